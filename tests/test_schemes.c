/* The schemes' pieces that need no peers, against their definitions: the EventGraD sender rule
 * (trigger.h: first send, warm-up, |n - n_last| >= delta, decay, adaptive thresholds over a
 * ring of slopes, bad words, checkpoint round trip); gradient payloads with error feedback
 * (payload.h: nothing lost over many steps, the mean of N payloads in rank order, the same on
 * two decoders); fedavg's weights (paramavg.h); and the hooks of local and allreduce on one
 * MPI rank (a hand-built
 * step context: the mean of one gradient is the gradient; fp16 is its round trip). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "schemes/paramavg.h"
#include "schemes/payload.h"
#include "schemes/qgm.h"
#include "schemes/scaffold.h"
#include "schemes/registry.h"
#include "schemes/trigger.h"
#include "check.h"
#include "comm/codec.h"
#include "comm/world.h"
#include "core/json.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "dtrain/server.h"

static int has_text(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* ------------------------------------------------------------------ the sender rule */

static dt_trigger make_trigger(int T, const char *threshold, float horizon, int history, float decay, long warmup) {
    dt_trigger t;
    dt_trigger_opts o = {.horizon = horizon, .history = history, .decay = decay, .warmup = warmup};
    const char *wrong = dt_threshold_parse(threshold, &o.threshold);
    CHECK_MSG(wrong == NULL, "%s: expected %s", threshold, wrong);
    dt_status st = dt_trigger_init(&t, T, &o);
    CHECK_MSG(st == DT_OK, "%s: %s", threshold, dt_last_error());
    return t;
}

static void test_trigger_const(void) {
    /* C = 0.5 (exact in binary), no warm-up, no decay */
    dt_trigger t = make_trigger(2, "const:0.5", 1.0f, 1, 1.0f, 0);
    CHECK(dt_trigger_decide(&t, 0, 0, 1.0) == 1);      /* first step: always */
    CHECK(dt_trigger_decide(&t, 0, 1, 1.0) == 0);      /* no change */
    CHECK(dt_trigger_decide(&t, 0, 2, 1.25) == 0);     /* 0.25 < 0.5 */
    CHECK(dt_trigger_decide(&t, 0, 3, 1.5) == 1);      /* 0.5 >= 0.5: the boundary sends */
    CHECK(dt_trigger_decide(&t, 0, 4, 1.0) == 1);      /* |1 - 1.5| = 0.5, downwards too */
    CHECK(dt_trigger_decide(&t, 0, 5, 0.75) == 0);     /* against the last sent (1.0): 0.25 */
    CHECK(dt_trigger_decide(&t, 0, 6, 0.5) == 1);      /* 0.5 from 1.0 */
    /* tensor 1 is independent: its first step sends whatever tensor 0 did */
    CHECK(dt_trigger_decide(&t, 1, 6, 100.0) == 1);
    CHECK(dt_trigger_decide(&t, 1, 7, 100.25) == 0);
    dt_trigger_free(&t);

    /* a hand-computed sequence, C = 2: last sent norm after each step in the comment */
    const double norms[] = {10, 11, 11.9, 12, 13, 14.5, 13.9, 12.4, 12.5, 20};
    const int want[] = {1, 0, 0, 1, 0, 1, 0, 1, 0, 1};
    /*                  10 10  10 12 12 14.5 14.5 12.4 12.4 20 */
    t = make_trigger(1, "const:2", 1.0f, 1, 1.0f, 0);
    for (int k = 0; k < 10; k++)
        CHECK_MSG(dt_trigger_decide(&t, 0, k, norms[k]) == want[k], "const:2 step %d norm %g", k, norms[k]);
    dt_trigger_free(&t);

    /* warm-up 3: steps 0, 1, 2 send whatever the norm; step 3 on applies the rule */
    t = make_trigger(1, "const:1", 1.0f, 1, 1.0f, 3);
    for (int k = 0; k < 3; k++) CHECK_MSG(dt_trigger_decide(&t, 0, k, 5.0) == 1, "warm-up step %d", k);
    CHECK(dt_trigger_decide(&t, 0, 3, 5.0) == 0);
    CHECK(dt_trigger_decide(&t, 0, 4, 5.5) == 0);
    CHECK(dt_trigger_decide(&t, 0, 5, 6.0) == 1);
    dt_trigger_free(&t);

    /* const:0: every step sends (|dn| >= 0) */
    t = make_trigger(1, "const:0", 1.0f, 1, 1.0f, 0);
    for (int k = 0; k < 5; k++) CHECK(dt_trigger_decide(&t, 0, k, 3.0) == 1);
    dt_trigger_free(&t);
}

