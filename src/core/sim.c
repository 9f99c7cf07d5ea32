/* The simulation build's answers (core/sim.h), compiled into dtrain-sim only. dtrain sim
 * passes what it set up through the environment, which every simulated rank shares: SMPI runs
 * them all in this one process. */
#include "core/sim.h"

#include <mpi.h> /* SMPI's: smpi_execute_flops */
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int dt_sim_modelled(void) {
    static int known = 0, modelled = 0; /* per rank: SMPI gives each its own statics */
    if (!known) {
        const char *c = getenv("DTRAIN_SIM_COMPUTE");
        modelled = c && !strcmp(c, "modelled");
        known = 1;
    }
    return modelled;
}

const char *dt_sim_replay(void) {
    static int known = 0; /* per rank, as dt_sim_modelled's */
    static const char *replay = NULL;
    if (!known) {
        const char *r = getenv("DTRAIN_SIM_REPLAY");
        replay = r && *r && dt_sim_modelled() ? r : NULL;
        known = 1;
    }
    return replay;
}

/* A restarted simulation (dtrain sim --cluster with a host failure and --max-restarts) goes on
 * from the simulated time the first one failed at: DTRAIN_SIM_CLOCK_OFFSET seconds, read once. */
static double clock_offset(void) {
    static int known = 0;
    static double offset = 0;
    if (!known) {
        const char *v = getenv("DTRAIN_SIM_CLOCK_OFFSET");
        offset = v ? atof(v) : 0;
        if (!(offset > 0)) offset = 0;
        known = 1;
    }
    return offset;
}

double dt_sim_clock(void) {
    int in = 0, out = 0;
    MPI_Initialized(&in);
    MPI_Finalized(&out);
    if (!in || out) return clock_offset() + simgrid_get_clock(); /* SMPI's clock_gettime would read the host's */
    /* SMPI's (smpi_helpers.h): it first ends the computing burst in progress, which measured
     * compute charges to the host, so that a timer around a computation sees it */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return clock_offset() + (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void dt_sim_compute(double flops) {
    if (flops > 0 && dt_sim_modelled()) smpi_execute_flops(flops);
}

const char *dt_sim_describe(void) {
    const char *d = getenv("DTRAIN_SIM_DESCRIBE");
    return d ? d : "";
}

const char *dt_sim_setup(void) { return getenv("DTRAIN_SIM_SETUP"); }

/* a positive number from the environment, or 0 */
static double env_positive(const char *name) {
    const char *v = getenv(name);
    char *end = NULL;
    const double x = v ? strtod(v, &end) : 0;
    return v && end != v && !*end && x > 0 ? x : 0;
}

double dt_sim_progress_bytes(void) {
    static int known = 0; /* per rank, as dt_sim_modelled's */
    static double bytes = 0;
    if (!known) bytes = env_positive("DTRAIN_SIM_PROGRESS_BYTES"), known = 1;
    return bytes;
}

double dt_sim_cpu_per_byte(void) {
    static int known = 0;
    static double s = 0;
    if (!known) s = env_positive("DTRAIN_SIM_CPU_PER_BYTE"), known = 1;
    return s;
}

void dt_sim_busy(double seconds) {
    if (seconds > 0) smpi_execute_flops(seconds * sg_host_get_speed(sg_host_self()));
}
