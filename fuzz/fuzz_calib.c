/* libFuzzer target: the calibration file of `dtrain sim --calibration` (src/cli/calib_file.c):
 * read through inih. What it accepts must hold together: sizes from 0 bytes, ascending, at
 * least two; the limiter and SimGrid's options computable; and written back and read again,
 * it writes the same file (the second round trip is byte for byte the first's). */
#include <math.h>

#include "cli/calib_file.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = dt_fuzz_write("cal.ini", data, size);
    static dt_calibration c, d, e;
    if (dt_calib_read(path, &c) != DT_OK) return 0;
    if (c.nsizes < 2 || c.size[0] != 0 || !(c.rate_bps >= 1e3) || !(c.latency_s >= 0)) abort();
    for (int i = 1; i < c.nsizes; i++)
        if (!(c.size[i] > c.size[i - 1])) abort();
    const double lim = dt_calib_limiter_Bps(&c);
    if (!(lim >= 0) || !isfinite(lim)) abort();
    static char cfg[16384];
    dt_calib_cfg(&c, cfg, sizeof cfg);
    if (strncmp(cfg, "--cfg=smpi/bw-factor:", 21) != 0) abort();
    /* written, read, written again: the two files the same */
    const char *one = dt_fuzz_path("one.ini"), *two = dt_fuzz_path("two.ini");
    if (dt_calib_write(&c, one) != DT_OK) abort();
    if (dt_calib_read(one, &d) != DT_OK) abort();
    if (dt_calib_write(&d, two) != DT_OK || dt_calib_read(two, &e) != DT_OK) abort();
    static char first[1 << 17];
    strcpy(first, dt_fuzz_slurp(one));
    if (strcmp(first, dt_fuzz_slurp(two)) != 0) abort();
    return 0;
}
