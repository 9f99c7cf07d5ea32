/* dtrain sample: text from a language model's weights, so that a person sees what it learned.
 * Each new token is drawn from the model's prediction at the last position of the text so far
 * (its last T tokens, T the model's context), as nanoGPT's sample.py draws them: the logits
 * divided by --temperature, cut to the --top-k most likely, softmax, one seeded draw. A text
 * shorter than T sits at the window's start, the rest of it filled with token 0: attention is
 * causal, so what follows a position does not change the prediction there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/alloc.h"
#include "core/flag_table.h"
#include "core/paths.h"
#include "data/text.h"
#include "dtrain.h"
#include "trainer/trainer.h"

typedef struct {
    const char *weights, *model, *prompt;
    long tokens;
    float temperature;
    int top_k;
    uint64_t seed;
} sample_opts;

static const dt_flag sample_flags[] = {
    {"weights", DT_AT_TEXT(sample_opts, weights), .help = "weights of a language model trained on a text (required)"},
    {"model", DT_AT_TEXT(sample_opts, model), .help = "model name or spec file", .zero = "the one the weights file names"},
    {"prompt", DT_AT_TEXT(sample_opts, prompt), .zero = "a new line",
     .help = "the text to continue (a byte-level model's: its bytes; a token file's: token ids, space-separated)"},
    {"tokens", DT_AT_INT(sample_opts, tokens), .def = "500", .min = 1, .max = 1e7, .help = "tokens to generate"},
    {"temperature", DT_AT_FLOAT(sample_opts, temperature), .def = "0.8", .min = 0, .max = 100,
     .help = "the logits' divisor: below 1 surer, above 1 wilder; 0: always the most likely"},
    {"top-k", DT_AT_INT(sample_opts, top_k), .def = "200", .min = 0, .max = 1e6, .help = "draw among the K most likely (0: all)"},
    {"seed", DT_AT_SEED(sample_opts, seed), .def = "1", .help = "the draws' seed"},
};

/* The prompt as tokens: bytes, or token ids for a model of a token file. */
static dt_status prompt_tokens(const char *prompt, int bytes, int vocab, uint16_t **out, long *n) {
    const size_t len = strlen(prompt);
    DT_TRY(dt_malloc(*out, len + 1, "the prompt's %zu tokens", len + 1));
    *n = 0;
    if (bytes) {
        for (size_t i = 0; i < len; i++) (*out)[(*n)++] = (unsigned char)prompt[i];
    } else {
        for (const char *p = prompt; *p;) {
            char *end;
            const long id = strtol(p, &end, 10);
            if (end == p || id < 0 || id >= vocab || (*end && *end != ' '))
                return dt_fail(DT_ERR_ARG, "--prompt %s: expected token ids from 0 to %d, space-separated (the model "
                               "was trained on a token file)", prompt, vocab - 1);
            (*out)[(*n)++] = (uint16_t)id;
            p = end + strspn(end, " ");
        }
    }
    for (long i = 0; i < *n; i++)
        if ((*out)[i] >= vocab) return dt_fail(DT_ERR_ARG, "--prompt: byte %u is beyond the model's vocabulary of %d", (*out)[i], vocab);
    return DT_OK;
}

static void put_token(uint16_t tok, int bytes) {
    if (bytes) putchar(tok);
    else printf("%u ", (unsigned)tok);
}

/* One draw from row (V logits): temperature, top-k, softmax, the seeded uniform. */
static uint16_t draw(const float *row, int V, const sample_opts *o, double *p, dt_rng *rng) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (row[v] > row[best]) best = v;
    if (o->temperature == 0) return (uint16_t)best;
    double cut = -INFINITY; /* the K-th largest logit */
    if (o->top_k > 0 && o->top_k < V) {
        for (int v = 0; v < V; v++) p[v] = row[v];
        for (int k = 0; k < o->top_k; k++) { /* K passes: K and V are small (V: the vocabulary) */
            int at = -1;
            for (int v = 0; v < V; v++)
                if (p[v] > -INFINITY && (at < 0 || p[v] > p[at])) at = v;
            cut = p[at];
            p[at] = -INFINITY;
        }
    }
    double sum = 0;
    for (int v = 0; v < V; v++) {
        p[v] = row[v] >= cut ? exp(((double)row[v] - row[best]) / o->temperature) : 0;
        sum += p[v];
    }
    double u = (double)(dt_rng_next(rng) >> 11) * 0x1.0p-53 * sum;
    for (int v = 0; v < V; v++)
        if ((u -= p[v]) < 0) return (uint16_t)v;
    return (uint16_t)best;
}

