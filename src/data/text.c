/* Texts as datasets (dtrain.h, docs/data.md): a stream of tokens whose examples are windows.
 * Byte-level texts (vocabulary 256, no tokenizer: kjv, fortunes, text:FILE) and llm.c's token
 * files (tokens:FILE: a header of 256 int32 — magic 20240520, version 1, the token count —
 * then the tokens as uint16), so that a corpus tokenized elsewhere trains here. The last tenth
 * of the stream is held out: the test split, the same windows for every run. */
#include "data/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/paths.h"
#include "data/dataset_share.h"

#define TOKENS_MAGIC 20240520
#define TOKENS_HEADER_INTS 256
/* A text of at most 2^31 tokens: window starts fit an int product with the window length. */
#define TEXT_MAX_TOKENS ((long long)1 << 31)

int dt_text_name(const char *name) {
    return !strcmp(name, "kjv") || !strcmp(name, "fortunes") || !strncmp(name, "text:", 5) ||
           !strncmp(name, "tokens:", 7);
}

/* The whole file into memory (a text is a few MB: the windows are drawn from all of it). */
static dt_status read_all(const char *path, unsigned char **out, size_t *len) {
    FILE *f = NULL;
    unsigned long long size = 0;
    dt_status st = dt_open_regular(path, &f, &size);
    if (st != DT_OK) return st;
    if (size > (unsigned long long)TEXT_MAX_TOKENS * 2 + 1024) {
        fclose(f);
        return dt_fail(DT_ERR_FORMAT, "%s: %llu bytes, more than a text of 2^31 tokens", path, size);
    }
    unsigned char *buf = malloc(size ? (size_t)size : 1);
    if (!buf) {
        fclose(f);
        return dt_nomem("the text %s (%llu bytes)", path, size);
    }
    const size_t got = fread(buf, 1, (size_t)size, f);
    const int err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(buf);
        return dt_fail(DT_ERR_IO, "%s: read error (%zu of %llu bytes)", path, got, size);
    }
    *out = buf;
    *len = got;
    return DT_OK;
}

/* A byte-level text: each byte a token of 256. */
static dt_status load_bytes(const char *path, uint16_t **tokens, long long *n) {
    unsigned char *buf;
    size_t len;
    dt_status st = read_all(path, &buf, &len);
    if (st != DT_OK) return st;
    if (!(*tokens = malloc((len ? len : 1) * sizeof **tokens))) {
        free(buf);
        return dt_nomem("the %zu tokens of %s", len, path);
    }
    for (size_t i = 0; i < len; i++) (*tokens)[i] = buf[i];
    free(buf);
    *n = (long long)len;
    return DT_OK;
}

static int32_t le32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* llm.c's token file: its header checked, its tokens (little-endian uint16). */
static dt_status load_tokens(const char *path, uint16_t **tokens, long long *n, int *vocab) {
    unsigned char *buf;
    size_t len;
    dt_status st = read_all(path, &buf, &len);
    if (st != DT_OK) return st;
    const size_t header = TOKENS_HEADER_INTS * 4;
    if (len < header || le32(buf) != TOKENS_MAGIC) {
        free(buf);
        return dt_fail(DT_ERR_FORMAT, "%s: not a token file (expected llm.c's: a header of 256 int32 starting with the "
                       "magic %d, version 1, the token count; then uint16 tokens)", path, TOKENS_MAGIC);
    }
    const int32_t version = le32(buf + 4), count = le32(buf + 8);
    if (version != 1) {
        free(buf);
        return dt_fail(DT_ERR_FORMAT, "%s: token file version %d, expected 1 (uint16 tokens; version 2's uint32 tokens "
                       "are for vocabularies above 65,536, which dtrain does not train)", path, (int)version);
    }
    if (count < 0 || len != header + 2 * (size_t)count) {
        free(buf);
        return dt_fail(DT_ERR_FORMAT, "%s: %zu bytes, but its header says %d tokens (%zu bytes with the header): cut "
                       "short or not a token file", path, len, (int)count, header + 2 * (size_t)(count < 0 ? 0 : count));
    }
    if (!(*tokens = malloc((count ? (size_t)count : 1) * sizeof **tokens))) {
        free(buf);
        return dt_nomem("the %d tokens of %s", (int)count, path);
    }
    int top = 0;
    for (int32_t i = 0; i < count; i++) {
        const unsigned char *p = buf + header + 2 * (size_t)i;
        (*tokens)[i] = (uint16_t)(p[0] | p[1] << 8);
        if ((*tokens)[i] > top) top = (*tokens)[i];
    }
    free(buf);
    *n = count;
    *vocab = top + 1;
    return DT_OK;
}

