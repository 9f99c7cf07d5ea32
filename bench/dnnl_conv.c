/* Per-layer timing of a zoo model's convolutions: dtrain's own (im2col + OpenBLAS, or its
 * Winograd) against oneDNN's primitives, forward and backward (data and weights), on the same
 * shapes, in the same process, on one thread. oneDNN gets what PyTorch's CPU path gives it:
 * NCHW tensors in and out, its own layouts inside (format "any"), the reorders between them
 * timed as part of the layer. The first step of issue 32: which layers oneDNN wins, on this CPU.
 *   bench/dnnl_conv MODEL [BATCH [REPS]]      (OMP_NUM_THREADS=1; taskset -c 0 for one core)
 * Prints one line per conv layer and the totals; also checks that both give the same output
 * and gradients (relative error), so a timing of a wrong result is not reported as a win. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>

#include "dtrain.h"
#include "layers/layer.h"
#include "models/model_struct.h"

#define CHECK(call)                                                                              \
    do {                                                                                         \
        dnnl_status_t s_ = (call);                                                               \
        if (s_ != dnnl_success) { fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #call, (int)s_); exit(1); } \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static float *fill(size_t n, unsigned seed) {
    float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) & ~(size_t)63);
    if (!p) { perror("alloc"); exit(1); }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

static double rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One oneDNN operation with user (NCHW) memories and its own inside, reorders around it. */
typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t inner[4]; /* the primitive's own memories (NULL: the user's is used) */
    dnnl_primitive_t to_inner[4], to_user[4];
    int arg[4], is_out[4], n;
    dnnl_memory_t user[4];
} op;

static dnnl_engine_t eng;
static dnnl_stream_t strm;

/* memory of md wrapping p (user) */
static dnnl_memory_t wrap(const dnnl_memory_desc_t *md, void *p) {
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, eng, p));
    return m;
}

/* Adds an argument: the user's memory (plain layout), the primitive's wanted md from pd */
static void add_arg(op *o, dnnl_primitive_desc_t pd, dnnl_query_t q, int idx, int arg, dnnl_memory_t user, int is_out) {
    const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, q, idx);
    const dnnl_memory_desc_t *have;
    CHECK(dnnl_memory_get_memory_desc(user, &have));
    int k = o->n++;
    o->arg[k] = arg;
    o->user[k] = user;
    o->is_out[k] = is_out;
    o->inner[k] = NULL;
    o->to_inner[k] = o->to_user[k] = NULL;
    if (dnnl_memory_desc_equal(want, have)) return;
    CHECK(dnnl_memory_create(&o->inner[k], want, eng, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_t rpd;
    if (is_out) {
        CHECK(dnnl_reorder_primitive_desc_create(&rpd, want, eng, have, eng, NULL));
        CHECK(dnnl_primitive_create(&o->to_user[k], rpd));
    } else {
        CHECK(dnnl_reorder_primitive_desc_create(&rpd, have, eng, want, eng, NULL));
        CHECK(dnnl_primitive_create(&o->to_inner[k], rpd));
    }
    dnnl_primitive_desc_destroy(rpd);
}

static void run(op *o) {
    dnnl_exec_arg_t a[4];
    for (int k = 0; k < o->n; k++) {
        dnnl_memory_t m = o->inner[k] ? o->inner[k] : o->user[k];
        if (o->to_inner[k]) {
            dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, o->user[k]}, {DNNL_ARG_TO, o->inner[k]}};
            CHECK(dnnl_primitive_execute(o->to_inner[k], strm, 2, r));
        }
        a[k] = (dnnl_exec_arg_t){o->arg[k], m};
    }
    CHECK(dnnl_primitive_execute(o->prim, strm, o->n, a));
    for (int k = 0; k < o->n; k++)
        if (o->to_user[k]) {
            dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, o->inner[k]}, {DNNL_ARG_TO, o->user[k]}};
            CHECK(dnnl_primitive_execute(o->to_user[k], strm, 2, r));
        }
    CHECK(dnnl_stream_wait(strm));
}

