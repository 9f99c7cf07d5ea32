/* allreduce (D-SGD): every step the gradients are averaged over all ranks with
 * MPI_Allreduce and every rank applies the same update, so the models stay identical. */
#include "algorithms/strategy.h"
#include "trainer/trainer.h"

static dt_status allreduce_after_backward(dt_strategy *s, dt_trainer *t) {
    (void)s;
    uint64_t before = t->comm.c.msgs_sent;
    dt_status st = dt_allreduce_mean(&t->comm, dt_model_grads(t->model), dt_model_num_params(t->model));
    t->comm.c.baseline_msgs += t->comm.c.msgs_sent - before; /* it always sends everything */
    return st;
}

dt_status dt_allreduce_create(dt_strategy *s) {
    s->after_backward = allreduce_after_backward;
    return DT_OK;
}