static dt_status sample(dt_model *m, const sample_opts *o, int bytes) {
    int c, T, w;
    dt_model_input_shape(m, &c, &T, &w);
    const int V = dt_model_num_classes(m), vocab = dt_model_vocab(m);
    if (!vocab || dt_model_positions(m) != T)
        return dt_fail(DT_ERR_ARG, "sample: %s is not a language model's weights (expected an 'input seq=T' of token ids "
                       "and a prediction at every position)", o->weights);
    uint16_t *prompt = NULL;
    long n = 0;
    dt_status st = prompt_tokens(o->prompt ? o->prompt : "\n", bytes, vocab, &prompt, &n);
    uint16_t *text = NULL;
    float *x = NULL;
    double *p = NULL;
    if (st == DT_OK && n == 0) st = dt_fail(DT_ERR_ARG, "--prompt: empty (leave it out for a new line)");
    if (st == DT_OK) st = dt_malloc(text, (size_t)(n + o->tokens), "the text of %ld tokens", n + o->tokens);
    if (st == DT_OK) st = dt_calloc(x, (size_t)T, "a window of %d tokens", T);
    if (st == DT_OK) st = dt_malloc(p, (size_t)V, "the %d probabilities", V);
    if (st == DT_OK) st = dt_model_reserve(m, 1);
    dt_rng rng;
    dt_rng_seed(&rng, dt_seed_mix(o->seed, 0x5a3b1e, 0, 0));
    if (st == DT_OK) {
        memcpy(text, prompt, (size_t)n * sizeof *text);
        for (long i = 0; i < n; i++) put_token(text[i], bytes);
    }
    for (long len = n; st == DT_OK && len < n + o->tokens; len++) {
        const long from = len > T ? len - T : 0, have = len - from;
        for (int t = 0; t < T; t++) x[t] = t < have ? (float)text[from + t] : 0.0f;
        const float *logits = dt_model_forward(m, x, 1, 0);
        text[len] = draw(logits + (size_t)(have - 1) * V, V, o, p, &rng);
        if (text[len] >= vocab) /* a head wider than the embedding: a token the model cannot read back */
            st = dt_fail(DT_ERR_ARG, "sample: the model predicted token %u, beyond its vocabulary of %d", text[len], vocab);
        else put_token(text[len], bytes);
        fflush(stdout);
    }
    if (st == DT_OK) putchar('\n');
    free(prompt), free(text), free(x), free(p);
    return st;
}

int dt_cmd_sample(int argc, char **argv) {
    sample_opts o = {0};
    const dt_flag_list list = {.flags = sample_flags, .n = NOPTS(sample_flags), .base = &o};
    int help = 0;
    dt_status st = dt_flags_defaults(sample_flags, NOPTS(sample_flags), &o);
    if (st == DT_OK) st = dt_flags_parse_argv("sample", argc, argv, 2, &list, 1, &help);
    if (st != DT_OK) return dt_cli_fail();
    if (help) {
        dt_flags_help("sample", "--weights FILE [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S]\n\n"
                                "Prints text a language model writes, continuing the prompt (docs/cli.md).", &list, 1);
        return 0;
    }
    if (!o.weights) { dt_fail(DT_ERR_ARG, "dtrain sample: --weights FILE is required"); return dt_cli_fail(); }
    if (dt_check_input("--weights", o.weights) != DT_OK) return dt_cli_fail();
    dt_runtime_init();
    dt_weights_meta w;
    if (dt_weights_meta_read(o.weights, &w) != DT_OK) return dt_cli_fail();
    dt_model *m = NULL;
    st = dt_weights_model("sample", o.model, o.weights, &w, &m);
    if (st == DT_OK) st = dt_model_load(m, o.weights);
    /* a byte-level text's model writes bytes; a token file's, token ids */
    const int bytes = !(w.data && !strncmp(w.data, "tokens:", 7));
    if (st == DT_OK && w.data && !dt_text_name(w.data))
        st = dt_fail(DT_ERR_ARG, "sample: %s was trained on %s, not on a text", o.weights, w.data);
    if (st == DT_OK) st = sample(m, &o, bytes);
    dt_model_free(m);
    dt_weights_meta_free(&w);
    return st == DT_OK ? 0 : dt_cli_fail();
}
