/* The simulation build's non-blocking allreduce (sim_coll.h; in dtrain-sim only): MPICH's schedule for a large
 * buffer on 2^m ranks, recursive halving (a reduce-scatter) then recursive doubling (an
 * allgather), each level one exchange with the partner rank ^ mask. A bucket's level moves
 * on when its messages are done; dt_test_all and dt_wait_all (comm.c) move the buckets in
 * flight along. Another number of ranks reduces each bucket at once (MPI_Allreduce).
 *
 * Progress. SMPI moves a posted message in the background; MPICH over TCP moves a large one
 * only inside its calls, each call handing the kernel what its socket buffers take (measured on
 * 1 Gbit/s namespace hosts: a 1 MB bucket started, 15 ms of computing, one MPI_Testall: a
 * quarter of it crossed meanwhile, the rest waited for MPI_Waitall). When the calibration
 * measured that (dt_sim_progress_bytes, dtrain sim calibrate's [progress]), a level's send goes
 * in pieces of that many bytes and each call (the start, each test) posts pieces of every
 * bucket in flight, in order, up to that many bytes in all; a wait posts the rest. Both
 * partners cut the same pieces (the same sizes), so each piece is a message of its own. Without
 * it, a level is one message each way, posted at once, as before.
 *
 * The network's CPU. Over TCP the kernel's work for a message runs on a core, and where a host
 * has one core a rank, on the one that computes: on namespace hosts at 1 Gbit/s, gpt-small's
 * buckets hidden behind backward made backward as much longer (docs/results.md, 2026-12-01).
 * With the calibration's cost a byte (dt_sim_cpu_per_byte), each call first looks at what
 * arrived since the last one (the receives done now): it crossed while the rank computed, and
 * keeps the rank's host busy that long; what crosses during a wait costs nothing (the rank had
 * nothing else to do). A send is done in SMPI once handed over (detached below 1 MB), so the
 * bytes received stand for both directions, as the calibration's cost a byte does. */
#include "comm/sim_coll.h"
#include "core/alloc.h"
#include "core/sim.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LEVELS 31

typedef struct {
    char *buf;
    size_t n, elem;   /* values, bytes a value */
    MPI_Datatype type;
    MPI_User_function *add; /* inout[k] = in[k] + inout[k], as the MPI_Op does */
    int level;        /* 0..m-1 halving, m..2m-1 doubling, 2m done */
    size_t lo[MAX_LEVELS], hi[MAX_LEVELS]; /* the range split at each halving level */
    size_t mlo, mhi;  /* the part this rank holds now */
    char *tmp;        /* the partner's half, to be added */
    size_t tmpcap;
    size_t slo, shi, sent; /* the level's values to send, and how many are posted */
    int posted_all, partner;
    MPI_Request *rq;  /* the level's receives, then its sends posted so far */
    size_t *rqbytes;  /* a receive's bytes until it is seen done (dt_sim_cpu_per_byte), else 0 */
    int nrq, caprq;
    int tag;
} bucket;

/* this rank's buckets in flight (SMPI gives each simulated rank its own statics) */
static struct {
    bucket *v;
    int n, cap, seq, m, size, rank;
    MPI_Comm comm;
} q = {.comm = MPI_COMM_NULL};

static int is_pow2(int p) { return p > 0 && (p & (p - 1)) == 0; }

/* values a piece of b's level: a whole level unless the MPI moves bytes only inside its calls */
static size_t piece(const bucket *b) {
    const double bytes = dt_sim_progress_bytes();
    /* at least 4 kB: a file's tiny value would make millions of messages a step */
    const double v = bytes > 0 ? (bytes < 4096 ? 4096 : bytes) / (double)b->elem : 0;
    return v <= 0 ? SIZE_MAX : (size_t)v;
}

/* a request slot for a receive of bytes (0: a send) */
static int add_request(bucket *b, MPI_Request **out, size_t bytes) {
    if (b->nrq == b->caprq) {
        const int cap = b->caprq ? 2 * b->caprq : 4;
        MPI_Request *v = realloc(b->rq, (size_t)cap * sizeof *v);
        if (v) b->rq = v;
        size_t *w = v ? realloc(b->rqbytes, (size_t)cap * sizeof *w) : NULL;
        if (!w) return MPI_ERR_NO_MEM;
        b->rqbytes = w, b->caprq = cap;
    }
    b->rqbytes[b->nrq] = bytes;
    *out = &b->rq[b->nrq++];
    return MPI_SUCCESS;
}

