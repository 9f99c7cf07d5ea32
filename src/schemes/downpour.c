/* downpour: an asynchronous parameter server (Dean et al. 2012, "Downpour SGD").
 *
 * Ranks [0, S) serve (--servers S), each owning a contiguous slice of the flat parameter
 * vector; the other ranks are workers that pull parameters every --fetch-every steps and push
 * (accumulated) gradients every --push-every steps, without waiting for each other. Servers
 * apply a push at once with the run's SGD over their slice, record its staleness, and drop a
 * worker silent for --worker-timeout seconds. The design in full (messages, progress
 * reports, time to accuracy, dropping, never blocking forever, accounting, --compress):
 * docs/downpour.md.
 *
 * This file: set-up, the end of the run (collective) and the figures; the worker's side is
 * downpour_worker.c, the server's downpour_server.c, their shared state downpour_state.h. */
#include "comm/watch.h"
#include "core/alloc.h"
#include "schemes/downpour_state.h"

/* ------------------------------------------------------------------ the end (collective) */

/* Servers' figures gathered on rank 0 (measurement, not counted): the staleness line on
 * stdout, and what the summary line says (dp_summary). */
static dt_status report_stats(dp_impl *p, dt_step_ctx *c) {
    const int W = p->W, len = 3 + 3 * W;
    double *mine = calloc((size_t)len, sizeof(double));
    double *all = c->comm->rank == 0 ? calloc((size_t)len * (size_t)c->comm->size, sizeof(double)) : NULL;
    if (!mine || (c->comm->rank == 0 && !all)) {
        free(mine); free(all);
        return dt_nomem("downpour's figures of %d ranks", c->comm->size);
    }
    if (p->server >= 0) {
        mine[0] = p->stale_sum; mine[1] = p->stale_n; mine[2] = p->stale_max;
        for (int w = 0; w < W; w++) {
            mine[3 + w] = (double)p->pushes[w];
            mine[3 + W + w] = p->wdropped[w];
            mine[3 + 2 * W + w] = p->silent[w];
        }
    }
    int err = MPI_Gather(mine, len, MPI_DOUBLE, all, len, MPI_DOUBLE, 0, c->comm->comm);
    free(mine);
    if (err != MPI_SUCCESS) { free(all); return dt_mpi_check(err, "MPI_Gather (downpour figures)"); }
    if (c->comm->rank != 0) return DT_OK;
    double sum = 0, n = 0, mx = 0, total = 0;
    p->f_per_worker = calloc((size_t)W * 3 + 1, sizeof(double));
    if (!p->f_per_worker) { free(all); return dt_nomem("downpour's figures of %d workers", W); }
    double *pushes = p->f_per_worker, *dropped = pushes + W, *silent = pushes + 2 * W;
    p->f_dropped = dropped;
    p->f_silent = silent;
    for (int k = 0; k < p->S; k++) {
        const double *r = all + (size_t)k * len;
        sum += r[0]; n += r[1];
        if (r[2] > mx) mx = r[2];
        for (int w = 0; w < W; w++) {
            /* a push reaches every server: count it once */
            if (r[3 + w] > pushes[w]) pushes[w] = r[3 + w];
            if (r[3 + W + w] > 0) dropped[w] = 1;
            if (r[3 + 2 * W + w] > silent[w]) silent[w] = r[3 + 2 * W + w];
        }
    }
    free(all);
    for (int w = 0; w < W; w++) total += pushes[w];
    p->f_pushes = total;
    p->f_mean = n > 0 ? sum / n : 0;
    p->f_max = mx;
    if (!c->run.quiet) {
        printf("downpour: %.0f pushes, staleness mean %.2f max %.0f; dropped workers: ", total, p->f_mean, mx);
        int any = 0;
        for (int w = 0; w < W; w++)
            if (dropped[w]) printf("%srank %d (silent %.1f s)", any++ ? ", " : "", p->S + w, silent[w]);
        printf("%s\n", any ? "" : "none");
        fflush(stdout);
    }
    return DT_OK;
}

