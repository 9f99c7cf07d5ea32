/* Gradient tracking for dpsgd and eventgrad (--tracking; DSGT: Pu and Nedić, "Distributed
 * stochastic gradient tracking methods", Math. Programming 2021; NEXT, Di Lorenzo and Scutari
 * 2016). Each rank keeps y, its estimate of the ranks' average gradient, mixed with the
 * neighbours' like the parameters and moved by the change of its own gradient:
 *     y(k) = y(k-1) + W sum_j (yhat_j(k-1) - yhat_self(k-1)) + g(k) - g(k-1),   y(-1) = g(-1) = 0
 * (so y(0) = g(0)), yhat_self the copy of y the neighbours hold: W (y + sum_j yhat_j) + g(k) - g(k-1)
 * when every tensor goes every step (dpsgd), and a pull between copies that keeps the ranks' sum
 * of y when eventgrad's trigger holds some back (stale copies mixed as they are would not: it
 * diverged in 2 epochs of cnn1)
 * and the local step takes y(k) for the gradient. With exact mixing (lock-step) the ranks' mean
 * of y is their mean gradient at every step, so no rank follows its own classes alone: the
 * data-heterogeneity term leaves the bound. y travels through a second gossip over the same
 * graph (its own windows, copies starting at 0) with the same codec: every tensor every step
 * (dpsgd: twice the bytes), or eventgrad's sender rule with its own thresholds on y's tensors'
 * norms (sent only when x's tensor was, y diverged in 2 epochs of cnn1). Tracking wants exact
 * mixing: with eventgrad's adaptive thresholds (horizon 2, and 0.5) it diverged or drifted on
 * cnn1's class split at batch 16, with const:0.01 it held (docs/algorithms.md). */
#ifndef DT_SCHEMES_TRACKING_H
#define DT_SCHEMES_TRACKING_H

#include "schemes/gossip.h"
#include "schemes/trigger.h"

typedef struct dt_tracking dt_tracking;

/* Collective (windows). trig: eventgrad's rule (NULL: every tensor every step). */
dt_status dt_tracking_create(dt_step_ctx *c, const char *topology, const dt_codec_spec *spec,
                             const dt_trigger_opts *trig, dt_tracking **out);
void dt_tracking_free(dt_tracking *t);
/* In after_backward, beside the scheme's own send of x: y's tensors (all, or the rule's) to every
 * neighbour and what arrived (sync: exactly this step's, as gossip.h's receive_sync); then y(k)
 * as above, and the gradient the optimiser steps with becomes y(k). */
dt_status dt_tracking_step(dt_tracking *t, dt_step_ctx *c, int sync);
/* Collective, at the end: gossip's drain of y's windows. */
dt_status dt_tracking_finish(dt_tracking *t, dt_step_ctx *c);
void dt_tracking_abandon(dt_tracking *t);
/* Checkpoints: "tracker", "tracker_last_grad", "tracker_neighbours", "tracker_own_copy" and the
 * rule's "tracker_norm_last", ... */
dt_status dt_tracking_save(const dt_tracking *t, dt_records *out);
dt_status dt_tracking_load(dt_tracking *t, const dt_tfile *f, const char *path);

#endif
