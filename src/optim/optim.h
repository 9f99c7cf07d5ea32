/* Inside the optimisers (src/optim): the arithmetic of one step over a run of parameters that
 * all decay or all do not, shared by dt_sgd, dt_optim and its slices, and the optimiser's
 * records in a checkpoint (the trainer's). */
#ifndef DT_OPTIM_H
#define DT_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensorfile.h"
#include "dtrain.h"

/* SGD (PyTorch's): w -= lr * (g + wd*w) without momentum; with it, buf = first ? g + wd*w : mu*buf
 * + (g + wd*w), and w -= lr * buf (Nesterov: lr * ((g + wd*w) + mu*buf)). */
void dt_sgd_run(float *w, const float *g, float *buf, size_t n, float lr, float wd, float mu, int nesterov, int first);

/* AdamW's scalars of step t, computed once per run of parameters as PyTorch computes them:
 * in double from its Python floats, rounded to float where a tensor op takes them. */
typedef struct dt_adamw_k {
    float decay_mul;             /* 1 - lr * wd: w is multiplied by it first (by 1 without decay) */
    float b1, one_b1, b2, one_b2;
    float bc2_sqrt;              /* sqrt(1 - beta2^t) */
    float eps;
    float neg_step;              /* -lr / (1 - beta1^t) */
} dt_adamw_k;
void dt_adamw_scalars(dt_adamw_k *k, float lr, float wd, double beta1, double beta2, double eps, int64_t t);
/* torch.optim.AdamW's single-tensor step (PyTorch 1.13, amsgrad off) over n parameters, bit for
 * bit: PyTorch's CPU kernels fuse the moments' multiply-adds (vec::fmadd), and so does this. */
void dt_adamw_run(float *w, const float *g, float *m, float *v, size_t n, const dt_adamw_k *k);

/* Checkpoints: the optimiser's records ("optim:momentum" for sgd with momentum, "optim:exp_avg"
 * and "optim:exp_avg_sq" for adamw; "train:optim": which optimiser, its betas and step count).
 * The records point at o and at *head until the file is written. */
typedef struct dt_optim_head {
    int32_t kind, reserved;
    double beta1, beta2;
    int64_t steps;
} dt_optim_head;
dt_status dt_optim_save(const dt_optim *o, dt_optim_head *head, dt_records *l);
/* Restores them; a checkpoint of another optimiser (or betas) is refused in one line naming the
 * flag. A checkpoint of an older build has no "train:optim": sgd's. */
dt_status dt_optim_load(dt_optim *o, const dt_tfile *f, const char *path);

#endif
