/* A cluster in dtrain's own terms (dtrain sim --cluster FILE, docs/simulation.md "Cluster
 * files"): a small INI file, in the style of the sweep files, that dtrain writes to SimGrid's
 * XML. Groups of hosts (count, ranks a host, speed or a named class, link rate and latency, a
 * switch's backbone, an uplink to the other groups, a region), WAN links joining regions,
 * stragglers as a host's speed over simulated time (a SimGrid speed profile) and host failures
 * at a simulated time (dtrain's own fault path: SimGrid 3.32's SMPI cannot lose a host, it
 * stops with "Actor is gone??"; dtrain-sim ends the failed host's ranks itself, sim.h). */
#ifndef DT_CLI_SIM_CLUSTER_H
#define DT_CLI_SIM_CLUSTER_H

#include <stdio.h>

#include "dtrain.h"

#define DT_CF_GROUPS 64
#define DT_CF_WANS 64
#define DT_CF_EVENTS 64
#define DT_CF_STEPS 32
#define DT_CF_NAME 48

typedef struct {
    char name[DT_CF_NAME], region[DT_CF_NAME];
    int hosts, per_host, line;
    double speed, link_Bps, latency_s, bb_Bps, bb_s, up_Bps, up_s; /* bb_Bps, up_Bps 0: none given */
} dt_cf_group;

typedef struct {
    char a[DT_CF_NAME], b[DT_CF_NAME];
    double Bps, s;
    int line;
} dt_cf_wan;

typedef struct {
    char host[2 * DT_CF_NAME];
    int group, index, line;
    int n;                        /* straggler: its profile's steps */
    double t[DT_CF_STEPS], frac[DT_CF_STEPS]; /* from simulated time t on, frac of the host's speed */
    double at;                    /* failure: when */
} dt_cf_event;

typedef struct dt_cluster_file {
    char path[4096], name[DT_CF_NAME];
    int ngroups, nwans, nslow, nfail;
    int hosts, ranks;
    dt_cf_group g[DT_CF_GROUPS];
    dt_cf_wan w[DT_CF_WANS];
    dt_cf_event slow[DT_CF_EVENTS], fail[DT_CF_EVENTS];
} dt_cluster_file;

/* Reads and checks path: one line naming path:line and what was expected for anything wrong. */
dt_status dt_cluster_read(const char *path, dt_cluster_file *c);
/* SimGrid's XML and hostfile (rank r on line r) for it, with the profiles shifted to a
 * simulation that starts at simulated time offset_s (a restart), and one line describing it. */
dt_status dt_cluster_write(const dt_cluster_file *c, double offset_s, FILE *xml, FILE *hosts, char *describe, size_t len);
/* The failures after simulated time after_s as dtrain-sim reads them (DTRAIN_SIM_FAILURES):
 * "RANK:SECONDS:HOST,..." for every rank on a failed host; "" when none. */
void dt_cluster_failures(const dt_cluster_file *c, double after_s, char *out, size_t len);

#endif
