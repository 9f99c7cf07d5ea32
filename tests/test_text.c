/* Texts as datasets (src/data/text.c, docs/data.md): a byte text's split into training part and
 * held-out tail, its windows and their targets (the next token), the augmentation's offsets;
 * llm.c's token files, and every malformed one refused in one line naming the file; the splits
 * a text takes (random, contiguous) and those it does not (class, equal). Files are written to
 * a temporary folder. */
#include "dtrain.h"
#include "check.h"
#include "data/text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/dtrain-test-text.XXXXXX";

static const char *path_of(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) { fprintf(stderr, "cannot write %s\n", path); exit(2); }
    fclose(f);
}

/* llm.c's layout: 256 little-endian int32 (magic, version, count), then count uint16. */
static void write_tokens(const char *path, int magic, int version, int count, const uint16_t *tok, int ntok) {
    unsigned char *buf = calloc(1024 + 2 * (size_t)ntok, 1);
    const int head[3] = {magic, version, count};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++) buf[4 * i + b] = (unsigned char)((uint32_t)head[i] >> (8 * b));
    for (int i = 0; i < ntok; i++) buf[1024 + 2 * i] = (unsigned char)tok[i], buf[1024 + 2 * i + 1] = (unsigned char)(tok[i] >> 8);
    write_file(path, buf, 1024 + 2 * (size_t)ntok);
    free(buf);
}

/* 1000 bytes of text: byte i is 32 + i % 90 */
static void test_bytes(void) {
    unsigned char text[1000];
    for (int i = 0; i < 1000; i++) text[i] = (unsigned char)(32 + i % 90);
    write_file(path_of("t.txt"), text, sizeof text);
    char name[600];
    snprintf(name, sizeof name, "text:%s", path_of("t.txt"));
    dt_dataset tr, te;
    CHECK(dt_dataset_load(name, NULL, 1, &tr) == DT_OK);
    CHECK(dt_dataset_load(name, NULL, 0, &te) == DT_OK);
    CHECK(tr.text && tr.bytes && tr.classes == 256 && tr.ntokens == 900 && te.ntokens == 100);
    CHECK(tr.tokens[0] == 32 && te.tokens[0] == 32 + 900 % 90); /* the tail is the last tenth */
    CHECK(dt_dataset_set_window(&tr, 16) == DT_OK && dt_dataset_set_window(&te, 16) == DT_OK);
    CHECK(tr.h == 16 && tr.c == 1 && tr.w == 1 && dt_dataset_positions(&tr) == 16);
    CHECK(tr.n == (900 - 16) / 16 && te.n == (100 - 16) / 16);
    /* windows 3 and 0: inputs from 3*16 and 0, targets one token on */
    int idx[2] = {3, 0};
    float x[32];
    uint16_t y[32];
    dt_batch_fill_targets(&tr, idx, 2, x, y, 0, NULL);
    int ok = 1;
    for (int t = 0; t < 16; t++) {
        ok &= x[t] == (float)(32 + (48 + t) % 90) && y[t] == 32 + (48 + t + 1) % 90;
        ok &= x[16 + t] == (float)(32 + t % 90) && y[16 + t] == 32 + (t + 1) % 90;
    }
    CHECK_MSG(ok, "window 3 of the training part, then window 0");
    /* augmented: each window starts 0..15 after its slot's start, every offset seen, targets
     * still the next tokens; the same seed the same offsets */
    int seen[16] = {0}, follows = 1;
    dt_rng r1, r2;
    dt_rng_seed(&r1, 7), dt_rng_seed(&r2, 7);
    for (int rep = 0; rep < 400; rep++) {
        int k = rep % tr.n;
        float xa[16], xb[16];
        dt_batch_fill_targets(&tr, &k, 1, xa, y, 1, &r1);
        dt_batch_fill_targets(&tr, &k, 1, xb, NULL, 1, &r2);
        const int off = ((int)xa[0] - 32 - (k * 16) % 90 + 90) % 90;
        if (off >= 0 && off < 16) seen[off]++;
        else follows = 0;
        follows &= !memcmp(xa, xb, sizeof xa);
        for (int t = 0; t < 16; t++) follows &= y[t] == 32 + (k * 16 + off + t + 1) % 90;
    }
    int all = 1;
    for (int o = 0; o < 16; o++) all &= seen[o] > 0;
    CHECK_MSG(follows && all, "augmented windows: offsets within the slot, targets the next tokens, reproducible");
    /* a window the text cannot give twice over */
    CHECK(dt_dataset_set_window(&te, 60) != DT_OK && strstr(dt_last_error(), "fewer than two windows"));
    dt_dataset_free(&tr);
    dt_dataset_free(&te);
}

