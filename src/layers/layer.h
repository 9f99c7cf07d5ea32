/* The layer interface: one file per layer kind behind this small table of functions.
 * A model is a list of nodes in topological order; each node reads one or two earlier
 * nodes (or the model input) and owns its output and output-gradient buffers. */
#ifndef DT_LAYER_H
#define DT_LAYER_H

#include <stdint.h>

#include "dtrain.h"

#define DT_NODE_NAME 40
#define DT_MAX_PTENSORS 2

typedef struct dt_node dt_node;

/* Everything a layer needs for one pass, filled in by the graph. */
typedef struct dt_pass {
    int batch;
    int train;
    const float *x[2];  /* input activations (batch x in-shape) */
    float *dx[2];       /* input gradients, NULL when not needed */
    int dx_acc[2];      /* 1: add into dx (another consumer wrote it first), 0: overwrite */
    float *work;        /* shared scratch of at least ops->workspace() floats */
    dt_rng *rng;        /* dropout randomness */
    int bf16;           /* --precision bf16: x, the GEMM parameters and dy hold bf16 values (in
                         * fp32); a layer may compute in bf16 with fp32 sums (oneDNN's kernels) */
    /* bf16 activations themselves, for a layer whose ops->bf16_io says it takes them: x16
     * instead of x, n->y16 and n->dy16 instead of n->y and n->dy, dx16 instead of dx */
    const uint16_t *x16[2];
    uint16_t *dx16[2];
} dt_pass;

/* A parameter or state tensor a layer declares in setup. */
typedef struct dt_ptensor {
    const char *suffix; /* "weight", "bias", "running_mean", ... */
    int ndim;
    int shape[4];
} dt_ptensor;

typedef struct dt_layer_ops {
    const char *kind;        /* spec keyword: "conv", "linear", ... */
    const char *auto_prefix; /* automatic node names: conv1, conv2, ... */
    int ninputs;             /* 1, or 2 for add */
    /* Checks hyper-parameters against the input shape; sets the output shape, the
     * parameter/state tensors and flops. Returns DT_ERR_ARG with a message on bad values. */
    dt_status (*setup)(dt_node *n);
    /* Initialises parameters (PyTorch defaults) and state. */
    void (*init)(dt_node *n, dt_rng *rng);
    void (*forward)(dt_node *n, const dt_pass *p);
    /* Writes parameter gradients (overwrites) and input gradients (per dx_acc). */
    void (*backward)(dt_node *n, const dt_pass *p);
    /* Floats of shared scratch needed for a batch of this size (may be NULL). */
    size_t (*workspace)(const dt_node *n, int batch);
    /* Bytes of per-node saved data (masks, argmax, statistics) for a batch (may be NULL). */
    size_t (*aux_bytes)(const dt_node *n, int batch);
    /* 1: forward honours node->relu_out (applies ReLU to its output in its own last pass) and
     * backward does not read its own output. */
    int can_fuse_relu;
    /* 1: the parameters are GEMM operands (conv, linear), which --precision bf16 rounds to
     * bf16 as PyTorch's autocast casts them; other layers (batch-norm) keep fp32 parameters. */
    int gemm_params;
    /* What backward does not read (DT_SKIPS_*), so --precision bf16 need not convert it into
     * fp32 for it (models/precision.c passes NULL instead, so a wrong claim fails loudly). */
    int bwd_skips;
    /* A layer that may run on another engine (conv: oneDNN): prepares it for a batch size and
     * precision (at dt_model_reserve, so the steps allocate nothing), names the engine that
     * runs node n ("own", "oneDNN", "oneDNN-bf16"; NULL: nothing to say at this precision) and
     * frees what it made. May be NULL. */
    dt_status (*prepare)(dt_node *n, int batch, int bf16);
    const char *(*engine)(const dt_node *n, int bf16);
    void (*release)(dt_node *n);
    /* 1: at this batch, forward and backward take the bf16 activations as they are stored
     * (dt_pass.x16 ...), without fp32 copies (conv on oneDNN's bf16 kernels). May be NULL. */
    int (*bf16_io)(dt_node *n, int batch);
} dt_layer_ops;

#define DT_SKIPS_X 1 /* backward reads no input activation (p->x) */
#define DT_SKIPS_Y 2 /* backward reads not its own output (n->y) */

struct dt_node {
    const dt_layer_ops *ops;
    char name[DT_NODE_NAME];
    int in[2];             /* producer node indices; -1 is the model input */
    int ic, ih, iw;        /* input shape (of in[0]) */
    int oc, oh, ow;        /* output shape */
    /* hyper-parameters (meaning per layer) */
    int out, k, stride, pad, bias;
    float p, eps, momentum;
    /* tensors declared in setup, and where they live once the model is allocated */
    int nparam, nstate;
    dt_ptensor ptens[DT_MAX_PTENSORS], stens[DT_MAX_PTENSORS];
    float *w[DT_MAX_PTENSORS];  /* parameters */
    float *g[DT_MAX_PTENSORS];  /* their gradients */
    float *s[DT_MAX_PTENSORS];  /* state */
    double flops;          /* forward FLOPs per image */
    /* ReLU fusion, planned by the graph: a producer with relu_out writes ReLU(output) (saves a
     * pass over memory); the relu node after it (relu_fused) then shares that output buffer and
     * skips its forward; its backward is unchanged (it reads y, which is the same). */
    int relu_out, relu_fused;
    /* activations; under bf16 (models/precision.c) they are stored in y16, dy16 and y, dy
     * point at fp32 staging copies while the node runs */
    float *y, *dy;
    uint16_t *y16, *dy16;
    void *aux;
    void *engine; /* the layer's other engine's state (ops->prepare), freed by ops->release */
};

/* The most values one image's activation or one parameter tensor may have: 2^28 floats
 * (1 GiB). Every shape product in the layers fits an int below it. */
#define DT_MAX_VALUES ((size_t)1 << 28)
/* The most parameters a whole model may have: 2^26 (256 MiB of floats; each rank also holds
 * their gradients, momentum and the schemes' copies). Six times resnet18-cifar, the zoo's
 * largest. */
#define DT_MAX_PARAMS ((size_t)1 << 26)

static inline size_t dt_node_in_size(const dt_node *n) { return (size_t)n->ic * n->ih * n->iw; }
static inline size_t dt_node_out_size(const dt_node *n) { return (size_t)n->oc * n->oh * n->ow; }
static inline size_t dt_ptensor_numel(const dt_ptensor *t) {
    size_t k = 1;
    for (int i = 0; i < t->ndim; i++) k *= (size_t)t->shape[i];
    return k;
}

/* Helpers shared by several layers. */
void dt_init_uniform(float *w, size_t n, float bound, dt_rng *rng);
/* Writes or adds (acc) src into dst. */
void dt_store(float *dst, const float *src, size_t n, int acc);

/* The layer table, and lookup by spec keyword. */
extern const dt_layer_ops dt_layer_conv, dt_layer_linear, dt_layer_maxpool, dt_layer_avgpool,
    dt_layer_gavgpool, dt_layer_relu, dt_layer_dropout, dt_layer_dropout2d, dt_layer_batchnorm,
    dt_layer_add, dt_layer_flatten;
const dt_layer_ops *dt_layer_find(const char *kind);
/* "conv, linear, ..." for error messages. */
const char *dt_layer_kinds(void);
/* The kernels' tier the layers run here: "avx512", "avx2" or "portable" (src/layers/cpu.c). */
const char *dt_layer_kernels(void);

#endif
