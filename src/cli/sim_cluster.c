/* Cluster files (sim_cluster.h): read with inih, a line counter in the reader so that every
 * error names its line; written as one SimGrid zone of Full routing holding a Cluster zone per
 * group (its hosts on their own full-duplex links to the group's switch, a backbone if given),
 * each group's uplink, the WAN links, and a route for every pair of groups: uplink, the WAN
 * link between their regions when they differ, uplink. */
#include "cli/sim_cluster.h"

#include <ctype.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>

#include "cli/sim_platform.h"
#include "core/paths.h"

/* Named host classes for `speed`: a flop/s figure a training step sustains, not a peak. */
static const struct {
    const char *name;
    double flops;
    const char *what;
} classes[] = {
    {"zen3-core", 29e9, "one AMD Zen 3 core on cnn1 (dtrain bench)"},
    {"a100", 125e12, "an NVIDIA A100: 312 Tflop/s bf16 dense at 40% utilisation"},
    {"h100", 396e12, "an NVIDIA H100 SXM: 989 Tflop/s bf16 dense at 40% utilisation"},
};

typedef struct {
    dt_cluster_file *c;
    FILE *f;
    int line;              /* the line just read */
    int section_line;      /* the line of the last [SECTION] */
    char section[128];     /* the section the last key was in */
    char why[300];
} reader;

static char *read_line(char *str, int num, void *stream) {
    reader *r = stream;
    char *got = fgets(str, num, r->f);
    if (got) r->line++;
    if (got && str[strspn(str, " \t")] == '[') r->section_line = r->line;
    return got;
}

static int fail(reader *r, const char *fmt, const char *a, const char *b) {
    snprintf(r->why, sizeof r->why, fmt, a, b);
    return 0;
}

static int good_name(const char *s) {
    if (!*s || strlen(s) >= DT_CF_NAME) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return 0;
    return 1;
}

/* "RATE TIME" (an uplink, a backbone) */
static const char *rate_and_time(const char *v, double *Bps, double *s) {
    char rate[64], time[64], extra;
    if (sscanf(v, "%63s %63s %c", rate, time, &extra) != 2) return "RATE TIME such as 40Gbps 2us";
    const char *why = dt_sim_parse_rate(rate, Bps);
    return why ? why : dt_sim_parse_time(time, s);
}

static int group_key(reader *r, dt_cf_group *g, const char *name, const char *v) {
    char *end;
    if (!strcmp(name, "hosts") || !strcmp(name, "ranks-per-host")) {
        const long n = strtol(v, &end, 10);
        if (end == v || *end || n < 1 || n > 65536) return fail(r, "%s: expected a whole number from 1 to 65536 (got '%s')", name, v);
        if (*name == 'h') g->hosts = (int)n;
        else g->per_host = (int)n;
        return 1;
    }
    if (!strcmp(name, "speed")) {
        for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
            if (!strcmp(v, classes[i].name)) { g->speed = classes[i].flops; return 1; }
        const char *why = dt_sim_parse_speed(v, &g->speed);
        return why ? fail(r, "speed: expected %s, or zen3-core, a100 or h100 (got '%s')", why, v) : 1;
    }
    if (!strcmp(name, "link")) {
        const char *why = dt_sim_parse_rate(v, &g->link_Bps);
        return why ? fail(r, "link: expected %s (got '%s')", why, v) : 1;
    }
    if (!strcmp(name, "latency")) {
        const char *why = dt_sim_parse_time(v, &g->latency_s);
        return why ? fail(r, "latency: expected %s (got '%s')", why, v) : 1;
    }
    if (!strcmp(name, "backbone") || !strcmp(name, "uplink")) {
        const char *why = *name == 'b' ? rate_and_time(v, &g->bb_Bps, &g->bb_s) : rate_and_time(v, &g->up_Bps, &g->up_s);
        return why ? fail(r, "%s: expected %s", name, why) : 1;
    }
    if (!strcmp(name, "region")) return good_name(v) ? (snprintf(g->region, sizeof g->region, "%s", v), 1)
                                                     : fail(r, "region: expected a name of letters, digits and _ (got '%s')%s", v, "");
    return fail(r, "unknown key '%s' in a group (expected hosts, ranks-per-host, speed, link, latency, backbone, uplink, "
                "region)%s", name, "");
}

