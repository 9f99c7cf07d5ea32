/* Inside a model: nodes in topological order, one parameter buffer, one gradient buffer, one
 * state buffer, named views into them, the activations and, under bf16, the staging buffers.
 * What the model's files see of it (model.c builds and runs it, precision.c runs its bf16
 * pass, weights.c and spec.c read and write it); everyone else holds a dt_model pointer. */
#ifndef DT_MODEL_STRUCT_H
#define DT_MODEL_STRUCT_H

#include "layers/layer.h"

/* bf16 staging: at most 2 inputs, output, output gradient, 2 input gradients */
#define DT_STAGE_SLOTS 6

struct dt_model {
    dt_node *nodes;
    int nn;
    int in_c, in_h, in_w;
    int in_seq;             /* 1: the input is a sequence (input seq=T): in_h positions of in_c */
    float *params, *grads, *state;
    size_t np, ns;
    dt_tensor_view *views, *sviews;
    int nviews, nsviews;
    /* per-node backward plan: does the gradient of input j accumulate? */
    int (*dx_acc)[2];
    /* activations */
    int max_batch, batch, last_train;
    float *work;
    size_t work_floats;
    void *act_block;        /* all y, dy and aux buffers */
    const float *input;
    const float *logits;    /* of the last forward: the last node's y, or bf16's fp32 copy */
    uint16_t *targets;      /* max_batch x positions: the uint8 labels widened (dt_model_backward) */
    /* precision (dtrain.h: dt_precision) and, under bf16, the fp32 staging buffers each layer
     * computes in (models/precision.c), carved from one block at reserve */
    int precision;
    size_t act_bytes;       /* dt_model_activation_bytes */
    float *stage;
    float *slot[DT_STAGE_SLOTS]; /* activation-sized, handed to a node's roles in turn */
    float *sw, *slogits;         /* a GEMM node's rounded parameters; the logits */
    /* 0: the layers without GEMM parameters compute on fp32 copies too, not in their bf16
     * forms (DTRAIN_BF16_FORMS=0, read at reserve: the same bits, slower; for comparisons) */
    int bf16_forms;
    dt_rng rng;
    double *t_fwd, *t_bwd;  /* per-node seconds when DTRAIN_LAYER_TIMES is set or a plan is being made, else NULL */
    dt_grads_ready_fn grads_ready; /* dt_model_set_grads_ready */
    void *grads_ready_arg;
};

/* Where grads[from..) is final once node n's backward has run (ready: where it was before):
 * the grads_ready callback's argument, for model.c's and precision.c's backward passes */
size_t dt_model_ready_after(const dt_model *m, const dt_node *n, size_t ready);

/* Node i's input shape from its producers (or the model's input), its setup, and the checks
 * of sizes, sequences and ties around it (model_shape.c): dt_model_build's step per node */
dt_status dt_model_shape_node(dt_node *nodes, int i, int in_c, int in_h, int in_w, int in_seq, const char *origin);

/* Per-node times from now on (zeroed at each call): what dt_model_layer_seconds reads, each
 * node's forward and backward together, under bf16 with its conversions to and from fp32 */
dt_status dt_model_time_layers(dt_model *m);
double dt_model_layer_seconds(const dt_model *m, int i);

/* dt_model_engines as at that precision (bf16 or not), whatever the model's */
size_t dt_model_engines_at(const dt_model *m, int bf16, char *buf, size_t cap);

#endif
