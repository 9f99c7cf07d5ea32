/* Gossip's checkpoint records (dt_gossip_save, dt_gossip_load; gossip.h): the graph, the
 * neighbours' values this rank holds and (--compress, or kept for consensus) the copy of its own
 * they hold. */
#include "core/alloc.h"
#include "schemes/gossip_state.h"

#include <stdlib.h>
#include <string.h>

static int *graph_record(const dt_gossip *g, const int *extra, int nextra, size_t *n) {
    *n = (size_t)(nextra + 1 + g->nn);
    int *r = malloc(*n * sizeof *r);
    if (!r) return NULL;
    if (nextra) memcpy(r, extra, (size_t)nextra * sizeof *r);
    r[nextra] = g->nn;
    memcpy(r + nextra + 1, g->nbrs, (size_t)g->nn * sizeof *r);
    return r;
}

/* The records' names are gossip's own; the trainer prefixes the scheme's ("eventgrad:graph"). */
dt_status dt_gossip_save(dt_gossip *g, const int *extra, int nextra, dt_records *out) {
    size_t n;
    free(g->graph);
    if (!(g->graph = graph_record(g, extra, nextra, &n))) return dt_nomem("the graph record");
    dt_status st = dt_records_add_raw(out, "graph", g->graph, n * sizeof *g->graph);
    return st == DT_OK ? dt_gossip_save_copies(g, "neighbours", "own_copy", out) : st;
}

dt_status dt_gossip_save_copies(const dt_gossip *g, const char *neighbours, const char *own, dt_records *out) {
    dt_status st = dt_records_add_raw(out, neighbours, g->xhat, (size_t)g->nn * g->np * sizeof(float));
    if (st == DT_OK && g->cself) st = dt_records_add_raw(out, own, g->cself, g->np * sizeof(float));
    return st;
}

dt_status dt_gossip_load_copies(dt_gossip *g, const char *neighbours, const char *own, const dt_tfile *f,
                                const char *path) {
    dt_status st = dt_tfile_take(f, path, neighbours, g->xhat, (size_t)g->nn * g->np * sizeof(float));
    if (st == DT_OK && g->cself) st = dt_tfile_take(f, path, own, g->cself, g->np * sizeof(float));
    return st;
}

dt_status dt_gossip_load(dt_gossip *g, const dt_comm *c, const int *extra, int nextra, const char *what,
                         const dt_tfile *f, const char *path) {
    size_t n;
    int *graph = graph_record(g, extra, nextra, &n);
    if (!graph) return dt_nomem("the graph record");
    const dt_record *r = dt_tfile_find(f, "graph");
    const int same = r && r->numel == n && memcmp(r->data, graph, n * sizeof *graph) == 0;
    free(graph);
    if (!same)
        return dt_fail(DT_ERR_ARG, "--resume %s: saved with another %s (this rank's neighbours or the state kept "
                       "differ)", path, what);
    dt_status st = dt_gossip_load_copies(g, "neighbours", "own_copy", f, path);
    g->overwritten_mark = c->c.overwritten; /* the counters were restored first */
    return st;
}
