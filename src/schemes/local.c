/* local: single-process mini-batch SGD (the accuracy reference). Every hook is the
 * trainer's default; the trainer refuses it with more than one rank. */
#include "schemes/registry.h"

static const dt_scheme_ops local_ops = {0};

static dt_status local_create(dt_scheme *s) {
    s->ops = &local_ops;
    return DT_OK;
}

const dt_scheme_def dt_scheme_local = {
    .name = "local", .summary = "one process, plain mini-batch SGD (the reference)", .create = local_create, .replayable = 1,
};
