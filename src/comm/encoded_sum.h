/* The sum over the ranks of vectors in an encoding MPI cannot add (int8's chunk scales,
 * top-k's indices), by a reduce-scatter and an allgather that re-encodes, as Horovod's and
 * DDP's compressed hooks and INTELLECT-1's int8 ring do:
 *
 *   1. the n values are cut into N parts, part j owned by rank j; every rank encodes its
 *      parts with error feedback (e += x - decode(encode(x + e))) and sends part j to rank j
 *      (MPI_Alltoallv);
 *   2. rank j decodes the N encodings of its part, adds them in rank order in fp32, and
 *      encodes the sum with an error feedback of its own (what the sum's encoding drops is
 *      added to the next call's sum);
 *   3. every rank gets every encoded sum (MPI_Allgatherv) and decodes them: the same bytes on
 *      every rank, so the same sum bit for bit.
 *
 * A rank sends (N-1)/N of its encoding in 1 and (N-1)/N of a summed encoding in 3: about
 * 2(N-1)/N of one payload, where allgathering every rank's payload sends N-1 of them. The
 * price: N-1 more messages and a second encoding (its error fed back as the first's). top-k
 * keeps the k largest of each part (k = F x the part's length), not of the whole vector.
 * dt_encoded_sum_faster says when this is the faster of the two (docs/algorithms.md).
 *
 * fp16 and bf16, which MPI can add (half_reduce.h), are summed by it instead: encoded with
 * error feedback, one MPI_Allreduce of 16-bit values, decoded. So a caller sums a vector in
 * any lossy encoding with one call (fedavg's pseudo-gradient, DiLoCo with --compress). */
#ifndef DT_ENCODED_SUM_H
#define DT_ENCODED_SUM_H

#include <stddef.h>

#include "comm/codec.h"
#include "core/tensorfile.h"

typedef struct dt_encoded_sum dt_encoded_sum;

/* For vectors of n floats on c's ranks, in the encoding of spec (a lossy codec: not none). */
dt_status dt_encoded_sum_create(const dt_codec_spec *spec, const dt_comm *c, size_t n, dt_encoded_sum **out);
void dt_encoded_sum_free(dt_encoded_sum *s);
/* Collective: x (this rank's n values) becomes the sum over the ranks of what was encoded,
 * the same on every rank bit for bit. Counted and timed as communication (codec included). */
dt_status dt_encoded_sum_run(dt_encoded_sum *s, dt_comm *c, float *x);
/* Checkpoints: the error feedbacks, as records "<prefix>:residual" and (not fp16, bf16)
 * "<prefix>:part_residual" (prefix: up to 40 characters). */
dt_status dt_encoded_sum_save(const dt_encoded_sum *s, const char *prefix, dt_records *out);
dt_status dt_encoded_sum_load(dt_encoded_sum *s, const char *prefix, const dt_tfile *f, const char *path);
/* Whether the reduce-scatter beats allgathering N payloads of this encoding: with a link of
 * latency a and time b a byte, the allgather costs (N-1)(a + Bb) and this 2(N-1)(a + Bb/N),
 * less when B b (N-2)/N > a. For the payloads dtrain sends (tens of KB and more) B b exceeds
 * a on any link up to 100 Gbit/s, so: N >= 3. At N = 2 the bytes are the same and the
 * allgather has no second encoding. */
int dt_encoded_sum_faster(int nranks);

#endif
