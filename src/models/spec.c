/* The model spec text format (docs/model-spec.md): one layer per line,
 *   KIND [key=value ...]
 * starting with "input c=C h=H w=W" (an image) or "input seq=T" (a sequence of T token ids;
 * "input seq=T c=C": of C features). Layers read the previous line's output unless in=NAME
 * says otherwise; "add in=A" adds A to the previous output, "add in=A,B" adds A and B. */
#include "models/model.h"

#include "core/alloc.h"
#include "core/paths.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keys each kind accepts besides name= and in=. */
static const struct { const char *kind, *keys; } allowed[] = {
    {"conv", "out k stride pad bias"}, {"linear", "out bias tie std"}, {"maxpool", "k stride pad"},
    {"avgpool", "k stride pad"}, {"gavgpool", ""}, {"relu", ""}, {"dropout", "p"},
    {"dropout2d", "p"}, {"batchnorm", "eps momentum"}, {"add", ""}, {"flatten", ""},
    {"embed", "vocab out std"}, {"posembed", "std"}, {"layernorm", "eps bias"}, {"attention", "heads"},
    {"gelu", ""},
};

static int key_allowed(const char *kind, const char *key) {
    if (!strcmp(key, "name") || !strcmp(key, "in")) return 1;
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (!strcmp(allowed[i].kind, kind)) {
            const char *k = allowed[i].keys;
            size_t len = strlen(key);
            while ((k = strstr(k, key)) != NULL) {
                if ((k == allowed[i].keys || k[-1] == ' ') && (k[len] == ' ' || k[len] == 0)) return 1;
                k += len;
            }
        }
    return 0;
}

static const char *keys_of(const char *kind) {
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (!strcmp(allowed[i].kind, kind)) return allowed[i].keys;
    return "";
}

static int parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < -1000000 || v > 100000000) return 0;
    *out = (int)v;
    return 1;
}

static int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end) return 0;
    *out = v;
    return 1;
}

static int find_node(const dt_node *nodes, int nn, const char *name) {
    if (!strcmp(name, "input")) return -1;
    for (int i = 0; i < nn; i++)
        if (!strcmp(nodes[i].name, name)) return i;
    return -2;
}

/* "input c=C h=H w=W" or "input seq=T [c=C]": the rest of the line, after its kind */
static dt_status parse_input(char **save_tok, const char *origin, int lineno, int *in_c, int *in_h, int *in_w,
                             int *in_seq) {
    int vals[4] = {0, 0, 0, 0}, pos = 0; /* c h w seq */
    for (char *tok; (tok = strtok_r(NULL, " \t\r", save_tok));) {
        char *eq = strchr(tok, '=');
        const char *v = eq ? eq + 1 : tok;
        int idx = pos;
        if (eq) {
            *eq = 0;
            idx = !strcmp(tok, "c") ? 0 : !strcmp(tok, "h") ? 1 : !strcmp(tok, "w") ? 2 : !strcmp(tok, "seq") ? 3 : -1;
            if (idx < 0) return dt_fail(DT_ERR_FORMAT, "%s:%d: unknown key '%s' for input (expected c, h, w or seq)", origin, lineno, tok);
        } else pos++;
        if (idx > 3 || (!eq && idx > 2) || !parse_int(v, &vals[idx]) || vals[idx] < 1)
            return dt_fail(DT_ERR_FORMAT, "%s:%d: input: expected c=C h=H w=W or seq=T with positive integers, got '%s'", origin, lineno, v);
    }
    if (vals[3]) { /* a sequence: T positions of c features (1: token ids) */
        if (vals[1] || vals[2]) return dt_fail(DT_ERR_FORMAT, "%s:%d: input seq=T takes no h= or w= (a sequence is T positions of c= features, 1 by default)", origin, lineno);
        vals[0] = vals[0] ? vals[0] : 1;
        vals[1] = vals[3];
        vals[2] = 1;
        *in_seq = 1;
    }
    if (!vals[0] || !vals[1] || !vals[2]) return dt_fail(DT_ERR_FORMAT, "%s:%d: input needs c=, h= and w= (or seq=)", origin, lineno);
    *in_c = vals[0]; *in_h = vals[1]; *in_w = vals[2];
    return DT_OK;
}

