/* The calibration file (calib_file.h): an INI file with [link], [sizes], [progress] (from
 * 2026-11-30; older files have none) and [host]. */
#include "cli/calib_file.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ini_lines.h"
#include "core/paths.h"

#define FIRST_LINE "; dtrain sim calibration"

void dt_calib_fit(dt_calibration *c) {
    const int n = c->nsizes;
    const double t0 = c->oneway_s[0];
    c->latency_s = t0 / 2;
    /* the marginal rate of the two largest messages: what a long transfer gets */
    double rate = 0;
    if (n >= 3 && c->oneway_s[n - 1] > c->oneway_s[n - 2])
        rate = 8 * (c->size[n - 1] - c->size[n - 2]) / (c->oneway_s[n - 1] - c->oneway_s[n - 2]);
    else if (n >= 2 && c->oneway_s[n - 1] > t0)
        rate = 8 * c->size[n - 1] / (c->oneway_s[n - 1] - t0);
    c->rate_bps = rate;
    c->duplex_bps = c->duplex_s > t0 ? 8 * c->size[n - 1] / (c->duplex_s - t0) : 0;
    for (int i = 0; i < n; i++) {
        /* at most 1000x the rate (a time within the zero-byte one's noise) */
        const double extra = fmax(c->oneway_s[i] - t0, 8 * c->size[i] / (rate * 1000));
        c->bw_factor[i] = i == 0 || rate <= 0 ? 1 : 8 * c->size[i] / (rate * extra);
    }
}

static dt_status fill(void *ctx, void *file) {
    const dt_calibration *c = ctx;
    FILE *f = file;
    /* (cut: inih reads lines of at most 200 characters; [host] keeps them whole) */
    fprintf(f, FIRST_LINE " (docs/simulation.md): measured by dtrain sim calibrate between %.40s, %.31s\n", c->hosts, c->when);
    fprintf(f, "; use: dtrain sim --calibration FILE (the platform cluster's links and SimGrid's corrections; the hosts'\n"
               "; speed for --compute modelled on the same model)\n\n[link]\n");
    fprintf(f, "; one link's latency: half the one-way time of a zero-byte message (a message crosses two links)\n");
    fprintf(f, "latency = %.6g\n", c->latency_s);
    fprintf(f, "; the payload rate of the largest messages, bits/s\nrate = %.6g\n", c->rate_bps);
    if (c->duplex_s > 0)
        fprintf(f, "; the largest size sent both ways at once (MPI_Sendrecv on both hosts): seconds (median), and the\n"
                   "; rate each way, bits/s (with --duplex-limit and below 95%% of rate, dtrain sim gives each host a\n"
                   "; link its two directions share at twice this, SimGrid's limiter link)\nduplex = %.6g\nduplex_rate = %.6g\n",
                c->duplex_s, c->duplex_bps);
    fprintf(f, "\n[sizes]\n");
    fprintf(f, "; bytes = one-way seconds (median), bandwidth factor (the share of the rate that gives it), seconds\n"
               "; MPI_Isend takes to return, seconds MPI_Recv takes for a message already there\n");
    for (int i = 0; i < c->nsizes; i++)
        fprintf(f, "%.0f = %.6g %.6g %.6g %.6g\n", c->size[i], c->oneway_s[i], c->bw_factor[i], c->isend_s[i], c->recv_s[i]);
    if (c->progress_bucket > 0) {
        fprintf(f, "\n[progress]\n; a sum of 'bucket' bytes started (MPI_Iallreduce), computing for twice its transfer time\n"
                   "; with one MPI_Testall, then MPI_Waitall: the share of the transfer that ran while computing\n"
                   "; ('hidden'), and the bytes one MPI call hands to the network ('bytes_per_call': half the bucket\n"
                   "; times that share, two calls a bucket; 0: the MPI moves messages in the background)\n");
        fprintf(f, "bucket = %.0f\nhidden = %.4f\nbytes_per_call = %.0f\n", c->progress_bucket, c->progress_hidden,
                c->progress_bytes);
        if (c->progress_cpu_per_byte > 0)
            fprintf(f, "; seconds of computing that each byte crossing while a rank computes takes from it (the\n"
                       "; network stack's work on its core: the model's steps timed with the sum crossing and without)\n"
                       "cpu_per_byte = %.6g\n", c->progress_cpu_per_byte);
    }
    /* what the file has: a file read without them (edited by hand) is written back as it was */
    fprintf(f, "\n[host]\n; the two hosts measured (MPI's processor names) and when (UTC)\n");
    if (*c->hosts) fprintf(f, "hosts = %s\n", c->hosts);
    if (*c->when) fprintf(f, "when = %s\n", c->when);
    if (*c->model) fprintf(f, "model = %s\n", c->model);
    if (c->batch >= 1) fprintf(f, "batch = %d\n", c->batch);
    if (c->speed > 0) {
        fprintf(f, "; flop/s: the model's FLOPs a training step (forward, backward twice that) over a step's median time,\n"
                   "; each rank computing beside the other; the ranks' mean, then each\n");
        fprintf(f, "speed = %.6g\nspeeds = %.6g %.6g\n", c->speed, c->rank_speed[0], c->rank_speed[1]);
    }
    return ferror(f) ? dt_fail(DT_ERR_IO, "write failed: %s", strerror(errno)) : DT_OK;
}

