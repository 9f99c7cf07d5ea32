/* The simulation build's non-blocking allreduce (sim_coll.h): MPICH's schedule for a large
 * buffer on 2^m ranks, recursive halving (a reduce-scatter) then recursive doubling (an
 * allgather), each level one exchange with the partner rank ^ mask. A bucket's level moves
 * on when both its messages are done; dt_test_all and dt_wait_all (comm.c) move the buckets
 * in flight along. Another number of ranks reduces each bucket at once (MPI_Allreduce). */
#include "comm/sim_coll.h"
#include "core/alloc.h"

#ifdef DT_SIM
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
    MPI_Request req[2];
    int tag;
} bucket;

/* this rank's buckets in flight (SMPI gives each simulated rank its own statics) */
static struct {
    bucket *v;
    int n, cap, seq, m, size, rank;
    MPI_Comm comm;
} q = {.comm = MPI_COMM_NULL};

static int is_pow2(int p) { return p > 0 && (p & (p - 1)) == 0; }

/* posts the exchange of b's level */
static int post(bucket *b) {
    const int m = q.m, r = q.rank;
    if (b->level < m) { /* halving: keep one half, send the other */
        const int mask = q.size >> (b->level + 1), partner = r ^ mask;
        const size_t lo = b->mlo, hi = b->mhi, mid = lo + (hi - lo) / 2;
        b->lo[b->level] = lo, b->hi[b->level] = hi;
        const int low = (r & mask) == 0;
        const size_t klo = low ? lo : mid, khi = low ? mid : hi, slo = low ? mid : lo, shi = low ? hi : mid;
        b->mlo = klo, b->mhi = khi;
        int err = MPI_Irecv(b->tmp, (int)(khi - klo), b->type, partner, b->tag, q.comm, &b->req[0]);
        if (err == MPI_SUCCESS)
            err = MPI_Isend(b->buf + slo * b->elem, (int)(shi - slo), b->type, partner, b->tag, q.comm, &b->req[1]);
        return err;
    }
    /* doubling, the halving levels in reverse: send what this rank holds, take the other half */
    const int i = 2 * m - 1 - b->level, mask = q.size >> (i + 1), partner = r ^ mask;
    const size_t lo = b->lo[i], hi = b->hi[i], mid = lo + (hi - lo) / 2;
    const int low = (r & mask) == 0;
    const size_t olo = low ? mid : lo, ohi = low ? hi : mid;
    int err = MPI_Irecv(b->buf + olo * b->elem, (int)(ohi - olo), b->type, partner, b->tag, q.comm, &b->req[0]);
    if (err == MPI_SUCCESS)
        err = MPI_Isend(b->buf + b->mlo * b->elem, (int)(b->mhi - b->mlo), b->type, partner, b->tag, q.comm, &b->req[1]);
    return err;
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
    return dt_mpi_check(post(b), "MPI_Isend/Irecv (simulated iallreduce)");
}

int dt_sim_sums_as_mpich(const dt_comm *c, size_t n, size_t bytes) {
    return c->size > 1 && is_pow2(c->size) && bytes > 2048 && n >= (size_t)c->size && n <= (size_t)INT_MAX;
}

dt_status dt_sim_iallreduce_progress(dt_comm *c, int wait) {
    (void)c;
    int all_done = 1;
    for (int i = 0; i < q.n; i++) {
        bucket *b = &q.v[i];
        while (b->level < 2 * q.m) {
            int flag = 1, err;
            if (wait) err = MPI_Waitall(2, b->req, MPI_STATUSES_IGNORE);
            else err = MPI_Testall(2, b->req, &flag, MPI_STATUSES_IGNORE);
            if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Testall (simulated iallreduce)");
            if (!flag) break;
            finish_level(b);
            if (b->level < 2 * q.m && (err = post(b)) != MPI_SUCCESS)
                return dt_mpi_check(err, "MPI_Isend/Irecv (simulated iallreduce)");
        }
        all_done &= b->level == 2 * q.m;
    }
    if (all_done) q.n = 0;
    return DT_OK;
}
#else
/* the ordinary build has MPICH's own */
int dt_sim_sums_as_mpich(const dt_comm *c, size_t n, size_t bytes) {
    (void)c, (void)n, (void)bytes;
    return 0;
}
#endif
