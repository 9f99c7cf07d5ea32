/* The run's timeline (trace.h). */
#include "comm/trace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/paths.h"

typedef struct {
    double ts, dur;   /* seconds, dt_now's clock */
    const char *name; /* static */
    int64_t bytes;
    int32_t peer, tensor, lane, step;
} trace_ev;

/* one step of a large model's per-tensor messages (reads and puts per neighbour, their
 * waits) fits; a window that overflows keeps its first events and says how many it lost */
#define EVENTS_PER_STEP 1024
#define MAX_EVENTS ((size_t)1 << 20)

static trace_ev *evs;
static size_t nev, cap, dropped;
static long win_from, win_to, cur_step = -1;
static int recording;

dt_status dt_trace_parse_steps(const char *text, long *from, long *to) {
    *from = 10;
    *to = 60;
    if (!text) return DT_OK;
    char *end;
    errno = 0;
    long a = strtol(text, &end, 10);
    if (end == text || *end != ':' || errno) goto bad;
    const char *b_text = end + 1;
    long b = strtol(b_text, &end, 10);
    if (end == b_text || *end || errno || a < 0 || b <= a) goto bad;
    *from = a;
    *to = b;
    return DT_OK;
bad:
    return dt_fail(DT_ERR_ARG, "--trace-steps %s: expected A:B, steps A to B-1 with 0 <= A < B (e.g. 10:60)", text);
}

dt_status dt_trace_open(long from, long to) {
    win_from = from;
    win_to = to;
    size_t want = (size_t)(to - from) * EVENTS_PER_STEP;
    cap = want < MAX_EVENTS ? want : MAX_EVENTS;
    nev = dropped = 0;
    recording = 0;
    free(evs); /* an earlier run's, in the same process */
    evs = malloc(cap * sizeof *evs);
    if (!evs) return dt_nomem("--trace's %zu events", cap);
    return DT_OK;
}

void dt_trace_step(long step) {
    cur_step = step;
    recording = evs && step >= win_from && step < win_to;
}

void dt_trace_stop(void) { recording = 0; }

void dt_trace_close(void) {
    recording = 0;
    free(evs);
    evs = NULL;
}

double dt_trace_t0(void) { return recording ? dt_now() : 0; }

void dt_trace_event(int lane, const char *name, double t0, int64_t bytes, int peer, int tensor) {
    if (t0 == 0 || !evs) return;
    const double now = dt_now();
    if (nev == cap) { dropped++; return; }
    evs[nev++] = (trace_ev){t0, now - t0, name, bytes, peer, tensor, lane, (int32_t)cur_step};
}

/* ------------------------------------------------------------------ writing */

typedef struct { char *p; size_t n, cap; int oom; } sbuf;

static void add(sbuf *s, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? s->cap - s->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { s->oom = 1; return; }
        if (s->p && s->n + (size_t)k < s->cap) { s->n += (size_t)k; return; }
        size_t nc = (s->cap ? s->cap * 2 : 65536) + (size_t)k;
        char *q = realloc(s->p, nc);
        if (!q) { s->oom = 1; return; }
        s->p = q;
        s->cap = nc;
    }
}

/* What each rank tells the others first, in the one collective every rank needs anyway. */
typedef struct {
    char host[256];
    double first; /* its first event, on its own clock (1e300: none) */
} rank_facts;

/* Rank r's clock minus rank 0's. On rank 0's host it is the same clock (CLOCK_MONOTONIC is
 * the host's): 0, exactly, where ping-pongs between oversubscribed ranks would be off by
 * milliseconds. A rank on another host measures it by ping-pongs with rank 0 (the one with
 * the shortest round trip, whose midpoint is closest to rank 0's reading, as NTP does). Raw
 * PMPI: not counted, not watched. Rank 0 serves those ranks in turn. */
#define PINGS 8
#define TAG_CLOCK 0x7ace
static int away_from_0(const rank_facts *facts, int r) { return strcmp(facts[r].host, facts[0].host) != 0; }

