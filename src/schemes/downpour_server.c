/* downpour: the server's side (design: docs/downpour.md). */
#include "schemes/downpour_state.h"

#include "comm/watch.h"

static int all_finished(const dp_impl *p, int count_dropped) {
    for (int w = 0; w < p->W; w++)
        if (!p->done[w] && !p->gone[w] && !(count_dropped && p->wdropped[w])) return 0;
    return 1;
}

/* At the end: a dropped worker that has not said DONE in 3 x --worker-timeout since it was
 * last heard is stopped or hung (a live one learns it was dropped at its next message and says
 * DONE at once). The end goes on without it. */
static void mark_gone(dt_step_ctx *c, dp_impl *p) {
    const double now = dt_now();
    for (int w = 0; w < p->W; w++) {
        if (!p->wdropped[w] || p->done[w] || p->gone[w] || now - p->last_heard[w] < 3 * p->timeout) continue;
        p->gone[w] = 1;
        fprintf(stderr, "dtrain: warning: downpour: worker rank %d still silent after %.0f s: left out of the end of the run "
                "(server rank %d)\n", p->S + w, now - p->last_heard[w], c->comm->rank);
        fflush(stderr);
    }
}

/* Rank 0 with one server: evaluates its parameters now, for epoch e's report (e > 0) or
 * between epochs (e == 0). Once an evaluation reaches --target-acc the model stays as it is
 * (later pushes are discarded) and every pull is answered with STOP. */
static dt_status server_eval(dt_step_ctx *c, dp_impl *p, int e) {
    const dt_counters *k = &c->comm->c;
    dt_server_eval ev = {.params = dt_model_params(c->model), .state = p->eval_state, .step = (long)(p->applied / p->W),
                         /* every counted message is one this server sent or received */
                         .msgs = (double)(k->msgs_sent + k->msgs_recv), .bytes = (double)(k->bytes_sent + k->bytes_recv),
                         /* per worker step begun (pulled, with --fetch-every 1) or applied: a pull
                          * request and a push from the worker, the server's reply */
                         .baseline = 3.0 * (double)(p->pulls > p->applied ? p->pulls : p->applied)};
    const double t0 = dt_now();
    const dt_server_reports *r = p->report_to;
    dt_status st = e > 0 ? r->epoch(r->host, e, p->e_loss[e] / p->e_seen[e], p->e_correct[e] / p->e_seen[e], &ev)
                         : r->step(r->host, &ev);
    /* the server was not listening meanwhile: that is no worker's silence */
    const double busy = dt_now() - t0;
    for (int w = 0; w < p->W; w++) p->last_heard[w] += busy;
    if (ev.reached) p->stopping = 1;
    return st;
}

/* Rank 0 with one server: reports epoch e once every live worker has finished it (after the
 * target was reached there is nothing new to report: the model is the one that reached it). */
static dt_status maybe_report(dt_step_ctx *c, dp_impl *p) {
    if (!p->reports) return DT_OK;
    const int epochs = c->run.epochs;
    while (!p->stopping) {
        int e = p->last_reported + 1;
        while (e <= epochs && p->e_n[e] == 0) e++;
        if (e > epochs) return DT_OK;
        for (int w = 0; w < p->W; w++)
            if (!p->done[w] && !p->wdropped[w] && p->wep[w] < e) return DT_OK;
        for (size_t i = 0; i < p->ns; i++) p->eval_state[i] = (float)(p->e_state[(size_t)e * p->ns + i] / p->e_n[e]);
        p->last_reported = e;
        dt_status st = server_eval(c, p, e);
        if (st != DT_OK) return st;
    }
    return DT_OK;
}

/* --eval-every-steps N (rank 0, one server): an evaluation each time the workers' mean
 * position, in the worker steps the server applied, passes a multiple of N, except where an
 * epoch's own evaluation is planned (the synchronous schemes skip that one too). */
static dt_status maybe_eval_step(dt_step_ctx *c, dp_impl *p) {
    const long N = c->run.eval_every_steps, spe = c->run.steps_per_epoch, every = c->run.eval_every;
    if (!p->reports || N <= 0 || p->stopping) return DT_OK;
    const long step = (long)(p->applied / p->W), e = step / spe;
    if (step < p->next_eval) return DT_OK;
    p->next_eval = (step / N + 1) * N;
    if (step % spe == 0 && (e == c->run.epochs || (every > 0 && e % every == 0))) return DT_OK;
    return server_eval(c, p, 0);
}

