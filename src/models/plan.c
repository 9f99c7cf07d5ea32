/* Kernel plans (plan.h): the file, the choice among a node's timed candidates, and applying a
 * plan to a model. Read with inih (as the calibration and sweep files are). */
#include "models/plan.h"

#include <ini.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ini_lines.h"
#include "core/paths.h"
#include "layers/kernels.h"
#include "models/model_struct.h"

#define FIRST_LINE "; dtrain kernel plan"

void dt_plan_free(dt_plan *p) {
    free(p->node);
    free(p->kernel);
    free(p->ms);
    memset(p, 0, sizeof *p);
}

/* the value of "key<spaces>: value" in a /proc/cpuinfo line, trimmed */
static int cpuinfo_value(const char *line, const char *key, char *out, size_t cap) {
    const size_t k = strlen(key);
    if (strncmp(line, key, k) != 0 || (line[k] != ' ' && line[k] != '\t' && line[k] != ':')) return 0;
    const char *v = strchr(line, ':');
    if (!v) return 0;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    snprintf(out, cap, "%s", v);
    out[strcspn(out, "\n")] = 0;
    return 1;
}

static int has_flag(const char *flags, const char *flag) {
    const size_t k = strlen(flag);
    for (const char *s = flags; (s = strstr(s, flag)) != NULL; s += k)
        if ((s == flags || s[-1] == ' ') && (s[k] == 0 || s[k] == ' ')) return 1;
    return 0;
}

void dt_plan_cpu(char *buf, size_t cap) {
    char name[128] = "unknown CPU", family[16] = "?", model[16] = "?", flags[4096] = "", line[4096], v[128];
    FILE *f = fopen("/proc/cpuinfo", "r");
    int got = 0;
    while (f && got != 15 && fgets(line, sizeof line, f)) {
        if (!(got & 1) && cpuinfo_value(line, "model name", name, sizeof name)) got |= 1;
        else if (!(got & 2) && cpuinfo_value(line, "cpu family", family, sizeof family)) got |= 2;
        else if (!(got & 4) && cpuinfo_value(line, "model", v, sizeof v)) { snprintf(model, sizeof model, "%.15s", v); got |= 4; }
        else if (!(got & 8) && cpuinfo_value(line, "flags", flags, sizeof flags)) got |= 8;
    }
    if (f) fclose(f);
    /* the instruction sets the kernels choose by: dtrain's own tier and bf16 arithmetic */
    snprintf(buf, cap, "%s | family %s model %s | kernels %s%s%s", name, family, model, dt_layer_kernels(),
             has_flag(flags, "avx512_bf16") ? " avx512_bf16" : "", has_flag(flags, "amx_bf16") ? " amx_bf16" : "");
}

int dt_plan_choose(const double ms[DT_KERNEL_COUNT], double tie) {
    int best = DT_KERNEL_RULE;
    for (int k = 1; k < DT_KERNEL_COUNT; k++)
        if (!isnan(ms[k]) && (best == DT_KERNEL_RULE || ms[k] < ms[best])) best = k;
    if (best == DT_KERNEL_RULE) return best;
    for (int k = 1; k < best; k++)
        if (!isnan(ms[k]) && ms[k] <= ms[best] * (1 + tie)) return k;
    return best;
}

/* ---- the file ---- */

typedef struct {
    dt_plan *p;
    int cap, seen;
    char why[200];
} reader;

static int precision_of(const char *v) {
    return !strcmp(v, "fp32") ? DT_PRECISION_FP32 : !strcmp(v, "bf16") ? DT_PRECISION_BF16 : -1;
}

static int add_node(reader *r, const char *name, int kernel) {
    dt_plan *p = r->p;
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->node[i], name)) { snprintf(r->why, sizeof r->why, "%s: named twice", name); return 0; }
    if (p->n == r->cap) {
        const int cap = r->cap ? 2 * r->cap : 64;
        void *a = realloc(p->node, (size_t)cap * sizeof *p->node), *b = a ? realloc(p->kernel, (size_t)cap * sizeof *p->kernel) : NULL;
        if (a) p->node = a;
        if (b) p->kernel = b;
        if (!a || !b) { snprintf(r->why, sizeof r->why, "out of memory"); return 0; }
        r->cap = cap;
    }
    snprintf(p->node[p->n], DT_NODE_NAME, "%s", name);
    p->kernel[p->n++] = kernel;
    return 1;
}

