/* Compressed weighted averaging of the ranks' parameters through rank 0 (--compress, for
 * ps --ps-mode weight and fedavg): parameter payloads as in the spec, both directions.
 *
 * Uplink: rank r keeps c_r, the copy of its parameters that rank 0 holds, sends
 * encode(x_r - c_r) with its aggregation weight w_r and its batch-norm state (fp32, small),
 * and both sides do c_r += decode(...). Rank 0 (whose own model goes through the same codec,
 * so every rank is treated alike) computes a = sum_r w_r c_r / sum_r w_r in rank order.
 * Downlink: every rank holds g, the last global model; rank 0 broadcasts encode(a - g) with the
 * averaged state, everyone does g += decode(...) and takes x = g. So all ranks end a round
 * with the same model bit for bit, and what one round does not send (topk) stays owed for the
 * next. Messages: a gather (one message from every other rank) and a broadcast per round.
 * At creation rank 0's parameters are broadcast once, uncounted (set-up, like the split):
 * every copy starts from them. */
#ifndef DT_PARAMAVG_H
#define DT_PARAMAVG_H

#include <stddef.h>

#include "comm/codec.h"
#include "comm/world.h"
#include "core/tensorfile.h"

typedef struct dt_param_avg dt_param_avg;

/* Collective. np parameters (x: this rank's), ns state values. */
dt_status dt_param_avg_create(const dt_codec_spec *spec, dt_comm *c, const float *x, size_t np, size_t ns,
                              dt_param_avg **out);
void dt_param_avg_free(dt_param_avg *a);
/* Collective: x (np) and state (ns) become the weighted average (weight w of this rank). */
dt_status dt_param_avg_run(dt_param_avg *a, dt_comm *c, float *x, float *state, float w);
/* Checkpoints: the copies and the global model, as records "<prefix>:..." */
dt_status dt_param_avg_save(const dt_param_avg *a, const dt_comm *c, dt_records *out);
dt_status dt_param_avg_load(dt_param_avg *a, const dt_comm *c, const dt_tfile *f, const char *path);
/* How a rank's model is weighted in the average (fedavg --aggregate): average 1; samples the
 * shard size; loss the rank's mean training loss over the round (worse ranks count more). */
typedef enum { DT_WEIGHT_AVERAGE, DT_WEIGHT_SAMPLES, DT_WEIGHT_LOSS } dt_param_weighting;
/* Their names, in the enum's order, NULL-terminated: the words of --aggregate. */
extern const char *const dt_param_weighting_words[];
/* This rank's weight (loss: 1 when no batch was seen in the round). */
float dt_param_weight(dt_param_weighting k, int shard_n, double round_loss, long round_batches);

/* Messages this rank sends per round (N-1 on rank 0, 1 elsewhere; 0 alone). */
uint64_t dt_param_avg_round_msgs(const dt_comm *c);

#endif