/* the bytes received since the last look (receives seen done now that were not before) */
static double received_since(void) {
    double bytes = 0;
    for (int i = 0; i < q.n; i++)
        for (int k = 0; k < q.v[i].nrq; k++) {
            int done = 0;
            if (!q.v[i].rqbytes[k] || MPI_Test(&q.v[i].rq[k], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) continue;
            bytes += (double)q.v[i].rqbytes[k];
            q.v[i].rqbytes[k] = 0;
        }
    return bytes;
}

/* At a call into MPI: what arrived since the previous call arrived while the rank computed, and
 * the network's work for it took that long from its core (dt_sim_cpu_per_byte): the rank's host
 * is kept busy for it now. What arrives meanwhile is taken as part of it (the cost a byte was
 * measured over the bytes that crossed while the stretched computing ran). */
static void charge_network_cpu(void) {
    const double per_byte = dt_sim_cpu_per_byte();
    if (per_byte <= 0 || q.n == 0) return;
    dt_sim_busy(received_since() * per_byte);
    (void)received_since();
}

/* posts b's level's receives (in pieces) and notes what it sends */
static int post(bucket *b) {
    const int m = q.m, r = q.rank;
    size_t rlo, rhi;
    char *into;
    b->nrq = 0, b->sent = 0, b->posted_all = 0;
    if (b->level < m) { /* halving: keep one half, send the other */
        const int mask = q.size >> (b->level + 1), partner = r ^ mask;
        const size_t lo = b->mlo, hi = b->mhi, mid = lo + (hi - lo) / 2;
        b->lo[b->level] = lo, b->hi[b->level] = hi;
        const int low = (r & mask) == 0;
        const size_t klo = low ? lo : mid, khi = low ? mid : hi;
        b->mlo = klo, b->mhi = khi;
        b->slo = low ? mid : lo, b->shi = low ? hi : mid, b->partner = partner;
        rlo = 0, rhi = khi - klo, into = b->tmp;
    } else { /* doubling, the halving levels in reverse: send what this rank holds, take the other half */
        const int i = 2 * m - 1 - b->level, mask = q.size >> (i + 1), partner = r ^ mask;
        const size_t lo = b->lo[i], hi = b->hi[i], mid = lo + (hi - lo) / 2;
        const int low = (r & mask) == 0;
        rlo = low ? mid : lo, rhi = low ? hi : mid, into = b->buf;
        b->slo = b->mlo, b->shi = b->mhi, b->partner = partner;
    }
    const size_t p = piece(b);
    for (size_t at = rlo;; at += p) { /* a zero-length level is one empty message */
        const size_t len = rhi - at < p ? rhi - at : p;
        MPI_Request *req;
        int err = add_request(b, &req, len * b->elem);
        if (err == MPI_SUCCESS) err = MPI_Irecv(into + at * b->elem, (int)len, b->type, b->partner, b->tag, q.comm, req);
        if (err != MPI_SUCCESS) return err;
        if (rhi - at <= p) break;
    }
    return MPI_SUCCESS;
}

/* posts b's level's sends, in pieces, while *budget bytes last (budget NULL: all of them) */
static int push(bucket *b, double *budget) {
    const size_t p = piece(b), len = b->shi - b->slo;
    while (!b->posted_all && (!budget || *budget > 0)) {
        const size_t n = len - b->sent < p ? len - b->sent : p;
        MPI_Request *req;
        int err = add_request(b, &req, 0);
        if (err == MPI_SUCCESS)
            err = MPI_Isend(b->buf + (b->slo + b->sent) * b->elem, (int)n, b->type, b->partner, b->tag, q.comm, req);
        if (err != MPI_SUCCESS) return err;
        b->sent += n;
        if (budget) *budget -= (double)(n * b->elem);
        b->posted_all = b->sent == len;
    }
    return MPI_SUCCESS;
}

/* a call's budget: the calibrated bytes a call moves, or NULL (all: in the background, or a wait) */
static double *call_budget(double *budget, int wait) {
    *budget = dt_sim_progress_bytes();
    return wait || *budget <= 0 ? NULL : budget;
}

/* b's level is done: add the partner's half (halving) or take the parent range (doubling) */
static void finish_level(bucket *b) {
    if (b->level < q.m) {
        int len = (int)(b->mhi - b->mlo);
        MPI_Datatype type = b->type;
        b->add(b->tmp, b->buf + b->mlo * b->elem, &len, &type);
    } else {
        const int i = 2 * q.m - 1 - b->level;
        b->mlo = b->lo[i], b->mhi = b->hi[i];
    }
    b->level++;
}

/* MPI_SUM on floats, as the halving levels add */
static void add_floats(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const float *a = in;
    float *b = inout;
    for (int k = 0; k < *len; k++) b[k] += a[k];
}

dt_status dt_sim_iallreduce_start(dt_comm *c, float *buf, size_t n) {
    return dt_sim_iallreduce_start_op(c, buf, n, MPI_FLOAT, sizeof(float), MPI_SUM, add_floats);
}

dt_status dt_sim_iallreduce_start_op(dt_comm *c, void *buf, size_t n, MPI_Datatype type, size_t elem, MPI_Op op,
                                     MPI_User_function *add) {
    if (c->size < 2) return DT_OK;
    if (!is_pow2(c->size) || n > (size_t)INT_MAX) /* see above: at once */
        return dt_mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, type, op, c->comm), "MPI_Allreduce");
    if (q.comm == MPI_COMM_NULL) { /* its own communicator: the schedule's messages meet no other */
        dt_status st = dt_mpi_check(MPI_Comm_dup(c->comm, &q.comm), "MPI_Comm_dup (simulated iallreduce)");
        if (st != DT_OK) return st;
        q.size = c->size, q.rank = c->rank;
        while ((1 << q.m) < q.size) q.m++;
    }
    charge_network_cpu();
    if (q.n == q.cap) {
        int cap = q.cap ? 2 * q.cap : 16;
        bucket *v = realloc(q.v, (size_t)cap * sizeof *v);
        if (!v) return dt_nomem("%d simulated iallreduce buckets", cap);
        memset(v + q.cap, 0, (size_t)(cap - q.cap) * sizeof *v);
        q.v = v, q.cap = cap;
    }
    bucket *b = &q.v[q.n];
    const size_t half = (n / 2 + 1) * elem;
    if (b->tmpcap < half) {
        char *t = realloc(b->tmp, half);
        if (!t) return dt_nomem("a simulated iallreduce of %zu values", n);
        b->tmp = t, b->tmpcap = half;
    }
    b->buf = buf, b->n = n, b->elem = elem, b->type = type, b->add = add;
    b->level = 0, b->mlo = 0, b->mhi = n;
    b->tag = 1 + q.seq++ % 30000;
    q.n++;
    double budget;
    int err = post(b);
    if (err == MPI_SUCCESS) err = push(b, call_budget(&budget, 0));
    return dt_mpi_check(err, "MPI_Isend/Irecv (simulated iallreduce)");
}