static void test_trigger_decay(void) {
    /* C = 1, d = 0.5: a change of 0.3 waits until 1 * 0.5^k <= 0.3, i.e. k = 2 silent steps
     * (0.5, 0.25), and is sent on the third step after the send */
    dt_trigger t = make_trigger(1, "const:1", 1.0f, 1, 0.5f, 0);
    CHECK(dt_trigger_decide(&t, 0, 0, 2.0) == 1);
    CHECK(dt_trigger_decide(&t, 0, 1, 2.3) == 0);
    CHECK(dt_trigger_decide(&t, 0, 2, 2.3) == 0);
    CHECK(dt_trigger_decide(&t, 0, 3, 2.3) == 1);
    CHECK(t.delta[0] == 1.0); /* back to C after the send */
    CHECK(dt_trigger_decide(&t, 0, 4, 2.4) == 0);  /* and the next change of 0.1 waits again */
    dt_trigger_free(&t);

    /* the threshold after k silent steps is C d^k */
    const float d = 0.9f;
    t = make_trigger(1, "const:3", 1.0f, 1, d, 0);
    CHECK(dt_trigger_decide(&t, 0, 0, 1.0) == 1);
    int sent_at = -1;
    for (int k = 1; k <= 40 && sent_at < 0; k++) {
        if (dt_trigger_decide(&t, 0, k, 1.5)) { sent_at = k; break; }
        const double want = 3.0 * pow((double)d, k);
        CHECK_MSG(fabs(t.delta[0] - want) <= 1e-12 * want, "after %d silent steps: %.17g, want %.17g", k, t.delta[0], want);
    }
    /* the change 0.5 is sent at the first k with 3 * 0.9^(k-1) <= 0.5: 0.9^(k-1) <= 1/6 */
    int want_k = 1;
    while (3.0 * pow((double)d, want_k - 1) > 0.5) want_k++;
    CHECK_MSG(sent_at == want_k, "sent at %d, want %d", sent_at, want_k);
    dt_trigger_free(&t);
}

/* Adaptive, horizon H: sends at k = 0, 2, 6, 8, 10 with norms 1, 3, 5, 11, 19 give the slopes
 * 1 (2/2), 0.5 (2/4), 3 (6/2), 4 (8/2); delta = H * mean of the last `history` of them. */
static void test_trigger_adaptive(void) {
    const long ks[] = {0, 2, 6, 8, 10};
    const double ns[] = {1, 3, 5, 11, 19};
    /* delta after each send, for history 1, 2, 3 (H = 1); the first send has no slope yet */
    const double want[3][5] = {
        {0, 1, 0.5, 3, 4},
        {0, 1, (1 + 0.5) / 2, (0.5 + 3) / 2.0, (3 + 4) / 2.0},
        {0, 1, (1 + 0.5) / 2, (1 + 0.5 + 3) / 3.0, (0.5 + 3 + 4) / 3.0}, /* the last wraps the ring */
    };
    for (int H = 1; H <= 2; H++)
        for (int h = 1; h <= 3; h++) {
            dt_trigger t = make_trigger(1, "adaptive", (float)H, h, 1.0f, 0);
            long k = 0;
            for (int s = 0; s < 5; s++) {
                /* between the sends an unchanged norm is not sent (delta > 0 after the second) */
                for (; s >= 2 && k < ks[s]; k++)
                    CHECK_MSG(dt_trigger_decide(&t, 0, k, ns[s - 1]) == 0, "H=%d h=%d quiet step %ld", H, h, k);
                k = ks[s];
                CHECK_MSG(dt_trigger_decide(&t, 0, k, ns[s]) == 1, "H=%d h=%d send %d at %ld", H, h, s, k);
                k++;
                const double w = H * want[h - 1][s];
                CHECK_MSG(fabs(t.delta[0] - w) <= 1e-12 * (w + 1), "H=%d h=%d after send %d: delta %.17g, want %.17g",
                          H, h, s, t.delta[0], w);
            }
            /* the rule with the last delta (exact for h = 1, 2: 4H, 3.5H; h = 3: 2.5H) */
            const double delta = H * want[h - 1][4];
            CHECK(dt_trigger_decide(&t, 0, 11, 19 + delta - 0.25) == 0);
            CHECK(dt_trigger_decide(&t, 0, 12, 19 - delta + 0.25) == 0);
            CHECK(dt_trigger_decide(&t, 0, 13, 19 + delta) == 1);
            dt_trigger_free(&t);
        }
}