/* rank 0: the summary's downpour members */
static void dp_summary(dt_scheme *s, dt_json *j) {
    dp_impl *p = s->impl;
    if (!p->f_per_worker) return;
    dt_json_int(j, "servers", p->S);
    dt_json_fixed(j, "staleness_mean", p->f_mean, 4);
    dt_json_num(j, "staleness_max", p->f_max);
    dt_json_num(j, "pushes", p->f_pushes);
    dt_json_begin_array(j, "pushes_per_worker");
    for (int w = 0; w < p->W; w++) dt_json_num(j, NULL, p->f_per_worker[w]);
    dt_json_end_array(j);
    dt_json_begin_array(j, "dropped");
    for (int w = 0; w < p->W; w++)
        if (p->f_dropped[w]) dt_json_int(j, NULL, p->S + w);
    dt_json_end_array(j);
    dt_json_begin_array(j, "dropped_silent_s");
    for (int w = 0; w < p->W; w++)
        if (p->f_dropped[w]) dt_json_fixed(j, NULL, p->f_silent[w], 2);
    dt_json_end_array(j);
}

/* After the servers' last messages: which workers are gone for good (any server's verdict,
 * collected by rank 0 and sent to every rank still here, point to point: a gone rank must not
 * be waited for). When some are, the ranks still here go on, for the end of the run (final
 * model, evaluation, figures), on a communicator of their own. */
static dt_status settle_gone(dp_impl *p, dt_step_ctx *c) {
    dt_comm *comm = c->comm;
    const int W = p->W, S = p->S;
    int err = MPI_SUCCESS;
    if (comm->rank == 0) {
        int *other;
        DT_TRY(dt_malloc(other, (size_t)W, "the servers' lists of %d workers", W));
        for (int k = 1; k < S && err == MPI_SUCCESS; k++) {
            err = MPI_Recv(other, W, MPI_INT, k, TAG_GONE_MASK, comm->comm, MPI_STATUS_IGNORE);
            for (int w = 0; w < W && err == MPI_SUCCESS; w++) p->gone[w] |= other[w];
        }
        free(other);
        for (int r = 1; r < comm->size && err == MPI_SUCCESS; r++)
            if (r < S || !p->gone[r - S]) err = MPI_Send(p->gone, W, MPI_INT, r, TAG_GONE, comm->comm);
    } else {
        if (p->server >= 0) err = MPI_Send(p->gone, W, MPI_INT, 0, TAG_GONE_MASK, comm->comm);
        if (err == MPI_SUCCESS) err = MPI_Recv(p->gone, W, MPI_INT, 0, TAG_GONE, comm->comm, MPI_STATUS_IGNORE);
    }
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Send/MPI_Recv (downpour: agreeing on gone workers)");
    int ngone = 0, gone_ranks[8];
    for (int w = 0; w < W; w++)
        if (p->gone[w]) { if (ngone < 8) gone_ranks[ngone] = S + w; ngone++; }
    if (!ngone) return DT_OK;
    if (p->server < 0 && p->gone[comm->rank - S])
        return dt_fail(DT_ERR_MPI, "downpour: rank %d was silent too long and the servers ended the run without it", comm->rank);
    dt_watch_dropped(gone_ranks, ngone < 8 ? ngone : 8); /* dtrain run ends them; MPI_Finalize would wait for them */
    MPI_Group world, live;
    const int nlive = comm->size - ngone;
    DT_TRY(dt_malloc(p->live_world, (size_t)nlive, "the list of %d live ranks", nlive));
    int n = 0;
    for (int r = 0; r < comm->size; r++)
        if (r < S || !p->gone[r - S]) p->live_world[n++] = r;
    err = MPI_Comm_group(comm->comm, &world);
    if (err == MPI_SUCCESS) err = MPI_Group_incl(world, n, p->live_world, &live);
    if (err == MPI_SUCCESS) err = MPI_Comm_create_group(comm->comm, live, TAG_LIVE_COMM, &p->live);
    if (err == MPI_SUCCESS) {
        MPI_Group_free(&live);
        MPI_Group_free(&world);
        p->has_live = 1;
        MPI_Comm_set_errhandler(p->live, MPI_ERRORS_RETURN);
        comm->comm = p->live;
        comm->world_ranks = p->live_world;
        MPI_Comm_rank(p->live, &comm->rank);
        MPI_Comm_size(p->live, &comm->size);
    }
    return dt_mpi_check(err, "MPI_Comm_create_group (downpour: the ranks still here)");
}