static int clock_offset(MPI_Comm comm, int rank, int size, const rank_facts *facts, double *offset) {
    *offset = 0;
    int err = MPI_SUCCESS;
    double best = 1e30;
    for (int r = 1; r < size && err == MPI_SUCCESS; r++)
        for (int i = 0; i < PINGS && away_from_0(facts, r); i++) {
            double t;
            if (rank == 0) {
                err = PMPI_Recv(&t, 1, MPI_DOUBLE, r, TAG_CLOCK, comm, MPI_STATUS_IGNORE);
                t = dt_now();
                if (err == MPI_SUCCESS) err = PMPI_Send(&t, 1, MPI_DOUBLE, r, TAG_CLOCK, comm);
                if (err != MPI_SUCCESS) break;
            } else if (rank == r) {
                const double t1 = dt_now();
                err = PMPI_Send(&t1, 1, MPI_DOUBLE, 0, TAG_CLOCK, comm);
                if (err == MPI_SUCCESS) err = PMPI_Recv(&t, 1, MPI_DOUBLE, 0, TAG_CLOCK, comm, MPI_STATUS_IGNORE);
                if (err != MPI_SUCCESS) break;
                const double t2 = dt_now();
                if (t2 - t1 < best) { best = t2 - t1; *offset = (t1 + t2) / 2 - t; }
            }
        }
    return err;
}

/* nested events of a lane in the order they began (they were stored as they ended) */
static int by_lane_then_time(const void *a, const void *b) {
    const trace_ev *x = a, *y = b;
    if (x->lane != y->lane) return x->lane - y->lane;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->dur > y->dur ? -1 : x->dur < y->dur; /* the enclosing one first */
}

static const char *lane_cat(int lane) { return lane == DT_TRACE_MAIN ? "compute" : lane == DT_TRACE_COMM ? "comm" : "mpi"; }

/* This rank's part of traceEvents: its names, then its events, each preceded by a comma. */
static void rank_text(sbuf *s, int rank, const char *host, double base, double offset) {
    char h[128];
    size_t k = 0;
    for (const char *p = host ? host : "?"; *p && k + 1 < sizeof h; p++)
        if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) h[k++] = *p;
    h[k] = 0;
    static const char *lanes[] = {"main thread: compute and hooks", "main thread: counted messages", "main thread: blocking MPI calls"};
    add(s, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d (%s)\"}}", rank, rank, h);
    add(s, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}", rank, rank);
    for (int l = 0; l < 3; l++)
        add(s, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", rank, l, lanes[l]);
    qsort(evs, nev, sizeof *evs, by_lane_then_time);
    for (size_t i = 0; i < nev; i++) {
        const trace_ev *e = &evs[i];
        add(s, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%d",
            e->name, lane_cat(e->lane), rank, e->lane, (e->ts - offset - base) * 1e6, e->dur * 1e6, e->step);
        if (e->bytes >= 0) add(s, ",\"bytes\":%lld", (long long)e->bytes);
        if (e->peer >= 0) add(s, ",\"peer\":%d", e->peer);
        if (e->tensor >= 0) add(s, ",\"tensor\":%d", e->tensor);
        add(s, "}}");
    }
}

/* head, the ranks' events and tail, written as they are: the events (about a megabyte for the
 * default window) are not copied into one more buffer on the way */
typedef struct { const char *path, *head, *events, *tail; size_t n; } trace_text;

static dt_status fill_trace(void *ctx, void *file) {
    const trace_text *t = ctx;
    FILE *f = file;
    const int bad = fputs(t->head, f) == EOF || fwrite(t->events, 1, t->n, f) != t->n || fputs(t->tail, f) == EOF;
    return bad ? dt_fail(DT_ERR_IO, "%s: write failed: %s", t->path, strerror(errno)) : DT_OK;
}

/* as every output: a temporary created new beside it, renamed into place (core/paths.h) */
static dt_status write_file(const char *path, const char *head, const char *events, size_t n, const char *tail) {
    trace_text t = {path, head, events, tail, n};
    dt_status st = dt_write_atomic(path, fill_trace, &t);
    return st == DT_OK ? st : dt_fail(st, "--trace %s", dt_last_error());
}

/* Collectives between oversubscribed ranks cost milliseconds each (a rank spins while the
 * one it waits for needs the core), so the writing takes three on one host: the facts, the
 * figures and the events; four across hosts (the time origin, after the clock offsets). */