static void test_trigger_bad(void) {
    const char *bad[] = {"const:-1", "const:x", "fast", "const:", "const:1x", "adaptive2", "", "const:inf", "const:nan"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_threshold th = {.adaptive = 7, .c = 7};
        const char *wrong = dt_threshold_parse(bad[i], &th);
        CHECK_MSG(wrong && has_text(wrong, "adaptive or const:C"), "'%s' accepted", bad[i]);
        CHECK_MSG(th.adaptive == 7 && th.c == 7, "'%s': the value was written", bad[i]);
    }
    /* parsed, formatted, parsed again: the same threshold */
    const char *good[] = {"adaptive", "const:0", "const:0.5", "const:0.1", "const:1e-07", "const:12345.5"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        dt_threshold a, b;
        char text[64];
        CHECK_MSG(dt_threshold_parse(good[i], &a) == NULL, "'%s' refused", good[i]);
        dt_threshold_format(&a, text, sizeof text);
        CHECK_MSG(!strcmp(text, good[i]), "'%s' formats as '%s'", good[i], text);
        CHECK_MSG(dt_threshold_parse(text, &b) == NULL && a.adaptive == b.adaptive && a.c == b.c, "'%s' round trip", good[i]);
    }
}

/* Save a trigger mid-run, read it back into a fresh one: from then on both decide alike. */
static void test_trigger_checkpoint(void) {
    enum { T = 4, STEPS = 60 };
    dt_rng r;
    dt_rng_seed(&r, 7);
    double norms[2 * STEPS][T];
    for (int k = 0; k < 2 * STEPS; k++)
        for (int i = 0; i < T; i++) norms[k][i] = 10.0 + (double)i + 4.0 * dt_rng_uniform(&r);
    const char *kinds[] = {"adaptive", "const:1.5"};
    for (int q = 0; q < 2; q++) {
        dt_trigger a = make_trigger(T, kinds[q], 1.5f, 3, 0.9f, 5);
        for (int k = 0; k < STEPS; k++)
            for (int i = 0; i < T; i++) dt_trigger_decide(&a, i, k, norms[k][i]);
        char path[] = "/tmp/dtrain-trig-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        if (fd < 0) { dt_trigger_free(&a); return; }
        close(fd);
        dt_records recs = {.prefix = "eventgrad"}; /* as the trainer sets it */
        CHECK(dt_trigger_save(&a, &recs) == DT_OK);
        CHECK_MSG(dt_tfile_write(path, recs.r, recs.n) == DT_OK, "%s", dt_last_error());
        dt_records_free(&recs);
        dt_tfile f = {0};
        CHECK_MSG(dt_tfile_read(path, &f) == DT_OK, "%s", dt_last_error());
        dt_trigger b = make_trigger(T, kinds[q], 1.5f, 3, 0.9f, 5);
        f.prefix = "eventgrad";
        CHECK_MSG(dt_trigger_load(&b, &f, path) == DT_OK, "%s", dt_last_error());
        /* another prefix is not there: an error naming the record */
        dt_trigger c = make_trigger(T, kinds[q], 1.5f, 3, 0.9f, 5);
        f.prefix = "other";
        CHECK(dt_trigger_load(&c, &f, path) == DT_ERR_FORMAT);
        CHECK(has_text(dt_last_error(), "other:norm_last"));
        f.prefix = "eventgrad";
        dt_trigger_free(&c);
        /* a forged count (valid checksum) is refused, not used as a ring index */
        if (q == 0) {
            dt_record *ns = NULL;
            for (int i = 0; i < f.n; i++)
                if (!strcmp(f.recs[i].name, "eventgrad:nslopes")) ns = &f.recs[i];
            CHECK(ns != NULL);
            if (ns) {
                const int minus_one = -1;
                memcpy(ns->data, &minus_one, sizeof minus_one);
                dt_trigger d = make_trigger(T, kinds[q], 1.5f, 3, 0.9f, 5);
                CHECK(dt_trigger_load(&d, &f, path) == DT_ERR_FORMAT);
                CHECK_MSG(has_text(dt_last_error(), "eventgrad:nslopes holds -1 for tensor 0, expected a count >= 0"), "%s",
                          dt_last_error());
                dt_trigger_free(&d);
            }
        }
        dt_tfile_free(&f);
        unlink(path);
        CHECK(memcmp(a.delta, b.delta, T * sizeof *a.delta) == 0);
        CHECK(memcmp(a.k_last, b.k_last, T * sizeof *a.k_last) == 0);
        int same = 1, sends = 0, silent = 0;
        for (int k = STEPS; k < 2 * STEPS; k++)
            for (int i = 0; i < T; i++) {
                const int da = dt_trigger_decide(&a, i, k, norms[k][i]), db = dt_trigger_decide(&b, i, k, norms[k][i]);
                same &= da == db && a.delta[i] == b.delta[i];
                sends += da;
                silent += !da;
            }
        CHECK_MSG(same, "%s: decisions differ after the round trip", kinds[q]);
        CHECK_MSG(sends > 0 && silent > 0, "%s: %d sends, %d silent (the comparison must see both)", kinds[q], sends,
                  silent);
        dt_trigger_free(&a);
        dt_trigger_free(&b);
    }
}

