/* The layer interface: one file per layer kind behind this small table of functions.
 * A model is a list of nodes in topological order; each node reads one or two earlier
 * nodes (or the model input) and owns its output and output-gradient buffers.
 *
 * An activation is an image (C x H x W per example, channel-major) or a SEQUENCE of T
 * positions of C features: oc = C, oh = T, ow = 1, stored position-major ([T][C] per example),
 * dt_node.seq = 1. A layer learns whether its input is one from dt_node.iseq (the graph fills
 * it from the producer or the model input) and says in dt_layer_ops.seq what it takes. */
#ifndef DT_LAYER_H
#define DT_LAYER_H

#include <stdint.h>

#include "dtrain.h"

#define DT_NODE_NAME 56 /* names of at most 39 characters (spec.c), so NAME.running_mean fits a view */
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
    /* The kernels a plan may choose for node n at this precision here (a mask of
     * 1 << DT_KERNEL_*; 0 or NULL: nothing to choose). models/plan.c times each. */
    unsigned (*kernels)(const dt_node *n, int bf16);
    /* What the layer takes (DT_SEQ_*): the graph refuses a sequence to an image-only layer
     * (conv, pooling, batch-norm: their channel-major loops would read [T][C] wrongly) and an
     * image to a sequence-only one, in one line naming the layer. */
    int seq;
    /* 1: reads the model input as token ids (embed): under --precision bf16 the input is handed
     * over as it is, not rounded to bf16 (which holds integers exactly only up to 256). */
    int ids_input;
} dt_layer_ops;

/* A node's kernel, as a plan (models/plan.h) chose it; DT_KERNEL_RULE: the layer's own rule
 * of the shape and the instruction set. Under --precision bf16, OWN and ONEDNN compute in fp32
 * on fp32 copies of the stored bf16 values (with bf16-rounded weights: the same products);
 * ONEDNN_BF16 multiplies bf16 values in oneDNN's bf16 kernels. For a 3x3 stride-1 conv, OWN is
 * im2col + GEMM (DTRAIN_WINOGRAD=1: Winograd) and OWN_WINOGRAD dtrain's Winograd F(2x2, 3x3);
 * ONEDNN is oneDNN's Winograd F(4x4, 3x3) where it has one, ONEDNN_DIRECT its direct
 * convolution. OWN_AVX2: OWN on dtrain's AVX2 kernels where the CPU's tier is AVX-512 (CPUs that
 * run AVX-512 at half width or a lower clock). The order is the tie's: a kernel wins a tie
 * against every later one. */
enum {
    DT_KERNEL_RULE = 0, DT_KERNEL_OWN = 1, DT_KERNEL_ONEDNN = 2, DT_KERNEL_ONEDNN_BF16 = 3, DT_KERNEL_OWN_WINOGRAD = 4,
    DT_KERNEL_ONEDNN_DIRECT = 5, DT_KERNEL_OWN_AVX2 = 6, DT_KERNEL_COUNT = 7
};
const char *dt_kernel_name(int kernel);
/* DT_KERNEL_* of a name, -1 if none */
int dt_kernel_parse(const char *name);

#define DT_SEQ_NO 0   /* images only (the default) */
#define DT_SEQ_ANY 1  /* either; a sequence stays one unless setup says otherwise (flatten) */
#define DT_SEQ_ONLY 2 /* sequences only (attention, position embedding, embed) */

#define DT_SKIPS_X 1 /* backward reads no input activation (p->x) */
#define DT_SKIPS_Y 2 /* backward reads not its own output (n->y) */

struct dt_node {
    const dt_layer_ops *ops;
    char name[DT_NODE_NAME];
    int in[2];             /* producer node indices; -1 is the model input */
    int ic, ih, iw;        /* input shape (of in[0]) */
    int oc, oh, ow;        /* output shape */
    int iseq, seq;         /* 1: the input (in[0]) / the output is a sequence (ih, oh positions) */
    /* hyper-parameters (meaning per layer) */
    int out, k, stride, pad, bias;
    int heads, vocab;      /* attention heads=, embed vocab= */
    float p, eps, momentum;
    float std;             /* std=: weights drawn from N(0, std^2), biases 0; 0: PyTorch's default */
    /* linear tie=NAME: 1 + the index of the embed node whose weight this layer uses as its own
     * weight (ptens[0] then names no tensor of the buffer: w[0], g[0] are the embed's); 0: none */
    int tie;
    /* 1: a later layer shares this node's weight (tie) and, backward running from the last node,
     * writes its gradient first: this node's backward adds to g[0] instead of overwriting it */
    int gacc;
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
    int kernel;   /* DT_KERNEL_*: which kernel runs this node (a plan's choice; 0: the rule) */
};

/* The most values one image's activation or one parameter tensor may have: 2^28 floats
 * (1 GiB). Every shape product in the layers fits an int below it. */
#define DT_MAX_VALUES ((size_t)1 << 28)
/* The most parameters a whole model may have: 2^26 (256 MiB of floats; each rank also holds
 * their gradients, momentum and the schemes' copies). Six times resnet18-cifar, the zoo's
 * largest. */
#define DT_MAX_PARAMS ((size_t)1 << 26)

static inline size_t dt_node_in_size(const dt_node *n) { return (size_t)n->ic * n->ih * n->iw; }
/* Does node n own parameter tensor t (in the model's buffer), or is it a tied weight? */
static inline int dt_node_owns(const dt_node *n, int t) { return !(t == 0 && n->tie); }
/* A layer that works per position (linear, layer norm): rows of features per example (the
 * positions of a sequence, else 1) and features per row (C of a sequence, else everything). */
static inline int dt_node_rows(const dt_node *n) { return n->iseq ? n->ih : 1; }
static inline int dt_node_row_len(const dt_node *n) { return n->iseq ? n->ic : (int)dt_node_in_size(n); }
static inline size_t dt_node_out_size(const dt_node *n) { return (size_t)n->oc * n->oh * n->ow; }
static inline size_t dt_ptensor_numel(const dt_ptensor *t) {
    size_t k = 1;
    for (int i = 0; i < t->ndim; i++) k *= (size_t)t->shape[i];
    return k;
}

/* Helpers shared by several layers. */
void dt_init_uniform(float *w, size_t n, float bound, dt_rng *rng);
/* N(0, std^2) draws (Box-Muller on the same stream), as nanoGPT's normal_(0, 0.02) */
void dt_init_normal(float *w, size_t n, float std, dt_rng *rng);
/* Writes or adds (acc) src into dst. */
void dt_store(float *dst, const float *src, size_t n, int acc);

/* The layer table, and lookup by spec keyword. */
extern const dt_layer_ops dt_layer_conv, dt_layer_linear, dt_layer_maxpool, dt_layer_avgpool,
    dt_layer_gavgpool, dt_layer_relu, dt_layer_dropout, dt_layer_dropout2d, dt_layer_batchnorm,
    dt_layer_add, dt_layer_flatten, dt_layer_embed, dt_layer_posembed, dt_layer_layernorm, dt_layer_attention,
    dt_layer_gelu;
const dt_layer_ops *dt_layer_find(const char *kind);
/* "conv, linear, ..." for error messages. */
const char *dt_layer_kinds(void);
/* The kernels' tier the layers run here: "avx512", "avx2" or "portable" (src/layers/cpu.c). */
const char *dt_layer_kernels(void);

#endif
