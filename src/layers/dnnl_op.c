/* What dtrain's oneDNN layers share (dnnl_op.h): the engine, ops with their reorders, the
 * arena, nodes' plans. */
#include "layers/dnnl_op.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16.h"
#include "layers/bf16_array.h"
#include "layers/transpose.h"

/* oneDNN in Debian runs on OpenMP: one thread per rank, as OpenBLAS (libgomp is oneDNN's own
 * dependency; its header is not in libdnnl-dev's, so the one call is declared here) */
void omp_set_num_threads(int);

#define MAX_ARGS DT_DNNL_MAX_ARGS
typedef dt_dnnl_op op;

/* One primitive runs at a time, and nothing of it is kept between runs (its inputs are
 * reordered in and its outputs out every time), so every plan's own memories and scratchpads
 * share one arena, as large as the largest op needs: grown while plans are made (when a model
 * is reserved), never while they run. */
static char *arena;
static size_t arena_bytes;
static int live_plans; /* the arena is freed with the last */
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER; /* the arena, live_plans, a run */
#define ALIGN(b) (((b) + 63) & ~(size_t)63)

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static dnnl_status_t engine_status = dnnl_runtime_error;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void make_engine(void) {
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (engine_status == dnnl_success) engine_status = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
}

dnnl_engine_t dt_dnnl_engine(void) {
    pthread_once(&engine_once, make_engine);
    if (engine_status == dnnl_success) return engine;
    dt_fail(DT_ERR_STATE, "oneDNN: no CPU engine (status %d)", (int)engine_status);
    return NULL;
}

int dt_dnnl_bf16_hw(void) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), bf16 = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    return (isa & bf16) == bf16;
}

int dt_dnnl_winograd_hw(void) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), avx512 = (unsigned)dnnl_cpu_isa_avx512_core;
    return (isa & avx512) == avx512;
}

const char *dt_dnnl_impl(const_dnnl_primitive_desc_t pd) {
    const char *s = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return s;
}

/* Is md the fp32 weight layout oneDNN's AVX-512 convolutions keep weight gradients in,
 * OIhw16i16o ("ABcd16b16a": 16x16 blocks of output x input channels, input channel outer),
 * with its blocks in order and no offset? Its reorder to OIHW (oneDNN 2.6's jit:uni) ran at
 * ~1 GB/s here, 8 ms a step for resnet18-cifar's 512x512x3x3 layer: unblock_16x16 instead. */
static int is_oi16i16o(const dnnl_memory_desc_t *md) {
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (md->ndims != 4 || md->data_type != dnnl_f32 || md->format_kind != dnnl_blocked || md->offset0 != 0 ||
        b->inner_nblks != 2 || b->inner_blks[0] != 16 || b->inner_blks[1] != 16 || b->inner_idxs[0] != 1 ||
        b->inner_idxs[1] != 0)
        return 0;
    const dnnl_dim_t kk = md->padded_dims[2] * md->padded_dims[3];
    return b->strides[3] == 256 && b->strides[2] == 256 * md->padded_dims[3] && b->strides[1] == 256 * kk &&
           b->strides[0] == 256 * kk * (md->padded_dims[1] / 16);
}

/* OIhw16i16o (padded to 16) to OIHW: for each output channel, its rows are read from the blocks
 * of one 16-channel group (in cache), written in order. */
static void unblock_16x16(const float *src, float *dst, const dnnl_dims_t d) {
    const dnnl_dim_t O = d[0], I = d[1], kk = d[2] * d[3], IB = (I + 15) / 16;
    for (dnnl_dim_t o = 0; o < O; o++) {
        const float *blk = src + (size_t)(o / 16) * IB * kk * 256 + o % 16;
        for (dnnl_dim_t i = 0; i < I; i++) {
            const float *from = blk + (size_t)(i / 16) * kk * 256 + (i % 16) * 16;
            for (dnnl_dim_t k = 0; k < kk; k++) *dst++ = from[k * 256];
        }
    }
}

/* Is md an activation layout nChw16c ("aBcd16b": channels in blocks of 16, innermost) with its
 * blocks in order, of the same type as the user's plain one? oneDNN 2.6's reorders between
 * it and NCHW ran at ~1.5 GB/s here (57 ms of a 450 ms resnet18-cifar bf16 step): activation_16c
 * instead. */
