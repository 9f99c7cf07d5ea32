/* Built-in models, each an embedded spec text (so `dtrain info --spec` can print it and users
 * can copy and edit it). Parameter names follow the PyTorch modules they mirror. */
#include "models/model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char spec_mlp[] =
    "# 784-100-10 two-layer network\n"
    "input c=1 h=28 w=28\n"
    "linear out=100\n"
    "relu\n"
    "linear out=10\n";

/* EventGraD Table I */
static const char spec_cnn1[] =
    "input c=1 h=28 w=28\n"
    "conv out=10 k=5\n"
    "maxpool k=2\n"
    "relu\n"
    "conv out=20 k=5\n"
    "dropout2d p=0.5\n"
    "maxpool k=2\n"
    "relu\n"
    "flatten\n"
    "linear out=100\n"
    "relu\n"
    "dropout p=0.5\n"
    "linear out=10\n";

/* EventGraD Table II: k3 kernels, 20x5x5 = 500 features */
static const char spec_cnn2[] =
    "input c=1 h=28 w=28\n"
    "conv out=10 k=3\n"
    "maxpool k=2\n"
    "relu\n"
    "conv out=20 k=3\n"
    "dropout2d p=0.5\n"
    "maxpool k=2\n"
    "relu\n"
    "flatten\n"
    "linear out=100\n"
    "relu\n"
    "dropout p=0.5\n"
    "linear out=10\n";

/* The Downpour report's MNIST model (PyTorch's MNIST example network) */
static const char spec_downpour_cnn[] =
    "input c=1 h=28 w=28\n"
    "conv out=32 k=3\n"
    "relu\n"
    "conv out=64 k=3\n"
    "relu\n"
    "maxpool k=2\n"
    "dropout p=0.25\n"
    "flatten\n"
    "linear out=128\n"
    "relu\n"
    "dropout p=0.5\n"
    "linear out=10\n";

/* AlexNet adapted to 32x32x3: five 3x3 convolutions (64-192-384-256-256, pad 1), max pooling
 * after the 1st, 2nd and 5th, then 4096-1024-1024-10 with dropout 0.5 before the first two. */
static const char spec_alexnet_cifar[] =
    "input c=3 h=32 w=32\n"
    "conv out=64 k=3 pad=1\n"
    "relu\n"
    "maxpool k=2\n"
    "conv out=192 k=3 pad=1\n"
    "relu\n"
    "maxpool k=2\n"
    "conv out=384 k=3 pad=1\n"
    "relu\n"
    "conv out=256 k=3 pad=1\n"
    "relu\n"
    "conv out=256 k=3 pad=1\n"
    "relu\n"
    "maxpool k=2\n"
    "flatten\n"
    "dropout p=0.5\n"
    "linear out=1024\n"
    "relu\n"
    "dropout p=0.5\n"
    "linear out=1024\n"
    "relu\n"
    "linear out=10\n";

/* A stem and one strided basic block with projection shortcut: small enough for finite
 * differences and the PyTorch oracle, and it exercises batch-norm and residual add. */
static const char spec_resblock_tiny[] =
    "input c=3 h=8 w=8\n"
    "conv out=8 k=3 pad=1 bias=0 name=conv1\n"
    "batchnorm name=bn1\n"
    "relu name=relu1\n"
    "conv out=16 k=3 stride=2 pad=1 bias=0 name=block.conv1\n"
    "batchnorm name=block.bn1\n"
    "relu\n"
    "conv out=16 k=3 pad=1 bias=0 name=block.conv2\n"
    "batchnorm name=block.bn2\n"
    "conv out=16 k=1 stride=2 bias=0 name=block.shortcut.0 in=relu1\n"
    "batchnorm name=block.shortcut.1\n"
    "add in=block.bn2,block.shortcut.1\n"
    "relu\n"
    "gavgpool\n"
    "flatten\n"
    "linear out=10 name=fc\n";

static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if (n < 0) return 0;
        if (*len + (size_t)n < *cap) { *len += (size_t)n; return 1; }
        size_t ncap = *cap * 2 + (size_t)n;
        char *nb = realloc(*buf, ncap);
        if (!nb) return 0;
        *buf = nb; *cap = ncap;
    }
}

/* ResNet-18 for CIFAR-10 (3x3 stem, no stem pooling, stages of 2 basic blocks with
 * 64-128-256-512 planes, 1x1 projection shortcuts, global average pool, linear 512->10). */
static char *resnet18_cifar_spec(void) {
    size_t len = 0, cap = 4096;
    char *b = malloc(cap);
    if (!b) return NULL;
    b[0] = 0;
    int ok = appendf(&b, &len, &cap,
                     "# ResNet-18 for CIFAR-10 (generated)\n"
                     "input c=3 h=32 w=32\n"
                     "conv out=64 k=3 pad=1 bias=0 name=conv1\n"
                     "batchnorm name=bn1\n"
                     "relu name=relu\n");
    const int planes[4] = {64, 128, 256, 512};
    char prev[48] = "relu"; /* pre and ".relu" */
    int in_planes = 64;
    for (int s = 0; s < 4 && ok; s++)
        for (int blk = 0; blk < 2 && ok; blk++) {
            int stride = (s > 0 && blk == 0) ? 2 : 1, p = planes[s];
            char pre[32]; /* "layerS.B" with any int: 29 bytes */
            snprintf(pre, sizeof pre, "layer%d.%d", s + 1, blk);
            ok = appendf(&b, &len, &cap,
                         "conv out=%d k=3 stride=%d pad=1 bias=0 name=%s.conv1 in=%s\n"
                         "batchnorm name=%s.bn1\n"
                         "relu name=%s.relu1\n"
                         "conv out=%d k=3 pad=1 bias=0 name=%s.conv2\n"
                         "batchnorm name=%s.bn2\n",
                         p, stride, pre, prev, pre, pre, p, pre, pre);
            if (ok && (stride != 1 || in_planes != p))
                ok = appendf(&b, &len, &cap,
                             "conv out=%d k=1 stride=%d bias=0 name=%s.shortcut.0 in=%s\n"
                             "batchnorm name=%s.shortcut.1\n"
                             "add in=%s.bn2,%s.shortcut.1\n",
                             p, stride, pre, prev, pre, pre, pre);
            else if (ok)
                ok = appendf(&b, &len, &cap, "add in=%s.bn2,%s\n", pre, prev);
            if (ok) ok = appendf(&b, &len, &cap, "relu name=%s.relu\n", pre);
            snprintf(prev, sizeof prev, "%s.relu", pre);
            in_planes = p;
        }
    if (ok) ok = appendf(&b, &len, &cap, "gavgpool\nflatten\nlinear out=10 name=linear\n");
    if (!ok) { free(b); return NULL; }
    return b;
}

