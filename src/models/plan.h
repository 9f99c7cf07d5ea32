/* Kernel plans: which kernel runs each layer of a model, chosen by timing them on this CPU
 * (as FFTW's planner and cuDNN's benchmark mode do) rather than by a rule of the instruction
 * set. A plan is made for one model, batch, precision, CPU and dtrain version (dtrain tune;
 * plan_tune.c), written as a small INI file, and applied to a model before dt_model_reserve.
 *
 *   # dtrain kernel plan (dtrain tune): ...
 *   [plan]
 *   cpu = AMD EPYC | family 26 model 2 | avx512 avx512_bf16
 *   dtrain = 0.9.0 (fb5471f)
 *   model = resnet18-cifar
 *   batch = 32
 *   precision = bf16        ; what was asked
 *   runs = bf16             ; what runs: fp32 where bf16 was slower for the whole model
 *   [kernels]
 *   conv1 = own             ; ms a step: own 4.1, onednn 5.3, onednn-bf16 4.8
 *   layer1.0.conv1 = onednn-bf16
 *
 * Why a plan changes no result beyond rounding: under bf16 every kernel multiplies the same
 * bf16-rounded values and sums in fp32 (models/precision.c); a plan whose `runs` is fp32 runs
 * the model in fp32, which rounds less. The choice is made once and read by every rank, so all
 * ranks and restarts run the same kernels. */
#ifndef DT_PLAN_H
#define DT_PLAN_H

#include <stdio.h>

#include "dtrain.h"
#include "layers/layer.h"

typedef struct {
    char cpu[200];     /* dt_plan_cpu() where it was made */
    char version[96];  /* dt_version() that made it */
    char model[256];
    int batch;
    int precision;     /* DT_PRECISION_*: asked */
    int runs;          /* DT_PRECISION_*: what runs (fp32 where bf16 lost) */
    int n;             /* planned nodes */
    char (*node)[DT_NODE_NAME];
    int *kernel;       /* DT_KERNEL_*, never RULE */
    double *ms;        /* [n][DT_KERNEL_COUNT] ms a step as measured (NAN: not a candidate); may be NULL */
    double made_s;     /* seconds the making took (0: unknown) */
} dt_plan;

void dt_plan_free(dt_plan *p);

/* This CPU as a plan names it: the model name, family and model numbers and the instruction
 * sets the kernels choose by ("AMD EPYC | family 26 model 2 | avx512 avx512_bf16"). */
void dt_plan_cpu(char *buf, size_t cap);

/* Reads a plan file; one line naming path (and the line) on anything but a plan. */
dt_status dt_plan_read(const char *path, dt_plan *p);
/* Writes it atomically (whole or not at all). */
dt_status dt_plan_write(const char *path, const dt_plan *p);

/* Whether plan p (read from path) was made for this: model, batch, precision asked, this CPU
 * and this dtrain version; else DT_ERR_ARG with one line saying what differs. */
dt_status dt_plan_matches(const dt_plan *p, const char *path, const char *model, int batch, int precision);

/* Sets each planned node's kernel (n->kernel) and, where the plan runs fp32 for a bf16 ask,
 * the model's precision; before dt_model_reserve. A node the plan names that the model lacks,
 * or a kernel the node cannot take here: DT_ERR_ARG naming path and the node. */
dt_status dt_plan_apply(const dt_plan *p, const char *path, dt_model *m);

/* The choice among one node's candidates from their times (ms[k], NAN where k is not one):
 * the fastest, but among those within tie (a fraction, e.g. 0.03) of it the simplest, the
 * lowest DT_KERNEL_* (own before oneDNN before oneDNN's bf16): a difference within the noise
 * does not switch kernels. Deterministic in the times; DT_KERNEL_RULE if none is a candidate. */
int dt_plan_choose(const double ms[DT_KERNEL_COUNT], double tie);

/* One line a node for `dtrain info --plan` and the tune report: name, kernel, the times. */
void dt_plan_print(const dt_plan *p, FILE *f);

#endif