/* A layer line's key=value pairs into n; in= and tie= as names, resolved by wire_inputs */
static dt_status parse_keys(const char *kind, dt_node *n, char **save_tok, const char *origin, int lineno,
                            char inputs[2][DT_NODE_NAME], char tie[DT_NODE_NAME], int *ninputs_named) {
    for (char *tok; (tok = strtok_r(NULL, " \t\r", save_tok));) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1]) return dt_fail(DT_ERR_FORMAT, "%s:%d: expected key=value, got '%s'", origin, lineno, tok);
        *eq = 0;
        const char *v = eq + 1;
        if (!key_allowed(kind, tok))
            return dt_fail(DT_ERR_FORMAT, "%s:%d: unknown key '%s' for %s (expected: %s%sname, in)", origin, lineno, tok, kind, keys_of(kind), *keys_of(kind) ? " " : "");
        int ok = 1;
        if (!strcmp(tok, "name")) {
            if (strlen(v) >= DT_NODE_NAME - 16 || !strcmp(v, "input")) ok = 0;
            else snprintf(n->name, sizeof n->name, "%s", v);
        } else if (!strcmp(tok, "in")) {
            const char *comma = strchr(v, ',');
            size_t l0 = comma ? (size_t)(comma - v) : strlen(v);
            if (l0 == 0 || l0 >= DT_NODE_NAME || (comma && (strchr(comma + 1, ',') || strlen(comma + 1) >= DT_NODE_NAME || !comma[1]))) ok = 0;
            else {
                memcpy(inputs[0], v, l0); inputs[0][l0] = 0;
                *ninputs_named = 1;
                if (comma) { snprintf(inputs[1], DT_NODE_NAME, "%s", comma + 1); *ninputs_named = 2; }
            }
        } else if (!strcmp(tok, "out")) ok = parse_int(v, &n->out);
        else if (!strcmp(tok, "k")) ok = parse_int(v, &n->k);
        else if (!strcmp(tok, "stride")) ok = parse_int(v, &n->stride) && n->stride >= 1;
        else if (!strcmp(tok, "pad")) ok = parse_int(v, &n->pad);
        else if (!strcmp(tok, "bias")) ok = parse_int(v, &n->bias) && (n->bias == 0 || n->bias == 1);
        else if (!strcmp(tok, "p")) ok = parse_float(v, &n->p);
        else if (!strcmp(tok, "eps")) ok = parse_float(v, &n->eps) && n->eps > 0;
        else if (!strcmp(tok, "momentum")) ok = parse_float(v, &n->momentum) && n->momentum > 0 && n->momentum <= 1;
        else if (!strcmp(tok, "heads")) ok = parse_int(v, &n->heads) && n->heads >= 1;
        else if (!strcmp(tok, "vocab")) ok = parse_int(v, &n->vocab) && n->vocab >= 1;
        else if (!strcmp(tok, "std")) ok = parse_float(v, &n->std) && n->std > 0 && n->std < 1e6f;
        else if (!strcmp(tok, "tie")) ok = strlen(v) < DT_NODE_NAME && snprintf(tie, DT_NODE_NAME, "%s", v) > 0;
        if (!ok) return dt_fail(DT_ERR_FORMAT, "%s:%d: bad value '%s' for %s=", origin, lineno, v, tok);
    }
    return DT_OK;
}

/* Node nn's in= and tie= names as indices of earlier nodes (none named: the previous line's) */
static dt_status wire_inputs(dt_node *nodes, int nn, const char *kind, char inputs[2][DT_NODE_NAME],
                             const char *tie, int ninputs_named, const char *origin, int lineno) {
    dt_node *n = &nodes[nn];
    const dt_layer_ops *ops = n->ops;
    if (ops->ninputs == 2) {
        if (ninputs_named == 0) return dt_fail(DT_ERR_FORMAT, "%s:%d: add needs in=NAME (adds NAME to the previous output) or in=A,B", origin, lineno);
        if (ninputs_named == 1) { snprintf(inputs[1], DT_NODE_NAME, "%s", inputs[0]); inputs[0][0] = 0; }
    } else if (ninputs_named == 2)
        return dt_fail(DT_ERR_FORMAT, "%s:%d: %s takes one input, in= names two", origin, lineno, kind);
    for (int j = 0; j < ops->ninputs; j++) {
        if (!inputs[j][0]) {
            if (nn == 0 && j == 0) n->in[0] = -1;
            continue;
        }
        int idx = find_node(nodes, nn, inputs[j]);
        if (idx == -2) return dt_fail(DT_ERR_FORMAT, "%s:%d: in=%s: no earlier layer has that name", origin, lineno, inputs[j]);
        n->in[j] = idx;
    }
    if (nn == 0 && !inputs[0][0]) n->in[0] = -1;
    if (tie[0]) {
        const int idx = find_node(nodes, nn, tie);
        if (idx < 0) return dt_fail(DT_ERR_FORMAT, "%s:%d: tie=%s: no earlier layer has that name", origin, lineno, tie);
        n->tie = idx + 1; /* its kind and shape: dt_model_build */
    }
    return DT_OK;
}

/* Node nn's name: the one it was given, unless an earlier node has it, or prefix + running count */
static dt_status name_node(dt_node *nodes, int nn, const char *origin, int lineno) {
    dt_node *n = &nodes[nn];
    const dt_layer_ops *ops = n->ops;
    if (!n->name[0]) {
        int count = 1;
        for (int i = 0; i < nn; i++)
            if (!strcmp(nodes[i].ops->auto_prefix, ops->auto_prefix)) count++;
        snprintf(n->name, sizeof n->name, "%s%d", ops->auto_prefix, count);
        while (find_node(nodes, nn, n->name) != -2)
            snprintf(n->name, sizeof n->name, "%s%d", ops->auto_prefix, ++count);
    } else if (find_node(nodes, nn, n->name) != -2)
        return dt_fail(DT_ERR_FORMAT, "%s:%d: name=%s is already used by an earlier layer", origin, lineno, n->name);
    return DT_OK;
}

