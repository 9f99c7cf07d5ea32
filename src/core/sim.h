/* The simulation build (DT_SIM: compiled with SimGrid's smpicc into dtrain-sim, started by
 * dtrain sim under smpirun; docs/simulation.md). What the rest of the library asks of it:
 * whether this is a simulation, its description for the log, and the modelled compute, which
 * charges each layer's FLOPs to the simulated host instead of timing the real CPU. Its
 * definitions are core/sim.c, compiled into dtrain-sim only; in the ordinary build every call
 * here is a static inline no-op answering "not simulated". */
#ifndef DT_SIM_H
#define DT_SIM_H

#include <stddef.h>

/* 1 in the simulation build, 0 in the ordinary one: the one test of "simulated" in .c files,
 * as a constant (if (DT_SIM_BUILD) ...), so that both builds compile every branch and the
 * compiler drops the other build's. */
#ifdef DT_SIM
#define DT_SIM_BUILD 1
#else
#define DT_SIM_BUILD 0
#endif

/* 1 in the simulation build (DT_SIM_BUILD). */
static inline int dt_sim_active(void) { return DT_SIM_BUILD; }

#ifdef DT_SIM
/* 1 when compute is modelled (DTRAIN_SIM_COMPUTE=modelled, set by dtrain sim). */
int dt_sim_modelled(void);
/* The log a replay takes its numbers from (DTRAIN_SIM_REPLAY, set by dtrain sim --replay), or
 * NULL: the model then charges every layer's FLOPs and calculates nothing (models/model.c). */
const char *dt_sim_replay(void);
/* Bytes of a non-blocking operation that one call into MPI hands to the network, when the
 * calibration (dtrain sim calibrate, [progress]) found the user's MPI moves large messages only
 * inside its calls, as MPICH over TCP does: DTRAIN_SIM_PROGRESS_BYTES, set by dtrain sim.
 * 0: the MPI moves them in the background (SMPI's own model, every shipped platform), and
 * always 0 outside simulation (the real MPI does what it does). */
double dt_sim_progress_bytes(void);
/* Seconds of computing that each byte a rank sends while it computes takes from it (the
 * network stack's work on its core), from the calibration's [progress] cpu_per_byte:
 * DTRAIN_SIM_CPU_PER_BYTE, set by dtrain sim; 0 without (SMPI's model: the network costs no
 * CPU). */
double dt_sim_cpu_per_byte(void);
/* Keeps this rank's simulated host busy for seconds (its speed's flops). */
void dt_sim_busy(double seconds);
/* The simulated clock, seconds (0 outside simulation). dt_now reads it in a simulation:
 * SMPI's own clock_gettime reads the host's clock before MPI_Init and after MPI_Finalize. */
double dt_sim_clock(void);
/* Modelled compute: flops executed on this rank's simulated host at its speed. */
void dt_sim_compute(double flops);
/* What dtrain sim said of the platform and the compute ("campus-100m: 16 hosts, ...;
 * compute modelled at 1e+11 flop/s"), "" when started otherwise, NULL outside simulation. */
const char *dt_sim_describe(void);
/* dtrain sim's cluster in figures, a JSON object (platform, hosts, link_bps, latency_s, compute,
 * speed_flops), or NULL (not simulated, or not started by dtrain sim) */
const char *dt_sim_setup(void);
#else
static inline int dt_sim_modelled(void) { return 0; }
static inline const char *dt_sim_replay(void) { return NULL; }
static inline double dt_sim_progress_bytes(void) { return 0; }
static inline double dt_sim_cpu_per_byte(void) { return 0; }
static inline void dt_sim_busy(double seconds) { (void)seconds; }
static inline double dt_sim_clock(void) { return 0; }
static inline void dt_sim_compute(double flops) { (void)flops; }
static inline const char *dt_sim_describe(void) { return NULL; }
static inline const char *dt_sim_setup(void) { return NULL; }
#endif

#endif