/* The file a text's name stands for: dir/NAME.txt for the texts get-data makes. */
static void text_path(const char *name, const char *dir, char *out, size_t len) {
    if (!strncmp(name, "text:", 5)) snprintf(out, len, "%s", name + 5);
    else if (!strncmp(name, "tokens:", 7)) snprintf(out, len, "%s", name + 7);
    else snprintf(out, len, "%s/%s.txt", dir && *dir ? dir : ".", name);
}

dt_status dt_text_load(const char *name, const char *dir, int train, dt_dataset *out) {
    memset(out, 0, sizeof *out);
    if (dt_dataset_share_find(name, dir, train, 0, out)) return DT_OK; /* simulation: loaded by a rank */
    char path[4200];
    text_path(name, dir, path, sizeof path);
    const int bytes = strncmp(name, "tokens:", 7) != 0;
    if (bytes && strncmp(name, "text:", 5) && access(path, F_OK) != 0)
        return dt_fail(DT_ERR_IO, "%s: not found; the %s text is missing: run scripts/get-data %s, or name its folder with --data-dir DIR "
                       "(or the folder holding %s/ with DTRAIN_DATA)", path, name, name, name);
    uint16_t *all = NULL;
    long long n = 0;
    int vocab = 256;
    dt_status st = bytes ? load_bytes(path, &all, &n) : load_tokens(path, &all, &n, &vocab);
    if (st != DT_OK) return st;
    /* the held-out tail: the last tenth, the same for every run */
    const long long cut = n - n / 10, from = train ? 0 : cut, to = train ? cut : n;
    out->tokens = malloc((size_t)(to - from > 0 ? to - from : 1) * sizeof *out->tokens);
    if (!out->tokens) {
        free(all);
        return dt_nomem("the %s split of %s (%lld tokens)", train ? "training" : "test", path, to - from);
    }
    memcpy(out->tokens, all + from, (size_t)(to - from) * sizeof *out->tokens);
    free(all);
    snprintf(out->name, sizeof out->name, "%s", bytes ? (strncmp(name, "text:", 5) ? name : "text") : "tokens");
    out->ntokens = to - from;
    out->text = 1;
    out->bytes = bytes;
    out->c = 1, out->h = 0, out->w = 1; /* the window: dt_dataset_set_window */
    out->classes = vocab;
    out->augment = 1; /* each window starts anywhere in its slot (dt_batch_fill_targets) */
    dt_dataset_share_add(name, dir, train, 0, out);
    return DT_OK;
}

dt_status dt_dataset_set_window(dt_dataset *d, int T) {
    if (!d->text) return DT_OK;
    if (T < 1) return dt_fail(DT_ERR_ARG, "a window of %d tokens", T);
    /* window i starts at i*T, or anywhere up to T - 1 later, and takes T + 1 tokens */
    const long long n = (d->ntokens - T) / T;
    if (n < 1)
        return dt_fail(DT_ERR_FORMAT, "%lld tokens, fewer than two windows of the model's context (%d): a longer "
                       "text, or a model of a shorter context", d->ntokens, T);
    d->h = T;
    d->n = n > 0x7fffffff ? 0x7fffffff : (int)n;
    return DT_OK;
}

dt_status dt_text_check_vocab(const dt_dataset *d, int vocab) {
    if (!d->text) return DT_OK;
    for (long long i = 0; i < d->ntokens; i++)
        if (d->tokens[i] >= vocab)
            return dt_fail(DT_ERR_ARG, "token %u at position %lld is beyond the model's vocabulary of %d",
                           (unsigned)d->tokens[i], i, vocab);
    return DT_OK;
}
