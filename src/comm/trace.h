/* The run's timeline (--trace FILE): what each rank did when, as Chrome trace-event JSON.
 * Events go into a fixed array allocated before training (no allocation in a step); only
 * steps in the window [from, to) are recorded. After training every rank sends its events
 * (as JSON text, with its clock offset to rank 0 applied) to rank 0, which writes one file.
 * Recording is process-wide (one rank per process), from the rank's one thread. */
#ifndef DT_TRACE_H
#define DT_TRACE_H

#include <stdint.h>

#include "comm/world.h"
#include "dtrain.h"

/* lanes of a rank's timeline (Chrome's "threads"): the rank has one thread; its compute,
 * its counted messages and its blocking MPI calls are drawn on three lanes so they nest */
enum { DT_TRACE_MAIN = 0, DT_TRACE_COMM = 1, DT_TRACE_MPI = 2 };

/* --trace-steps "A:B" (steps A..B-1, counted from 0 per rank) into *from, *to; DT_ERR_ARG
 * with a one-line message otherwise. NULL: the default window. */
dt_status dt_trace_parse_steps(const char *text, long *from, long *to);

/* Before training: room for the window's events. */
dt_status dt_trace_open(long from, long to);
/* Every step's start: recording is on while from <= step < to. */
void dt_trace_step(long step);
/* After training: nothing more is recorded. */
void dt_trace_stop(void);
/* The events dropped unwritten (a run that failed): a later run of the process records none. */
void dt_trace_close(void);

/* The start time of an event (seconds, dt_now's clock), 0 when not recording. */
double dt_trace_t0(void);
/* A complete event from t0 to now on a lane: name and what (tensor or bucket label) are
 * static strings; bytes, peer, tensor < 0: not known. Nothing when t0 == 0. */
void dt_trace_event(int lane, const char *name, double t0, int64_t bytes, int peer, int tensor);

/* A span of the main lane (a phase of the step or of the run), begun and ended in one call
 * each: dt_span s = dt_span_begin("forward"); ...; dt_span_end(s). name is a static string. */
typedef struct dt_span {
    const char *name;
    double t0;
} dt_span;
static inline dt_span dt_span_begin(const char *name) { return (dt_span){name, dt_trace_t0()}; }
static inline void dt_span_end(dt_span s) { dt_trace_event(DT_TRACE_MAIN, s.name, s.t0, -1, -1, -1); }

/* Collective over comm, after training: rank 0 writes path atomically (temp + rename).
 * Messages here are raw PMPI calls: neither counted nor watched. Frees the events. */
dt_status dt_trace_write(MPI_Comm comm, const char *path, const char *host, const char *scheme);

#endif
