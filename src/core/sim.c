/* The simulation build's answers (core/sim.h). dtrain sim passes what it set up through the
 * environment, which every simulated rank shares: SMPI runs them all in this one process. */
#include "core/sim.h"

#include <stdlib.h>
#include <string.h>

#ifdef DT_SIM
#include <mpi.h> /* SMPI's: smpi_execute_flops */

int dt_sim_active(void) { return 1; }

int dt_sim_modelled(void) {
    static int known = 0, modelled = 0; /* per rank: SMPI gives each its own statics */
    if (!known) {
        const char *c = getenv("DTRAIN_SIM_COMPUTE");
        modelled = c && !strcmp(c, "modelled");
        known = 1;
    }
    return modelled;
}

void dt_sim_compute(double flops) {
    if (flops > 0 && dt_sim_modelled()) smpi_execute_flops(flops);
}

const char *dt_sim_describe(void) {
    const char *d = getenv("DTRAIN_SIM_DESCRIBE");
    return d ? d : "";
}
#else
int dt_sim_active(void) { return 0; }
int dt_sim_modelled(void) { return 0; }
void dt_sim_compute(double flops) { (void)flops; }
const char *dt_sim_describe(void) { return NULL; }
#endif