static int is_nchw16c(const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *user) {
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking, *u = &user->format_desc.blocking;
    if (md->ndims != 4 || md->data_type != user->data_type || md->format_kind != dnnl_blocked || md->offset0 != 0 ||
        b->inner_nblks != 1 || b->inner_blks[0] != 16 || b->inner_idxs[0] != 1 || user->format_kind != dnnl_blocked ||
        u->inner_nblks != 0 || user->offset0 != 0)
        return 0;
    const dnnl_dim_t hw = md->dims[2] * md->dims[3];
    return b->strides[3] == 16 && b->strides[2] == 16 * md->dims[3] && b->strides[1] == 16 * hw &&
           b->strides[0] == 16 * hw * (md->padded_dims[1] / 16) && u->strides[3] == 1 && u->strides[1] == hw &&
           u->strides[0] == hw * md->dims[1];
}

/* Is md the channels-last activation layout nhwc ("acdb", AMX's convolutions' choice), dense,
 * of the same type as the user's plain NCHW one? oneDNN 2.6's reorders between the two ran at
 * ~2 GB/s here (63 ms of a 474 ms resnet18-cifar bf16 step on AMX): transpose_nhwc instead. */
static int is_nhwc(const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *user) {
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking, *u = &user->format_desc.blocking;
    if (md->ndims != 4 || md->data_type != user->data_type || md->format_kind != dnnl_blocked || md->offset0 != 0 ||
        b->inner_nblks != 0 || user->format_kind != dnnl_blocked || u->inner_nblks != 0 || user->offset0 != 0 ||
        md->padded_dims[1] != md->dims[1])
        return 0;
    const dnnl_dim_t C = md->dims[1], H = md->dims[2], W = md->dims[3];
    return b->strides[1] == 1 && b->strides[3] == C && b->strides[2] == C * W && b->strides[0] == C * H * W &&
           u->strides[3] == 1 && u->strides[2] == W && u->strides[1] == H * W && u->strides[0] == C * H * W;
}

/* Per image, the C x HW matrix NCHW holds <-> the HW x C one nhwc holds. add (to NCHW only):
 * plain += nhwc (bf16: summed in fp32, rounded once). */
static void transpose_nhwc(char *plain, char *last, const dnnl_dims_t d, int size, int to_last, int add) {
    const size_t C = (size_t)d[1], HW = (size_t)(d[2] * d[3]), img = C * HW * (size_t)size;
    for (size_t n = 0; n < (size_t)d[0]; n++)
        if (to_last) dt_transpose(last + n * img, C, plain + n * img, HW, C, HW, size, 0);
        else dt_transpose(plain + n * img, HW, last + n * img, C, HW, C, size, add);
}

/* NCHW <-> nChw16c, values of size bytes (2: bf16, 4: fp32); a channel block's values stay in
 * cache while its 16 planes are read or written. The padding channels of a block are zero (as
 * oneDNN's reorder leaves them: they meet zero weights, and garbage could be NaN). add (out
 * only): plain += blocked (bf16: summed in fp32, rounded once, as dt_bf16_store_add). */
static void activation_16c(const char *src, char *dst, const dnnl_dims_t d, int size, int to_blocked, int add) {
    const size_t C = (size_t)d[1], hw = (size_t)(d[2] * d[3]), CB = (C + 15) / 16;
    for (size_t n = 0; n < (size_t)d[0]; n++)
        for (size_t cb = 0; cb < CB; cb++) {
            const size_t blk = ((n * CB + cb) * hw) * 16, plane0 = (n * C + cb * 16) * hw;
            const size_t valid = C - cb * 16 < 16 ? C - cb * 16 : 16;
            if (!to_blocked) {
                dt_transpose(dst + plane0 * size, hw, src + blk * size, 16, hw, valid, size, add);
                continue;
            }
            dt_transpose(dst + blk * size, 16, src + plane0 * size, hw, valid, hw, size, 0);
            for (size_t i = 0; valid < 16 && i < hw; i++) memset(dst + (blk + i * 16 + valid) * size, 0, (16 - valid) * size);
        }
}

/* to += from, n values (bf16: summed in fp32, rounded once: the layers' gradient add) */
static void add_values(char *to, const char *from, size_t n, int size) {
    if (size == 4)
        for (size_t i = 0; i < n; i++) ((float *)to)[i] += ((const float *)from)[i];
    else
        dt_bf16_pass_grad((uint16_t *)to, (const uint16_t *)from, n, 1);
}

