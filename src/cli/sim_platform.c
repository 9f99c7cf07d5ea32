/* SimGrid platform files for dtrain sim (sim_platform.h). A single site is one zone of
 * SimGrid's Cluster routing: every host has its own full-duplex link to a switch (SPLITDUPLEX:
 * a host sends and receives at the link's rate at once, as a switched Ethernet port does),
 * and a site with a backbone sends every message between two hosts across it as well. Hosts
 * are written as cabinets (runs of hosts of one speed), so that a straggler's host can be
 * slower. The WAN is four such sites (fewer with fewer hosts), each behind an uplink to the
 * others. A calibration that found a host's two directions slow each other (limiter_Bps) makes
 * the site one <cluster> whose hosts each have a limiter link both directions cross. */
#include "cli/sim_platform.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    double link_Bps, latency_s;   /* each host's link; 0: the user's (--link, --latency) */
    double backbone_Bps, backbone_s;  /* 0: none (a non-blocking switch) */
    int regions;                  /* > 1: a WAN of this many sites */
    double uplink_Bps, uplink_s;  /* WAN: each site's link to the others */
    const char *what;
} platform_def;

#define GBIT (1e9 / 8)
#define MBIT (1e6 / 8)

static const platform_def platforms[] = {
    {"cluster", 0, 0, 0, 0, 1, 0, 0, "one switch, every host on its own link (--link, --latency)"},
    {"datacenter", 10 * GBIT, 5e-6, 400 * GBIT, 1e-6, 1, 0, 0, "10 Gbit/s host links, 400 Gbit/s backbone"},
    {"campus-1g", 1 * GBIT, 100e-6, 10 * GBIT, 50e-6, 1, 0, 0, "1 Gbit/s host links, 10 Gbit/s backbone"},
    {"campus-100m", 100 * MBIT, 100e-6, 1 * GBIT, 50e-6, 1, 0, 0, "100 Mbit/s host links, 1 Gbit/s backbone"},
    {"wan", 10 * GBIT, 5e-6, 0, 0, 4, 100 * MBIT, 25e-3,
     "4 regions 50 ms and 100 Mbit/s apart, 10 Gbit/s inside"},
};
#define NPLATFORMS ((int)(sizeof platforms / sizeof platforms[0]))

const char *dt_sim_platform_names(void) { return "cluster, datacenter, campus-1g, campus-100m, wan"; }

static const platform_def *find(const char *name) {
    for (int i = 0; i < NPLATFORMS; i++)
        if (name && !strcmp(platforms[i].name, name)) return &platforms[i];
    return NULL;
}

int dt_sim_platform_known(const char *name) { return find(name) != NULL; }

/* ------------------------------------------------------------------ units */

/* the number at the start of text and its unit after it, or NULL when no number */
static const char *number(const char *text, double *x) {
    char *end;
    if (!text || !*text || *text == '-' || *text == '+') return NULL;
    *x = strtod(text, &end);
    if (end == text || !isfinite(*x) || *x < 0) return NULL;
    return end;
}

static double prefix_of(char c) {
    switch (c) {
    case 'k': return 1e3;
    case 'M': return 1e6;
    case 'G': return 1e9;
    case 'T': return 1e12;
    default: return 0;
    }
}

const char *dt_sim_parse_rate(const char *text, double *Bps) {
    static const char *expect = "a rate from 1kbps such as 100Mbps, 1Gbps or 12.5MBps (bits: bps, bytes: Bps; k M G T)";
    double x;
    const char *u = number(text, &x);
    if (!u || !(x > 0)) return expect;
    double scale = 1;
    if (prefix_of(*u) > 0) scale = prefix_of(*u++);
    if (!strcmp(u, "bps")) *Bps = x * scale / 8;
    else if (!strcmp(u, "Bps")) *Bps = x * scale;
    else return expect;
    return *Bps >= 1e3 / 8 && *Bps < 1e18 ? NULL : expect;
}

const char *dt_sim_parse_time(const char *text, double *s) {
    static const char *expect = "a time of 0 or from 1ns such as 50us, 2ms or 0.1s (s ms us ns)";
    double x;
    const char *u = number(text, &x);
    if (!u) return expect;
    if (!*u && x == 0) { *s = 0; return NULL; }
    if (!strcmp(u, "s")) *s = x;
    else if (!strcmp(u, "ms")) *s = x * 1e-3;
    else if (!strcmp(u, "us")) *s = x * 1e-6;
    else if (!strcmp(u, "ns")) *s = x * 1e-9;
    else return expect;
    return (*s == 0 || *s >= 1e-9) && *s < 1e6 ? NULL : expect;
}

