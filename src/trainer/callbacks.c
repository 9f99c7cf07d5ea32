/* The configuration's callbacks (dt_train_config.on_epoch, .on_eval): rank 0 hears of every
 * evaluation as the log does, with the same figures. The caller's time in them is not training
 * time: it goes to the evaluations' (t->eval_s), as a slow callback must not read as a slow
 * scheme. */
#include "trainer/trainer.h"

static double val_or_none(const dt_trainer *t, double v) { return t->val.n ? v : -1; }

/* calls fn (if any) with info, its time counted as evaluation's */
static void call(dt_trainer *t, dt_epoch_fn fn, dt_epoch_info *info) {
    if (!fn) return;
    info->train_s = dt_trainer_train_seconds(t);
    const double t0 = dt_now();
    fn(info, t->cfg->user);
    t->eval_s += dt_now() - t0;
}

void dt_trainer_on_epoch(dt_trainer *t, const dt_epoch_stats *e, long step) {
    if (t->comm.rank != 0 || (!t->cfg->on_epoch && !t->cfg->on_eval)) return;
    dt_epoch_info info = {.epoch = e->epoch, .step = step, .train_loss = e->loss, .train_acc = e->train_acc,
                          .test_acc = e->test_acc, .test_loss = e->test_loss, .val_acc = val_or_none(t, e->val_acc),
                          .val_loss = val_or_none(t, e->val_loss), .lr = e->lr, .msgs_sent = e->msgs_sent,
                          .msgs_pct = e->msgs_pct, .mb_sent = e->mb_sent};
    call(t, t->cfg->on_epoch, &info);
    call(t, t->cfg->on_eval, &info);
}

void dt_trainer_on_step_eval(dt_trainer *t, const dt_step_eval *e) {
    if (t->comm.rank != 0 || !t->cfg->on_eval) return;
    dt_epoch_info info = {.epoch = (int)e->epoch + 1, .step = e->step, .between_steps = 1, .test_acc = e->acc,
                          .test_loss = e->loss, .val_acc = val_or_none(t, e->val[0]), .val_loss = val_or_none(t, e->val[1]),
                          .lr = t->ctx.lr, .msgs_sent = e->msgs, .msgs_pct = e->baseline > 0 ? 100 * e->msgs / e->baseline : 0,
                          .mb_sent = e->bytes / 1e6};
    call(t, t->cfg->on_eval, &info);
}