double dt_calib_limiter_Bps(const dt_calibration *c) {
    /* SMPI scales a flow's bandwidth by the size's factor: the largest size's, as measured */
    const double factor = c->nsizes > 0 ? c->bw_factor[c->nsizes - 1] : 1, each = c->duplex_bps / factor;
    if (c->duplex_bps <= 0 || each >= 0.95 * c->rate_bps) return 0;
    return 2 * each / 8;
}

dt_status dt_calib_write(const dt_calibration *c, const char *path) { return dt_write_atomic(path, fill, (void *)c); }

typedef struct {
    dt_calibration *c;
    char why[200];
    int seen_rate, seen_latency, seen_speed;
} reader;

static int number(const char *v, double *out, double lo) {
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < lo) return 0;
    *out = x;
    return 1;
}

static int on_value(void *user, const char *section, const char *name, const char *value) {
    reader *r = user;
    dt_calibration *c = r->c;
    if (!strcmp(section, "link") && !strcmp(name, "latency")) {
        if (!number(value, &c->latency_s, 0)) { snprintf(r->why, sizeof r->why, "latency: expected seconds >= 0"); return 0; }
        r->seen_latency = 1;
    } else if (!strcmp(section, "link") && !strcmp(name, "rate")) {
        if (!number(value, &c->rate_bps, 1e3)) { snprintf(r->why, sizeof r->why, "rate: expected bits/s from 1e3"); return 0; }
        r->seen_rate = 1;
    } else if (!strcmp(section, "link") && !strcmp(name, "duplex")) {
        if (!number(value, &c->duplex_s, 0)) { snprintf(r->why, sizeof r->why, "duplex: expected seconds >= 0"); return 0; }
    } else if (!strcmp(section, "link") && !strcmp(name, "duplex_rate")) {
        if (!number(value, &c->duplex_bps, 0)) { snprintf(r->why, sizeof r->why, "duplex_rate: expected bits/s >= 0"); return 0; }
    } else if (!strcmp(section, "sizes")) {
        double sz, v[4];
        char extra;
        if (!number(name, &sz, 0) || sz != floor(sz) || sz > 1e12 ||
            sscanf(value, "%lf %lf %lf %lf %c", &v[0], &v[1], &v[2], &v[3], &extra) != 4 || !(v[0] >= 0) ||
            !(v[1] > 0) || !(v[2] >= 0) || !(v[3] >= 0) || !isfinite(v[0] + v[1] + v[2] + v[3])) {
            snprintf(r->why, sizeof r->why, "expected BYTES = SECONDS FACTOR ISEND_SECONDS RECV_SECONDS (times >= 0, factor > 0)");
            return 0;
        }
        if (c->nsizes == DT_CALIB_SIZES || (c->nsizes > 0 && sz <= c->size[c->nsizes - 1])) {
            snprintf(r->why, sizeof r->why, "sizes: at most %d, in ascending order", DT_CALIB_SIZES);
            return 0;
        }
        const int i = c->nsizes++;
        c->size[i] = sz, c->oneway_s[i] = v[0], c->bw_factor[i] = v[1], c->isend_s[i] = v[2], c->recv_s[i] = v[3];
    } else if (!strcmp(section, "progress") && !strcmp(name, "bucket")) {
        if (!number(value, &c->progress_bucket, 1)) { snprintf(r->why, sizeof r->why, "bucket: expected bytes from 1"); return 0; }
    } else if (!strcmp(section, "progress") && !strcmp(name, "hidden")) {
        if (!number(value, &c->progress_hidden, -1e9) || c->progress_hidden > 1) {
            snprintf(r->why, sizeof r->why, "hidden: expected a share up to 1");
            return 0;
        }
    } else if (!strcmp(section, "progress") && !strcmp(name, "bytes_per_call")) {
        if (!number(value, &c->progress_bytes, 0)) { snprintf(r->why, sizeof r->why, "bytes_per_call: expected bytes >= 0"); return 0; }
    } else if (!strcmp(section, "progress") && !strcmp(name, "cpu_per_byte")) {
        if (!number(value, &c->progress_cpu_per_byte, 0) || c->progress_cpu_per_byte > 1e-3) {
            snprintf(r->why, sizeof r->why, "cpu_per_byte: expected seconds a byte, 0 to 1e-3");
            return 0;
        }
    } else if (!strcmp(section, "host") && !strcmp(name, "model")) {
        dt_ini_keep(c->model, sizeof c->model, value);
    } else if (!strcmp(section, "host") && !strcmp(name, "batch")) {
        double b;
        if (!number(value, &b, 1) || b != floor(b) || b > 1e6) { snprintf(r->why, sizeof r->why, "batch: expected a whole number"); return 0; }
        c->batch = (int)b;
    } else if (!strcmp(section, "host") && !strcmp(name, "speed")) {
        if (!number(value, &c->speed, 1e6)) { snprintf(r->why, sizeof r->why, "speed: expected flop/s from 1e6"); return 0; }
        r->seen_speed = 1;
    } else if (!strcmp(section, "host") && !strcmp(name, "hosts")) {
        dt_ini_keep(c->hosts, sizeof c->hosts, value);
    } else if (!strcmp(section, "host") && !strcmp(name, "when")) {
        dt_ini_keep(c->when, sizeof c->when, value);
    } else if (!strcmp(section, "host") && !strcmp(name, "speeds")) {
        /* the ranks' own, for the reader: not used */
    } else {
        snprintf(r->why, sizeof r->why, "unknown key '%s' in [%s] (expected [link] latency, rate, duplex, duplex_rate; [sizes]; [progress] "
                 "bucket, hidden, bytes_per_call, cpu_per_byte; [host] hosts, when, model, batch, speed, speeds)", name, section);
        return 0;
    }
    return 1;
}