/* "T:FRACTION, T:FRACTION": from simulated time T on, FRACTION of the host's speed */
static int profile(reader *r, dt_cf_event *e, const char *v) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v);
    e->n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) return fail(r, "speed: expected TIME:FRACTION, ... such as 0:1, 60s:0.25, 120s:1 (got '%s')%s", tok, "");
        if (e->n == DT_CF_STEPS) return fail(r, "speed: at most %s steps%s", "32", "");
        *colon = 0;
        double t, f;
        char *end;
        if (dt_sim_parse_time(tok, &t)) return fail(r, "speed: a time such as 0, 30s or 2ms (got '%s')%s", tok, "");
        f = strtod(colon + 1, &end);
        if (end == colon + 1 || *end || !(f > 0) || f > 1000)
            return fail(r, "speed: a fraction of the host's speed above 0 and up to 1000 (got '%s')%s", colon + 1, "");
        if (e->n > 0 && t <= e->t[e->n - 1]) return fail(r, "speed: times in increasing order (%s)%s", tok, "");
        e->t[e->n] = t, e->frac[e->n++] = f;
    }
    return e->n ? 1 : fail(r, "speed: expected TIME:FRACTION, ... such as 0:1, 60s:0.25, 120s:1%s%s", "", "");
}

static int on_value(void *user, const char *section, const char *name, const char *value) {
    reader *r = user;
    dt_cluster_file *c = r->c;
    const int fresh = strcmp(section, r->section) != 0;
    snprintf(r->section, sizeof r->section, "%s", section);
    char kind[32] = "", a[128] = "", b[128] = "", extra[8] = "";
    const int words = sscanf(section, "%31s %127s %127s %7s", kind, a, b, extra);
    if (!strcmp(kind, "cluster") && words == 1) {
        if (strcmp(name, "name") || !good_name(value))
            return fail(r, "[cluster]: expected name = a name of letters, digits and _ (got %s = %s)", name, value);
        snprintf(c->name, sizeof c->name, "%s", value);
        return 1;
    }
    if (!strcmp(kind, "group") && words == 2) {
        if (!good_name(a)) return fail(r, "[group %s]: a group's name is letters, digits and _ (at most 47)%s", a, "");
        if (fresh) {
            for (int i = 0; i < c->ngroups; i++)
                if (!strcmp(c->g[i].name, a)) return fail(r, "[group %s]: a second group of that name%s", a, "");
            if (c->ngroups == DT_CF_GROUPS) return fail(r, "at most %s groups%s", "64", "");
            dt_cf_group *g = &c->g[c->ngroups++];
            memset(g, 0, sizeof *g);
            snprintf(g->name, sizeof g->name, "%s", a);
            snprintf(g->region, sizeof g->region, "main");
            g->per_host = 1, g->line = r->section_line, g->link_Bps = 1e9 / 8, g->latency_s = 50e-6;
        }
        return group_key(r, &c->g[c->ngroups - 1], name, value);
    }
    if (!strcmp(kind, "wan") && words == 3) {
        if (fresh) {
            if (c->nwans == DT_CF_WANS) return fail(r, "at most %s WAN links%s", "64", "");
            dt_cf_wan *w = &c->w[c->nwans++];
            memset(w, 0, sizeof *w);
            snprintf(w->a, sizeof w->a, "%s", a);
            snprintf(w->b, sizeof w->b, "%s", b);
            w->line = r->section_line;
        }
        dt_cf_wan *w = &c->w[c->nwans - 1];
        const char *why = !strcmp(name, "link") ? dt_sim_parse_rate(value, &w->Bps)
                          : !strcmp(name, "latency") ? dt_sim_parse_time(value, &w->s) : "link = RATE or latency = TIME";
        return why ? fail(r, "[wan]: %s: expected %s", name, why) : 1;
    }
    if ((!strcmp(kind, "straggler") || !strcmp(kind, "failure")) && words == 2) {
        const int slow = kind[0] == 's';
        int *n = slow ? &c->nslow : &c->nfail;
        dt_cf_event *list = slow ? c->slow : c->fail;
        if (fresh) {
            if (*n == DT_CF_EVENTS) return fail(r, "at most %s %ss", "64", kind);
            dt_cf_event *e = &list[(*n)++];
            memset(e, 0, sizeof *e);
            snprintf(e->host, sizeof e->host, "%s", a);
            e->line = r->section_line;
        }
        dt_cf_event *e = &list[*n - 1];
        if (slow && !strcmp(name, "speed")) return profile(r, e, value);
        if (!slow && !strcmp(name, "at")) {
            const char *why = dt_sim_parse_time(value, &e->at);
            return why ? fail(r, "at: expected %s (got '%s')", why, value) : 1;
        }
        return fail(r, "unknown key '%s' (expected %s)", name, slow ? "speed = TIME:FRACTION, ..." : "at = TIME");
    }
    return fail(r, "unknown section [%s] (expected [cluster], [group NAME], [wan REGION REGION], [straggler HOST], "
                "[failure HOST])%s", section, "");
}

