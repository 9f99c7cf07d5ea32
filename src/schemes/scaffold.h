/* SCAFFOLD's control variates for fedavg (--scaffold; Karimireddy, Kale, Mohri, Reddi, Stich and
 * Suresh, "SCAFFOLD: Stochastic Controlled Averaging for Federated Learning", ICML 2020, with
 * every rank taking part in every round).
 *
 * On data split by class a rank's local steps follow its own classes' gradient, and K of them
 * carry its model away from the others (client drift). SCAFFOLD corrects each local gradient by
 * c - c_i, the global average gradient minus the rank's own, both estimated over the last round:
 *     every local step        g <- g + (c - c_i)
 *     at the round's end      c_i <- the mean of the round's own gradients g (before the correction)
 *                             c   <- the ranks' weighted mean of their c_i, in the same allreduce
 *                                    as the models (twice the bytes of a round)
 * The paper's option II, c_i - c + (x_start - x) / (K lr), is that mean for plain SGD; with
 * momentum it is 1/(1 - momentum) times it (the step moves x further than lr g), a correction
 * that diverged at momentum 0.9 (cnn1, class split). The mean holds under any optimizer and
 * schedule. c and c_i start at 0, so the first round is fedavg's. One rank: c = c_i, the plain
 * scheme bit for bit. */
#ifndef DT_SCHEMES_SCAFFOLD_H
#define DT_SCHEMES_SCAFFOLD_H

#include <stddef.h>

#include "schemes/registry.h"

typedef struct dt_scaffold dt_scaffold;

/* For np parameters. */
dt_status dt_scaffold_create(size_t np, dt_scaffold **out);
void dt_scaffold_free(dt_scaffold *s);
/* After backward: g is added to the round's sum, then g += c - c_i. */
void dt_scaffold_correct(dt_scaffold *s, float *g);
/* At the round's end: c_i becomes the round's mean gradient (unchanged after a round of no
 * steps), and out gets w c_i (to be summed with the models). */
void dt_scaffold_round_end(dt_scaffold *s, float w, float *out);
/* After the sum: c = sum * inv (inv = 1 / the weights' sum); a new round. */
void dt_scaffold_round_start(dt_scaffold *s, const float *sum, float inv);
/* Checkpoints: "scaffold_c", "scaffold_ci", "scaffold_round" (the round's gradients summed),
 * "scaffold_steps"; a set saved with or without them resumed the other way is refused in one
 * line naming --scaffold. */
dt_status dt_scaffold_save(const dt_scaffold *s, dt_records *out);
dt_status dt_scaffold_load(dt_scaffold *s, const dt_tfile *f, const char *path);

#endif