static const char *impl(dnnl_primitive_desc_t pd) {
    const char *s = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return s;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s MODEL [BATCH [REPS]]\n", argv[0]); return 2; }
    const int B = argc > 2 ? atoi(argv[2]) : 32, reps = argc > 3 ? atoi(argv[3]) : 5;
    setenv("DTRAIN_ENGINE", "own", 1); /* dtrain's side: its own kernels, whatever the build's rule */
    dt_model *m;
    if (dt_model_from_name(argv[1], &m) != DT_OK) { fprintf(stderr, "%s\n", dt_last_error()); return 2; }
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    double tot_dt = 0, tot_dn = 0;
    printf("%-10s %-22s %9s %9s %9s %9s %6s  %s\n", "layer", "shape", "dt fwd", "dt bwd", "dnnl fwd", "dnnl bwd",
           "dt/dn", "oneDNN impl (fwd / bwd data / bwd weights); max rel err");
    for (int i = 0; i < m->nn; i++) {
        dt_node *n = &m->nodes[i];
        if (n->ops != &dt_layer_conv) continue;
        const size_t in = (size_t)B * dt_node_in_size(n), out = (size_t)B * dt_node_out_size(n);
        const size_t nw = (size_t)n->oc * n->ic * n->k * n->k;
        float *x = fill(in, 1), *dy = fill(out, 2), *w = fill(nw, 3), *bias = fill((size_t)n->oc, 4);
        float *y = fill(out, 5), *dx = fill(in, 6), *gw = fill(nw, 7), *gb = fill((size_t)n->oc, 8);
        float *y2 = fill(out, 9), *dx2 = fill(in, 10), *gw2 = fill(nw, 11), *gb2 = fill((size_t)n->oc, 12);
        const int first = n->in[0] < 0, has_bias = n->bias;
        /* dtrain's layer */
        dt_node d = *n;
        d.w[0] = w; d.w[1] = bias; d.g[0] = gw; d.g[1] = gb; d.y = y; d.dy = dy; d.relu_out = 0;
        float *work = fill(n->ops->workspace(n, B) + 16, 13);
        dt_pass p = {.batch = B, .train = 1, .x = {x, NULL}, .dx = {first ? NULL : dx, NULL}, .work = work};
        double tf[64], tb[64], df[64], db[64];
        for (int r = -1; r < reps; r++) {
            double t0 = now();
            n->ops->forward(&d, &p);
            double t1 = now();
            n->ops->backward(&d, &p);
            double t2 = now();
            if (r >= 0) { tf[r] = t1 - t0; tb[r] = t2 - t1; }
        }
        /* oneDNN */
        dnnl_dims_t xs = {B, n->ic, n->ih, n->iw}, ys = {B, n->oc, n->oh, n->ow}, ws = {n->oc, n->ic, n->k, n->k},
                    bs = {n->oc}, st = {n->stride, n->stride}, pl = {n->pad, n->pad};
        dnnl_dims_t pr = {(n->oh - 1) * n->stride + n->k - n->ih - n->pad, (n->ow - 1) * n->stride + n->k - n->iw - n->pad};
        dnnl_memory_desc_t xu, yu, wu, bu, xa, ya, wa, ba;
        CHECK(dnnl_memory_desc_init_by_tag(&xu, 4, xs, dnnl_f32, dnnl_nchw));
        CHECK(dnnl_memory_desc_init_by_tag(&yu, 4, ys, dnnl_f32, dnnl_nchw));
        CHECK(dnnl_memory_desc_init_by_tag(&wu, 4, ws, dnnl_f32, dnnl_oihw));
        CHECK(dnnl_memory_desc_init_by_tag(&bu, 1, bs, dnnl_f32, dnnl_x));
        CHECK(dnnl_memory_desc_init_by_tag(&xa, 4, xs, dnnl_f32, dnnl_format_tag_any));
        CHECK(dnnl_memory_desc_init_by_tag(&ya, 4, ys, dnnl_f32, dnnl_format_tag_any));
        CHECK(dnnl_memory_desc_init_by_tag(&wa, 4, ws, dnnl_f32, dnnl_format_tag_any));
        CHECK(dnnl_memory_desc_init_by_tag(&ba, 1, bs, dnnl_f32, dnnl_format_tag_any));
        const dnnl_alg_kind_t alg = getenv("DNNL_ALG_AUTO") ? dnnl_convolution_auto : dnnl_convolution_direct;
        dnnl_convolution_desc_t fd, bdd, bwd;
        CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, alg, &xa, &wa, has_bias ? &ba : NULL, &ya, st, pl, pr));
        CHECK(dnnl_convolution_backward_data_desc_init(&bdd, alg, &xa, &wa, &ya, st, pl, pr));
        CHECK(dnnl_convolution_backward_weights_desc_init(&bwd, alg, &xa, &wa, has_bias ? &ba : NULL, &ya, st, pl, pr));
        dnnl_primitive_desc_t fpd, bdpd, bwpd;
        CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
        CHECK(dnnl_primitive_desc_create(&bdpd, &bdd, NULL, eng, fpd));
        CHECK(dnnl_primitive_desc_create(&bwpd, &bwd, NULL, eng, fpd));
        op F = {0}, BD = {0}, BW = {0};
        CHECK(dnnl_primitive_create(&F.prim, fpd));
        CHECK(dnnl_primitive_create(&BD.prim, bdpd));
        CHECK(dnnl_primitive_create(&BW.prim, bwpd));
        dnnl_memory_t mx = wrap(&xu, x), my = wrap(&yu, y2), mw = wrap(&wu, w), mb = wrap(&bu, bias);
        dnnl_memory_t mdy = wrap(&yu, dy), mdx = wrap(&xu, dx2), mgw = wrap(&wu, gw2), mgb = wrap(&bu, gb2);
        add_arg(&F, fpd, dnnl_query_src_md, 0, DNNL_ARG_SRC, mx, 0);
        add_arg(&F, fpd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, mw, 0);
        if (has_bias) add_arg(&F, fpd, dnnl_query_weights_md, 1, DNNL_ARG_BIAS, mb, 0);
        add_arg(&F, fpd, dnnl_query_dst_md, 0, DNNL_ARG_DST, my, 1);
        add_arg(&BD, bdpd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, mdy, 0);
        add_arg(&BD, bdpd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, mw, 0);
        add_arg(&BD, bdpd, dnnl_query_diff_src_md, 0, DNNL_ARG_DIFF_SRC, mdx, 1);
        add_arg(&BW, bwpd, dnnl_query_src_md, 0, DNNL_ARG_SRC, mx, 0);
        add_arg(&BW, bwpd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, mdy, 0);
        add_arg(&BW, bwpd, dnnl_query_diff_weights_md, 0, DNNL_ARG_DIFF_WEIGHTS, mgw, 1);
        if (has_bias) add_arg(&BW, bwpd, dnnl_query_diff_weights_md, 1, DNNL_ARG_DIFF_BIAS, mgb, 1);
        for (int r = -1; r < reps; r++) {
            double t0 = now();
            run(&F);
            double t1 = now();
            if (!first) run(&BD);
            run(&BW);
            double t2 = now();
            if (r >= 0) { df[r] = t1 - t0; db[r] = t2 - t1; }
        }
        double e = rel_err(y2, y, out);
        const double ew = rel_err(gw2, gw, nw), ex = first ? 0 : rel_err(dx2, dx, in);
        if (ew > e) e = ew;
        if (ex > e) e = ex;
        const double a = median(tf, reps), b = median(tb, reps), c = median(df, reps), dd = median(db, reps);
        tot_dt += a + b;
        tot_dn += c + dd;
        char shape[64];
        snprintf(shape, sizeof shape, "%dx%dx%d k%d s%d >%d", n->ic, n->ih, n->iw, n->k, n->stride, n->oc);
        printf("%-10s %-22s %7.2fms %7.2fms %7.2fms %7.2fms %6.2f  %s / %s / %s; %.1e\n", n->name, shape, a * 1e3, b * 1e3,
               c * 1e3, dd * 1e3, (a + b) / (c + dd), impl(fpd), impl(bdpd), impl(bwpd), e);
        free(x); free(dy); free(w); free(bias); free(y); free(dx); free(gw); free(gb);
        free(y2); free(dx2); free(gw2); free(gb2); free(work);
    }
    printf("total conv: dtrain %.2f ms, oneDNN %.2f ms a step (batch %d): dtrain/oneDNN %.2f\n", tot_dt * 1e3,
           tot_dn * 1e3, B, tot_dt / tot_dn);
    return 0;
}
