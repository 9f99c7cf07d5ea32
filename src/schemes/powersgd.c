/* PowerSGD's factors (powersgd.h). The tensors keep the model's order, and so do their slots
 * in the first allreduce's buffer (a compressed tensor's P, an uncompressed one's values):
 * the tensors of a bucket, contiguous in the gradient, have contiguous slots. The products
 * are plain loops with float sums, the same on every rank (the matrices are small: cnn1's
 * largest is 100 x 320). */
#include "schemes/powersgd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

typedef struct {
    size_t off, numel;  /* in the flat gradient */
    size_t n, m;        /* rows (the first dimension) and columns (the rest) */
    int low;            /* compressed: R (n + m) < n m */
    size_t slot;        /* its floats in pbuf: n R (low) or numel */
    size_t q;           /* low: its Q (m x R) in qbuf */
} psgd_tensor;

struct dt_powersgd {
    int R, nt, nlow;
    psgd_tensor *t;
    float *pbuf;        /* every tensor's slot: P (low) or its values */
    size_t npbuf;
    float *qbuf;        /* every low tensor's Q: warm-started between steps */
    size_t nqbuf;
    float *error;       /* error feedback over the whole gradient (used where low) */
    size_t np;
};

/* the floats of tensor t in pbuf: its P, or its values */
static size_t slot_len(const psgd_tensor *t, size_t R) { return t->low ? t->n * R : t->numel; }

/* Q's start: uniform values in [-1, 1) from a fixed seed (the same on every rank; PyTorch's
 * hook draws normal ones from a generator seeded alike on every rank): any Q of full rank
 * starts the power iteration */
#define PSGD_SEED 0x50534744ULL /* "PSGD" */
/* Gram-Schmidt's guard against a zero column (PyTorch's orthogonalization_epsilon) */
#define PSGD_EPS 1e-8f

dt_status dt_powersgd_create(const dt_model *m, int rank, dt_powersgd **out) {
    *out = NULL;
    dt_powersgd *p;
    DT_TRY(dt_calloc(p, 1, "PowerSGD's state"));
    p->R = rank;
    p->nt = dt_model_num_tensors(m);
    p->np = dt_model_num_params(m);
    dt_status st = dt_calloc(p->t, (size_t)p->nt, "PowerSGD's %d tensors", p->nt);
    if (st != DT_OK) { free(p); return st; }
    const size_t R = (size_t)rank;
    for (int i = 0; i < p->nt; i++) {
        const dt_tensor_view *v = dt_model_tensor(m, i);
        psgd_tensor *t = &p->t[i];
        t->off = v->offset;
        t->numel = v->numel;
        t->n = v->ndim >= 2 ? (size_t)v->shape[0] : v->numel;
        t->m = t->n ? v->numel / t->n : 0;
        t->low = v->ndim >= 2 && R * (t->n + t->m) < t->n * t->m;
        t->slot = p->npbuf;
        p->npbuf += slot_len(t, R);
        if (t->low) {
            t->q = p->nqbuf;
            p->nqbuf += t->m * R;
            p->nlow++;
        }
    }
    if ((st = dt_malloc(p->pbuf, p->npbuf, "PowerSGD's P of %zu floats", p->npbuf)) != DT_OK ||
        (st = dt_malloc(p->qbuf, p->nqbuf, "PowerSGD's Q of %zu floats", p->nqbuf)) != DT_OK ||
        (st = dt_calloc(p->error, p->np, "PowerSGD's error feedback of %zu floats", p->np)) != DT_OK) {
        dt_powersgd_free(p);
        return st;
    }
    dt_rng r;
    dt_rng_seed(&r, PSGD_SEED);
    for (size_t i = 0; i < p->nqbuf; i++) p->qbuf[i] = 2.0f * dt_rng_uniform(&r) - 1.0f;
    *out = p;
    return DT_OK;
}

void dt_powersgd_free(dt_powersgd *p) {
    if (p) dt_free_all(p->t, p->pbuf, p->qbuf, p->error, p);
}

int dt_powersgd_compressed(const dt_powersgd *p) { return p->nlow; }
size_t dt_powersgd_floats(const dt_powersgd *p) { return p->npbuf + p->nqbuf; }

/* P (n x R) = M (n x m) Q (m x R) */
static void mul_mq(const float *M, const float *Q, float *P, size_t n, size_t m, size_t R) {
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < R; r++) {
            float s = 0;
            for (size_t j = 0; j < m; j++) s += M[i * m + j] * Q[j * R + r];
            P[i * R + r] = s;
        }
}

