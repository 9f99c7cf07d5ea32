/* 16-bit floats summed by MPI itself (allreduce --compress fp16 | bf16): a user-defined
 * MPI_Op adds two arrays of fp16 (or bf16) values in fp32 and rounds each sum back to 16
 * bits, so MPI's own allreduce (for large buffers a reduce-scatter and an allgather) moves 2
 * bytes a value each way: 2(N-1)/N of the 16-bit payload per rank, where allgathering every
 * rank's payload moves N-1 of them. As PyTorch DDP's fp16 hook does (and NCCL's fp16 sum),
 * each addition rounds; a caller keeps the sum in range by scaling what it encodes (1/N).
 * The op is commutative (IEEE addition is), and both ranks of every exchange add the same two
 * operands: every rank gets the same sum, bit for bit. */
#ifndef DT_HALF_REDUCE_H
#define DT_HALF_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain.h"
#include "dtrain/comm.h"

/* The element-wise sum over the ranks of n 16-bit floats of kind (DT_CODEC_FP16 or
 * DT_CODEC_BF16), in place: counted and timed as dt_allreduce_sum is, at 2 bytes a value. */
dt_status dt_allreduce_half(dt_comm *c, uint16_t *buf, size_t n, dt_codec_kind kind);
/* ... started (MPI_Iallreduce): counted when started, buf untouched until the request
 * completes (dt_wait_all, dt_test_all). In the simulation build *req is MPI_REQUEST_NULL and
 * the sum is MPICH's schedule in messages, moved along by those calls (comm/sim_coll.h), as
 * dt_iallreduce_sum's is. */
dt_status dt_iallreduce_half(dt_comm *c, uint16_t *buf, size_t n, dt_codec_kind kind, MPI_Request *req);

#endif