/* HOST (GROUP-INDEX) to its group and index, or -1 */
static int find_host(const dt_cluster_file *c, const char *host, int *index) {
    const char *dash = strrchr(host, '-');
    if (!dash) return -1;
    char *end;
    const long i = strtol(dash + 1, &end, 10);
    if (end == dash + 1 || *end || i < 0) return -1;
    for (int g = 0; g < c->ngroups; g++)
        if (strlen(c->g[g].name) == (size_t)(dash - host) && !strncmp(c->g[g].name, host, (size_t)(dash - host)) &&
            i < c->g[g].hosts) {
            *index = (int)i;
            return g;
        }
    return -1;
}

static int has_wan(const dt_cluster_file *c, const char *x, const char *y) {
    for (int w = 0; w < c->nwans; w++)
        if ((!strcmp(c->w[w].a, x) && !strcmp(c->w[w].b, y)) || (!strcmp(c->w[w].a, y) && !strcmp(c->w[w].b, x))) return w;
    return -1;
}

static dt_status check(dt_cluster_file *c) {
    const char *p = c->path;
    if (c->ngroups == 0) return dt_fail(DT_ERR_ARG, "--cluster %s: no [group NAME] (expected at least one group of hosts)", p);
    long ranks = 0, hosts = 0;
    for (int i = 0; i < c->ngroups; i++) {
        const dt_cf_group *g = &c->g[i];
        if (!g->hosts) return dt_fail(DT_ERR_ARG, "--cluster %s:%d: [group %s] needs hosts = N", p, g->line, g->name);
        if (!g->speed) return dt_fail(DT_ERR_ARG, "--cluster %s:%d: [group %s] needs speed = FLOPS or a class (zen3-core, "
                                      "a100, h100)", p, g->line, g->name);
        hosts += g->hosts;
        ranks += (long)g->hosts * g->per_host;
        for (int j = 0; j < i; j++)
            if (strcmp(g->region, c->g[j].region) && has_wan(c, g->region, c->g[j].region) < 0)
                return dt_fail(DT_ERR_ARG, "--cluster %s:%d: [group %s] is in region %s, group %s in %s, and no [wan %s %s] "
                               "joins them", p, g->line, g->name, g->region, c->g[j].name, c->g[j].region, g->region,
                               c->g[j].region);
    }
    if (ranks > 65536) return dt_fail(DT_ERR_ARG, "--cluster %s: %ld ranks (at most 65536)", p, ranks);
    for (int w = 0; w < c->nwans; w++)
        if (!(c->w[w].Bps > 0)) return dt_fail(DT_ERR_ARG, "--cluster %s:%d: [wan %s %s] needs link = RATE", p, c->w[w].line,
                                              c->w[w].a, c->w[w].b);
    for (int k = 0; k < c->nslow + c->nfail; k++) {
        dt_cf_event *e = k < c->nslow ? &c->slow[k] : &c->fail[k - c->nslow];
        const char *what = k < c->nslow ? "straggler" : "failure";
        if ((e->group = find_host(c, e->host, &e->index)) < 0)
            return dt_fail(DT_ERR_ARG, "--cluster %s:%d: [%s %s]: no such host (hosts are GROUP-INDEX, from %s-0)", p, e->line,
                           what, e->host, c->g[0].name);
        if (k < c->nslow && !e->n) return dt_fail(DT_ERR_ARG, "--cluster %s:%d: [straggler %s] needs speed = TIME:FRACTION, ...",
                                                  p, e->line, e->host);
        if (k >= c->nslow && !(e->at > 0))
            return dt_fail(DT_ERR_ARG, "--cluster %s:%d: [failure %s] needs at = TIME after 0", p, e->line, e->host);
    }
    c->hosts = (int)hosts;
    c->ranks = (int)ranks;
    return DT_OK;
}

dt_status dt_cluster_read(const char *path, dt_cluster_file *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", path);
    snprintf(c->name, sizeof c->name, "cluster");
    FILE *f;
    if (dt_open_regular(path, &f, NULL) != DT_OK) return dt_fail(DT_ERR_ARG, "--cluster %s", dt_last_error());
    reader r = {.c = c, .f = f};
    const int bad = ini_parse_stream(read_line, &r, on_value, &r);
    fclose(f);
    if (bad) return dt_fail(DT_ERR_ARG, "--cluster %s:%d: %s", path, bad, *r.why ? r.why : "not an INI line (KEY = VALUE, [SECTION])");
    return check(c);
}

/* the host's speed fraction at simulated time t of a profile (1 before its first step) */
static double fraction_at(const dt_cf_event *e, double t) {
    double f = 1;
    for (int i = 0; i < e->n && e->t[i] <= t; i++) f = e->frac[i];
    return f;
}