const char *dt_sim_parse_speed(const char *text, double *flops) {
    static const char *expect = "a speed from 1Mf in flop/s such as 30Gf, 2.5Tf or 3e10 (f, kf Mf Gf Tf Pf)";
    double x;
    const char *u = number(text, &x);
    if (!u || !(x > 0)) return expect;
    double scale = 1;
    if (*u == 'P') scale = 1e15, u++;
    else if (prefix_of(*u) > 0) scale = prefix_of(*u++);
    if (*u && strcmp(u, "f")) return expect;
    if (!*u && scale != 1) return expect; /* "3G": say f */
    *flops = x * scale;
    return *flops >= 1e6 && *flops < 1e21 ? NULL : expect;
}

const char *dt_sim_parse_stragglers(const char *text, dt_sim_cluster *c) {
    static const char *expect = "RANK:FACTOR with FACTOR >= 1 (a host FACTOR times slower), or a list a:f,b:g";
    c->nslow = 0;
    const char *p = text;
    while (p && *p) {
        char *end;
        long r = strtol(p, &end, 10);
        if (end == p || *end != ':' || r < 0 || r > 1000000) return expect;
        double f;
        const char *u = number(end + 1, &f);
        if (!u || !(f >= 1) || f > 1e6 || (*u && *u != ',')) return expect;
        if (c->nslow == DT_SIM_MAX_STRAGGLERS) return "at most 16 stragglers";
        for (int i = 0; i < c->nslow; i++)
            if (c->slow_rank[i] == (int)r) return "each rank once";
        c->slow_rank[c->nslow] = (int)r;
        c->slow_factor[c->nslow++] = f;
        p = *u ? u + 1 : u;
        if (*u && !*p) return expect;
    }
    return c->nslow ? NULL : expect;
}

void dt_sim_format_rate(double Bps, char *out, size_t len) {
    const double bits = Bps * 8;
    if (bits >= 1e9) snprintf(out, len, "%g Gbit/s", bits / 1e9);
    else if (bits >= 1e6) snprintf(out, len, "%g Mbit/s", bits / 1e6);
    else snprintf(out, len, "%g kbit/s", bits / 1e3);
}

/* ------------------------------------------------------------------ files */

static double host_speed(const dt_sim_cluster *c, int h) {
    for (int i = 0; i < c->nslow; i++)
        if (c->slow_rank[i] == h) return c->speed / c->slow_factor[i];
    return c->speed;
}

/* Hosts [from, to) as cabinets, a run of hosts of one speed each. %.17g: the file says
 * exactly the numbers given (SimGrid reads plain numbers as bytes/s, s and flop/s). */
static void cabinets(FILE *xml, const dt_sim_cluster *c, int from, int to, double Bps, double lat) {
    for (int h = from; h < to;) {
        int e = h + 1;
        while (e < to && host_speed(c, e) == host_speed(c, h)) e++;
        fprintf(xml, "    <cabinet id=\"hosts%d\" prefix=\"host\" suffix=\"\" radical=\"%d-%d\" speed=\"%.17gf\" bw=\"%.17gBps\" lat=\"%.17gs\"/>\n",
                h, h, e - 1, host_speed(c, h), Bps, lat);
        h = e;
    }
}