/* Q (m x R) = M^T P */
static void mul_mtp(const float *M, const float *P, float *Q, size_t n, size_t m, size_t R) {
    memset(Q, 0, m * R * sizeof *Q);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++)
            for (size_t r = 0; r < R; r++) Q[j * R + r] += M[i * m + j] * P[i * R + r];
}

/* The columns of P (n x R) made orthonormal, one after the other (Gram-Schmidt, as PyTorch's
 * hook does, in fp32) */
static void orthogonalize(float *P, size_t n, size_t R) {
    for (size_t c = 0; c < R; c++) {
        float norm = 0;
        for (size_t i = 0; i < n; i++) norm += P[i * R + c] * P[i * R + c];
        const float inv = 1.0f / (sqrtf(norm) + PSGD_EPS);
        for (size_t i = 0; i < n; i++) P[i * R + c] *= inv;
        for (size_t d = c + 1; d < R; d++) {
            float dot = 0;
            for (size_t i = 0; i < n; i++) dot += P[i * R + c] * P[i * R + d];
            for (size_t i = 0; i < n; i++) P[i * R + d] -= dot * P[i * R + c];
        }
    }
}

dt_status dt_powersgd_start(dt_powersgd *p, dt_comm *c, float *g, size_t from, size_t to, MPI_Request *req) {
    const size_t R = (size_t)p->R;
    size_t lo = p->npbuf, hi = 0;
    const double t0 = dt_comm_time_begin(c); /* the compression's time is communication's, as a codec's */
    for (int i = 0; i < p->nt; i++) {
        const psgd_tensor *t = &p->t[i];
        if (t->off < from || t->off + t->numel > to) continue;
        float *M = g + t->off;
        if (t->low) {
            for (size_t k = 0; k < t->numel; k++) M[k] += p->error[t->off + k]; /* M = g + e */
            mul_mq(M, p->qbuf + t->q, p->pbuf + t->slot, t->n, t->m, R);
        } else {
            memcpy(p->pbuf + t->slot, M, t->numel * sizeof *M);
        }
        if (t->slot < lo) lo = t->slot;
        if (t->slot + slot_len(t, R) > hi) hi = t->slot + slot_len(t, R);
    }
    dt_comm_time_end(c, t0);
    if (hi <= lo) { *req = MPI_REQUEST_NULL; return DT_OK; }
    return dt_iallreduce_sum(c, p->pbuf + lo, hi - lo, req);
}

dt_status dt_powersgd_finish(dt_powersgd *p, dt_comm *c, float *g) {
    const size_t R = (size_t)p->R;
    const float inv = 1.0f / (float)c->size;
    double t0 = dt_comm_time_begin(c);
    for (int i = 0; i < p->nt; i++) {
        const psgd_tensor *t = &p->t[i];
        if (!t->low) continue;
        float *P = p->pbuf + t->slot;
        orthogonalize(P, t->n, R);
        mul_mtp(g + t->off, P, p->qbuf + t->q, t->n, t->m, R);
    }
    dt_status st = p->nqbuf ? dt_allreduce_sum(c, p->qbuf, p->nqbuf) : DT_OK;
    for (int i = 0; st == DT_OK && i < p->nt; i++) {
        const psgd_tensor *t = &p->t[i];
        float *M = g + t->off, *P = p->pbuf + t->slot;
        if (!t->low) { /* summed as it was: the mean, as the plain allreduce takes it */
            for (size_t k = 0; k < t->numel; k++) M[k] = P[k] * inv;
            continue;
        }
        const float *Q = p->qbuf + t->q;
        float *e = p->error + t->off;
        for (size_t a = 0; a < t->n; a++)
            for (size_t b = 0; b < t->m; b++) {
                float s = 0;
                for (size_t r = 0; r < R; r++) s += P[a * R + r] * Q[b * R + r];
                const float mean = s * inv;
                const size_t k = a * t->m + b;
                e[k] = M[k] - mean; /* what this step did not send of M */
                M[k] = mean;
            }
    }
    dt_comm_time_end(c, t0);
    return st;
}

dt_status dt_powersgd_save(dt_powersgd *p, dt_records *out) {
    dt_status st = dt_records_add(out, "powersgd_error", p->error, p->np);
    if (st == DT_OK && p->nqbuf) st = dt_records_add(out, "powersgd_q", p->qbuf, p->nqbuf);
    return st;
}

dt_status dt_powersgd_load(dt_powersgd *p, const dt_tfile *f, const char *path) {
    dt_status st = dt_tfile_take(f, path, "powersgd_error", p->error, p->np * sizeof(float));
    if (st == DT_OK && p->nqbuf) st = dt_tfile_take(f, path, "powersgd_q", p->qbuf, p->nqbuf * sizeof(float));
    return st;
}
