/* What dtrain's oneDNN layers share (built with DTRAIN_WITH_DNNL): the CPU engine, one
 * primitive with the reorders between the caller's plain memories and oneDNN's own layouts
 * around it (an "op"), one arena for every op's own memories and scratchpad, and the plans a
 * node keeps per batch size and mode (n->engine). */
#ifndef DT_LAYERS_DNNL_OP_H
#define DT_LAYERS_DNNL_OP_H

#include <oneapi/dnnl/dnnl.h>

#include "layers/layer.h"

#define DT_DNNL_MAX_ARGS 5

typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t scratch;
    int n, arg[DT_DNNL_MAX_ARGS], is_out[DT_DNNL_MAX_ARGS];
    dnnl_memory_t user[DT_DNNL_MAX_ARGS], inner[DT_DNNL_MAX_ARGS]; /* inner NULL: the user's is used */
    dnnl_primitive_t to_inner[DT_DNNL_MAX_ARGS], to_user[DT_DNNL_MAX_ARGS];
    dnnl_primitive_t add_to_user[DT_DNNL_MAX_ARGS]; /* to_user that adds (a dX another consumer wrote) */
    size_t add_same[DT_DNNL_MAX_ARGS]; /* values, when oneDNN's layout is the user's and an output that
                                          can be added to goes to the inner memory only to be added */
    dnnl_dims_t unblock[DT_DNNL_MAX_ARGS]; /* dims when to_user is unblock_16x16's, not oneDNN's reorder */
    dnnl_dims_t act16[DT_DNNL_MAX_ARGS];   /* dims when the reorder is activation_16c's */
    dnnl_dims_t nhwc[DT_DNNL_MAX_ARGS];    /* dims when it is transpose_nhwc's */
    int esize[DT_DNNL_MAX_ARGS];           /* its bytes per value */
    size_t at[DT_DNNL_MAX_ARGS + 1], bytes; /* where its own memories and scratchpad lie in the arena */
} dt_dnnl_op;

/* goto fail, with dt_last_error naming the call, when a oneDNN call fails */
#define DT_DNNL_TRY(call)                                                                             \
    do {                                                                                              \
        const dnnl_status_t s_ = (call);                                                              \
        if (s_ != dnnl_success) {                                                                     \
            dt_fail(DT_ERR_STATE, "oneDNN: %s failed (status %d)", #call, (int)s_);                 \
            goto fail;                                                                                \
        }                                                                                             \
    } while (0)

/* The CPU engine (made once); NULL, with dt_last_error set, when oneDNN has none. */
dnnl_engine_t dt_dnnl_engine(void);
/* 1 when this CPU gives oneDNN bf16 arithmetic (AVX512_BF16 or AMX; ONEDNN_MAX_CPU_ISA may
 * lower what it uses), not its emulation on plain AVX-512 or none at all. */
int dt_dnnl_bf16_hw(void);
/* 1 when oneDNN has its fp32 Winograd F(4x4, 3x3) here (2.6: AVX-512, avx512_core) */
int dt_dnnl_winograd_hw(void);
/* "jit:avx512_core" ...: the implementation oneDNN chose */
const char *dt_dnnl_impl(const_dnnl_primitive_desc_t pd);

/* Makes o's primitive (and its scratchpad) from pd, then, per argument, the user's memory
 * and, where pd wants another layout or type, an inner memory and the reorder to it (inputs)
 * or from it (is_out; can_add: also one that adds to the user's, and, where the layouts are
 * the same, an inner memory used only when adding). Then dt_dnnl_op_fit. */
dnnl_status_t dt_dnnl_op_make(dt_dnnl_op *o, const_dnnl_primitive_desc_t pd);
dnnl_status_t dt_dnnl_op_arg(dt_dnnl_op *o, const_dnnl_primitive_desc_t pd, dnnl_query_t q, int idx, int arg,
                             dnnl_memory_t user, int is_out, int can_add);
/* The shared arena grown to what o needs; 0 when it cannot be. */
int dt_dnnl_op_fit(const dt_dnnl_op *o);
/* Reorders in, runs, reorders out (add: the outputs that can be added to are); one op at a
 * time in the process, on one OpenMP thread. */
dnnl_status_t dt_dnnl_op_run(dt_dnnl_op *o, int add);
/* Runs a (add as above), then b, whose first argument is a's first, in the same layout at the
 * same place (dt_dnnl_op_shares_first): b finds it there, reordered once. */
dnnl_status_t dt_dnnl_op_run_pair(dt_dnnl_op *a, int add, dt_dnnl_op *b);
/* Do a and b take their first argument from the same user memory into the same inner layout
 * at the same place of the arena (or both straight from the user's)? */
int dt_dnnl_op_shares_first(const dt_dnnl_op *a, const dt_dnnl_op *b);
void dt_dnnl_op_free(dt_dnnl_op *o);
/* What a plan may choose for a layer whose one other kernel is oneDNN's bf16 (linear layers,
 * attention): its own and that one, under bf16 where the CPU has bf16 arithmetic; else 0 */
unsigned dt_dnnl_bf16_kernels(int bf16);
/* m's handle set to v (oneDNN takes its handles as void *: an input is only read) */
static inline dnnl_status_t dt_dnnl_set(dnnl_memory_t m, const float *v) { return dnnl_memory_set_data_handle(m, (void *)v); }
/* o as a matmul src x weights (+ bias) -> dst, its descriptors src and wei (bf16 "any": oneDNN's
 * layout, reordered into from the user's), dst the user's own, scales and post-ops from attr;
 * bound to the user's memories (ubias NULL: none); its implementation's name appended to impl.
 * After dt_dnnl_engine. */
dnnl_status_t dt_dnnl_matmul(dt_dnnl_op *o, const_dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *src,
                             dnnl_memory_t usrc, const dnnl_memory_desc_t *wei, dnnl_memory_t uwei, dnnl_memory_t ubias,
                             dnnl_memory_t udst, char *impl, size_t cap);

/* A node's plan at this batch and mode, made by make on first use and kept in n->engine (at
 * most 8: another batch size gets NULL: the layer's own path). A NULL make result is kept
 * too (and said once), so a plan oneDNN cannot make is not tried at every step. */
void *dt_dnnl_node_plan(dt_node *n, int batch, int mode, void *(*make)(const dt_node *n, int batch, int mode));
/* Frees node n's plans with free_plan (with its model); the arena goes with the last plan. */
void dt_dnnl_node_release(dt_node *n, void (*free_plan)(void *plan));

#endif
