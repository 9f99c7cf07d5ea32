/* Progress within an epoch, from rank 0 alone (one line, never one per rank), with no
 * communication at all: the figures are rank 0's own, so the messages counted and the training
 * are the same with and without it.
 *
 * - A live line, "epoch E step s/S  img/s  loss  msgs %  ETA", rewritten in place with '\r' at
 *   most 4 times a second when rank 0's stdout is a terminal, or when `dtrain run` says its own
 *   stdout is one (DTRAIN_LIVE=1: rank 0's stdout is a pipe to the supervisor, so each drawing
 *   is sent as a line of its own that starts with '\r', which the relay passes on without its
 *   newline: relay.h). Cleared before any other line rank 0 prints.
 * - --progress N: every N steps a "step" line in the log (the mean loss of rank 0's batches
 *   since the previous one) and, when there is no live line, the same figures as a plain line.
 *
 * On a scheme whose rank 0 does not train (downpour's server) there is nothing: it sees no batch
 * and no step of its own, and asking the workers would be communication. --quiet: no console
 * output (the step lines are still written). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "trainer/trainer.h"

#define LIVE_EVERY_S 0.25

void dt_progress_begin(dt_trainer *t) {
    dt_progress *p = &t->prog;
    memset(p, 0, sizeof *p);
    p->first_step = t->ctx.step;
    if (t->comm.rank != 0 || t->ctx.run.worker < 0 || t->cfg->quiet) return;
    const char *env = getenv("DTRAIN_LIVE");
    /* under dtrain run (its boards' folder is set) the supervisor knows whether its own output is
     * a terminal: the rank's may be a pty of the launcher's (Open MPI forwards output through
     * ptys) when the user's is a file */
    if (getenv("DTRAIN_BOARD")) p->live = env && !strcmp(env, "1") ? 2 : 0;
    else if (isatty(STDOUT_FILENO)) p->live = 1;
}

/* Images seen by all training ranks after `step` steps per rank: every rank's batches are
 * full, except one process's last of each epoch (setup.c: steps_per_epoch). */
static double images_after(const dt_trainer *t, long step) {
    const dt_run_info *r = &t->ctx.run;
    const long spe = r->steps_per_epoch, B = r->batch;
    const long per_epoch = spe * B < r->shard_n ? spe * B : r->shard_n, part = (step % spe) * B;
    return (double)r->nworkers * ((double)(step / spe) * per_epoch + (part < per_epoch ? part : per_epoch));
}

static double train_seconds(const dt_trainer *t) { return dt_now() - t->t_start - t->eval_s; }

/* "epoch E step s/S  N img/s  loss L  msgs P%  ETA m:ss" into buf */
static void figures(const dt_trainer *t, double loss, char *buf, size_t len) {
    const dt_step_ctx *c = &t->ctx;
    const dt_train_config *cfg = t->cfg;
    const long spe = c->run.steps_per_epoch, done = c->step - t->prog.first_step;
    long total = (long)cfg->epochs * spe;
    if (cfg->max_steps > 0 && cfg->max_steps < total) total = cfg->max_steps;
    const double secs = train_seconds(t), rate = secs > 0 ? done / secs : 0;
    const long in_epoch = c->epoch_step + 1; /* the loop counts this step at the end of its turn */
    size_t o = (size_t)snprintf(buf, len, "epoch %d step %ld/%ld  %.0f img/s  loss %.4f", c->epoch + 1, in_epoch, spe,
                                secs > 0 ? (images_after(t, c->step) - images_after(t, t->prog.first_step)) / secs : 0,
                                loss);
    const dt_counters *k = &t->comm.c;
    if (o < len && k->baseline_msgs > 0)
        o += (size_t)snprintf(buf + o, len - o, "  msgs %.1f%%", 100.0 * (double)k->msgs_sent / (double)k->baseline_msgs);
    if (o < len && rate > 0 && total > c->step) {
        const long eta = lround((double)(total - c->step) / rate);
        if (eta >= 3600) snprintf(buf + o, len - o, "  ETA %ld:%02ld:%02ld", eta / 3600, eta / 60 % 60, eta % 60);
        else snprintf(buf + o, len - o, "  ETA %ld:%02ld", eta / 60, eta % 60);
    }
}

/* Draws the live line over the last one (padded to cover it); through the relay as one line. */
static void draw(dt_trainer *t, const char *text) {
    dt_progress *p = &t->prog;
    const int n = (int)strlen(text);
    printf("\r%s%*s%s", text, p->width > n ? p->width - n : 0, "", p->live == 2 ? "\n" : "");
    fflush(stdout);
    p->width = n;
    p->shown = 1;
}

void dt_progress_clear(dt_trainer *t) {
    dt_progress *p = &t->prog;
    if (!p->shown) return;
    printf("\r%*s\r%s", p->width, "", p->live == 2 ? "\n" : "");
    fflush(stdout);
    p->shown = 0;
    p->width = 0;
}

/* {"type":"step","step":S,"epoch":E,"images":I,"loss":L,"seconds":T} */
static dt_status step_line(dt_trainer *t, double loss) {
    if (!t->cfg->log_path) return DT_OK;
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "type", "step");
    dt_json_int(&j, "step", t->ctx.step);
    dt_json_int(&j, "epoch", t->ctx.epoch + 1);
    dt_json_fixed(&j, "images", images_after(t, t->ctx.step), 0);
    dt_json_fixed(&j, "loss", loss, 6);
    dt_json_fixed(&j, "seconds", train_seconds(t), 3);
    dt_json_end(&j);
    const char *text = dt_json_text(&j);
    dt_status st = dt_allocated(text);
    if (st == DT_OK) st = dt_trainer_log(t, text);
    dt_json_free(&j);
    return st;
}

dt_status dt_progress_step(dt_trainer *t) {
    if (t->comm.rank != 0 || t->ctx.run.worker < 0) return DT_OK;
    dt_progress *p = &t->prog;
    p->loss_sum += t->ctx.loss;
    p->loss_steps++;
    p->live_sum += t->ctx.loss;
    p->live_steps++;
    const int every = t->cfg->progress;
    char text[200];
    if (every > 0 && t->ctx.step % every == 0) {
        const double loss = p->loss_sum / (double)p->loss_steps;
        p->loss_sum = 0;
        p->loss_steps = 0;
        dt_status st = step_line(t, loss);
        if (st != DT_OK) return st;
        if (!p->live && !t->cfg->quiet) {
            figures(t, loss, text, sizeof text);
            printf("%s\n", text);
            fflush(stdout);
        }
    }
    const double now = dt_now();
    /* the first drawing at once, then at most 4 a second, also across the lines in between */
    if (p->live && (p->last_draw == 0 || now - p->last_draw >= LIVE_EVERY_S)) {
        figures(t, p->live_sum / (double)p->live_steps, text, sizeof text);
        draw(t, text);
        p->last_draw = now;
        p->live_sum = 0;
        p->live_steps = 0;
    }
    return DT_OK;
}
