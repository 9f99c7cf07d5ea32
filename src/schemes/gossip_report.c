/* Gossip's transport line (dt_gossip_end_epoch): every rank's tensors sent, overwritten,
 * coalesced and the fresh arrivals from each neighbour, gathered at rank 0 every epoch, and a
 * warning where a neighbour sent but nothing arrived. */
#include "core/alloc.h"
#include "schemes/gossip_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank 0's transport line from every rank's row [sent, overwritten, degree, coalesced, fresh
 * from each rank + 0.5 where it is a neighbour]: returns the starved (rank, neighbour) pairs.
 * sent counts the writes asked for; coalesced, those of them a newer one replaced before they
 * left (overlapped sends). */
static int transport_line(dt_json *j, int epoch, const double *all, int N, int W) {
    int starved = 0;
    dt_json_begin(j, NULL);
    dt_json_str(j, "type", "transport");
    dt_json_int(j, "epoch", epoch);
    dt_json_begin_array(j, "ranks");
    for (int r = 0; r < N; r++) {
        const double *q = all + (size_t)r * W;
        dt_json_begin(j, NULL);
        dt_json_int(j, "rank", r);
        dt_json_num(j, "sent", q[0]);
        dt_json_num(j, "overwritten", q[1]);
        dt_json_num(j, "coalesced", q[3]);
        dt_json_begin(j, "fresh_from");
        for (int k = 0; k < N; k++) {
            if (q[4 + k] == 0) continue; /* not a neighbour */
            const double fresh = q[4 + k] - 0.5;
            if (all[(size_t)k * W] > 0 && fresh == 0) starved++;
            char key[16];
            snprintf(key, sizeof key, "%d", k);
            dt_json_num(j, key, fresh);
        }
        dt_json_end(j);
        dt_json_end(j);
    }
    dt_json_end_array(j);
    dt_json_int(j, "starved_pairs", starved);
    dt_json_end(j);
    return starved;
}

dt_status dt_gossip_end_epoch(dt_gossip *g, dt_step_ctx *ctx) {
    dt_comm *c = ctx->comm;
    const int N = c->size, W = 4 + N;
    double *row = calloc((size_t)W, sizeof *row), *all = c->rank == 0 ? calloc((size_t)W * N, sizeof *all) : NULL;
    if (!row || (c->rank == 0 && !all)) { free(row); free(all); return dt_nomem("gossip's figures of %d ranks", N); }
    row[0] = (double)g->sent_epoch;
    row[1] = (double)(c->c.overwritten - g->overwritten_mark);
    row[2] = (double)g->nn;
    const uint64_t coalesced = g->win ? dt_win_get_stats(g->win)->coalesced : 0;
    row[3] = (double)(coalesced - g->coalesced_mark);
    for (int j = 0; j < g->nn; j++) row[4 + g->nbrs[j]] = (double)g->fresh_epoch[j] + 0.5; /* +0.5: "is a neighbour" */
    int err = MPI_Gather(row, W, MPI_DOUBLE, all, W, MPI_DOUBLE, 0, c->comm);
    dt_status st = dt_mpi_check(err, "MPI_Gather (gossip transport figures)");
    if (st == DT_OK && c->rank == 0) {
        dt_json j;
        dt_json_init(&j);
        const int starved = transport_line(&j, ctx->epoch + 1, all, N, W);
        const char *text = dt_json_text(&j);
        st = dt_allocated(text);
        if (st == DT_OK) st = ctx->log(ctx->host, text);
        if (starved && !ctx->run.quiet)
            printf("warning: epoch %d: %d (rank, neighbour) pairs received nothing although the neighbour sent\n",
                   ctx->epoch + 1, starved);
        dt_json_free(&j);
    }
    free(row);
    free(all);
    g->sent_epoch = 0;
    memset(g->fresh_epoch, 0, (size_t)(g->nn ? g->nn : 1) * sizeof *g->fresh_epoch);
    g->overwritten_mark = c->c.overwritten;
    g->coalesced_mark = coalesced;
    return st;
}