static dt_status evaluations(dt_step_ctx *c, dp_impl *p) {
    dt_status st = maybe_report(c, p);
    return st != DT_OK ? st : maybe_eval_step(c, p);
}

/* Worker w's receive given up on (receive): done yet? (wait: until the deadline, at the end;
 * a gone worker's is let go: dtrain run ends that rank, and with it the receive) */
static dt_status settle_stuck(dp_impl *p, int w, int wait) {
    if (p->stuck[w] == MPI_REQUEST_NULL) return DT_OK;
    if (wait && p->gone[w]) return dt_mpi_check(MPI_Request_free(&p->stuck[w]), "MPI_Request_free (downpour receive)");
    const double end = dt_now() + (wait ? p->deadline : 0);
    for (;;) {
        int flag = 0, err = MPI_Test(&p->stuck[w], &flag, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Test (downpour receive given up on)");
        if (flag || dt_now() >= end) break;
        dp_nap(50000);
    }
    if (p->stuck[w] == MPI_REQUEST_NULL) return DT_OK;
    return wait ? dt_fail(DT_ERR_MPI, "downpour: worker rank %d's message never arrived whole", p->S + w) : DT_OK;
}

static void drop(dt_step_ctx *c, dp_impl *p, int w, double now) {
    p->wdropped[w] = 1;
    p->silent[w] = now - p->last_heard[w];
    fprintf(stderr, "dtrain: warning: downpour: worker rank %d silent for %.1f s (--worker-timeout %g): dropped by server rank %d, the other workers carry on\n",
            p->S + w, p->silent[w], p->timeout, c->comm->rank);
    fflush(stderr);
}

static void check_timeouts(dt_step_ctx *c, dp_impl *p) {
    const double now = dt_now();
    p->last_check = now;
    if (p->timeout <= 0) return;
    for (int w = 0; w < p->W; w++)
        if (!p->done[w] && !p->wdropped[w] && now - p->last_heard[w] > p->timeout) drop(c, p, w, now);
}

/* Receives the matched message from worker w into p->inbuf (*got set), polling: a worker
 * stopped in the middle of sending a large one would otherwise hold the server for ever, the
 * other workers waiting on it (over TCP, as between hosts, the bytes move only while the
 * sender runs; through shared memory MPI reads them itself). Given up once w has been silent
 * past --worker-timeout (a dropped worker: past the 3 x that leaves it out of the end): w is
 * dropped, the receive is left to finish into a buffer of its own (p->stuck) and the server
 * takes a new one. */
static dt_status receive(dt_step_ctx *c, dp_impl *p, int w, int cnt, dt_probed *msg, int *got) {
    MPI_Request req;
    *got = 0;
    dt_status st = dt_irecv_probed(c->comm, p->inbuf, cnt, msg, &req);
    if (st != DT_OK) return st;
    if (req == MPI_REQUEST_NULL) { *got = 1; return DT_OK; } /* received at once (the simulation) */
    const double t0 = dt_now();
    for (;;) {
        int flag = 0, err = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Test (downpour receive)");
        if (flag) { *got = 1; break; }
        const double now = dt_now(), limit = p->wdropped[w] ? 3 * p->timeout : p->timeout;
        if (p->timeout > 0 && now - p->last_heard[w] > limit) {
            if ((st = settle_stuck(p, w, 0)) != DT_OK) return st;
            char *fresh = p->stuck[w] == MPI_REQUEST_NULL ? malloc(p->incap) : NULL;
            if (fresh) {
                if (!p->wdropped[w]) drop(c, p, w, now);
                free(p->stuck_buf[w]);
                p->stuck[w] = req;
                p->stuck_buf[w] = p->inbuf;
                p->inbuf = fresh;
                break;
            }
            /* (out of memory, or a second message of w stuck: the server waits, as MPI would) */
        }
        if (now - t0 > 1e-3) dp_nap(20000); /* a message that is moving takes microseconds */
    }
    /* the server was not listening to the others meanwhile: that is none of their silence */
    const double waited = dt_now() - t0;
    for (int v = 0; v < p->W; v++)
        if (v != w) p->last_heard[v] += waited;
    c->comm->c.t_comm += waited;
    return DT_OK;
}

static dt_status server_reply(dt_step_ctx *c, dp_impl *p, int w) {
    const int dest = p->S + w;
    double t0 = dt_now();
    int err = MPI_SUCCESS;
    if (p->oreq[w] != MPI_REQUEST_NULL) err = MPI_Wait(&p->oreq[w], MPI_STATUS_IGNORE);
    msg_hdr h = {.version = p->sversion};
    memcpy(p->obuf[w], &h, HDR);
    size_t bytes = HDR;
    const int tag = p->wdropped[w] ? TAG_DROPPED : p->stopping ? TAG_STOP : TAG_REPLY;
    if (tag == TAG_REPLY) {
        const size_t n = dp_slice_n(p, p->server);
        const float *x = dt_model_params(c->model) + p->lo[p->server];
        if (p->codec) /* parameter payload: the change since the copy worker w holds */
            dt_codec_encode_delta(p->codec, x, p->scopy + (size_t)w * n, n, p->obuf[w] + HDR);
        else
            memcpy(p->obuf[w] + HDR, x, n * sizeof(float));
        bytes += dp_pay_bytes(p, p->server);
    }
    if (err == MPI_SUCCESS) err = MPI_Isend(p->obuf[w], (int)bytes, MPI_BYTE, dest, tag, c->comm->comm, &p->oreq[w]);
    c->comm->c.t_comm += dt_now() - t0;
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Isend (downpour reply)");
    dt_count_send(c->comm, 1, bytes);
    /* a run communicating at every step learns to stop so too (the worker adds its request) */
    if (tag == TAG_STOP) c->comm->c.baseline_msgs++;
    return DT_OK;
}

static dt_status server_apply(dt_step_ctx *c, dp_impl *p, int w, const msg_hdr *h, const float *g) {
    const int k = p->server;
    const double stale = (double)(p->sversion - h->version);
    p->stale_sum += stale;
    p->stale_n += 1;
    if (stale > p->stale_max) p->stale_max = stale;
    p->pushes[w]++;
    p->applied += h->count;
    /* the lr of the worker's step (h->steps trained before it) */
    const float lr = dt_schedule_lr_at(c->sched, (long)h->steps, h->epoch_pos, c->run.epochs);
    /* a step of the run's optimiser over this server's slice: its moments (momentum) are the
     * slice's of c->opt, its step count the pushes this server applied */
    double t0 = dt_now();
    dt_optim_begin(c->opt);
    dt_optim_apply(c->opt, p->lo[k], dp_slice_n(p, k), dt_model_params(c->model) + p->lo[k], g, lr);
    c->comm->c.t_compute += dt_now() - t0;
    p->sversion++;
    return DT_OK;
}

static dt_status server_handle(dt_step_ctx *c, dp_impl *p, dt_probed *msg, MPI_Status *status) {
    int cnt = 0;
    dt_status gs = dt_mpi_check(MPI_Get_count(status, MPI_BYTE, &cnt), "MPI_Get_count (downpour)");
    if (gs != DT_OK) return gs;
    const int src = status->MPI_SOURCE, tag = status->MPI_TAG, w = src - p->S;
    if (w < 0 || w >= p->W || cnt < (int)HDR || (size_t)cnt > p->incap) {
        /* take it anyway (into a scratch buffer) so that it is not left unmatched */
        char *junk = malloc(cnt > 0 ? (size_t)cnt : 1);
        dt_status rs = junk ? dt_recv_probed(c->comm, junk, cnt, msg) : DT_OK;
        free(junk);
        if (rs != DT_OK) return rs;
        return dt_fail(DT_ERR_MPI, "downpour: server rank %d got an unexpected message from rank %d (tag %d, %d bytes)",
                       c->comm->rank, src, tag, cnt);
    }
    int got = 0;
    const dt_status rs = receive(c, p, w, cnt, msg, &got);
    if (rs != DT_OK || !got) return rs;
    /* EPOCH is measurement and DONE control (docs/accounting.md): not training traffic */
    if (tag == TAG_PULL || tag == TAG_PUSH) dt_count_recv(c->comm, 1, (uint64_t)cnt);
    p->last_heard[w] = dt_now();
    msg_hdr h;
    memcpy(&h, p->inbuf, HDR);
    const float *payload = (const float *)(p->inbuf + HDR);
    const int live = !p->wdropped[w] && !p->done[w];
    switch (tag) {
    case TAG_PULL:
        p->pulls += live;
        return server_reply(c, p, w);
    case TAG_PUSH:
        if ((size_t)cnt != HDR + dp_pay_bytes(p, p->server))
            return dt_fail(DT_ERR_MPI, "downpour: push of %d bytes from rank %d, expected %zu", cnt, src,
                           HDR + dp_pay_bytes(p, p->server));
        if (!live || p->stopping) return DT_OK; /* a dropped worker's, or after --target-acc: discarded */
        if (p->codec) {
            const double t0 = dt_now();
            dt_codec_decode(p->codec, p->inbuf + HDR, dp_slice_n(p, p->server), p->grad);
            c->comm->c.t_comm += dt_now() - t0;
            payload = p->grad;
        }
        return server_apply(c, p, w, &h, payload);
    case TAG_EPOCH:
        if ((size_t)cnt != HDR + p->ns * sizeof(float) || h.epoch < 1 || h.epoch > c->run.epochs)
            return dt_fail(DT_ERR_MPI, "downpour: bad epoch report from rank %d", src);
        if ((int)h.epoch > p->epochs_reported) p->epochs_reported = (int)h.epoch;
        if (live && p->reports) {
            const int e = (int)h.epoch;
            p->e_loss[e] += h.loss_sum;
            p->e_seen[e] += (double)h.count;
            p->e_correct[e] += h.correct;
            p->e_n[e] += 1;
            for (size_t i = 0; i < p->ns; i++) p->e_state[(size_t)e * p->ns + i] += payload[i];
            p->wep[w] = e;
        }
        return DT_OK;
    case TAG_DONE:
        p->done[w] = 1;
        c->comm->c.baseline_msgs += (uint64_t)h.steps; /* one reply per step, had it pulled every step */
        return DT_OK;
    default:
        return dt_fail(DT_ERR_MPI, "downpour: server rank %d got tag %d from rank %d", c->comm->rank, tag, src);
    }
}

/* Serves until every worker is done (drain) or done or dropped (!drain). */
static dt_status server_loop(dt_step_ctx *c, dp_impl *p, int drain) {
    dt_status st = DT_OK;
    while (!all_finished(p, !drain)) {
        int flag = 0;
        dt_probed msg;
        MPI_Status status;
        if ((st = dt_probe_any(c->comm, &flag, &msg, &status)) != DT_OK) return st;
        if (flag) {
            if ((st = server_handle(c, p, &msg, &status)) != DT_OK) return st;
            /* where the server is, for its board: the trainer's loop, which marks the workers'
             * steps, does not run on a server */
            const int e = p->epochs_reported < c->run.epochs ? p->epochs_reported + 1 : c->run.epochs;
            dt_watch_progress(e, (long)(p->applied / (p->W > 0 ? p->W : 1)));
            /* judge silence also when messages keep coming, but not on every one */
            if (!drain && dt_now() - p->last_check > p->timeout / 4) check_timeouts(c, p);
            if ((st = evaluations(c, p)) != DT_OK) return st;
            continue;
        }
        if (!drain) check_timeouts(c, p);
        else mark_gone(c, p);
        if ((st = evaluations(c, p)) != DT_OK) return st;
        dp_nap(100000);
    }
    return evaluations(c, p);
}

dt_status dp_serve(dt_scheme *s, dt_step_ctx *c, const dt_server_reports *reports) {
    dp_impl *p = s->impl;
    p->report_to = reports; /* kept by the trainer until the run ends: finish serves on */
    const double now = dt_now();
    for (int w = 0; w < p->W; w++) p->last_heard[w] = now;
    p->last_check = now;
    return server_loop(c, p, 0);
}

dt_status dp_server_finish(dt_step_ctx *c, dp_impl *p) {
    /* dropped workers still send what they had in flight, then DONE */
    dt_status st = server_loop(c, p, 1);
    for (int w = 0; st == DT_OK && w < p->W; w++) st = settle_stuck(p, w, 1);
    for (int w = 0; st == DT_OK && w < p->W; w++) {
        if (p->oreq[w] == MPI_REQUEST_NULL) continue;
        if (p->gone[w]) { /* nobody will take it: let MPI forget it */
            MPI_Request_free(&p->oreq[w]);
            continue;
        }
        /* every reply answers a pull whose worker waits for it */
        double t0 = dt_now(), end = t0 + p->deadline;
        int flag = 0;
        while (!flag) {
            int err = MPI_Test(&p->oreq[w], &flag, MPI_STATUS_IGNORE);
            if (err != MPI_SUCCESS) { st = dt_mpi_check(err, "MPI_Test (downpour reply)"); break; }
            if (!flag && dt_now() > end) {
                st = dt_fail(DT_ERR_MPI, "downpour: worker rank %d did not take its last reply", p->S + w);
                break;
            }
            if (!flag) dp_nap(50000);
        }
        c->comm->c.t_comm += dt_now() - t0;
    }
    return st;
}