/* ------------------------------------------------------------------ gradient payloads */

static void fill_normal(dt_rng *r, float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) {
        float u = dt_rng_uniform(r) + 1e-7f, v = dt_rng_uniform(r);
        x[i] = scale * sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
    }
}

static const char *const codecs[] = {"fp16", "bf16", "int8", "topk:0.25"};

/* Over K steps: sum of what was sent (decoded) + the residual left == sum of the gradients. */
static void test_payload_feedback(const char *text) {
    enum { N = 700, K = 25 };
    dt_codec_spec spec;
    CHECK_MSG(dt_codec_parse(text, &spec) == DT_OK, "%s", dt_last_error());
    dt_grad_payload p;
    CHECK_MSG(dt_grad_payload_init(&p, &spec, N) == DT_OK, "%s: %s", text, dt_last_error());
    CHECK(p.bytes == dt_codec_bytes(&spec, N));
    dt_rng r;
    dt_rng_seed(&r, 11);
    float g[N], sent[N] = {0};
    double sum_g[N] = {0}, sum_abs[N] = {0};
    for (int k = 0; k < K; k++) {
        fill_normal(&r, g, N, 0.01f * (float)(1 + k % 3));
        for (int i = 0; i < N; i++) sum_g[i] += g[i], sum_abs[i] += fabsf(g[i]);
        dt_grad_payload_encode(&p, g);
        dt_codec_decode_add(p.codec, p.send, N, sent);
    }
    double worst = 0, res_norm = 0;
    int ok = 1;
    for (int i = 0; i < N; i++) {
        const double err = fabs((double)sent[i] + p.residual[i] - sum_g[i]);
        ok &= err <= 1e-5 * sum_abs[i] + 1e-9;
        if (err > worst) worst = err;
        res_norm += fabs(p.residual[i]);
    }
    CHECK_MSG(ok, "%s: sent + residual != sum of gradients (worst %g)", text, worst);
    CHECK_MSG(res_norm > 0, "%s: a lossy codec left no residual", text);
    dt_grad_payload_free(&p);
}

/* The mean of `count` ranks' payloads: decoded and added in rank order, then / count.
 * Bit for bit where / count is exact (count a power of two): the code multiplies by 1/count
 * (as dt_allreduce_mean does), which for count = 3 can differ from / 3 by an ulp. */
