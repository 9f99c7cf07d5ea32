/* PowerSGD (Vogels, Karimireddy, Jaggi 2019; PyTorch DDP's powerSGD_hook): allreduce's
 * low-rank compression, --compress powersgd:R (docs/algorithms.md "PowerSGD").
 *
 * Each gradient tensor of two or more dimensions is a matrix M (its first dimension by the
 * rest: a conv's out x in*kh*kw), compressed when R(n + m) < nm; the others (biases, and a
 * matrix too small to gain) are summed as they are. Per step, with error feedback e (the
 * part of M no step has sent yet) and the warm-started Q (m x R, the same on every rank):
 *
 *     M = g + e;  P = M Q;  P = allreduce-sum(P);  orthogonalize(P)      (Gram-Schmidt, fp32)
 *     Q = M^T P;  Q = allreduce-sum(Q);  g = P Q^T / N;  e = M - g
 *
 * so a rank sends R(n + m) floats a matrix where the plain allreduce sends nm, in two
 * allreduces: the first carries every tensor's P and the uncompressed tensors together, in
 * the buckets of the plain allreduce (started while backward goes on), the second every Q.
 * Both are linear in M: MPI sums them (MPI_Allreduce), and every rank gets the same P, Q and
 * so the same gradient, bit for bit. A rank at least the matrices' smaller sides compresses
 * nothing: the plain allreduce, bit for bit on 2 ranks. The first --powersgd-start steps are
 * the plain allreduce (PyTorch's start_powerSGD_iter), with no error kept. */
#ifndef DT_POWERSGD_H
#define DT_POWERSGD_H

#include <stddef.h>

#include "schemes/registry.h"

typedef struct dt_powersgd dt_powersgd;

/* For the model's gradient at rank R (Q drawn from a fixed seed: the same on every rank). */
dt_status dt_powersgd_create(const dt_model *m, int rank, dt_powersgd **out);
void dt_powersgd_free(dt_powersgd *p);
/* How many of the model's tensors it compresses, and the floats one step sends (P, Q and the
 * uncompressed tensors) against the plain allreduce's. */
int dt_powersgd_compressed(const dt_powersgd *p);
size_t dt_powersgd_floats(const dt_powersgd *p);

/* The gradients [from, to) of g are final (whole tensors): error feedback added, P of their
 * matrices computed, and P with the uncompressed tensors' values started on their allreduce
 * (a request of reqs, counted). */
dt_status dt_powersgd_start(dt_powersgd *p, dt_comm *c, float *g, size_t from, size_t to, MPI_Request *req);
/* After every bucket was started and waited for: orthogonalize, Q, its allreduce, and the
 * mean gradient into g (error kept). */
dt_status dt_powersgd_finish(dt_powersgd *p, dt_comm *c, float *g);

/* Checkpoints: the error feedback and the warm-started Q's, as the records "powersgd_error"
 * and "powersgd_q". */
dt_status dt_powersgd_save(dt_powersgd *p, dt_records *out);
dt_status dt_powersgd_load(dt_powersgd *p, const dt_tfile *f, const char *path);

#endif
