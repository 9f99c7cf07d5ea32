/* A calibration of dtrain sim on the user's own hosts (docs/simulation.md, "Calibrating on
 * your cluster"): what `dtrain sim calibrate` measured between two real hosts, kept as a small
 * INI file that `dtrain sim --calibration FILE` turns into the platform cluster's links and
 * SimGrid's corrections, SimGrid's own calibration procedure (its MPI tutorial): the links'
 * latency and payload rate, the bandwidth factor by message size (smpi/bw-factor), the time
 * MPI_Isend takes to return and MPI_Recv takes for a message already there (smpi/ois,
 * smpi/or), the hosts' speed on a model (--speed), and how much of a non-blocking sum the MPI
 * moves while the rank computes ([progress], comm/sim_coll.c). */
#ifndef DT_CLI_CALIB_FILE_H
#define DT_CLI_CALIB_FILE_H

#include <stddef.h>

#include "dtrain.h"

#define DT_CALIB_SIZES 40

typedef struct dt_calibration {
    double latency_s; /* one link's: half a zero-byte message's one-way time (two links a message) */
    double rate_bps;  /* the payload rate of the largest messages, bits/s */
    /* the largest size sent both ways at once: its time, and the rate each way it gives (0 when
     * not measured: files before 2026-11-30). Over TCP the two directions share the hosts'
     * CPUs and network stacks, and each gets less than one alone (SimGrid's limiter link) */
    double duplex_s, duplex_bps;
    int nsizes;       /* message sizes measured, ascending, the first 0 */
    double size[DT_CALIB_SIZES], oneway_s[DT_CALIB_SIZES], bw_factor[DT_CALIB_SIZES], isend_s[DT_CALIB_SIZES],
        recv_s[DT_CALIB_SIZES];
    char model[256];  /* the speed's model */
    int batch;
    double speed;     /* flop/s: the model's FLOPs a training step over a step's median time, the ranks' mean */
    double rank_speed[2];
    /* [progress] (0, 0, 0 when the file has none: the MPI is taken to move messages in the
     * background, as SMPI does): a sum of progress_bucket bytes started before computing, with one
     * MPI_Testall during it; the share of it that crossed meanwhile; the bytes one MPI call
     * hands to the network (0: in the background); and the seconds of computing each byte that
     * crosses while the rank computes takes from it (the network stack's work on the same core: 0
     * when not measured, files before 2026-12-01, or when too little crossed to tell) */
    double progress_bucket, progress_hidden, progress_bytes, progress_cpu_per_byte;
    char hosts[512];  /* "a and b" */
    char when[32];    /* UTC */
} dt_calibration;

/* The bandwidth factors and the link rate from the one-way times (size[0] must be 0): the
 * rate is the largest messages' marginal rate, a size's factor is what gives its measured
 * time at that rate after the zero-byte time; the rate each way of the exchange both ways. */
void dt_calib_fit(dt_calibration *c);
/* Writes c to path atomically (the file a reader finds is the old one or the whole new one). */
dt_status dt_calib_write(const dt_calibration *c, const char *path);
/* Reads path; bad content is one line naming path:line and what was expected. */
dt_status dt_calib_read(const char *path, dt_calibration *c);
/* The bytes/s a host moves in and out together (SimGrid's limiter link: twice the rate each
 * way of the exchange both ways, over the largest size's bandwidth factor), or 0 when the two directions do not slow each other (from
 * 95% of the one-way rate each way) or the file did not measure it. */
double dt_calib_limiter_Bps(const dt_calibration *c);
/* SimGrid's options for it: --cfg=smpi/bw-factor:...;..., smpi/ois and smpi/or, space-separated. */
void dt_calib_cfg(const dt_calibration *c, char *out, size_t len);

#endif