static void test_payload_mean(const char *text, int count) {
    enum { N = 517 };
    dt_codec_spec spec;
    CHECK(dt_codec_parse(text, &spec) == DT_OK);
    dt_grad_payload ranks[5], other;
    for (int q = 0; q < count; q++) CHECK(dt_grad_payload_init(&ranks[q], &spec, N) == DT_OK);
    CHECK(dt_grad_payload_init(&other, &spec, N) == DT_OK); /* an independent decoder */
    const size_t B = ranks[0].bytes;
    uint8_t *in = malloc(B * (size_t)count);
    dt_rng r;
    dt_rng_seed(&r, 100 + (uint64_t)count);
    float g[N], mine[N], out[N], out2[N];
    int same = 1, same2 = 1, near_def = 1;
    for (int step = 0; step < 3; step++) { /* later steps carry residuals */
        for (int q = 0; q < count; q++) {
            fill_normal(&r, g, N, 0.1f * (float)(q + 1));
            dt_grad_payload_encode(&ranks[q], g);
            memcpy(in + (size_t)q * B, ranks[q].send, B);
        }
        /* my own: rank 0's decode, then rank 1's, ..., divided by count */
        memset(mine, 0, sizeof mine);
        for (int q = 0; q < count; q++) dt_codec_decode_add(ranks[0].codec, in + (size_t)q * B, N, mine);
        for (int i = 0; i < N; i++) mine[i] /= (float)count;
        dt_grad_payload_mean(&ranks[count - 1], in, count, out);
        dt_grad_payload_mean(&other, in, count, out2);
        if ((count & (count - 1)) == 0) same &= memcmp(out, mine, sizeof out) == 0; /* x / 2^j exact */
        for (int i = 0; i < N; i++) near_def &= fabsf(out[i] - mine[i]) <= 2.4e-7f * fabsf(mine[i]);
        same2 &= memcmp(out, out2, sizeof out) == 0;
    }
    CHECK_MSG(same, "%s N=%d: the mean is not the rank-order sum / N bit for bit", text, count);
    CHECK_MSG(near_def, "%s N=%d: the mean is off the rank-order sum / N by more than an ulp", text, count);
    CHECK_MSG(same2, "%s N=%d: two decoders disagree", text, count);
    free(in);
    for (int q = 0; q < count; q++) dt_grad_payload_free(&ranks[q]);
    dt_grad_payload_free(&other);
}

/* ------------------------------------------------------------------ fedavg weights */

static void test_weights(void) {
    /* --aggregate's words are the enum's, in its order (a CHOICE flag stores the index) */
    CHECK(!strcmp(dt_param_weighting_words[DT_WEIGHT_AVERAGE], "average"));
    CHECK(!strcmp(dt_param_weighting_words[DT_WEIGHT_SAMPLES], "samples"));
    CHECK(!strcmp(dt_param_weighting_words[DT_WEIGHT_LOSS], "loss"));
    CHECK(dt_param_weighting_words[3] == NULL);
    CHECK(dt_param_weight(DT_WEIGHT_AVERAGE, 1234, 7.0, 3) == 1.0f);
    CHECK(dt_param_weight(DT_WEIGHT_SAMPLES, 1234, 7.0, 3) == 1234.0f);
    CHECK(dt_param_weight(DT_WEIGHT_LOSS, 1234, 7.5, 3) == 2.5f);  /* mean loss 7.5 / 3 */
    CHECK(dt_param_weight(DT_WEIGHT_LOSS, 1234, 0.0, 0) == 1.0f);  /* no batch this round */
}

/* ------------------------------------------------------------------ hooks on one rank */

static dt_step_ctx make_ctx(dt_model *m, dt_comm *comm) {
    dt_step_ctx c;
    memset(&c, 0, sizeof c);
    c.model = m;
    c.comm = comm;
    c.run.epochs = 1;
    c.run.batch = 8;
    c.run.steps_per_epoch = 10;
    c.run.nworkers = comm->size;
    c.run.worker = comm->rank;
    c.run.shard_n = 80;
    c.run.quiet = 1;
    c.lr = 0.1f;
    return c;
}

static void test_local_hooks(void) {
    dt_scheme_config a = {.name = "local"};
    dt_scheme *s = NULL;
    CHECK(dt_scheme_make(&a, &s) == DT_OK && s);
    if (!s) return;
    static const dt_scheme_ops none;
    CHECK_MSG(memcmp(s->ops, &none, sizeof none) == 0, "local's hooks are not all NULL");
    CHECK(s->impl == NULL && dt_scheme_servers(s) == 0 && !s->decentralized);
    dt_scheme_free(s);
}