dt_status dt_trace_write(MPI_Comm comm, const char *path, const char *host, const char *scheme) {
    recording = 0;
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    rank_facts me = {.first = 1e300};
    snprintf(me.host, sizeof me.host, "%s", host ? host : "");
    for (size_t i = 0; i < nev; i++)
        if (evs[i].ts < me.first) me.first = evs[i].ts;
    rank_facts *facts;
    DT_TRY(dt_calloc(facts, (size_t)size, "--trace's facts of %d ranks", size));
    int err = PMPI_Allgather(&me, (int)sizeof me, MPI_BYTE, facts, (int)sizeof me, MPI_BYTE, comm);
    double offset = 0;
    if (err == MPI_SUCCESS) err = clock_offset(comm, rank, size, facts, &offset);
    /* the time origin: the first event of any rank, on rank 0's clock */
    double base = 1e300;
    int any_away = 0;
    for (int r = 0; r < size && err == MPI_SUCCESS; r++) {
        any_away |= away_from_0(facts, r);
        if (facts[r].first < base) base = facts[r].first;
    }
    if (any_away && err == MPI_SUCCESS) {
        const double first = me.first - offset;
        err = PMPI_Allreduce(&first, &base, 1, MPI_DOUBLE, MPI_MIN, comm);
    }
    free(facts);
    if (base == 1e300) base = 0;
    sbuf s = {0};
    rank_text(&s, rank, host, base, offset);
    free(evs);
    evs = NULL;
    const long long len = s.oom ? 0 : (long long)s.n;
    long long mine[3] = {(long long)dropped, (long long)(offset * 1e6), len};
    int *lens = NULL, *displs = NULL;
    long long *figs = NULL;
    char *all = NULL;
    dt_status st = DT_OK;
    if (rank == 0) {
        lens = calloc((size_t)size, sizeof *lens);
        displs = calloc((size_t)size, sizeof *displs);
        figs = calloc(3 * (size_t)size, sizeof *figs);
    }
    /* every rank takes part in the collectives whatever went wrong, so none is left waiting */
    if (err == MPI_SUCCESS) err = PMPI_Gather(mine, 3, MPI_LONG_LONG, figs, 3, MPI_LONG_LONG, 0, comm);
    size_t total = 0;
    if (rank == 0 && lens && displs && figs && err == MPI_SUCCESS) {
        for (int r = 0; r < size; r++) { lens[r] = (int)figs[3 * r + 2]; displs[r] = (int)total; total += (size_t)lens[r]; }
        all = malloc(total + 1); /* + 1: never malloc(0) */
    }
    if (err == MPI_SUCCESS) err = PMPI_Gatherv(s.p ? s.p : "", (int)len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, comm);
    if (err != MPI_SUCCESS) st = dt_mpi_check(err, "--trace: gathering the ranks' events");
    if (rank == 0 && st == DT_OK) {
        if (!lens || !displs || !figs || !all || s.oom) st = dt_nomem("--trace's events of %d ranks", size);
        sbuf out = {0};
        if (st == DT_OK) {
            add(&out, "\n],\"displayTimeUnit\":\"ms\",\"metadata\":{\"tool\":\"dtrain\",\"scheme\":\"%s\",\"ranks\":%d,"
                "\"steps_from\":%ld,\"steps_to\":%ld,\"clock_offset_us\":[", scheme ? scheme : "", size, win_from, win_to);
            for (int r = 0; r < size; r++) add(&out, "%s%lld", r ? "," : "", figs[3 * r + 1]);
            add(&out, "],\"dropped_events\":[");
            for (int r = 0; r < size; r++) add(&out, "%s%lld", r ? "," : "", figs[3 * r]);
            add(&out, "]}}\n");
            /* every part starts with a comma: the first one's goes */
            const size_t skip = total ? 1 : 0;
            if (out.oom) st = dt_nomem("--trace's file");
            else st = write_file(path, "{\"traceEvents\":[", all + skip, total - skip, out.p);
        }
        free(out.p);
    }
    free(s.p);
    free(lens);
    free(displs);
    free(figs);
    free(all);
    return st;
}