int dt_sim_sums_as_mpich(const dt_comm *c, size_t n, size_t bytes) {
    return c->size > 1 && is_pow2(c->size) && bytes > 2048 && n >= (size_t)c->size && n <= (size_t)INT_MAX;
}

dt_status dt_sim_iallreduce_progress(dt_comm *c, int wait) {
    (void)c;
    charge_network_cpu();
    int all_done = 1;
    double budget;
    double *left = call_budget(&budget, wait);
    for (int i = 0; i < q.n; i++) {
        bucket *b = &q.v[i];
        while (b->level < 2 * q.m) {
            int flag = 1, err = push(b, left);
            if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Isend (simulated iallreduce)");
            if (!b->posted_all) break; /* the level cannot end before all of it is sent */
            if (wait) err = MPI_Waitall(b->nrq, b->rq, MPI_STATUSES_IGNORE);
            else err = MPI_Testall(b->nrq, b->rq, &flag, MPI_STATUSES_IGNORE);
            if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Testall (simulated iallreduce)");
            if (!flag) break;
            finish_level(b);
            if (b->level < 2 * q.m && (err = post(b)) != MPI_SUCCESS)
                return dt_mpi_check(err, "MPI_Irecv (simulated iallreduce)");
        }
        all_done &= b->level == 2 * q.m;
    }
    if (all_done) q.n = 0;
    return DT_OK;
}