/* allreduce on this rank (N = 1) with --compress as given (NULL: not given). */
static void test_allreduce_one_rank(dt_comm *comm, dt_model *m, const char *compress) {
    dt_scheme_config a = {.name = "allreduce"};
    a.compress = compress;
    dt_scheme *s = NULL;
    CHECK_MSG(dt_scheme_make(&a, &s) == DT_OK && s, "%s", dt_last_error());
    if (!s) return;
    dt_step_ctx c = make_ctx(m, comm);
    comm->c = (dt_counters){0};
    CHECK_MSG(s->ops->start(s, &c) == DT_OK, "start: %s", dt_last_error());
    const size_t n = dt_model_num_params(m);
    float *g = dt_model_grads(m);
    float *want = malloc(n * sizeof *want), *res = calloc(n, sizeof *res);
    const int fp16 = compress && !strcmp(compress, "fp16");
    dt_rng r;
    dt_rng_seed(&r, 3);
    int exact = 1, changed = 0;
    for (int step = 0; step < 4; step++) {
        fill_normal(&r, g, n, 0.05f);
        for (size_t i = 0; i < n; i++) {
            if (fp16) { /* sent: fp16(g / N + e); kept: e = (g / N + e) - sent */
                const float p = g[i] * 1.0f + res[i], sent = dt_f16_to_f32(dt_f32_to_f16(p));
                res[i] = p - sent;
                /* summed by MPI in 16 bits (comm/half_reduce.h): alone, the payload itself */
                want[i] = sent;
            } else {
                want[i] = g[i]; /* the mean of one gradient */
            }
            changed += want[i] != g[i];
        }
        c.step = step;
        CHECK_MSG(s->ops->after_backward(s, &c) == DT_OK, "after_backward: %s", dt_last_error());
        exact &= memcmp(g, want, n * sizeof *g) == 0;
    }
    CHECK_MSG(exact, "allreduce --compress %s on one rank: not the expected gradient", compress ? compress : "(not given)");
    if (fp16) CHECK_MSG(changed > 0, "fp16 changed nothing: the check would not tell");
    /* N = 1: an allreduce (or allgather) sends nothing to nobody, and the baseline is the same */
    CHECK(comm->c.msgs_sent == 0 && comm->c.bytes_sent == 0 && comm->c.msgs_recv == 0 && comm->c.baseline_msgs == 0);
    /* the residual is in the checkpoint records (compressed), nothing otherwise */
    dt_records recs = {.prefix = "allreduce"}; /* as the trainer sets it */
    CHECK(s->ops->save_state(s, &c, &recs) == DT_OK);
    if (fp16) {
        CHECK(recs.n == 1 && !strcmp(recs.r[0].name, "allreduce:residual") && recs.r[0].numel == n);
        if (recs.n == 1) CHECK(memcmp(recs.r[0].data, res, n * sizeof *res) == 0);
    } else {
        CHECK(recs.n == 0);
    }
    dt_records_free(&recs);
    free(want);
    free(res);
    dt_scheme_free(s);
}

/* fedavg's outer optimizer (DiLoCo) on one rank: the average of one model is the model, so a
 * round's pseudo-gradient is the master less the round's model; master, momentum and the model
 * the next round starts from follow the formula of docs/algorithms.md, bit for bit. */
