/* Splits: disjoint shards; random covers the set near-equally and is reproducible from the
 * seed; class shards hold whole classes (more ranks than classes: one class each, shared in
 * near-equal pieces); equal shards have equal per-class counts. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtrain.h"

enum { N = 5003, K = 10 };

static void check_disjoint(const int *idx, int total, const char *what) {
    char *seen = calloc(N, 1);
    int dup = 0;
    for (int i = 0; i < total; i++) dup += seen[idx[i]]++ != 0;
    CHECK_MSG(dup == 0, "%s: %d examples in two shards", what, dup);
    free(seen);
}

int main(void) {
    uint8_t labels[N];
    dt_rng r;
    dt_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) labels[i] = (uint8_t)(dt_rng_below(&r, 100) < 30 ? 0 : 1 + dt_rng_below(&r, K - 1));
    int idx[N], idx2[N], off[40], off2[40];
    for (int ranks = 1; ranks <= 7; ranks++) {
        /* random */
        CHECK(dt_split(labels, N, K, ranks, DT_SPLIT_RANDOM, 9, idx, off) == DT_OK);
        CHECK(off[0] == 0 && off[ranks] == N);
        for (int s = 0; s < ranks; s++) CHECK(abs((off[s + 1] - off[s]) - N / ranks) <= 1);
        check_disjoint(idx, off[ranks], "random");
        CHECK(dt_split(labels, N, K, ranks, DT_SPLIT_RANDOM, 9, idx2, off2) == DT_OK);
        CHECK(memcmp(idx, idx2, sizeof idx) == 0 && memcmp(off, off2, sizeof(int) * (size_t)(ranks + 1)) == 0);
        CHECK(dt_split(labels, N, K, ranks, DT_SPLIT_RANDOM, 10, idx2, off2) == DT_OK);
        if (ranks > 1) CHECK(memcmp(idx, idx2, sizeof idx) != 0);
        /* class */
        CHECK(dt_split(labels, N, K, ranks, DT_SPLIT_CLASS, 9, idx, off) == DT_OK);
        CHECK(off[ranks] == N);
        check_disjoint(idx, N, "class");
        for (int s = 0; s < ranks; s++)
            for (int i = off[s]; i < off[s + 1]; i++) CHECK_MSG(labels[idx[i]] % ranks == s, "class split: label %d on shard %d", labels[idx[i]], s);
        /* equal */
        CHECK(dt_split(labels, N, K, ranks, DT_SPLIT_EQUAL, 9, idx, off) == DT_OK);
        check_disjoint(idx, off[ranks], "equal");
        int cnt[K] = {0};
        for (int i = 0; i < N; i++) cnt[labels[i]]++;
        int expect_total = 0;
        for (int c = 0; c < K; c++) expect_total += cnt[c] / ranks * ranks;
        CHECK(off[ranks] == expect_total);
        for (int s = 0; s < ranks; s++) {
            int per[K] = {0};
            for (int i = off[s]; i < off[s + 1]; i++) per[labels[idx[i]]]++;
            for (int c = 0; c < K; c++) CHECK_MSG(per[c] == cnt[c] / ranks, "equal: shard %d class %d has %d, want %d", s, c, per[c], cnt[c] / ranks);
        }
    }
    /* more ranks than classes: rank s holds class s mod K alone, its sharers near-equal pieces */
    for (int ranks = K + 1; ranks <= 3 * K + 3; ranks += 5) {
        CHECK(dt_split(labels, N, K, ranks, DT_SPLIT_CLASS, 9, idx, off) == DT_OK);
        CHECK(off[ranks] == N);
        check_disjoint(idx, N, "class, more ranks than classes");
        int cnt[K] = {0};
        for (int i = 0; i < N; i++) cnt[labels[i]]++;
        for (int s = 0; s < ranks; s++) {
            const int c = s % K, sharers = (ranks - 1 - c) / K + 1, size = off[s + 1] - off[s];
            int other = 0;
            for (int i = off[s]; i < off[s + 1]; i++) other += labels[idx[i]] != c;
            CHECK_MSG(other == 0, "%d ranks: shard %d holds %d examples of other classes than %d", ranks, s, other, c);
            CHECK_MSG(abs(size - cnt[c] / sharers) <= 1, "%d ranks: shard %d holds %d of class %d's %d (%d sharers)", ranks,
                      s, size, c, cnt[c], sharers);
        }
    }
    /* ... a class with fewer examples than ranks to share it: refused, naming it */
    uint8_t few[40];
    for (int i = 0; i < 40; i++) few[i] = (uint8_t)(i < 2 ? 3 : i % 3);
    CHECK(dt_split(few, 40, 4, 12, DT_SPLIT_CLASS, 9, idx, off) == DT_ERR_ARG);
    CHECK(strstr(dt_last_error(), "class 3 has 2 examples for the 3 of 12 training ranks") != NULL);
    dt_split_kind k;
    CHECK(dt_split_parse("stratified", &k) == DT_ERR_ARG);
    CHECK(strstr(dt_last_error(), "--split stratified") != NULL);
    return test_summary("test_split");
}
