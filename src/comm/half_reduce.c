/* The 16-bit sums of half_reduce.h: two MPI_Ops made on first use (one per kind; MPI frees
 * them at MPI_Finalize), counted as an allreduce of 2-byte values. */
#include "comm/half_reduce.h"

#include <assert.h>
#include <limits.h>

#include "comm/codec.h"
#include "comm/sim_coll.h"
#include "comm/trace.h"
#include "core/sim.h"

static void add_fp16(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = dt_f32_to_f16(dt_f16_to_f32(a[i]) + dt_f16_to_f32(b[i]));
}

static void add_bf16(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = dt_f32_to_bf16(dt_bf16_to_f32(a[i]) + dt_bf16_to_f32(b[i]));
}

/* the sum of kind for n values in one MPI call (made once per process; SMPI gives each
 * simulated rank its own statics) */
static dt_status half_sum(size_t n, dt_codec_kind kind, MPI_Op *op) {
    static MPI_Op ops[2] = {MPI_OP_NULL, MPI_OP_NULL};
    if (n > (size_t)INT_MAX) return dt_fail(DT_ERR_ARG, "a 16-bit allreduce of %zu values is too large for one MPI call", n);
    assert(kind == DT_CODEC_FP16 || kind == DT_CODEC_BF16);
    const int k = kind == DT_CODEC_BF16;
    if (ops[k] == MPI_OP_NULL) {
        const int err = MPI_Op_create(k ? add_bf16 : add_fp16, 1, &ops[k]);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Op_create (16-bit sum)");
    }
    *op = ops[k];
    return DT_OK;
}

static void count_half(dt_comm *c, size_t n) {
    if (c->size < 2) return;
    const uint64_t m = 2 * (uint64_t)(c->size - 1), bytes = (uint64_t)n * sizeof(uint16_t);
    dt_count_send(c, m, m * bytes / (uint64_t)c->size);
    dt_count_recv(c, m, m * bytes / (uint64_t)c->size);
}

dt_status dt_allreduce_half(dt_comm *c, uint16_t *buf, size_t n, dt_codec_kind kind) {
    MPI_Op op = MPI_OP_NULL;
    dt_status st = half_sum(n, kind, &op);
    if (st != DT_OK) return st;
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    if (dt_sim_sums_as_mpich(c, n, n * sizeof(uint16_t))) { /* MPICH's schedule (sim_coll.h) */
        st = dt_sim_iallreduce_start_op(c, buf, n, MPI_UINT16_T, sizeof(uint16_t), op,
                                        kind == DT_CODEC_BF16 ? add_bf16 : add_fp16);
        if (st == DT_OK) st = dt_sim_iallreduce_progress(c, 1);
        dt_comm_time_end(c, t0);
        if (st != DT_OK) return st;
        count_half(c, n);
        dt_trace_event(DT_TRACE_COMM, "allreduce (16-bit)", tt, (int64_t)(n * sizeof(uint16_t)), -1, -1);
        return DT_OK;
    }
    const int err = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_UINT16_T, op, c->comm);
    dt_comm_time_end(c, t0);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (16-bit sum)");
    count_half(c, n);
    dt_trace_event(DT_TRACE_COMM, "allreduce (16-bit)", tt, (int64_t)(n * sizeof(uint16_t)), -1, -1);
    return DT_OK;
}

dt_status dt_iallreduce_half(dt_comm *c, uint16_t *buf, size_t n, dt_codec_kind kind, MPI_Request *req) {
    MPI_Op op = MPI_OP_NULL;
    dt_status st = half_sum(n, kind, &op);
    if (st != DT_OK) return st;
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    if (DT_SIM_BUILD) {
        /* SMPI 3.32's MPI_Iallreduce loses an in-place buffer: MPICH's schedule in messages,
         * moved along by dt_test_all and dt_wait_all as the fp32 buckets are (sim_coll.h) */
        *req = MPI_REQUEST_NULL;
        st = dt_sim_iallreduce_start_op(c, buf, n, MPI_UINT16_T, sizeof(uint16_t), op,
                                        kind == DT_CODEC_BF16 ? add_bf16 : add_fp16);
        dt_comm_time_end(c, t0);
        if (st != DT_OK) return st;
    } else {
        const int err = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_UINT16_T, op, c->comm, req);
        dt_comm_time_end(c, t0);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Iallreduce (16-bit sum)");
    }
    count_half(c, n);
    dt_trace_event(DT_TRACE_COMM, "iallreduce 16-bit (start)", tt, (int64_t)(n * sizeof(uint16_t)), -1, -1);
    return DT_OK;
}
