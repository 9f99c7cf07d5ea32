/* downpour: the worker's side (design: docs/downpour.md). */
#include "schemes/downpour_state.h"

/* Polls n requests until all complete; a server that does not answer by the deadline is an
 * error (the caller stops the run). */
static dt_status wait_all(dt_step_ctx *c, dp_impl *p, int n, MPI_Request *reqs, MPI_Status *sts, const char *what) {
    const double end = dt_now() + p->deadline;
    dt_status st = DT_OK;
    dt_wait_begin(c->comm, "a downpour server's answer"); /* communication time, seen by the watchdog */
    for (;;) {
        int flag = 0, err = MPI_Testall(n, reqs, &flag, sts ? sts : MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS) { st = dt_mpi_check(err, what); break; }
        if (flag) break;
        if (dt_now() > end) {
            int who = -1;
            for (int i = 0; i < n && who < 0; i++) {
                int one = 0;
                if (MPI_Test(&reqs[i], &one, MPI_STATUS_IGNORE) != MPI_SUCCESS || !one) who = i % p->S;
            }
            st = dt_fail(DT_ERR_MPI, "downpour: %s: server rank %d did not answer for %.0f s", what, who, p->deadline);
            break;
        }
        dp_nap(50000);
    }
    dt_wait_end(c->comm);
    return st;
}

static dt_status worker_done(dt_step_ctx *c, dp_impl *p) {
    msg_hdr h = {.steps = p->trained};
    double t0 = dt_now();
    for (int k = 0; k < p->S; k++) {
        int err = MPI_Isend(&h, (int)HDR, MPI_BYTE, k, TAG_DONE, c->comm->comm, &p->req[k]);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Isend (downpour done)");
    }
    c->comm->c.t_comm += dt_now() - t0;
    p->done_sent = 1;
    return wait_all(c, p, p->S, p->req, NULL, "done");
}

static dt_status worker_pull(dt_step_ctx *c, dp_impl *p) {
    const int S = p->S;
    msg_hdr h = {.steps = p->trained};
    double t0 = dt_now();
    for (int k = 0; k < S; k++) {
        int err = MPI_Irecv(p->rbuf[k], (int)(HDR + dp_pay_bytes(p, k)), MPI_BYTE, k, MPI_ANY_TAG,
                            c->comm->comm, &p->req[k]);
        if (err == MPI_SUCCESS) err = MPI_Isend(&h, (int)HDR, MPI_BYTE, k, TAG_PULL, c->comm->comm, &p->req[S + k]);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Irecv/MPI_Isend (downpour pull)");
        dt_count_send(c->comm, 1, HDR);
    }
    c->comm->c.t_comm += dt_now() - t0;
    dt_status st = wait_all(c, p, 2 * S, p->req, p->sts, "pull");
    if (st != DT_OK) return st;
    float *x = dt_model_params(c->model);
    int dropped = 0, stop = 0;
    const double t1 = dt_now();
    for (int k = 0; k < S; k++) {
        int cnt = 0, err = MPI_Get_count(&p->sts[k], MPI_BYTE, &cnt);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Get_count (downpour pull)");
        dt_count_recv(c->comm, 1, (uint64_t)cnt);
        if (p->sts[k].MPI_TAG == TAG_DROPPED) { dropped = 1; continue; }
        if (p->sts[k].MPI_TAG == TAG_STOP) { stop = 1; continue; }
        const size_t bytes = dp_pay_bytes(p, k);
        if (p->sts[k].MPI_TAG != TAG_REPLY || (size_t)cnt != HDR + bytes)
            return dt_fail(DT_ERR_MPI, "downpour: unexpected reply from server rank %d (tag %d, %d bytes)", k,
                           p->sts[k].MPI_TAG, cnt);
        msg_hdr r;
        memcpy(&r, p->rbuf[k], HDR);
        p->version[k] = r.version;
        if (!p->codec) {
            memcpy(x + p->lo[k], p->rbuf[k] + HDR, bytes);
            continue;
        }
        /* the copy of server k's slice: += decode, as the server did to its copy of ours */
        float *copy = p->wcopy ? p->wcopy : x;
        dt_codec_decode_add(p->codec, p->rbuf[k] + HDR, dp_slice_n(p, k), copy + p->lo[k]);
        if (p->wcopy) memcpy(x + p->lo[k], copy + p->lo[k], dp_slice_n(p, k) * sizeof(float));
    }
    if (p->codec) c->comm->c.t_comm += dt_now() - t1;
    if (dropped) {
        /* told by a server: stop training; the servers stop waiting for us */
        p->dropped = 1;
        return worker_done(c, p);
    }
    if (stop) {
        /* the run reached --target-acc: this step is not taken, the trainer ends the run as
         * after the last epoch (finish sends DONE) */
        p->stopped = 1;
        c->comm->c.baseline_msgs += (uint64_t)p->S; /* the requests (the server adds its STOP) */
    }
    return DT_OK;
}

