/* local: single-process mini-batch SGD (the accuracy reference). Every hook is the
 * trainer's default; the trainer refuses it with more than one rank. */
#include "algorithms/strategy.h"

dt_status dt_local_create(dt_strategy *s) {
    (void)s;
    return DT_OK;
}