static int on_value(void *user, const char *section, const char *name, const char *value) {
    reader *r = user;
    dt_plan *p = r->p;
    if (!strcmp(section, "plan")) {
        if (!strcmp(name, "cpu")) dt_ini_keep(p->cpu, sizeof p->cpu, value), r->seen |= 1;
        else if (!strcmp(name, "dtrain")) dt_ini_keep(p->version, sizeof p->version, value), r->seen |= 2;
        else if (!strcmp(name, "model")) dt_ini_keep(p->model, sizeof p->model, value), r->seen |= 4;
        else if (!strcmp(name, "batch")) {
            char *end;
            const long b = strtol(value, &end, 10);
            if (*end || end == value || b < 1 || b > 1000000) { snprintf(r->why, sizeof r->why, "batch: expected a whole number from 1"); return 0; }
            p->batch = (int)b, r->seen |= 8;
        } else if (!strcmp(name, "precision") || !strcmp(name, "runs")) {
            const int v = precision_of(value);
            if (v < 0) { snprintf(r->why, sizeof r->why, "%s: expected fp32 or bf16", name); return 0; }
            if (*name == 'p') p->precision = v, r->seen |= 16;
            else p->runs = v, r->seen |= 32;
        } else if (!strcmp(name, "made_s")) {
            p->made_s = atof(value);
        } else {
            snprintf(r->why, sizeof r->why, "unknown key '%s' in [plan] (expected cpu, dtrain, model, batch, precision, runs, made_s)", name);
            return 0;
        }
        return 1;
    }
    if (!strcmp(section, "kernels")) {
        const int k = dt_kernel_parse(value);
        if (k <= DT_KERNEL_RULE) { snprintf(r->why, sizeof r->why, "%s = %s: expected own, onednn, onednn-bf16, own-winograd, onednn-direct or own-avx2", name, value); return 0; }
        if (!*name) { snprintf(r->why, sizeof r->why, "= %s: a layer name is missing", value); return 0; }
        if (strlen(name) >= DT_NODE_NAME) { snprintf(r->why, sizeof r->why, "a layer name longer than %d characters", DT_NODE_NAME - 1); return 0; }
        return add_node(r, name, k);
    }
    snprintf(r->why, sizeof r->why, "unknown section [%s] (expected [plan] and [kernels])", section);
    return 0;
}

dt_status dt_plan_read(const char *path, dt_plan *p) {
    memset(p, 0, sizeof *p);
    FILE *f;
    dt_status st = dt_open_regular(path, &f, NULL);
    if (st != DT_OK) return dt_fail(DT_ERR_ARG, "--plan %s", dt_last_error());
    char first[64] = "";
    if (!fgets(first, sizeof first, f) || strncmp(first, FIRST_LINE, strlen(FIRST_LINE)) != 0) {
        fclose(f);
        return dt_fail(DT_ERR_ARG, "--plan %s:1: not a kernel plan (expected '" FIRST_LINE "', what dtrain tune writes)", path);
    }
    rewind(f);
    reader r = {.p = p};
    dt_ini_lines lines = {.f = f};
    int line = ini_parse_stream(dt_ini_lines_read, &lines, on_value, &r);
    fclose(f);
    if (line == 0 && *lines.why) line = lines.line;
    if (line != 0) {
        dt_plan_free(p);
        return dt_fail(DT_ERR_ARG, "--plan %s:%d: %s", path, line, *lines.why ? lines.why : *r.why ? r.why : "not an INI line");
    }
    if (r.seen != 63) {
        dt_plan_free(p);
        return dt_fail(DT_ERR_ARG, "--plan %s: expected [plan] cpu, dtrain, model, batch, precision and runs", path);
    }
    if (p->precision == DT_PRECISION_FP32 && p->runs != DT_PRECISION_FP32) {
        dt_plan_free(p);
        return dt_fail(DT_ERR_ARG, "--plan %s: runs = bf16 for precision = fp32 (a plan runs what was asked, or fp32)", path);
    }
    return DT_OK;
}

