/* Waiting by polling in the simulation build (docs/simulation.md, "Waiting"). SimGrid moves
 * its clock only when every simulated rank is blocked or computing: a rank that polls (MPI_Test,
 * MPI_Iprobe, a window's memory) at no simulated cost holds the clock still, and the messages
 * it waits for never arrive. So in dtrain-sim:
 * - a poll that found nothing costs simulated time (dt_sim_poll_idle: a fixed schedule, the same
 *   on any machine), and the waits that can block instead do (window_overlap.c);
 * - a wait that polls longer than --timeout in simulated seconds ends the run, naming the rank
 *   and what it waited for (the watchdog of a real run, on the simulated clock);
 * - a rank that polls a million times without the simulated clock moving (a loop that never
 *   calls dt_sim_poll_idle) ends the run, naming the rank, the call and the simulated time.
 * Both end with status 4, as the watchdog does. In the ordinary build every call is a no-op. */
#ifndef DT_SIM_POLL_H
#define DT_SIM_POLL_H

/* What a fruitless poll costs a simulated host: MPICH's MPI_Test through UCX takes about a
 * microsecond when nothing has arrived. A wait's polls cost more as it goes on, doubling up to
 * DT_SIM_POLL_MAX_S (SMPI grows its own injected times so, smpi/grow-injected-times): a wait
 * of 40 ms takes a few hundred polls, not 40,000 (each may hash a tensor on this CPU), and
 * ends at most DT_SIM_POLL_MAX_S after what it waited for arrived. */
#define DT_SIM_POLL_S 1e-6
#define DT_SIM_POLL_MAX_S 128e-6
/* Fruitless polls at one simulated instant that make a stall (a legitimate wait moves the
 * clock at every one of them). */
#define DT_SIM_STALL_POLLS 1000000L

#ifdef DT_SIM
/* The fruitless poll number polls (0, 1, ...) of a wait: this rank's host spends
 * DT_SIM_POLL_S x 2^polls of simulated time, at most DT_SIM_POLL_MAX_S; then the --timeout check. */
void dt_sim_poll_idle(int polls);
/* The run's --timeout (simulated seconds; 0: none) and its scheme, for the lines. */
void dt_sim_poll_limits(double timeout_s, const char *scheme);
/* A host failure of dtrain sim --cluster (DTRAIN_SIM_FAILURES="RANK:SECONDS:HOST,...", what
 * dtrain sim wrote; read once): once this rank's simulated time reaches its host's failure, the
 * simulation ends as a lost rank ends a real job: one line naming the rank, its host and the
 * simulated time, a note for dtrain sim's restart (DTRAIN_SIM_FAILURE_FD: "RANK SECONDS HOST
 * STEP"), status 4. Checked after every training step and every poll (dt_sim_poll_idle): a host
 * fails at the first of them at or after its time. */
void dt_sim_check_failure(void);
#else
static inline void dt_sim_poll_idle(int polls) { (void)polls; }
static inline void dt_sim_poll_limits(double timeout_s, const char *scheme) { (void)timeout_s, (void)scheme; }
static inline void dt_sim_check_failure(void) {}
#endif

#endif
