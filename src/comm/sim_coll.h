/* The simulation build's non-blocking allreduce (docs/simulation.md). SMPI 3.32's own
 * MPI_Iallreduce frees its in-place copy before sending it and sends every buffer to every
 * rank ((N-1)·B bytes a rank); MPICH's reduces a large buffer by recursive halving and
 * gathers it back by recursive doubling (2·B·(N-1)/N a rank). Without a non-blocking one, the
 * buckets of allreduce would be reduced while backward waits: 24.5 ms a step simulated against
 * 12.9 ms measured on 2 hosts at 100 Mbit/s. This one is MPICH's schedule, in point-to-point
 * messages, moved along where MPICH moves its own: in the calls that test or wait. */
#ifndef DT_SIM_COLL_H
#define DT_SIM_COLL_H

#include <stddef.h>

#include "dtrain.h"
#include "dtrain/comm.h"

#ifdef DT_SIM /* comm/sim_coll.c, compiled into dtrain-sim only */
/* Starts the sum of buf over the ranks of c, in place (every rank the same calls in the same
 * order). */
dt_status dt_sim_iallreduce_start(dt_comm *c, float *buf, size_t n);
/* ... of n values of type (elem bytes each) under op, which add (op's function) computes here:
 * the 16-bit sums of half_reduce.h. */
dt_status dt_sim_iallreduce_start_op(dt_comm *c, void *buf, size_t n, MPI_Datatype type, size_t elem, MPI_Op op,
                                     MPI_User_function *add);
/* Whether a blocking sum of n values (bytes in all) goes by MPICH's schedule below rather
 * than SMPI's MPI_Allreduce: under the mpich selector SMPI 3.32 takes a commutative sum to
 * MVAPICH2's two-level algorithm, whose leaders (one rank a host) sum by recursive doubling,
 * every rank sending the whole buffer log2(N) times, where MPICH sends 2(N-1)/N of it by
 * recursive halving then doubling above 2 kB (MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE) when there
 * is a value for each of the 2^m ranks: 1.33x the bytes and time on 4 hosts, 2.1x on 16, 3x on
 * 64 (fedavg's averages, allreduce --bucket-kb 0). Other rank counts keep SMPI's. 0 outside
 * the simulation build. */
int dt_sim_sums_as_mpich(const dt_comm *c, size_t n, size_t bytes);
/* Moves the started sums along; wait: until every one is done. */
dt_status dt_sim_iallreduce_progress(dt_comm *c, int wait);
#else
/* The ordinary build has MPICH's own; its callers test DT_SIM_BUILD (core/sim.h) first, so
 * the others are never called there. */
static inline dt_status dt_sim_iallreduce_start(dt_comm *c, float *buf, size_t n) {
    (void)c, (void)buf, (void)n;
    return DT_OK;
}
static inline dt_status dt_sim_iallreduce_start_op(dt_comm *c, void *buf, size_t n, MPI_Datatype type, size_t elem,
                                                   MPI_Op op, MPI_User_function *add) {
    (void)c, (void)buf, (void)n, (void)type, (void)elem, (void)op, (void)add;
    return DT_OK;
}
static inline int dt_sim_sums_as_mpich(const dt_comm *c, size_t n, size_t bytes) {
    (void)c, (void)n, (void)bytes;
    return 0;
}
static inline dt_status dt_sim_iallreduce_progress(dt_comm *c, int wait) {
    (void)c, (void)wait;
    return DT_OK;
}
#endif

#endif
