/* Making a kernel plan (plan_tune.h): every candidate kernel of every layer timed in the model
 * itself, on its real shapes and neighbours, on random data.
 *
 * How: the model is built once per precision. A round runs each candidate for all the layers
 * that can take it at once ("every conv on oneDNN"), one untimed step (oneDNN makes its
 * primitives then) and `steps` timed ones, and reads each layer's time (forward and backward;
 * under bf16 with the conversions into and out of fp32 copies that a kernel not taking bf16
 * needs). Rounds alternate the candidates, so a slow minute of the machine hits all of them;
 * each layer's median over the rounds decides, a tie (within `tie`) keeping the simpler
 * kernel (after the first round a layer no longer runs a candidate 1.5x slower than its
 * fastest). Then the whole model is timed the same way, alternating, with the plan and with the
 * rule it replaces: where the plan is not faster by more than the tie, the rule's own choices
 * are written (a layer's
 * time in a uniform round does not see every interaction with its neighbours' kernels). For a
 * bf16 ask the fp32 model is planned too and the faster of the two runs: bf16 must beat fp32 by
 * more than the tie, or the plan runs fp32. */
#include "trainer/plan_tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "models/model_struct.h"
#include "trainer/trainer.h"

typedef struct {
    dt_model *m;
    float *x;
    uint16_t *y;
    int batch, bf16;
    unsigned *can;  /* per node: the candidates (ops->kernels) */
    double *ms;     /* [node][kernel][round] ms a step */
    double *chosen; /* [node][kernel] medians, NAN where not a candidate */
    int *choice;    /* per node */
} rig;

static void rig_close(rig *r) {
    dt_model_free(r->m);
    free(r->x), free(r->y), free(r->can), free(r->ms), free(r->chosen), free(r->choice);
    memset(r, 0, sizeof *r);
}

static dt_status rig_open(rig *r, const char *model, int batch, int precision, int rounds) {
    memset(r, 0, sizeof *r);
    r->batch = batch;
    r->bf16 = precision == DT_PRECISION_BF16;
    dt_status st = dt_model_open(model, &r->m);
    if (st == DT_OK) st = dt_model_set_precision(r->m, (dt_precision)precision);
    if (st == DT_OK) st = dt_model_reserve(r->m, batch);
    if (st != DT_OK) { rig_close(r); return st; }
    dt_model *m = r->m;
    const int vocab = dt_model_vocab(m), positions = dt_model_positions(m), classes = dt_model_num_classes(m);
    const size_t in = (size_t)batch * m->in_c * m->in_h * m->in_w, rows = (size_t)batch * positions;
    const size_t cells = (size_t)m->nn * DT_KERNEL_COUNT;
    if ((st = dt_malloc(r->x, in, "the tuning batch")) != DT_OK || (st = dt_malloc(r->y, rows, "its targets")) != DT_OK ||
        (st = dt_calloc(r->can, (size_t)m->nn, "the candidates")) != DT_OK ||
        (st = dt_calloc(r->ms, cells * (size_t)rounds, "the layer times")) != DT_OK ||
        (st = dt_malloc(r->chosen, cells, "the layer times")) != DT_OK ||
        (st = dt_calloc(r->choice, (size_t)m->nn, "the choices")) != DT_OK ||
        (st = dt_model_time_layers(m)) != DT_OK) {
        rig_close(r);
        return st;
    }
    dt_rng g;
    dt_rng_seed(&g, 7);
    for (size_t i = 0; i < in; i++) r->x[i] = vocab ? (float)dt_rng_below(&g, (uint32_t)vocab) : 2 * dt_rng_uniform(&g) - 1;
    for (size_t i = 0; i < rows; i++) r->y[i] = (uint16_t)dt_rng_below(&g, (uint32_t)classes);
    dt_model_init(m, 1);
    for (int i = 0; i < m->nn; i++) {
        const dt_node *n = &m->nodes[i];
        r->can[i] = n->ops->kernels ? n->ops->kernels(n, r->bf16) & ~1u : 0;
    }
    return DT_OK;
}

/* One untimed step, then the mean seconds of `steps` timed ones, or of as many as take `least`
 * seconds (by the untimed step's time; at most 1000): a small model's layers take microseconds */
static double run(rig *r, int steps, double least) {
    const double w = dt_now();
    dt_model_forward(r->m, r->x, r->batch, 1);
    dt_model_backward_targets(r->m, r->y, NULL);
    const double warm = dt_now() - w;
    if (warm > 0 && steps * warm < least) steps = least / warm > 1000 ? 1000 : (int)(least / warm) + 1;
    dt_model_time_layers(r->m);
    const double t0 = dt_now();
    for (int s = 0; s < steps; s++) {
        dt_model_forward(r->m, r->x, r->batch, 1);
        dt_model_backward_targets(r->m, r->y, NULL);
    }
    return (dt_now() - t0) / steps;
}