dt_status dt_cluster_write(const dt_cluster_file *c, double offset_s, FILE *xml, FILE *hosts, char *describe, size_t len) {
    fprintf(xml, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                 "<!-- written by dtrain sim from %s -->\n<platform version=\"4.1\">\n  <zone id=\"%s\" routing=\"Full\">\n",
            c->path, c->name);
    for (int i = 0; i < c->ngroups; i++) {
        const dt_cf_group *g = &c->g[i];
        fprintf(xml, "    <cluster id=\"%s\" prefix=\"%s-\" suffix=\"\" radical=\"0-%d\" speed=\"%.17gf\" core=\"%d\" "
                     "bw=\"%.17gBps\" lat=\"%.17gs\" router_id=\"%s-router\"", g->name, g->name, g->hosts - 1, g->speed,
                g->per_host, g->link_Bps, g->latency_s, g->name);
        if (g->bb_Bps > 0) fprintf(xml, " bb_bw=\"%.17gBps\" bb_lat=\"%.17gs\"", g->bb_Bps, g->bb_s);
        fprintf(xml, "/>\n");
    }
    /* without one given, a group's uplink carries every host's link at once (non-blocking) */
    for (int i = 0; i < c->ngroups; i++) {
        const dt_cf_group *g = &c->g[i];
        fprintf(xml, "    <link id=\"%s-uplink\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", g->name,
                g->up_Bps > 0 ? g->up_Bps : g->link_Bps * g->hosts, g->up_Bps > 0 ? g->up_s : 0.0);
    }
    for (int w = 0; w < c->nwans; w++)
        fprintf(xml, "    <link id=\"wan%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", w, c->w[w].Bps, c->w[w].s);
    for (int i = 0; i < c->ngroups; i++)
        for (int j = i + 1; j < c->ngroups; j++) {
            const dt_cf_group *a = &c->g[i], *b = &c->g[j];
            fprintf(xml, "    <zoneRoute src=\"%s\" dst=\"%s\" gw_src=\"%s-router\" gw_dst=\"%s-router\"><link_ctn id=\"%s-uplink\"/>",
                    a->name, b->name, a->name, b->name, a->name);
            const int w = strcmp(a->region, b->region) ? has_wan(c, a->region, b->region) : -1;
            if (w >= 0) fprintf(xml, "<link_ctn id=\"wan%d\"/>", w);
            fprintf(xml, "<link_ctn id=\"%s-uplink\"/></zoneRoute>\n", b->name);
        }
    fprintf(xml, "  </zone>\n");
    /* stragglers: SimGrid speed profiles, their times from this simulation's start */
    for (int k = 0; k < c->nslow; k++) {
        const dt_cf_event *e = &c->slow[k];
        fprintf(xml, "  <trace id=\"speed%d\" periodicity=\"-1\">\n0 %.17g\n", k, fraction_at(e, offset_s));
        for (int i = 0; i < e->n; i++)
            if (e->t[i] > offset_s) fprintf(xml, "%.17g %.17g\n", e->t[i] - offset_s, e->frac[i]);
        fprintf(xml, "</trace>\n  <trace_connect kind=\"SPEED\" trace=\"speed%d\" element=\"%s\"/>\n", k, e->host);
    }
    fprintf(xml, "</platform>\n");
    for (int i = 0; i < c->ngroups; i++)
        for (int h = 0; h < c->g[i].hosts; h++)
            for (int r = 0; r < c->g[i].per_host; r++) fprintf(hosts, "%s-%d\n", c->g[i].name, h);
    int n = snprintf(describe, len, "cluster file %s: %d hosts, %d ranks in %d group%s", c->path, c->hosts, c->ranks,
                     c->ngroups, c->ngroups > 1 ? "s" : "");
    if (c->nwans > 0 && n > 0 && (size_t)n < len) n += snprintf(describe + n, len - (size_t)n, ", %d WAN link%s", c->nwans, c->nwans > 1 ? "s" : "");
    if (c->nslow > 0 && n > 0 && (size_t)n < len) n += snprintf(describe + n, len - (size_t)n, ", %d straggler%s", c->nslow, c->nslow > 1 ? "s" : "");
    if (c->nfail > 0 && n > 0 && (size_t)n < len) snprintf(describe + n, len - (size_t)n, ", %d host failure%s", c->nfail, c->nfail > 1 ? "s" : "");
    return (ferror(xml) || ferror(hosts)) ? dt_fail(DT_ERR_IO, "dtrain sim: cannot write the platform file") : DT_OK;
}

void dt_cluster_failures(const dt_cluster_file *c, double after_s, char *out, size_t len) {
    size_t o = 0;
    out[0] = 0;
    for (int k = 0; k < c->nfail; k++) {
        const dt_cf_event *e = &c->fail[k];
        if (e->at <= after_s) continue;
        int first = 0;
        for (int g = 0; g < e->group; g++) first += c->g[g].hosts * c->g[g].per_host;
        first += e->index * c->g[e->group].per_host;
        for (int r = 0; r < c->g[e->group].per_host && o < len; r++)
            o += (size_t)snprintf(out + o, len - o, "%s%d:%.17g:%s", o ? "," : "", first + r, e->at, e->host);
    }
}
