/* local: single-process mini-batch SGD (the accuracy reference). Every hook is the
 * trainer's default; the trainer refuses it with more than one rank. */
#include "algorithms/strategy.h"

static const dt_strategy_ops local_ops = {0};

static dt_status local_create(dt_strategy *s) {
    s->ops = &local_ops;
    return DT_OK;
}

const dt_scheme dt_scheme_local = {
    .name = "local", .summary = "one process, plain mini-batch SGD (the reference)", .create = local_create,
};