/* every node that can take kernel k (of the mask `can` per node) runs it; the others their rule */
static void uniform(rig *r, const unsigned *can, int k) {
    for (int i = 0; i < r->m->nn; i++) r->m->nodes[i].kernel = can[i] >> k & 1 ? k : DT_KERNEL_RULE;
}

static void set_kernels(rig *r, const int *kernels) {
    for (int i = 0; i < r->m->nn; i++) r->m->nodes[i].kernel = kernels ? kernels[i] : DT_KERNEL_RULE;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dt_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* the kernel the rule runs at node i (the name its engine gives) */
static int rule_kernel(const rig *r, int i) {
    const dt_node *n = &r->m->nodes[i];
    const char *e = n->ops->engine ? n->ops->engine(n, r->bf16) : NULL;
    return !e || !strcmp(e, "own") ? DT_KERNEL_OWN : !strcmp(e, "oneDNN-bf16") ? DT_KERNEL_ONEDNN_BF16 : DT_KERNEL_ONEDNN;
}

/* After the first round, a layer's candidate slower than this many times the layer's fastest
 * is not timed again there: it cannot win (the VM's minutes differ by 15%, not 50%), and the
 * later rounds take less time (resnet18-cifar: its convolutions' own kernels) */
#define PLAN_HOPELESS 1.5

/* Node i's candidates still in the running after the first round */
static unsigned hopeful(const rig *r, int i, int repeats) {
    double best = INFINITY;
    const double *t = r->ms + (size_t)i * DT_KERNEL_COUNT * repeats;
    for (int k = 1; k < DT_KERNEL_COUNT; k++)
        if (r->can[i] >> k & 1 && t[k * repeats] < best) best = t[k * repeats];
    unsigned keep = 0;
    for (int k = 1; k < DT_KERNEL_COUNT; k++)
        if (r->can[i] >> k & 1 && !(t[k * repeats] > PLAN_HOPELESS * best)) keep |= 1u << k;
    return keep;
}

/* Times the candidates layer by layer and chooses (r->choice, r->chosen) */
static void plan_layers(rig *r, const dt_plan_opts *o, const char *what) {
    dt_model *m = r->m;
    unsigned *can = malloc((size_t)m->nn * sizeof *can);
    int *rounds = calloc((size_t)m->nn * DT_KERNEL_COUNT, sizeof *rounds); /* each layer's and candidate's */
    if (!can || !rounds) { /* (the rule's kernels then) */
        free(can), free(rounds);
        for (int i = 0; i < m->nn; i++) r->choice[i] = DT_KERNEL_RULE;
        return;
    }
    memcpy(can, r->can, (size_t)m->nn * sizeof *can);
    for (int round = 0; round < o->repeats; round++) {
        if (round == 1)
            for (int i = 0; i < m->nn; i++) can[i] = hopeful(r, i, o->repeats);
        unsigned all = 0;
        for (int i = 0; i < m->nn; i++) all |= can[i];
        if (o->log) fprintf(o->log, "tune: %s: round %d of %d:", what, round + 1, o->repeats);
        for (int k = 1; k < DT_KERNEL_COUNT; k++) {
            if (!(all >> k & 1)) continue;
            uniform(r, can, k);
            const double s = run(r, o->steps, 0.1);
            if (o->log) fprintf(o->log, " %s %.1f ms", dt_kernel_name(k), 1e3 * s);
            for (int i = 0; i < m->nn; i++) {
                if (!(can[i] >> k & 1)) continue;
                const size_t cell = (size_t)i * DT_KERNEL_COUNT + k;
                r->ms[cell * o->repeats + rounds[cell]++] = 1e3 * dt_model_layer_seconds(m, i) / o->steps;
            }
        }
        if (o->log) fprintf(o->log, " a step%s\n", round ? " (each layer's hopeful kernels)" : "");
    }
    for (int i = 0; i < m->nn; i++) {
        double *c = r->chosen + (size_t)i * DT_KERNEL_COUNT;
        for (int k = 0; k < DT_KERNEL_COUNT; k++) {
            const size_t cell = (size_t)i * DT_KERNEL_COUNT + k;
            c[k] = k && rounds[cell] ? dt_median(r->ms + cell * o->repeats, rounds[cell]) : NAN;
        }
        r->choice[i] = r->can[i] ? dt_plan_choose(c, o->tie) : DT_KERNEL_RULE;
    }
    free(can), free(rounds);
}

/* The whole-model comparisons decide between two sets of kernels at once, on differences of a
 * few percent: rounds of at least 0.3 s a set, the tune's rounds and more, up to 5, until a set
 * has run 2 s (gpt-tiny at batch 12, 35 ms a step, flipped between bf16 and fp32 in two tunes
 * with 3 rounds of 0.1 s; resnet18-cifar's 3 rounds take 4 s a set) */
#define WHOLE_ROUNDS 5
#define WHOLE_SECONDS 0.3
#define WHOLE_ENOUGH 2.0

/* Medians of whole-model step times, the kernel sets alternating: [set][round] */
static void alternate(rig *const *rigs, int *const *kernels, int sets, const dt_plan_opts *o, double *out) {
    const int most = o->repeats > WHOLE_ROUNDS ? o->repeats : WHOLE_ROUNDS;
    double *t = malloc((size_t)sets * most * sizeof *t);
    if (!t) { for (int s = 0; s < sets; s++) out[s] = NAN; return; }
    int rounds = 0;
    const double t0 = dt_now();
    while (rounds < most && (rounds < o->repeats || dt_now() - t0 < sets * WHOLE_ENOUGH)) {
        for (int s = 0; s < sets; s++) {
            set_kernels(rigs[s], kernels[s]);
            t[s * most + rounds] = run(rigs[s], o->steps, WHOLE_SECONDS);
        }
        rounds++;
    }
    for (int s = 0; s < sets; s++) out[s] = dt_median(t + s * most, rounds);
    free(t);
}

/* Plans one precision: layer by layer, then kept only where the whole model is faster than
 * with the rules by more than the tie (the rules are the simpler choice: a plan that gains
 * within the noise could as well lose); *step the planned step's seconds */
static void plan_model(rig *r, const dt_plan_opts *o, const char *what, double *step) {
    plan_layers(r, o, what);
    rig *rigs[2] = {r, r};
    int *kernels[2] = {r->choice, NULL};
    double t[2];
    alternate(rigs, kernels, 2, o, t);
    if (o->log)
        fprintf(o->log, "tune: %s: %.1f ms a step planned, %.1f by the rule: %s\n", what, 1e3 * t[0], 1e3 * t[1],
                t[0] * (1 + o->tie) < t[1] ? "the plan" : "the rule's kernels (the plan not faster by more than the tie)");
    if (!(t[0] * (1 + o->tie) < t[1])) { /* NAN too */
        set_kernels(r, NULL);
        for (int i = 0; i < r->m->nn; i++) r->choice[i] = r->can[i] ? rule_kernel(r, i) : DT_KERNEL_RULE;
        t[0] = t[1];
    }
    *step = t[0];
}

static dt_status fill_plan(const rig *r, dt_plan *p) {
    const dt_model *m = r->m;
    int n = 0;
    for (int i = 0; i < m->nn; i++) n += r->can[i] != 0;
    dt_status st;
    if ((st = dt_calloc(p->node, (size_t)n + 1, "the plan")) != DT_OK || (st = dt_calloc(p->kernel, (size_t)n + 1, "the plan")) != DT_OK ||
        (st = dt_calloc(p->ms, ((size_t)n + 1) * DT_KERNEL_COUNT, "the plan")) != DT_OK)
        return st;
    for (int i = 0; i < m->nn; i++) {
        if (!r->can[i]) continue;
        snprintf(p->node[p->n], DT_NODE_NAME, "%s", m->nodes[i].name);
        p->kernel[p->n] = r->choice[i];
        memcpy(p->ms + (size_t)p->n * DT_KERNEL_COUNT, r->chosen + (size_t)i * DT_KERNEL_COUNT, DT_KERNEL_COUNT * sizeof *p->ms);
        p->n++;
    }
    return DT_OK;
}

dt_status dt_plan_make(const char *model, int batch, int precision, const dt_plan_opts *o, dt_plan *p) {
    memset(p, 0, sizeof *p);
    const double t0 = dt_now();
    rig fp = {0}, bf = {0};
    dt_status st = rig_open(&fp, model, batch, DT_PRECISION_FP32, o->repeats);
    double t_fp = NAN, t_bf = NAN;
    if (st == DT_OK) plan_model(&fp, o, "fp32", &t_fp);
    const rig *runs = &fp;
    if (st == DT_OK && precision == DT_PRECISION_BF16 && (st = rig_open(&bf, model, batch, DT_PRECISION_BF16, o->repeats)) == DT_OK) {
        plan_model(&bf, o, "bf16", &t_bf);
        /* the two planned models against each other, alternating */
        rig *rigs[2] = {&bf, &fp};
        int *kernels[2] = {bf.choice, fp.choice};
        double t[2];
        alternate(rigs, kernels, 2, o, t);
        const int keep = t[0] * (1 + o->tie) < t[1];
        if (o->log)
            fprintf(o->log, "tune: bf16 %.1f ms a step, fp32 %.1f (both planned): %s\n", 1e3 * t[0], 1e3 * t[1],
                    keep ? "bf16 runs" : "fp32 runs: bf16 is not faster on this CPU for this model");
        if (keep) runs = &bf;
    }
    if (st == DT_OK) {
        dt_plan_cpu(p->cpu, sizeof p->cpu);
        snprintf(p->version, sizeof p->version, "%s", dt_version());
        snprintf(p->model, sizeof p->model, "%s", model);
        p->batch = batch;
        p->precision = precision;
        p->runs = runs == &bf ? DT_PRECISION_BF16 : DT_PRECISION_FP32;
        st = fill_plan(runs, p);
        p->made_s = dt_now() - t0;
    }
    rig_close(&fp);
    rig_close(&bf);
    if (st != DT_OK) dt_plan_free(p);
    return st;
}
