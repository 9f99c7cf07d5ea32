/* MPI_COMM_WORLD for dtrain: what only the library does with the communication context (its
 * start, its end, agreeing on an error). The public part (the dt_comm, its counters, the
 * counted and timed calls, counted.c) is include/dtrain/comm.h. Accounting: docs/accounting.md. */
#ifndef DT_COMM_WORLD_H
#define DT_COMM_WORLD_H

#include <mpi.h>
#include <stdint.h>

#include "dtrain.h"
#include "dtrain/comm.h"

/* Initialises MPI (if not yet) and the context on MPI_COMM_WORLD. */
dt_status dt_comm_init(int *argc, char ***argv, dt_comm *c);
/* Finalises MPI if this process initialised it. */
void dt_comm_finalize(void);

/* Collective: every rank learns whether any rank's st failed, so that none is left waiting in
 * a later collective for one that gave up. Returns st where it failed (its message stays on
 * that rank); DT_ERR_STATE with the message `other` where only another rank failed; the MPI
 * error where the agreement itself failed. A context whose MPI did not start (size 0): st. */
dt_status dt_comm_agree(const dt_comm *c, dt_status st, const char *other);

#endif