/* A layer line after its kind: node nn, its keys, inputs and name */
static dt_status parse_layer(dt_node *nodes, int nn, const dt_layer_ops *ops, const char *kind, char **save_tok,
                             const char *origin, int lineno) {
    dt_node *n = &nodes[nn];
    n->ops = ops;
    n->bias = 1;
    n->p = 0.5f;
    n->in[0] = nn - 1; n->in[1] = -2;
    char inputs[2][DT_NODE_NAME] = {"", ""}, tie[DT_NODE_NAME] = "";
    int ninputs_named = 0;
    dt_status st = parse_keys(kind, n, save_tok, origin, lineno, inputs, tie, &ninputs_named);
    if (st == DT_OK) st = wire_inputs(nodes, nn, kind, inputs, tie, ninputs_named, origin, lineno);
    if (st == DT_OK) st = name_node(nodes, nn, origin, lineno);
    return st;
}

dt_status dt_model_from_spec(const char *text, const char *origin, dt_model **out) {
    *out = NULL;
    size_t cap = 16;
    int nn = 0, have_input = 0, in_c = 0, in_h = 0, in_w = 0, in_seq = 0, lineno = 0;
    dt_node *nodes = calloc(cap, sizeof *nodes);
    char *copy = strdup(text);
    if (!nodes || !copy) { free(nodes); free(copy); return dt_nomem("the model spec %s", origin); }
    dt_status st = DT_OK;
    for (char *next = copy; next;) {
        char *line = next, *nl = strchr(next, '\n');
        if (nl) { *nl = 0; next = nl + 1; } else next = NULL;
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *save_tok = NULL;
        char *kind = strtok_r(line, " \t\r", &save_tok);
        if (!kind) continue;
        if (!strcmp(kind, "input")) {
            if (have_input || nn) { st = dt_fail(DT_ERR_FORMAT, "%s:%d: 'input' must be the first line, once", origin, lineno); goto fail; }
            if ((st = parse_input(&save_tok, origin, lineno, &in_c, &in_h, &in_w, &in_seq)) != DT_OK) goto fail;
            have_input = 1;
            continue;
        }
        if (!have_input) { st = dt_fail(DT_ERR_FORMAT, "%s:%d: the first line must be 'input c=C h=H w=W'", origin, lineno); goto fail; }
        const dt_layer_ops *ops = dt_layer_find(kind);
        if (!ops) { st = dt_fail(DT_ERR_FORMAT, "%s:%d: unknown layer '%s' (expected one of: %s)", origin, lineno, kind, dt_layer_kinds()); goto fail; }
        if ((size_t)nn == cap) {
            dt_node *nb = realloc(nodes, 2 * cap * sizeof *nodes);
            if (!nb) { st = dt_nomem("%zu layers of %s", 2 * cap, origin); goto fail; }
            memset(nb + cap, 0, cap * sizeof *nodes);
            nodes = nb; cap *= 2;
        }
        if ((st = parse_layer(nodes, nn, ops, kind, &save_tok, origin, lineno)) != DT_OK) goto fail;
        nn++;
    }
    free(copy);
    if (!have_input) { free(nodes); return dt_fail(DT_ERR_FORMAT, "%s: no 'input c=C h=H w=W' line", origin); }
    return dt_model_build(nodes, nn, in_c, in_h, in_w, in_seq, origin, out);
fail:
    free(copy);
    free(nodes);
    return st;
}

dt_status dt_model_spec_read(const char *path, char **text) {
    *text = NULL;
    FILE *f;
    unsigned long long size = 0;
    dt_status st = dt_open_regular(path, &f, &size); /* a FIFO named as a spec is refused, not waited on */
    if (st != DT_OK) return st;
    if (size > (1u << 20)) { fclose(f); return dt_fail(DT_ERR_FORMAT, "%s: model spec file larger than 1 MB", path); }
    char *buf = malloc((size_t)size + 1);
    if (!buf) { fclose(f); return dt_nomem("the model spec %s (%llu bytes)", path, size); }
    /* what is there now: a file that grew since fstat is read to its size then */
    const size_t len = fread(buf, 1, (size_t)size, f);
    const int err = ferror(f);
    fclose(f);
    if (err) { free(buf); return dt_fail(DT_ERR_IO, "%s: read error", path); }
    buf[len] = 0;
    if (memchr(buf, 0, len)) { free(buf); return dt_fail(DT_ERR_FORMAT, "%s: not a text file", path); }
    *text = buf;
    return DT_OK;
}

dt_status dt_model_from_file(const char *path, dt_model **out) {
    *out = NULL;
    char *buf;
    dt_status st = dt_model_spec_read(path, &buf);
    if (st != DT_OK) return st;
    st = dt_model_from_spec(buf, path, out);
    free(buf);
    return st;
}
