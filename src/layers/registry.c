/* The table of layer kinds and helpers they share. */
#include "layers/layer.h"

#include <math.h>
#include <string.h>

static const dt_layer_ops *const all_layers[] = {
    &dt_layer_conv, &dt_layer_linear, &dt_layer_maxpool, &dt_layer_avgpool, &dt_layer_gavgpool,
    &dt_layer_relu, &dt_layer_dropout, &dt_layer_dropout2d, &dt_layer_batchnorm, &dt_layer_add,
    &dt_layer_flatten, &dt_layer_embed, &dt_layer_posembed, &dt_layer_layernorm, &dt_layer_attention, &dt_layer_gelu,
};
#define NLAYERS (sizeof all_layers / sizeof all_layers[0])

const dt_layer_ops *dt_layer_find(const char *kind) {
    for (size_t i = 0; i < NLAYERS; i++)
        if (strcmp(all_layers[i]->kind, kind) == 0) return all_layers[i];
    return NULL;
}

const char *dt_layer_kinds(void) {
    static char buf[256];
    if (!buf[0]) {
        strcat(buf, "input");
        for (size_t i = 0; i < NLAYERS; i++) {
            strcat(buf, ", ");
            strcat(buf, all_layers[i]->kind);
        }
    }
    return buf;
}

void dt_init_uniform(float *w, size_t n, float bound, dt_rng *rng) {
    for (size_t i = 0; i < n; i++) w[i] = (2.0f * dt_rng_uniform(rng) - 1.0f) * bound;
}

void dt_init_normal(float *w, size_t n, float std, dt_rng *rng) {
    for (size_t i = 0; i < n; i += 2) {
        /* 1 - u in (0, 1]: log never sees 0 */
        const double r = sqrt(-2.0 * log(1.0 - (double)dt_rng_uniform(rng))), a = 6.283185307179586 * dt_rng_uniform(rng);
        w[i] = (float)(std * r * cos(a));
        if (i + 1 < n) w[i + 1] = (float)(std * r * sin(a));
    }
}

void dt_store(float *dst, const float *src, size_t n, int acc) {
    if (acc)
        for (size_t i = 0; i < n; i++) dst[i] += src[i];
    else if (dst != src)
        memcpy(dst, src, n * sizeof *dst);
}
