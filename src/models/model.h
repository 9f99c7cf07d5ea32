/* The model: nodes in topological order, one parameter buffer, one gradient buffer, one
 * state buffer, and a table of named views into them. */
#ifndef DT_MODEL_H
#define DT_MODEL_H

#include "layers/layer.h"

/* bf16 staging: at most 2 inputs, output, output gradient, 2 input gradients */
#define DT_STAGE_SLOTS 6

struct dt_model {
    dt_node *nodes;
    int nn;
    int in_c, in_h, in_w;
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
    /* precision (dtrain.h: dt_precision) and, under bf16, the fp32 staging buffers each layer
     * computes in (models/precision.c), carved from one block at reserve */
    int precision;
    size_t act_bytes;       /* dt_model_activation_bytes */
    float *stage;
    float *slot[DT_STAGE_SLOTS]; /* activation-sized, handed to a node's roles in turn */
    float *sw, *slogits;         /* a GEMM node's rounded parameters; the logits */
    dt_rng rng;
    double *t_fwd, *t_bwd;  /* per-node seconds when DTRAIN_LAYER_TIMES is set, else NULL */
    dt_grads_ready_fn grads_ready; /* dt_model_set_grads_ready */
    void *grads_ready_arg;
};

/* bf16 (models/precision.c): the staging floats a reserve for batch needs; carving them from
 * m->stage; forward and backward through the staging buffers. */
size_t dt_bf16_stage_floats(const dt_model *m, int batch);
void dt_bf16_stage_carve(dt_model *m, int batch);
void dt_bf16_forward(dt_model *m, int batch, int train);
float dt_bf16_backward(dt_model *m, const uint8_t *labels, int *correct, float *dx_out);
/* Softmax cross-entropy (model.c), shared with the bf16 pass */
float dt_softmax_xent(const float *logits, const uint8_t *labels, int batch, int classes, float *dlogits,
                      int *correct);

/* Builds a model from nodes whose ops, names, inputs and hyper-parameters are set; takes
 * ownership of nodes (freed on error too). Computes shapes and allocates parameters. */
dt_status dt_model_build(dt_node *nodes, int nn, int in_c, int in_h, int in_w, const char *origin,
                         dt_model **out);

/* Records (name, shape, data pointer into the model) for every parameter and state tensor,
 * in that order; out needs dt_model_num_tensors + dt_model_num_state_tensors entries.
 * Returns the count. Declared with a forward type so callers need not include tensorfile.h. */
struct dt_record;
struct dt_tfile;
int dt_model_records(dt_model *m, struct dt_record *out);
/* The metadata records (meta:model, meta:spec, meta:data, meta:algo) into a list about to be
 * written, and back out of a file read (dtrain.h: dt_weights_meta). */
struct dt_records;
struct dt_tfile;
dt_status dt_weights_meta_put(struct dt_records *l, const char *model, const char *data, const char *algo);
dt_status dt_weights_meta_get(const struct dt_tfile *f, dt_weights_meta *out);
/* A spec file's text (malloc'd): a regular file of at most 1 MB without NUL bytes, else a
 * one-line error naming path. */
dt_status dt_model_spec_read(const char *path, char **text);
/* The spec text of a model name or spec file (malloc'd), NULL when it cannot be had. */
char *dt_model_spec_of(const char *model);
/* A weights file read by its name: *.safetensors as safetensors (core/safetensors.h), any
 * other as DTRTNS01 (core/tensorfile.h). */
dt_status dt_weights_read(const char *path, struct dt_tfile *out);
/* dt_model_load from a file already read (a checkpoint read once for model and the rest);
 * path is for messages */
dt_status dt_model_load_records(dt_model *m, const struct dt_tfile *f, const char *path);

#endif