/* nanoGPT's GPT (model.py) as a spec, its module names as the layers' names so that weights
 * files and safetensors carry its state_dict's keys: token and position embeddings, blocks of
 *   x = x + c_proj(attention(c_attn(ln_1(x)))),  x = x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))
 * then ln_f and the head tied to the token embedding (lm_head.weight is transformer.wte.weight).
 * Biases in linears and layer norms (GPT-2's, nanoGPT's bias=True), no dropout (its CPU recipe's
 * 0.0). Its initialisation: N(0, 0.02) weights and embeddings, the residual projections
 * (c_proj) N(0, 0.02 / sqrt(2 layers)), biases 0, layer norms 1 and 0. */
char *dt_gpt_spec(int layers, int heads, int width, int context, int vocab) {
    size_t len = 0, cap = 4096;
    char *b = malloc(cap);
    if (!b) return NULL;
    b[0] = 0;
    const double proj_std = 0.02 / sqrt(2.0 * layers);
    int ok = appendf(&b, &len, &cap,
                     "# nanoGPT's GPT: %d layers, %d heads, width %d, context %d, vocabulary %d (generated)\n"
                     "input seq=%d\n"
                     "embed vocab=%d out=%d std=0.02 name=transformer.wte\n"
                     "posembed std=0.02 name=transformer.wpe\n",
                     layers, heads, width, context, vocab, context, vocab, width);
    char prev[48] = "transformer.wpe"; /* the residual stream so far */
    for (int l = 0; l < layers && ok; l++) {
        char h[32];
        snprintf(h, sizeof h, "transformer.h.%d", l);
        ok = appendf(&b, &len, &cap,
                     "layernorm name=%s.ln_1\n"
                     "linear out=%d std=0.02 name=%s.attn.c_attn\n"
                     "attention heads=%d name=%s.attn\n"
                     "linear out=%d std=%.9g name=%s.attn.c_proj\n"
                     "add in=%s name=%s.res_attn\n"
                     "layernorm name=%s.ln_2\n"
                     "linear out=%d std=0.02 name=%s.mlp.c_fc\n"
                     "gelu name=%s.mlp.gelu\n"
                     "linear out=%d std=%.9g name=%s.mlp.c_proj\n"
                     "add in=%s.res_attn name=%s.res_mlp\n",
                     h, 3 * width, h, heads, h, width, proj_std, h, prev, h, h, 4 * width, h, h, width, proj_std, h, h,
                     h);
        snprintf(prev, sizeof prev, "%s.res_mlp", h);
    }
    if (ok)
        ok = appendf(&b, &len, &cap,
                     "layernorm name=transformer.ln_f\n"
                     "linear out=%d bias=0 tie=transformer.wte name=lm_head\n",
                     vocab);
    if (!ok) { free(b); return NULL; }
    return b;
}

static const char *const model_names[] = {
    "mlp", "cnn1", "cnn2", "downpour-cnn", "alexnet-cifar", "resnet18-cifar", "resblock-tiny", "gpt-tiny", "gpt-small",
    NULL,
};

const char *const *dt_model_names(void) { return model_names; }

char *dt_model_spec_text(const char *name) {
    const char *s = NULL;
    if (!strcmp(name, "mlp")) s = spec_mlp;
    else if (!strcmp(name, "cnn1")) s = spec_cnn1;
    else if (!strcmp(name, "cnn2")) s = spec_cnn2;
    else if (!strcmp(name, "downpour-cnn")) s = spec_downpour_cnn;
    else if (!strcmp(name, "alexnet-cifar")) s = spec_alexnet_cifar;
    else if (!strcmp(name, "resblock-tiny")) s = spec_resblock_tiny;
    else if (!strcmp(name, "resnet18-cifar")) return resnet18_cifar_spec();
    /* nanoGPT's CPU configuration (its Shakespeare-char recipe): 834,304 parameters */
    else if (!strcmp(name, "gpt-tiny")) return dt_gpt_spec(4, 4, 128, 64, 256);
    /* its GPU configuration on bytes: 10.8M */
    else if (!strcmp(name, "gpt-small")) return dt_gpt_spec(6, 6, 384, 256, 256);
    return s ? strdup(s) : NULL;
}

dt_status dt_model_from_name(const char *name, dt_model **out) {
    *out = NULL;
    char *text = dt_model_spec_text(name);
    if (!text) {
        char list[256] = "";
        for (int i = 0; model_names[i]; i++) {
            strcat(list, i ? ", " : "");
            strcat(list, model_names[i]);
        }
        return dt_fail(DT_ERR_ARG, "unknown model '%s' (expected one of: %s, or a spec file path)",
                       name, list);
    }
    dt_status st = dt_model_from_spec(text, name, out);
    free(text);
    return st;
}