dt_status dt_sim_platform_write(const dt_sim_cluster *c, FILE *xml, FILE *hosts, char *describe, size_t len) {
    const platform_def *p = find(c->platform);
    if (!p) return dt_fail(DT_ERR_ARG, "--platform %s: expected one of %s, or a SimGrid platform file", c->platform,
                           dt_sim_platform_names());
    for (int i = 0; i < c->nslow; i++)
        if (c->slow_rank[i] >= c->hosts)
            return dt_fail(DT_ERR_ARG, "--straggler %d:%g: there are ranks 0 to %d", c->slow_rank[i], c->slow_factor[i],
                           c->hosts - 1);
    const double Bps = p->link_Bps > 0 ? p->link_Bps : c->link_Bps, lat = p->link_Bps > 0 ? p->latency_s : c->latency_s;
    fprintf(xml, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                 "<!-- written by dtrain sim: %s, %d hosts -->\n<platform version=\"4.1\">\n", p->name, c->hosts);
    const int regions = p->regions < c->hosts ? p->regions : c->hosts;
    if (regions <= 1 && c->limiter_Bps > 0) {
        /* a calibration found the two directions slow each other: SimGrid's <cluster> gives each
         * host a limiter link both directions cross (cabinets have none, so every host one speed) */
        if (c->nslow)
            return dt_fail(DT_ERR_ARG, "--straggler: not with a calibration whose hosts share their links' two directions "
                           "(its duplex_rate); give a cluster file (--cluster) for a slower host");
        fprintf(xml, "  <cluster id=\"%s\" prefix=\"host\" suffix=\"\" radical=\"0-%d\" speed=\"%.17gf\" bw=\"%.17gBps\" "
                     "lat=\"%.17gs\" limiter_link=\"%.17gBps\"",
                p->name, c->hosts - 1, c->speed, Bps, lat, c->limiter_Bps);
        if (p->backbone_Bps > 0) fprintf(xml, " bb_bw=\"%.17gBps\" bb_lat=\"%.17gs\"", p->backbone_Bps, p->backbone_s);
        fprintf(xml, "/>\n");
    } else if (regions <= 1) {
        fprintf(xml, "  <zone id=\"%s\" routing=\"Cluster\">\n", p->name);
        cabinets(xml, c, 0, c->hosts, Bps, lat);
        if (p->backbone_Bps > 0)
            fprintf(xml, "    <backbone id=\"backbone\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", p->backbone_Bps,
                    p->backbone_s);
        fprintf(xml, "  </zone>\n");
    } else {
        /* each site a Cluster zone of its own with a router; the sites' uplinks join them */
        fprintf(xml, "  <zone id=\"%s\" routing=\"Full\">\n", p->name);
        for (int r = 0; r < regions; r++) {
            const int from = (int)((long)c->hosts * r / regions), to = (int)((long)c->hosts * (r + 1) / regions);
            for (int h = from; h < to; h++)
                if (host_speed(c, h) != c->speed)
                    return dt_fail(DT_ERR_ARG, "--straggler: not on --platform %s (its sites are uniform); give a "
                                   "platform file of your own", p->name);
            fprintf(xml, "    <cluster id=\"region%d\" prefix=\"host\" suffix=\"\" radical=\"%d-%d\" speed=\"%.17gf\" "
                         "bw=\"%.17gBps\" lat=\"%.17gs\" router_id=\"region%d-router\"/>\n",
                    r, from, to - 1, c->speed, Bps, lat, r);
        }
        for (int r = 0; r < regions; r++)
            fprintf(xml, "    <link id=\"uplink%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", r, p->uplink_Bps,
                    p->uplink_s);
        for (int a = 0; a < regions; a++)
            for (int b = a + 1; b < regions; b++)
                fprintf(xml, "    <zoneRoute src=\"region%d\" dst=\"region%d\" gw_src=\"region%d-router\" gw_dst=\"region%d-router\">"
                             "<link_ctn id=\"uplink%d\"/><link_ctn id=\"uplink%d\"/></zoneRoute>\n",
                        a, b, a, b, a, b);
        fprintf(xml, "  </zone>\n");
    }
    fprintf(xml, "</platform>\n");
    for (int h = 0; h < c->hosts; h++) fprintf(hosts, "host%d\n", h);
    char rate[32];
    dt_sim_format_rate(Bps, rate, sizeof rate);
    int n = snprintf(describe, len, "%s: %d hosts, %s links (%g us)", p->name, c->hosts, rate, lat * 1e6);
    if (c->limiter_Bps > 0 && regions <= 1 && n > 0 && (size_t)n < len) {
        dt_sim_format_rate(c->limiter_Bps, rate, sizeof rate);
        n += snprintf(describe + n, len - (size_t)n, ", %s in and out together", rate);
    }
    if (p->backbone_Bps > 0 && n > 0 && (size_t)n < len) {
        dt_sim_format_rate(p->backbone_Bps, rate, sizeof rate);
        n += snprintf(describe + n, len - (size_t)n, ", %s backbone", rate);
    }
    if (regions > 1 && n > 0 && (size_t)n < len) {
        dt_sim_format_rate(p->uplink_Bps, rate, sizeof rate);
        n += snprintf(describe + n, len - (size_t)n, ", %d regions %g ms and %s apart", regions, 2 * p->uplink_s * 1e3, rate);
    }
    for (int i = 0; i < c->nslow && n > 0 && (size_t)n < len; i++)
        n += snprintf(describe + n, len - (size_t)n, ", rank %d %gx slower", c->slow_rank[i], c->slow_factor[i]);
    return (ferror(xml) || ferror(hosts)) ? dt_fail(DT_ERR_IO, "dtrain sim: cannot write the platform file") : DT_OK;
}