static void test_token_files(void) {
    uint16_t tok[300];
    int top = 0;
    for (int i = 0; i < 300; i++) tok[i] = (uint16_t)(i * 7 % 1000), top = tok[i] > top ? tok[i] : top;
    write_tokens(path_of("good.bin"), 20240520, 1, 300, tok, 300);
    char name[600];
    snprintf(name, sizeof name, "tokens:%s", path_of("good.bin"));
    dt_dataset d;
    CHECK(dt_dataset_load(name, NULL, 1, &d) == DT_OK);
    CHECK(d.text && !d.bytes && d.ntokens == 270 && d.tokens[5] == 35 && d.classes == top + 1);
    CHECK(dt_text_check_vocab(&d, 1000) == DT_OK);
    CHECK(dt_text_check_vocab(&d, 256) != DT_OK && strstr(dt_last_error(), "beyond the model's vocabulary of 256"));
    dt_dataset_free(&d);
    struct {
        const char *file, *want;
        int magic, version, count, ntok;
    } bad[] = {
        {"magic.bin", "not a token file", 12345, 1, 300, 300},
        {"v2.bin", "token file version 2, expected 1", 20240520, 2, 300, 300},
        {"short.bin", "its header says 300 tokens", 20240520, 1, 300, 299},
        {"long.bin", "its header says 299 tokens", 20240520, 1, 299, 300},
        {"negative.bin", "its header says -1 tokens", 20240520, 1, -1, 300},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_tokens(path_of(bad[i].file), bad[i].magic, bad[i].version, bad[i].count, tok, bad[i].ntok);
        snprintf(name, sizeof name, "tokens:%s", path_of(bad[i].file));
        const dt_status st = dt_dataset_load(name, NULL, 1, &d);
        CHECK_MSG(st != DT_OK && strstr(dt_last_error(), bad[i].want) && strstr(dt_last_error(), bad[i].file) &&
                      !strchr(dt_last_error(), '\n'),
                  "%s: %s", bad[i].file, dt_last_error());
    }
    write_file(path_of("tiny.bin"), "abc", 3); /* shorter than a header */
    snprintf(name, sizeof name, "tokens:%s", path_of("tiny.bin"));
    CHECK(dt_dataset_load(name, NULL, 1, &d) != DT_OK && strstr(dt_last_error(), "not a token file"));
    snprintf(name, sizeof name, "tokens:%s", path_of("missing.bin"));
    CHECK(dt_dataset_load(name, NULL, 1, &d) != DT_OK && strstr(dt_last_error(), "missing.bin"));
    CHECK(dt_dataset_load("kjv", dir, 1, &d) != DT_OK && strstr(dt_last_error(), "scripts/get-data kjv"));
}

/* random and contiguous shard the windows; class and equal have no classes to go by */
static void test_splits(void) {
    int idx[40], off[5];
    CHECK(dt_split(NULL, 40, 256, 4, DT_SPLIT_CONTIGUOUS, 1, idx, off) == DT_OK);
    int in_order = off[0] == 0 && off[4] == 40;
    for (int i = 0; i < 40; i++) in_order &= idx[i] == i;
    CHECK_MSG(in_order && off[1] == 10 && off[2] == 20, "contiguous: runs of consecutive windows");
    CHECK(dt_split(NULL, 40, 256, 4, DT_SPLIT_RANDOM, 1, idx, off) == DT_OK && off[4] == 40);
    CHECK(dt_split(NULL, 40, 256, 4, DT_SPLIT_CLASS, 1, idx, off) != DT_OK && strstr(dt_last_error(), "no classes"));
    CHECK(dt_split(NULL, 40, 256, 4, DT_SPLIT_EQUAL, 1, idx, off) != DT_OK && strstr(dt_last_error(), "no classes"));
    dt_split_kind k;
    CHECK(dt_split_parse("contiguous", &k) == DT_OK && k == DT_SPLIT_CONTIGUOUS);
}

int main(void) {
    if (!mkdtemp(dir)) return 2;
    test_bytes();
    test_token_files();
    test_splits();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    return test_summary("test_text");
}