static void test_fedavg_outer(dt_comm *comm, dt_model *m, int nesterov) {
    dt_scheme_config a = {.name = "fedavg"};
    dt_scheme_config_set(&a, "local-steps", "1");
    dt_scheme_config_set(&a, "outer-lr", "0.7");
    dt_scheme_config_set(&a, "outer-momentum", "0.9");
    if (nesterov) dt_scheme_config_set(&a, "outer-nesterov", "1");
    dt_scheme *s = NULL;
    CHECK_MSG(dt_scheme_make(&a, &s) == DT_OK && s, "%s", dt_last_error());
    if (!s) return;
    dt_step_ctx c = make_ctx(m, comm);
    CHECK_MSG(s->ops->start(s, &c) == DT_OK, "start: %s", dt_last_error());
    const size_t n = dt_model_num_params(m);
    float *x = dt_model_params(m);
    float *master = malloc(n * sizeof *master), *v = calloc(n, sizeof *v), *want = malloc(n * sizeof *want);
    memcpy(master, x, n * sizeof *x);
    dt_rng r;
    dt_rng_seed(&r, 11);
    int exact = 1, moved = 0;
    for (int round = 0; round < 3; round++) {
        float *step = want; /* the round's local training: a random step */
        fill_normal(&r, step, n, 0.01f);
        for (size_t i = 0; i < n; i++) x[i] -= step[i];
        for (size_t i = 0; i < n; i++) {
            const float d = master[i] - x[i], mu = 0.9f;
            v[i] = mu * v[i] + d;
            master[i] -= 0.7f * (nesterov ? d + mu * v[i] : v[i]);
        }
        c.loss = 1.0f;
        CHECK_MSG(s->ops->end_step(s, &c) == DT_OK, "end_step: %s", dt_last_error());
        exact &= memcmp(x, master, n * sizeof *x) == 0;
        moved += memcmp(x, want, n * sizeof *x) != 0;
    }
    CHECK_MSG(exact, "fedavg outer optimizer (nesterov %d): not the model of the formula", nesterov);
    CHECK(moved == 3);
    /* the outer state is in the checkpoint records, and restores the master */
    dt_records recs = {.prefix = "fedavg"};
    CHECK(s->ops->save_state(s, &c, &recs) == DT_OK);
    int found = 0;
    for (int i = 0; i < recs.n; i++) {
        if (!strcmp(recs.r[i].name, "fedavg:outer_master")) found += recs.r[i].numel == n && !memcmp(recs.r[i].data, master, n * 4);
        if (!strcmp(recs.r[i].name, "fedavg:outer_momentum")) found += recs.r[i].numel == n && !memcmp(recs.r[i].data, v, n * 4);
    }
    CHECK_MSG(found == 2, "the outer state's records: %d of 2 found and right", found);
    dt_records_free(&recs);
    free(master);
    free(v);
    free(want);
    dt_scheme_free(s);
}

/* Quasi-global momentum on one rank with a made-up mixing (x pulled halfway to another model):
 * the buffer SGD steps with, the model and the buffer the step leaves follow Lin et al.'s
 * Algorithm 1 as docs/algorithms.md writes it, computed here in double. */
static void test_qgm(dt_model *m, int nesterov) {
    const size_t n = dt_model_num_params(m);
    dt_optim_config oc;
    dt_optim_config_defaults(&oc);
    oc.momentum = 0.9f;
    oc.nesterov = nesterov;
    dt_optim o;
    CHECK_MSG(dt_optim_init(&o, &oc, m) == DT_OK, "%s", dt_last_error());
    dt_qgm *q = NULL;
    CHECK_MSG(dt_qgm_create(&o, n, &q) == DT_OK && q, "%s", dt_last_error());
    dt_comm comm = {.size = 1};
    dt_step_ctx c = make_ctx(m, &comm);
    c.opt = &o;
    float *x = dt_model_params(m), *g = dt_model_grads(m), *other = malloc(n * sizeof *other);
    double *xr = malloc(n * sizeof *xr), *mhat = calloc(n, sizeof *mhat);
    for (size_t i = 0; i < n; i++) xr[i] = x[i];
    dt_rng r;
    dt_rng_seed(&r, 5);
    double worst = 0, scale = 0;
    for (int step = 0; step < 5; step++) {
        c.lr = 0.1f / (float)(step + 1); /* a schedule: d is the change over this step's lr */
        fill_normal(&r, g, n, 0.05f);
        fill_normal(&r, other, n, 0.2f);
        dt_qgm_begin_step(q, &c);
        for (size_t i = 0; i < n; i++) x[i] = 0.5f * (x[i] + other[i]); /* the mixing */
        dt_optim_step(&o, x, g, c.lr);
        dt_qgm_end_step(q, &c);
        for (size_t i = 0; i < n; i++) {
            const double mixed = 0.5 * (xr[i] + other[i]), v = 0.9 * mhat[i] + g[i];
            const double next = mixed - c.lr * (nesterov ? g[i] + 0.9 * v : v);
            mhat[i] = 0.9 * mhat[i] + 0.1 * (xr[i] - next) / c.lr;
            xr[i] = next;
            worst = fmax(worst, fabs(xr[i] - x[i]));
            scale = fmax(scale, fabs(xr[i]));
        }
    }
    CHECK_MSG(worst <= 1e-5 * scale, "qgm (nesterov %d): the model is %g off the formula's (scale %g)", nesterov, worst,
              scale);
    /* the buffer is the record a checkpoint keeps */
    dt_records recs = {.prefix = "dpsgd"};
    CHECK(dt_qgm_save(q, &recs) == DT_OK && recs.n == 1);
    double mworst = 0, mscale = 0;
    for (size_t i = 0; recs.n == 1 && i < n; i++) {
        mworst = fmax(mworst, fabs(((const float *)recs.r[0].data)[i] - mhat[i]));
        mscale = fmax(mscale, fabs(mhat[i]));
    }
    CHECK_MSG(mscale > 0 && mworst <= 1e-4 * mscale, "qgm: the buffer is %g off the formula's (scale %g)", mworst, mscale);
    dt_records_free(&recs);
    dt_qgm_free(q);
    dt_optim_free(&o);
    /* nothing to keep without momentum; AdamW refused in one line */
    oc.momentum = 0;
    oc.nesterov = 0;
    CHECK(dt_optim_init(&o, &oc, m) == DT_OK && dt_qgm_create(&o, n, &q) == DT_OK && q == NULL);
    dt_optim_free(&o);
    dt_optim_config_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    CHECK(dt_optim_init(&o, &oc, m) == DT_OK);
    CHECK(dt_qgm_create(&o, n, &q) == DT_ERR_ARG && q == NULL && has_text(dt_last_error(), "--momentum-kind qgm"));
    dt_optim_free(&o);
    free(other);
    free(xr);
    free(mhat);
}