dnnl_status_t dt_dnnl_op_arg(op *o, const_dnnl_primitive_desc_t pd, dnnl_query_t q, int idx, int arg,
                             dnnl_memory_t user, int is_out, int can_add) {
    const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, q, idx), *have;
    dnnl_status_t s = dnnl_memory_get_memory_desc(user, &have);
    if (s != dnnl_success) return s;
    const int k = o->n++;
    o->arg[k] = arg;
    o->user[k] = user;
    o->is_out[k] = is_out;
    const int same = dnnl_memory_desc_equal(want, have);
    if (same && !(is_out && can_add)) return dnnl_success;
    if (is_out && !can_add && is_oi16i16o(want) && have->data_type == dnnl_f32 && have->format_kind == dnnl_blocked &&
        have->format_desc.blocking.inner_nblks == 0)
        memcpy(o->unblock[k], want->dims, sizeof o->unblock[k]);
    if (is_nchw16c(want, have)) {
        memcpy(o->act16[k], want->dims, sizeof o->act16[k]);
        o->esize[k] = want->data_type == dnnl_bf16 ? 2 : 4;
    }
    if (is_nhwc(want, have)) {
        memcpy(o->nhwc[k], want->dims, sizeof o->nhwc[k]);
        o->esize[k] = want->data_type == dnnl_bf16 ? 2 : 4;
    }
    o->at[k] = o->bytes;
    o->bytes += ALIGN(dnnl_memory_desc_get_size(want));
    s = dnnl_memory_create(&o->inner[k], want, engine, DNNL_MEMORY_NONE);
    if (same) { /* written straight to the user's unless added to it: add_values then */
        o->add_same[k] = (size_t)dnnl_memory_desc_get_size(want) / (want->data_type == dnnl_bf16 ? 2 : 4);
        o->esize[k] = want->data_type == dnnl_bf16 ? 2 : 4;
        return s;
    }
    dnnl_primitive_desc_t rpd = NULL;
    if (s == dnnl_success)
        s = is_out ? dnnl_reorder_primitive_desc_create(&rpd, want, engine, have, engine, NULL)
                   : dnnl_reorder_primitive_desc_create(&rpd, have, engine, want, engine, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(is_out ? &o->to_user[k] : &o->to_inner[k], rpd);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    rpd = NULL;
    if (s == dnnl_success && can_add) { /* user = user + inner, summed in fp32, as dt_bf16_store_add */
        dnnl_primitive_attr_t attr = NULL;
        dnnl_post_ops_t sum = NULL;
        s = dnnl_primitive_attr_create(&attr);
        if (s == dnnl_success) s = dnnl_post_ops_create(&sum);
        if (s == dnnl_success) s = dnnl_post_ops_append_sum(sum, 1.0f);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, sum);
        if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&rpd, want, engine, have, engine, attr);
        if (s == dnnl_success) s = dnnl_primitive_create(&o->add_to_user[k], rpd);
        if (rpd) dnnl_primitive_desc_destroy(rpd);
        if (sum) dnnl_post_ops_destroy(sum);
        if (attr) dnnl_primitive_attr_destroy(attr);
    }
    return s;
}

/* The primitive and its scratchpad (user mode: allocated here, once). */
dnnl_status_t dt_dnnl_op_make(op *o, const_dnnl_primitive_desc_t pd) {
    dnnl_status_t s = dnnl_primitive_create(&o->prim, pd);
    const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (s == dnnl_success && sm && dnnl_memory_desc_get_size(sm) > 0) {
        o->at[MAX_ARGS] = o->bytes;
        o->bytes += ALIGN(dnnl_memory_desc_get_size(sm));
        s = dnnl_memory_create(&o->scratch, sm, engine, DNNL_MEMORY_NONE);
    }
    return s;
}

/* The arena as large as op o needs (while plans are made). */
int dt_dnnl_op_fit(const op *o) {
    pthread_mutex_lock(&arena_lock);
    char *a = o->bytes <= arena_bytes ? arena : aligned_alloc(64, o->bytes);
    if (a && a != arena) {
        free(arena);
        arena = a;
        arena_bytes = o->bytes;
    }
    pthread_mutex_unlock(&arena_lock);
    return a != NULL;
}

static dnnl_status_t run_locked(op *o, int add, int reuse_first);

dnnl_status_t dt_dnnl_op_run(op *o, int add) {
    omp_set_num_threads(1); /* per calling thread in OpenMP: set by the thread that runs it */
    pthread_mutex_lock(&arena_lock);
    const dnnl_status_t s = run_locked(o, add, 0);
    pthread_mutex_unlock(&arena_lock);
    return s;
}

dnnl_status_t dt_dnnl_op_run_pair(op *a, int add, op *b) {
    omp_set_num_threads(1);
    pthread_mutex_lock(&arena_lock);
    dnnl_status_t s = run_locked(a, add, 0);
    if (s == dnnl_success) s = run_locked(b, 0, 1);
    pthread_mutex_unlock(&arena_lock);
    return s;
}