static dt_status fill(void *ctx, void *file) {
    const dt_plan *p = ctx;
    FILE *f = file;
    fprintf(f, FIRST_LINE " (dtrain tune): the kernel each layer runs, chosen by timing each candidate on this CPU\n"
               "; (ms a step: each layer's forward and backward, with its conversions under bf16; the median of the\n"
               "; repeats). dtrain uses it only for this model, batch, precision, CPU and dtrain version.\n");
    fprintf(f, "[plan]\ncpu = %s\ndtrain = %s\nmodel = %s\nbatch = %d\nprecision = %s\nruns = %s\n", p->cpu, p->version,
            p->model, p->batch, dt_precision_name((dt_precision)p->precision), dt_precision_name((dt_precision)p->runs));
    if (p->made_s > 0) fprintf(f, "made_s = %.6g\n", p->made_s);
    fprintf(f, "[kernels]\n");
    for (int i = 0; i < p->n; i++) {
        if (p->ms) {
            fprintf(f, "; ms:");
            for (int k = 1; k < DT_KERNEL_COUNT; k++)
                if (!isnan(p->ms[(size_t)i * DT_KERNEL_COUNT + k]))
                    fprintf(f, " %s %.2f", dt_kernel_name(k), p->ms[(size_t)i * DT_KERNEL_COUNT + k]);
            fprintf(f, "\n");
        }
        fprintf(f, "%s = %s\n", p->node[i], dt_kernel_name(p->kernel[i]));
    }
    return ferror(f) ? dt_fail(DT_ERR_IO, "writing the plan failed") : DT_OK;
}

dt_status dt_plan_write(const char *path, const dt_plan *p) { return dt_write_atomic(path, fill, (void *)p); }

dt_status dt_plan_matches(const dt_plan *p, const char *path, const char *model, int batch, int precision) {
    char cpu[sizeof p->cpu];
    dt_plan_cpu(cpu, sizeof cpu);
    if (strcmp(p->model, model) != 0)
        return dt_fail(DT_ERR_ARG, "--plan %s: made for model %s, not %s", path, p->model, model);
    if (p->batch != batch) return dt_fail(DT_ERR_ARG, "--plan %s: made for batch %d, not %d", path, p->batch, batch);
    if (p->precision != precision)
        return dt_fail(DT_ERR_ARG, "--plan %s: made for --precision %s, not %s", path,
                       dt_precision_name((dt_precision)p->precision), dt_precision_name((dt_precision)precision));
    if (strcmp(p->cpu, cpu) != 0)
        return dt_fail(DT_ERR_ARG, "--plan %s: made on another CPU (%s; this is %s): make one here (dtrain tune)", path,
                       p->cpu, cpu);
    if (strcmp(p->version, dt_version()) != 0)
        return dt_fail(DT_ERR_ARG, "--plan %s: made by dtrain %s, this is %s: make it again (dtrain tune)", path, p->version,
                       dt_version());
    return DT_OK;
}

dt_status dt_plan_apply(const dt_plan *p, const char *path, dt_model *m) {
    const int bf16 = p->runs == DT_PRECISION_BF16;
    for (int i = 0; i < p->n; i++) {
        dt_node *n = NULL;
        for (int j = 0; j < m->nn && !n; j++)
            if (!strcmp(m->nodes[j].name, p->node[i])) n = &m->nodes[j];
        if (!n) return dt_fail(DT_ERR_ARG, "--plan %s: layer %s: the model has no layer of that name", path, p->node[i]);
        const unsigned can = n->ops->kernels ? n->ops->kernels(n, bf16) : 0;
        if (!(can >> p->kernel[i] & 1))
            return dt_fail(DT_ERR_ARG, "--plan %s: layer %s: %s cannot run it here (%s)", path, p->node[i],
                           dt_kernel_name(p->kernel[i]), can ? "another kernel can" : "nothing to choose for it");
    }
    dt_status st = DT_OK;
    if (p->precision == DT_PRECISION_BF16 && !bf16) st = dt_model_set_precision(m, DT_PRECISION_FP32);
    for (int j = 0; j < m->nn; j++) m->nodes[j].kernel = DT_KERNEL_RULE;
    for (int i = 0; i < p->n && st == DT_OK; i++)
        for (int j = 0; j < m->nn; j++)
            if (!strcmp(m->nodes[j].name, p->node[i])) m->nodes[j].kernel = p->kernel[i];
    return st;
}

void dt_plan_print(const dt_plan *p, FILE *f) {
    fprintf(f, "plan: %s batch %d, --precision %s runs %s; made on %s by dtrain %s", p->model, p->batch,
            dt_precision_name((dt_precision)p->precision), dt_precision_name((dt_precision)p->runs), p->cpu, p->version);
    if (p->made_s > 0) fprintf(f, " in %.1f s", p->made_s);
    fprintf(f, "\n");
    for (int i = 0; i < p->n; i++) {
        fprintf(f, "  %-24s %-12s", p->node[i], dt_kernel_name(p->kernel[i]));
        for (int k = 1; p->ms && k < DT_KERNEL_COUNT; k++) {
            const double v = p->ms[(size_t)i * DT_KERNEL_COUNT + k];
            if (!isnan(v)) fprintf(f, " %s %.2f ms", dt_kernel_name(k), v);
        }
        fprintf(f, "\n");
    }
}
