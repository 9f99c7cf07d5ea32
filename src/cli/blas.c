/* OpenBLAS's kernel family and threads, set before the library is used (blas.h). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/blas.h"
#include "core/sim.h"

/* Debian's OpenBLAS 0.3.21 does not know recent AVX-512 CPUs (e.g. Zen 5); with a preset or
 * detected AVX2 kernel family (OPENBLAS_CORETYPE=Haswell, Zen) it runs at half the speed. The
 * kernel family is fixed when the library loads, so when the CPU has AVX-512 but an AVX2 family
 * is in use we set OPENBLAS_CORETYPE=SkylakeX (and one BLAS thread) and re-execute ourselves
 * once. DTRAIN_BLAS_AUTO=0 keeps the environment as it is. */
static int is_avx512_core(const char *core) {
    return core && (!strcasecmp(core, "skylakex") || !strcasecmp(core, "cooperlake") ||
                    !strcasecmp(core, "sapphirerapids"));
}

void dt_cli_fast_blas(char **argv) {
    /* dtrain-sim: smpirun's program reads its arguments otherwise; dtrain sim chose the BLAS */
    if (dt_sim_active()) return;
    const char *opt = getenv("DTRAIN_BLAS_AUTO");
    if ((opt && !strcmp(opt, "0")) || getenv("DTRAIN_REEXECED")) return;
    int reexec = 0;
    if (!getenv("OPENBLAS_NUM_THREADS")) { setenv("OPENBLAS_NUM_THREADS", "1", 1); reexec = 1; }
    __builtin_cpu_init();
    const char *core = openblas_get_corename();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && !is_avx512_core(core)) {
        setenv("DTRAIN_BLAS_WAS", core ? core : "unknown", 1);
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        reexec = 1;
    }
    if (!reexec) return;
    setenv("DTRAIN_REEXECED", "1", 1);
    /* by its real path: exec of /proc/self/exe would name the process "exe" in ps and top */
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) { self[len] = 0; execv(self, argv); }
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with what we have */
}