/* reuse_first: the first argument's inner memory already holds it (dt_dnnl_op_run_pair) */
static dnnl_status_t run_locked(op *o, int add, int reuse_first) {
    dnnl_exec_arg_t a[MAX_ARGS + 1];
    dnnl_status_t s = dnnl_success;
    for (int k = 0; k < o->n && s == dnnl_success; k++)
        if (o->inner[k]) s = dnnl_memory_set_data_handle(o->inner[k], arena + o->at[k]);
    if (s == dnnl_success && o->scratch) s = dnnl_memory_set_data_handle(o->scratch, arena + o->at[MAX_ARGS]);
    for (int k = 0; k < o->n && s == dnnl_success; k++) {
        if (k == 0 && reuse_first) {
        } else if (o->act16[k][0] && o->to_inner[k]) {
            void *user = NULL;
            s = dnnl_memory_get_data_handle(o->user[k], &user);
            if (s == dnnl_success) activation_16c(user, arena + o->at[k], o->act16[k], o->esize[k], 1, 0);
        } else if (o->nhwc[k][0] && o->to_inner[k]) {
            void *user = NULL;
            s = dnnl_memory_get_data_handle(o->user[k], &user);
            if (s == dnnl_success) transpose_nhwc(user, arena + o->at[k], o->nhwc[k], o->esize[k], 1, 0);
        } else if (o->to_inner[k]) {
            dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, o->user[k]}, {DNNL_ARG_TO, o->inner[k]}};
            s = dnnl_primitive_execute(o->to_inner[k], stream, 2, r);
        }
        const int inner = o->inner[k] && !(o->add_same[k] && !add);
        a[k] = (dnnl_exec_arg_t){o->arg[k], inner ? o->inner[k] : o->user[k]};
    }
    int na = o->n;
    if (o->scratch) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, o->scratch};
    if (s == dnnl_success) s = dnnl_primitive_execute(o->prim, stream, na, a);
    for (int k = 0; k < o->n && s == dnnl_success; k++)
        if (o->unblock[k][0]) {
            void *user = NULL;
            s = dnnl_memory_get_data_handle(o->user[k], &user);
            if (s == dnnl_success) unblock_16x16((const float *)(arena + o->at[k]), user, o->unblock[k]);
        } else if (o->add_same[k]) {
            void *user = NULL;
            if (add) s = dnnl_memory_get_data_handle(o->user[k], &user);
            if (add && s == dnnl_success) add_values(user, arena + o->at[k], o->add_same[k], o->esize[k]);
        } else if (o->act16[k][0] && o->to_user[k]) {
            void *user = NULL;
            s = dnnl_memory_get_data_handle(o->user[k], &user);
            if (s == dnnl_success)
                activation_16c(arena + o->at[k], user, o->act16[k], o->esize[k], 0, add && o->add_to_user[k]);
        } else if (o->nhwc[k][0] && o->to_user[k]) {
            void *user = NULL;
            s = dnnl_memory_get_data_handle(o->user[k], &user);
            if (s == dnnl_success)
                transpose_nhwc(user, arena + o->at[k], o->nhwc[k], o->esize[k], 0, add && o->add_to_user[k]);
        } else if (o->to_user[k]) {
            dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, o->inner[k]}, {DNNL_ARG_TO, o->user[k]}};
            s = dnnl_primitive_execute(add && o->add_to_user[k] ? o->add_to_user[k] : o->to_user[k], stream, 2, r);
        }
    return s == dnnl_success ? dnnl_stream_wait(stream) : s;
}

int dt_dnnl_op_shares_first(const op *a, const op *b) {
    if (a->n < 1 || b->n < 1 || a->user[0] != b->user[0] || !a->inner[0] != !b->inner[0]) return 0;
    if (!a->inner[0]) return 1;
    const dnnl_memory_desc_t *da, *db;
    if (dnnl_memory_get_memory_desc(a->inner[0], &da) != dnnl_success ||
        dnnl_memory_get_memory_desc(b->inner[0], &db) != dnnl_success)
        return 0;
    return a->at[0] == 0 && b->at[0] == 0 && dnnl_memory_desc_equal(da, db);
}

