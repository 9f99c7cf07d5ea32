/* The model: nodes in topological order, one parameter buffer, one gradient buffer, one
 * state buffer, and a table of named views into them. */
#ifndef DT_MODEL_H
#define DT_MODEL_H

#include "layers/layer.h"

#include "models/model_struct.h"

/* Builds a model from nodes whose ops, names, inputs and hyper-parameters are set; takes
 * ownership of nodes (freed on error too). Computes shapes and allocates parameters. in_seq: the
 * input is a sequence of in_h positions of in_c features (in_w 1). */
dt_status dt_model_build(dt_node *nodes, int nn, int in_c, int in_h, int in_w, int in_seq, const char *origin,
                         dt_model **out);
/* nanoGPT's GPT as spec text (malloc'd; NULL without memory): layers blocks of heads heads,
 * width, context positions, a vocabulary of vocab tokens, biases in linears and layer norms,
 * the head tied to the token embedding, nanoGPT's initialisation; names as its modules. */
char *dt_gpt_spec(int layers, int heads, int width, int context, int vocab);

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
dt_status dt_weights_meta_put(struct dt_records *l, const char *model, const char *data, const char *scheme);
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
/* The dropout stream where it stands (a checkpoint saved within an epoch keeps it). */
dt_rng *dt_model_rng(dt_model *m);
dt_status dt_model_load_records(dt_model *m, const struct dt_tfile *f, const char *path);

#endif
