/* The clusters dtrain sim simulates: SimGrid platform files made from a few numbers (a named
 * platform, or a flat cluster of the links given), the hostfile that puts rank r on host r,
 * and the units of their rates and times. docs/simulation.md describes each platform. */
#ifndef DT_SIM_PLATFORM_H
#define DT_SIM_PLATFORM_H

#include <stdio.h>

#include "dtrain.h"

#define DT_SIM_MAX_STRAGGLERS 16

typedef struct dt_sim_cluster {
    const char *platform;  /* "cluster", "datacenter", "campus-1g", "campus-100m", "wan" */
    int hosts;
    double link_Bps;       /* cluster: each host's link, bytes/s */
    double latency_s;      /* cluster: each host link's latency */
    double limiter_Bps;    /* cluster: what a host moves in and out together (0: each way its link's rate) */
    double speed;          /* every host's flop/s (a straggler's is divided by its factor) */
    int nslow;
    int slow_rank[DT_SIM_MAX_STRAGGLERS];
    double slow_factor[DT_SIM_MAX_STRAGGLERS];
} dt_sim_cluster;

/* The named platforms, for --help and errors: "cluster, datacenter, ..." */
const char *dt_sim_platform_names(void);
/* 1 when name is one of them. */
int dt_sim_platform_known(const char *name);
/* The platform XML to xml, the hostfile (host r on line r) to hosts, and one line describing
 * them ("campus-100m: 16 hosts, 100 Mbit/s links (100 us), 1 Gbit/s backbone") to describe. */
dt_status dt_sim_platform_write(const dt_sim_cluster *c, FILE *xml, FILE *hosts, char *describe, size_t len);

/* "100Mbps", "1Gbps", "12.5MBps" (bits or bytes a second, SimGrid's units) into bytes/s;
 * NULL when good, else what was expected. Each keeps to what SimGrid simulates faithfully:
 * a rate from 1 kbit/s, a time of 0 or from 1 ns (its precision), a speed from 1 Mflop/s. */
const char *dt_sim_parse_rate(const char *text, double *Bps);
/* "50us", "2ms", "0.1s", "0" into seconds. */
const char *dt_sim_parse_time(const char *text, double *s);
/* "100Gf", "2.5Tf", "3e10" into flop/s. */
const char *dt_sim_parse_speed(const char *text, double *flops);
/* "2:4" or "2:4,7:1.5" (RANK:FACTOR, the rank's host FACTOR times slower). */
const char *dt_sim_parse_stragglers(const char *text, dt_sim_cluster *c);
/* sim_inputs.c: a user's hostfile has a host's name alone on each line, at least ranks of
 * them; a user's platform file no speed or bandwidth of 0 or less, no negative latency. */
dt_status dt_sim_check_hostfile(const char *path, int ranks);
dt_status dt_sim_check_platform_file(const char *path);

/* bytes/s as "100 Mbit/s" */
void dt_sim_format_rate(double Bps, char *out, size_t len);

#endif