void dt_dnnl_op_free(op *o) {
    for (int k = 0; k < o->n; k++) {
        if (o->inner[k]) dnnl_memory_destroy(o->inner[k]);
        if (o->to_inner[k]) dnnl_primitive_destroy(o->to_inner[k]);
        if (o->to_user[k]) dnnl_primitive_destroy(o->to_user[k]);
        if (o->add_to_user[k]) dnnl_primitive_destroy(o->add_to_user[k]);
    }
    if (o->scratch) dnnl_memory_destroy(o->scratch);
    if (o->prim) dnnl_primitive_destroy(o->prim);
}


/* A node's plans, one per batch size and mode it ran at (training, the last partial batch,
 * evaluation): n->engine. */
unsigned dt_dnnl_bf16_kernels(int bf16) {
    return bf16 && dt_dnnl_bf16_hw() && dt_dnnl_engine() ? 1u << DT_KERNEL_OWN | 1u << DT_KERNEL_ONEDNN_BF16 : 0;
}

/* (the engine: the caller has had dt_dnnl_engine make it) */
dnnl_status_t dt_dnnl_matmul(op *o, const_dnnl_primitive_attr_t attr,
                            const dnnl_memory_desc_t *src, dnnl_memory_t usrc, const dnnl_memory_desc_t *wei,
                            dnnl_memory_t uwei, dnnl_memory_t ubias, dnnl_memory_t udst, char *impl, size_t cap) {
    const dnnl_memory_desc_t *bias = NULL, *dst;
    dnnl_status_t s = dnnl_memory_get_memory_desc(udst, &dst);
    if (s == dnnl_success && ubias) s = dnnl_memory_get_memory_desc(ubias, &bias);
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success) s = dnnl_matmul_desc_init(&md, src, wei, bias, dst);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL);
    if (s == dnnl_success) s = dt_dnnl_op_make(o, pd);
    if (s == dnnl_success) s = dt_dnnl_op_arg(o, pd, dnnl_query_src_md, 0, DNNL_ARG_SRC, usrc, 0, 0);
    if (s == dnnl_success) s = dt_dnnl_op_arg(o, pd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, uwei, 0, 0);
    if (s == dnnl_success && ubias) s = dt_dnnl_op_arg(o, pd, dnnl_query_weights_md, 1, DNNL_ARG_BIAS, ubias, 0, 0);
    if (s == dnnl_success) s = dt_dnnl_op_arg(o, pd, dnnl_query_dst_md, 0, DNNL_ARG_DST, udst, 1, 0);
    if (s == dnnl_success && !dt_dnnl_op_fit(o)) s = dnnl_out_of_memory;
    if (s == dnnl_success) snprintf(impl + strlen(impl), cap - strlen(impl), "%s%s", *impl ? " / " : "", dt_dnnl_impl(pd));
    if (pd) dnnl_primitive_desc_destroy(pd);
    return s;
}

#define NODE_PLANS 8
typedef struct {
    int count;
    struct {
        int batch, mode;
        void *plan; /* NULL: oneDNN could not make it (said once); the layer's own path runs */
    } at[NODE_PLANS];
} node_plans;

void *dt_dnnl_node_plan(dt_node *n, int batch, int mode, void *(*make)(const dt_node *n, int batch, int mode)) {
    node_plans *ps = n->engine;
    if (!ps) {
        if (!(ps = calloc(1, sizeof *ps))) return NULL;
        n->engine = ps;
    }
    for (int i = 0; i < ps->count; i++)
        if (ps->at[i].batch == batch && ps->at[i].mode == mode) return ps->at[i].plan;
    if (ps->count == NODE_PLANS) return NULL; /* a ninth batch size: the own path for it */
    void *p = make(n, batch, mode);
    static int said;
    if (!p && !said++)
        fprintf(stderr, "dtrain: warning: %s: %s; dtrain's own kernels instead\n", n->name, dt_last_error());
    pthread_mutex_lock(&arena_lock);
    if (p) live_plans++;
    pthread_mutex_unlock(&arena_lock);
    ps->at[ps->count].batch = batch;
    ps->at[ps->count].mode = mode;
    ps->at[ps->count++].plan = p;
    return p;
}

void dt_dnnl_node_release(dt_node *n, void (*free_plan)(void *plan)) {
    node_plans *ps = n->engine;
    if (!ps) return;
    int freed = 0;
    for (int i = 0; i < ps->count; i++)
        if (ps->at[i].plan) {
            free_plan(ps->at[i].plan);
            freed++;
        }
    free(ps);
    n->engine = NULL;
    pthread_mutex_lock(&arena_lock);
    live_plans -= freed;
    if (live_plans == 0) {
        free(arena);
        arena = NULL;
        arena_bytes = 0;
    }
    pthread_mutex_unlock(&arena_lock);
}
