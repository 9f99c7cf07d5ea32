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

/* Starts the sum of buf over the ranks of c, in place (every rank the same calls in the same
 * order). */
dt_status dt_sim_iallreduce_start(dt_comm *c, float *buf, size_t n);
/* ... of n values of type (elem bytes each) under op, which add (op's function) computes here:
 * the 16-bit sums of half_reduce.h. */
dt_status dt_sim_iallreduce_start_op(dt_comm *c, void *buf, size_t n, MPI_Datatype type, size_t elem, MPI_Op op,
                                     MPI_User_function *add);
/* Moves the started sums along; wait: until every one is done. */
dt_status dt_sim_iallreduce_progress(dt_comm *c, int wait);

#endif