static dt_status dp_finish(dt_scheme *s, dt_step_ctx *c) {
    dp_impl *p = s->impl;
    dt_status st = p->server < 0 ? dp_worker_finish(c, p) : dp_server_finish(c, p);
    if (st == DT_OK) st = settle_gone(p, c);
    /* every rank still here reaches this point unless it failed (and then the run is aborted) */
    return st != DT_OK ? st : report_stats(p, c);
}

/* The servers' parameters (each its slice) and the mean of the workers' batch-norm state. */
static dt_status dp_model_for_eval(dt_scheme *s, dt_step_ctx *c, float *params, float *state) {
    dp_impl *p = s->impl;
    memset(params, 0, p->np * sizeof(float));
    if (p->server >= 0)
        memcpy(params + p->lo[p->server], dt_model_params(c->model) + p->lo[p->server],
               dp_slice_n(p, p->server) * sizeof(float));
    int err = MPI_Allreduce(MPI_IN_PLACE, params, (int)p->np, MPI_FLOAT, MPI_SUM, c->comm->comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (downpour final model)");
    if (p->ns) {
        if (p->server >= 0) memset(state, 0, p->ns * sizeof(float));
        else memcpy(state, dt_model_state(c->model), p->ns * sizeof(float));
        err = MPI_Allreduce(MPI_IN_PLACE, state, (int)p->ns, MPI_FLOAT, MPI_SUM, c->comm->comm);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (downpour final state)");
        int live_workers = p->W;
        for (int w = 0; w < p->W; w++) live_workers -= p->gone[w];
        const float inv = 1.0f / (float)live_workers;
        for (size_t i = 0; i < p->ns; i++) state[i] *= inv;
    }
    return DT_OK;
}

/* ------------------------------------------------------------------ set-up */

static char **alloc_bufs(int n, size_t bytes) {
    char **b = calloc((size_t)n, sizeof *b);
    if (!b) return NULL;
    for (int i = 0; i < n; i++)
        if (!(b[i] = malloc(bytes))) return b; /* the caller checks the last one */
    return b;
}

static int bufs_ok(char **b, int n) { return b && (n == 0 || b[n - 1]); }

static void free_bufs(char **b, int n) {
    if (!b) return;
    for (int i = 0; i < n; i++) free(b[i]);
    free(b);
}

/* A server's receive buffer, a send buffer and request per worker, its bookkeeping of who is
 * heard and gone, the copies compression decodes into, and (one server at rank 0) the
 * evaluations it reports. */
static dt_status dp_server_buffers(dp_impl *p, const dt_step_ctx *c) {
    const int S = p->S, W = p->W;
    const size_t mine = dp_slice_n(p, p->server), pay = dp_pay_bytes(p, p->server);
    p->incap = HDR + (pay > p->ns * sizeof(float) ? pay : p->ns * sizeof(float));
    p->inbuf = malloc(p->incap);
    p->obuf = alloc_bufs(W, HDR + pay);
    p->oreq = malloc((size_t)W * sizeof *p->oreq);
    p->stuck = malloc((size_t)W * sizeof *p->stuck);
    p->stuck_buf = calloc((size_t)W, sizeof *p->stuck_buf);
    p->last_heard = calloc((size_t)W, sizeof(double));
    p->silent = calloc((size_t)W, sizeof(double));
    p->done = calloc((size_t)W, sizeof(int));
    p->wdropped = calloc((size_t)W, sizeof(int));
    p->wep = calloc((size_t)W, sizeof(int));
    p->pushes = calloc((size_t)W, sizeof(int64_t));
    if (!p->inbuf || !bufs_ok(p->obuf, W) || !p->oreq || !p->stuck || !p->stuck_buf || !p->last_heard || !p->silent || !p->done ||
        !p->wdropped || !p->wep || !p->pushes)
        return dt_nomem("the server's buffers for %d workers", W);
    for (int w = 0; w < W; w++) p->oreq[w] = p->stuck[w] = MPI_REQUEST_NULL;
    if (p->codec) {
        p->scopy = malloc(((size_t)W * mine > 0 ? (size_t)W * mine : 1) * sizeof(float));
        p->grad = malloc((mine ? mine : 1) * sizeof(float));
        if (!p->scopy || !p->grad) return dt_nomem("the server's compression buffers for %d workers", W);
    }
    p->reports = S == 1 && c->comm->rank == 0;
    if (p->reports) {
        const size_t E = (size_t)c->run.epochs + 1;
        p->e_loss = calloc(E * 4, sizeof(double));
        p->e_state = calloc(E * (p->ns ? p->ns : 1), sizeof(float));
        p->eval_state = calloc(p->ns ? p->ns : 1, sizeof(float));
        if (!p->e_loss || !p->e_state || !p->eval_state) return dt_nomem("the evaluations of %zu epochs", E);
        /* evaluations before the first epoch's report: the model's initial state */
        if (p->ns) memcpy(p->eval_state, dt_model_state(c->model), p->ns * sizeof(float));
        p->next_eval = c->run.eval_every_steps;
        p->e_seen = p->e_loss + E;
        p->e_correct = p->e_loss + 2 * E;
        p->e_n = p->e_loss + 3 * E;
    }
    return DT_OK;
}

/* A worker's send and receive buffer per server, its requests, and the residual and copy
 * of compression. */
static dt_status dp_worker_buffers(dp_impl *p) {
    const int S = p->S;
    p->rbuf = calloc((size_t)S, sizeof *p->rbuf);
    p->sbuf = calloc((size_t)S, sizeof *p->sbuf);
    if (!p->rbuf || !p->sbuf) return dt_nomem("the worker's buffer lists for %d servers", S);
    for (int k = 0; k < S; k++) {
        p->rbuf[k] = malloc(HDR + dp_pay_bytes(p, k));
        p->sbuf[k] = malloc(HDR + dp_pay_bytes(p, k));
        if (!p->rbuf[k] || !p->sbuf[k]) return dt_nomem("the worker's buffers for server %d", k);
    }
    p->req = malloc((size_t)(2 * S) * sizeof *p->req);
    p->sts = malloc((size_t)(2 * S) * sizeof *p->sts);
    p->version = calloc((size_t)S, sizeof *p->version);
    p->ebuf = malloc(HDR + p->ns * sizeof(float));
    if (p->push_every > 1) p->accum = calloc(p->np, sizeof(float));
    if (!p->req || !p->sts || !p->version || !p->ebuf || (p->push_every > 1 && !p->accum))
        return dt_nomem("the worker's requests and copies");
    for (int i = 0; i < 2 * S; i++) p->req[i] = MPI_REQUEST_NULL;
    if (p->codec) {
        const size_t n1 = p->np ? p->np : 1;
        p->residual = calloc(n1, sizeof(float));
        if (p->fetch_every > 1) p->wcopy = malloc(n1 * sizeof(float));
        if (!p->residual || (p->fetch_every > 1 && !p->wcopy))
            return dt_nomem("the worker's compression buffers of %zu values", n1);
    }
    return DT_OK;
}

static dt_status dp_start(dt_scheme *s, dt_step_ctx *c) {
    dp_impl *p = s->impl;
    const int S = dt_scheme_servers(s), W = c->run.nworkers;
    p->S = S;
    p->W = W;
    p->np = dt_model_num_params(c->model);
    p->ns = dt_model_num_state(c->model);
    p->server = c->run.worker < 0 ? c->comm->rank : -1;
    DT_TRY(dt_calloc(p->gone, (size_t)W, "the flags of %d workers", W));
    p->deadline = 4 * p->timeout > 120 ? 4 * p->timeout : 120;
    p->last_reported = 0;
    DT_TRY(dt_malloc(p->lo, (size_t)(S + 1), "the bounds of %d servers' parts", S));
    for (int k = 0; k <= S; k++) p->lo[k] = (size_t)((unsigned long long)p->np * (unsigned long long)k / (unsigned long long)S);
    size_t biggest = 0, bigpay = 0;
    DT_TRY(dt_malloc(p->pbytes, (size_t)S, "the payload sizes of %d servers", S));
    const int zip = p->spec.kind != DT_CODEC_NONE;
    for (int k = 0; k < S; k++) {
        if (dp_slice_n(p, k) > biggest) biggest = dp_slice_n(p, k);
        p->pbytes[k] = zip ? dt_codec_bytes(&p->spec, dp_slice_n(p, k)) : dp_slice_n(p, k) * sizeof(float);
        if (p->pbytes[k] > bigpay) bigpay = p->pbytes[k];
    }
    if ((HDR + (biggest > p->ns ? biggest : p->ns) * sizeof(float)) > (size_t)2147483647 || HDR + bigpay > (size_t)2147483647)
        return dt_fail(DT_ERR_ARG, "downpour: a slice of %zu parameters is too large for one message (use more --servers)", biggest);
    if (zip) { /* scratch for the largest slice: encoding and decoding allocate nothing */
        dt_status st = dt_codec_create(&p->spec, biggest, &p->codec);
        if (st != DT_OK) return st;
    }
    DT_TRY(p->server >= 0 ? dp_server_buffers(p, c) : dp_worker_buffers(p));
    if (!p->codec) return DT_OK;
    /* set-up, not counted: every copy of server k's slice starts equal to server k's */
    float *x = dt_model_params(c->model);
    for (int k = 0; k < S; k++) {
        dt_status st = dt_bcast_setup(c->comm, x + p->lo[k], dp_slice_n(p, k), k, "MPI_Bcast (downpour starting weights)");
        if (st != DT_OK) return st;
    }
    if (p->server >= 0) {
        const size_t n = dp_slice_n(p, p->server);
        for (int w = 0; w < W; w++) memcpy(p->scopy + (size_t)w * n, x + p->lo[p->server], n * sizeof(float));
    } else if (p->wcopy) {
        memcpy(p->wcopy, x, p->np * sizeof(float));
    }
    return DT_OK;
}

static void dp_destroy(dt_scheme *s) {
    dp_impl *p = s->impl;
    free_bufs(p->rbuf, p->S);
    free_bufs(p->sbuf, p->S);
    free_bufs(p->obuf, p->W);
    free_bufs(p->stuck_buf, p->W);
    if (p->has_live) MPI_Comm_free(&p->live);
    dt_codec_free(p->codec);
    dt_free_all(p->lo, p->req, p->sts, p->accum, p->version, p->ebuf, p->inbuf, p->stuck, p->oreq, p->last_heard,
                p->silent, p->done, p->wdropped, p->wep, p->gone, p->live_world, p->pushes, p->e_loss, p->e_state,
                p->eval_state, p->f_per_worker, p->pbytes, p->residual, p->wcopy, p->scopy, p->grad, p);
}

typedef struct {
    int servers;
    long fetch_every, push_every;
    double worker_timeout;
    float stall_seconds;
    long stall_at_step;
} dp_opts;

static const dt_flag dp_flags[] = {
    {"servers", DT_AT_INT(dp_opts, servers), .def = "1", .min = 1, .max = 1e6,
     .help = "parameter-server ranks (each holds a slice of the model)"},
    {"fetch-every", DT_AT_INT(dp_opts, fetch_every), .def = "1", .min = 1, .max = 1e9,
     .help = "pull the parameters every N steps",
     .reach = DT_REACH_EVERY_STEPS, .unreached = "the workers never pull the server's parameters"},
    {"push-every", DT_AT_INT(dp_opts, push_every), .def = "1", .min = 1, .max = 1e9,
     .help = "push the accumulated gradients every N steps",
     .reach = DT_REACH_EVERY_STEPS, .unreached = "the workers never push a gradient: the server's model never moves"},
    {"worker-timeout", DT_AT_FLOAT(dp_opts, worker_timeout), .def = "30", .min = 0, .max = 1e9, .min_open = 1,
     .help = "drop a worker silent this long, seconds"},
    {"stall-seconds", DT_AT_FLOAT(dp_opts, stall_seconds), .def = "0", .min = 0, .max = 1e9,
     .help = "(tests) the last worker stalls this long once", .hidden = 1},
    {"stall-at-step", DT_AT_INT(dp_opts, stall_at_step), .def = "0", .min = 0, .max = 1e9,
     .help = "(tests) ... at this step of its first epoch (0: halfway through it)", .hidden = 1},
};

static const dt_scheme_ops dp_ops = {
    .start = dp_start,
    .begin_step = dp_begin_step,
    .optimizer_step = dp_optimizer_step,
    .end_epoch = dp_end_epoch,
    .finish = dp_finish,
    .model_for_eval = dp_model_for_eval,
    .summary = dp_summary,
    .destroy = dp_destroy,
};

static dt_status dp_create(dt_scheme *s) {
    dp_impl *p;
    /* own baseline: a pull every step and a push every step, counted as they would be */
    DT_TRY(dt_scheme_new(s, p, &dp_ops, DT_SCHEME_OWN_BASELINE));
    const dp_opts *o = s->opts;
    p->spec = s->codec; /* the codec is made at start */
    p->fetch_every = o->fetch_every;
    p->push_every = o->push_every;
    p->timeout = o->worker_timeout;
    p->stall_seconds = o->stall_seconds;
    p->stall_at_step = o->stall_at_step;
    const char *stop = getenv("DTRAIN_TEST_STOP_IN_PUSH");
    p->stop_in_push = stop ? atol(stop) : 0;
    const char *at = getenv("DTRAIN_TEST_STOP_AT"), *colon = at ? strchr(at, ':') : NULL;
    if (colon) {
        p->stop_at = atol(at);
        snprintf(p->stop_ranks, sizeof p->stop_ranks, ",%s,", colon + 1);
    }
    return DT_OK;
}

/* --servers ranks serve (dtrain/server.h) */
static int dp_servers(const dt_scheme *s) { return ((const dp_opts *)s->opts)->servers; }

/* told by a server in begin_step: dropped, or the run reached --target-acc */
static int dp_worker_stopped(const dt_scheme *s) {
    const dp_impl *p = s->impl;
    return p->dropped || p->stopped;
}

static const dt_scheme_server dp_server = {.count = dp_servers, .serve = dp_serve, .worker_stopped = dp_worker_stopped};

const dt_scheme_def dt_scheme_downpour = {
    .name = "downpour", .summary = "asynchronous parameter server: workers push gradients and pull parameters",
    DT_SCHEME_FLAGS(dp_flags, dp_opts), .compress = DT_COMPRESS_YES, .create = dp_create, .server = &dp_server,
};
