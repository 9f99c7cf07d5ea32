/* Which engine runs each kind of layer of a model (dtrain info, the run log), and what
 * --precision bf16 does with each: printers above both the model (model.c, model_query.c) and
 * its precision rules (precision.c). */
#include <stdio.h>
#include <string.h>

#include "models/model_struct.h"
#include "models/precision.h"

size_t dt_model_engines(const dt_model *m, char *buf, size_t cap) {
    return dt_model_engines_at(m, m->precision == DT_PRECISION_BF16, buf, cap);
}

size_t dt_model_engines_at(const dt_model *m, int bf16, char *buf, size_t cap) {
    size_t len = 0;
    if (cap) *buf = 0;
    for (int i = 0; i < m->nn; i++) {
        const dt_node *n = &m->nodes[i];
        if (!n->ops->engine) continue;
        const char *e = n->ops->engine(n, bf16);
        if (!e) continue;
        int seen = 0, count = 0;
        for (int j = 0; j < m->nn; j++) {
            const dt_node *o = &m->nodes[j];
            if (o->ops != n->ops || !o->ops->engine(o, bf16) || strcmp(o->ops->engine(o, bf16), e) != 0) continue;
            if (j < i) seen = 1;
            count++;
        }
        if (seen) continue;
        const int k = snprintf(buf + (len < cap ? len : cap), len < cap ? cap - len : 0, "%s%s:%s:%d", len ? "," : "",
                               n->ops->kind, e, count);
        len += k > 0 ? (size_t)k : 0;
    }
    return len;
}

/* What --precision bf16 does with each kind of layer of this model, here (dtrain info). */
void dt_model_print_precision(const dt_model *m, void *file) {
    FILE *f = file;
    char gemm[200] = "", forms[300] = "", other[300] = "";
    for (int i = 0; i < m->nn; i++) {
        const dt_layer_ops *ops = m->nodes[i].ops;
        char *list = ops->gemm_params ? gemm : ops->bf16_io ? forms : other;
        const size_t cap = ops->gemm_params ? sizeof gemm : ops->bf16_io ? sizeof forms : sizeof other;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = m->nodes[j].ops == ops;
        if (!seen) snprintf(list + strlen(list), cap - strlen(list), "%s%s", *list ? ", " : "", ops->kind);
    }
    const char *why = dt_bf16_fallback_reason();
    char engines[256];
    dt_model_engines_at(m, 1, engines, sizeof engines);
    fprintf(f, "precision: fp32 (default); --precision bf16 stores every activation and its gradient as bf16, and\n");
    if (!why && strstr(engines, "bf16"))
        fprintf(f, "  conv: where oneDNN runs it (%s), multiplies in bf16 with oneDNN's bf16 kernels, sums in fp32\n",
                engines);
    if (*gemm)
        fprintf(f, "  %s%s: multiplies bf16-rounded weights and inputs, sums in fp32, with the fp32 GEMM (%s)\n",
                !why && strstr(engines, "bf16") ? "otherwise " : "", gemm, why ? why : "no bf16 GEMM for these");
    if (*forms)
        fprintf(f, "  %s: read and write the stored bf16 values, computing in fp32 (their bf16 forms)\n", forms);
    if (*other) fprintf(f, "  %s: computes in fp32 on fp32 copies of the bf16-stored values\n", other);
    fprintf(f, "  parameters, their gradients, optimiser, loss, checkpoints: fp32\n");
}