static dt_status worker_push(dt_step_ctx *c, dp_impl *p, const float *g, long count) {
    const double pos = c->epoch + (double)p->epoch_steps / c->run.steps_per_epoch;
    double t0 = dt_now();
    for (int k = 0; k < p->S; k++) {
        msg_hdr h = {.version = p->version[k], .steps = p->trained, .count = count, .epoch_pos = pos};
        const size_t bytes = dp_pay_bytes(p, k);
        memcpy(p->sbuf[k], &h, HDR);
        if (p->codec) /* gradient payload: error feedback per server slice */
            dt_codec_encode_ef(p->codec, g + p->lo[k], p->residual + p->lo[k], dp_slice_n(p, k), p->sbuf[k] + HDR);
        else
            memcpy(p->sbuf[k] + HDR, g + p->lo[k], bytes);
        int err = MPI_Isend(p->sbuf[k], (int)(HDR + bytes), MPI_BYTE, k, TAG_PUSH, c->comm->comm, &p->req[k]);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Isend (downpour push)");
        dt_count_send(c->comm, 1, HDR + bytes);
    }
    c->comm->c.t_comm += dt_now() - t0;
    if (p->stop_in_push > 0 && p->trained == p->stop_in_push && c->comm->rank == c->comm->size - 1) raise(SIGSTOP);
    return wait_all(c, p, p->S, p->req, NULL, "push");
}

dt_status dp_begin_step(dt_scheme *s, dt_step_ctx *c) {
    dp_impl *p = s->impl;
    if (p->dropped) return DT_OK;
    if (p->stop_at > 0 && p->trained == p->stop_at) {
        char me[16];
        snprintf(me, sizeof me, ",%d,", c->comm->rank);
        if (strstr(p->stop_ranks, me)) raise(SIGSTOP);
    }
    if (!p->stalled && p->stall_seconds > 0 && c->comm->rank == c->comm->size - 1 && p->epochs_run == 0 &&
        p->epoch_steps == (p->stall_at_step > 0 ? p->stall_at_step : c->run.steps_per_epoch / 2)) {
        p->stalled = 1;
        double until = dt_now() + p->stall_seconds;
        for (double left; (left = until - dt_now()) > 0;) {
            struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    const long F = p->fetch_every > 1 ? p->fetch_every : 1;
    return p->trained % F == 0 ? worker_pull(c, p) : DT_OK;
}

dt_status dp_optimizer_step(dt_scheme *s, dt_step_ctx *c) {
    dp_impl *p = s->impl;
    if (p->dropped || p->stopped) return DT_OK;
    const long F = p->fetch_every > 1 ? p->fetch_every : 1;
    const long P = p->push_every > 1 ? p->push_every : 1;
    const float lr = c->lr;
    p->ep_loss += (double)c->loss * c->count;
    p->ep_correct += c->correct;
    p->ep_seen += c->count;
    float *g = dt_model_grads(c->model), *x = dt_model_params(c->model);
    /* --clip: the worker's gradient of this step, before it is pushed (or summed for a push);
     * the servers hold slices and cannot see its norm */
    if (c->opt->cfg.clip > 0) dt_clip_grad_norm(g, p->np, c->opt->cfg.clip);
    dt_status st = DT_OK;
    if (P == 1) {
        st = worker_push(c, p, g, 1);
    } else {
        for (size_t i = 0; i < p->np; i++) p->accum[i] += g[i];
        if (++p->since_push == P) {
            st = worker_push(c, p, p->accum, P);
            memset(p->accum, 0, p->np * sizeof(float));
            p->since_push = 0;
        }
    }
    if (st != DT_OK) return st;
    if ((p->trained + 1) % F != 0)
        for (size_t i = 0; i < p->np; i++) x[i] -= lr * g[i];
    p->trained++;
    p->epoch_steps++;
    c->comm->c.baseline_msgs += 2 * (uint64_t)p->S;
    return DT_OK;
}

/* At the epochs the trainer evaluates, rank 0 (the one server) reports the epoch once every
 * live worker has sent this: loss, accuracy and batch-norm state. */
dt_status dp_end_epoch(dt_scheme *s, dt_step_ctx *c) {
    dp_impl *p = s->impl;
    dt_status st = DT_OK;
    /* once stopped nothing more is reported: the server keeps the model that reached the target */
    if (!p->dropped && !p->stopped && p->S == 1 && p->ep_seen > 0 && c->eval_due) {
        msg_hdr h = {.epoch = c->epoch + 1, .count = (int64_t)p->ep_seen, .loss_sum = p->ep_loss, .correct = p->ep_correct};
        memcpy(p->ebuf, &h, HDR);
        if (p->ns) memcpy(p->ebuf + HDR, dt_model_state(c->model), p->ns * sizeof(float));
        const size_t bytes = HDR + p->ns * sizeof(float);
        double t0 = dt_now();
        int err = MPI_Isend(p->ebuf, (int)bytes, MPI_BYTE, 0, TAG_EPOCH, c->comm->comm, &p->req[0]);
        c->comm->c.t_comm += dt_now() - t0;
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Isend (downpour epoch)");
        st = wait_all(c, p, 1, p->req, NULL, "epoch report");
    }
    p->ep_loss = p->ep_seen = p->ep_correct = 0;
    p->epoch_steps = 0;
    p->epochs_run++;
    return st;
}

dt_status dp_worker_finish(dt_step_ctx *c, dp_impl *p) {
    dt_status st = DT_OK;
    if (!p->dropped && !p->stopped && p->since_push > 0) { /* else the server would discard it */
        st = worker_push(c, p, p->accum, p->since_push);
        memset(p->accum, 0, p->np * sizeof(float));
        p->since_push = 0;
    }
    if (st == DT_OK && !p->done_sent) st = worker_done(c, p);
    return st;
}
