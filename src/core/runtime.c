/* Process-wide runtime setup: one BLAS thread per rank. */
#include "dtrain.h"

#include "core/sim.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void dt_runtime_init(void) { openblas_set_num_threads(1); }

double dt_now(void) {
    if (dt_sim_active()) return dt_sim_clock();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *dt_blas_core(void) {
    static char buf[96];
    const char *was = getenv("DTRAIN_BLAS_WAS");
    if (was) snprintf(buf, sizeof buf, "%s (auto, instead of %s)", openblas_get_corename(), was);
    else snprintf(buf, sizeof buf, "%s", openblas_get_corename());
    return buf;
}