dt_status dt_calib_read(const char *path, dt_calibration *c) {
    memset(c, 0, sizeof *c);
    FILE *f;
    dt_status st = dt_open_regular(path, &f, NULL);
    if (st != DT_OK) return dt_fail(DT_ERR_ARG, "--calibration %s", dt_last_error());
    char first[64] = "";
    if (!fgets(first, sizeof first, f) || strncmp(first, FIRST_LINE, strlen(FIRST_LINE)) != 0) {
        fclose(f);
        return dt_fail(DT_ERR_ARG, "--calibration %s:1: not a calibration file (expected '" FIRST_LINE "', what dtrain sim "
                       "calibrate writes)", path);
    }
    rewind(f);
    reader r = {.c = c};
    const int line = ini_parse_file(f, on_value, &r);
    fclose(f);
    if (line != 0)
        return dt_fail(DT_ERR_ARG, "--calibration %s:%d: %s", path, line, *r.why ? r.why : "not an INI line");
    if (!r.seen_latency || !r.seen_rate || c->nsizes < 2 || c->size[0] != 0)
        return dt_fail(DT_ERR_ARG, "--calibration %s: expected [link] latency and rate and [sizes] from 0 bytes (at least "
                       "two sizes)", path);
    if (!r.seen_speed) c->speed = 0;
    return DT_OK;
}

/* "S0:T0:0;S1:T1:0": a time by size, constant from each size on (SMPI's piecewise
 * offset:factor form) */
static size_t overhead(const dt_calibration *c, const double *t, char *out, size_t len) {
    size_t o = 0;
    for (int i = 0; i < c->nsizes && o < len; i++)
        o += (size_t)snprintf(out + o, len - o, "%s%.0f:%.6g:0", i ? ";" : "", c->size[i], t[i]);
    return o;
}

void dt_calib_cfg(const dt_calibration *c, char *out, size_t len) {
    size_t o = (size_t)snprintf(out, len, "--cfg=smpi/bw-factor:");
    /* a size's factor applies from the size before it on: a message between two measured
     * sizes gets the larger one's (as scripts/sim-validate fitted it) */
    for (int i = 1; i < c->nsizes && o < len; i++)
        o += (size_t)snprintf(out + o, len - o, "%s%.0f:%.6g", i > 1 ? ";" : "", c->size[i - 1], c->bw_factor[i]);
    /* A blocking send of these sizes returns as an MPI_Isend does: once its bytes are handed
     * over. SMPI charges the send's overhead before the transfer starts, while a real MPI_Isend
     * hands bytes to the kernel as the link takes them: over 1,500-byte frames it returned only
     * when a 64-512 kB message had nearly crossed (1.87 ms of 131 kB's 2.05), and charging that
     * whole counted the transfer twice (ps at 1 Gbit/s 29% slow). So only the part of the call
     * the transfer does not explain: max(0, call - max(0, one-way - zero-byte one-way)). */
    double os[DT_CALIB_SIZES];
    /* (a size whose one-way time came out below the zero-byte one, noise on a loaded machine,
     * has no transfer to take off: the call's time is not to grow by it) */
    for (int i = 0; i < c->nsizes; i++) os[i] = fmax(0, c->isend_s[i] - fmax(0, c->oneway_s[i] - c->oneway_s[0]));
    if (o < len) o += (size_t)snprintf(out + o, len - o, " --cfg=smpi/ois:");
    if (o < len) o += overhead(c, os, out + o, len - o);
    if (o < len) o += (size_t)snprintf(out + o, len - o, " --cfg=smpi/os:");
    if (o < len) o += overhead(c, os, out + o, len - o);
    if (o < len) o += (size_t)snprintf(out + o, len - o, " --cfg=smpi/or:");
    if (o < len) overhead(c, c->recv_s, out + o, len - o);
}