/* SCAFFOLD's variates: the correction is c - c_i, c_i the round's mean gradient, c the
 * weighted mean handed back */
static void test_scaffold(void) {
    enum { N = 6 };
    dt_scaffold *s = NULL;
    CHECK(dt_scaffold_create(N, &s) == DT_OK);
    float g[N], out[N], sum[N];
    const float g1[N] = {1, 2, 3, -1, 0.5f, 0}, g2[N] = {3, 0, 1, -3, 1.5f, 2};
    memcpy(g, g1, sizeof g);
    dt_scaffold_correct(s, g);
    CHECK_MSG(!memcmp(g, g1, sizeof g), "the first round is fedavg's (c = c_i = 0)");
    memcpy(g, g2, sizeof g);
    dt_scaffold_correct(s, g);
    dt_scaffold_round_end(s, 2.0f, out);
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= out[i] == 2.0f * 0.5f * (g1[i] + g2[i]);
    CHECK_MSG(ok, "w c_i is w times the round's mean gradient");
    for (int i = 0; i < N; i++) sum[i] = (float)i;
    dt_scaffold_round_start(s, sum, 0.5f);
    memcpy(g, g1, sizeof g);
    dt_scaffold_correct(s, g);
    ok = 1;
    for (int i = 0; i < N; i++) ok &= g[i] == g1[i] + (0.5f * (float)i - 0.5f * (g1[i] + g2[i]));
    CHECK_MSG(ok, "the next round's gradients are corrected by c - c_i");
    dt_scaffold_free(s);
}

static void test_hooks(void) {
    test_local_hooks();
    dt_comm comm;
    if (dt_comm_init(NULL, NULL, &comm) != DT_OK) {
        CHECK_MSG(0, "dt_comm_init: %s", dt_last_error());
        return;
    }
    CHECK(comm.size == 1 && comm.rank == 0);
    dt_model *m = NULL;
    CHECK_MSG(dt_model_from_name("mlp", &m) == DT_OK, "%s", dt_last_error());
    if (m && comm.size == 1) {
        dt_model_init(m, 1);
        test_allreduce_one_rank(&comm, m, NULL);
        test_allreduce_one_rank(&comm, m, "none");
        test_allreduce_one_rank(&comm, m, "fp16");
        test_fedavg_outer(&comm, m, 0);
        test_fedavg_outer(&comm, m, 1);
        test_qgm(m, 0);
        test_qgm(m, 1);
    }
    dt_model_free(m);
    dt_comm_finalize();
}

int main(void) {
    dt_runtime_init();
    test_trigger_const();
    test_trigger_decay();
    test_trigger_adaptive();
    test_trigger_bad();
    test_trigger_checkpoint();
    for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++) {
        test_payload_feedback(codecs[i]);
        for (int count = 1; count <= 4; count++) test_payload_mean(codecs[i], count);
    }
    test_weights();
    test_scaffold();
    test_hooks();
    return test_summary("test_schemes");
}
