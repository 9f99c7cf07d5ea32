/* Splitting the training set across ranks (index lists only; every rank reads the data). */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "dtrain.h"

dt_status dt_split_parse(const char *text, dt_split_kind *out) {
    if (!strcmp(text, "random")) *out = DT_SPLIT_RANDOM;
    else if (!strcmp(text, "class")) *out = DT_SPLIT_CLASS;
    else if (!strcmp(text, "equal")) *out = DT_SPLIT_EQUAL;
    else if (!strcmp(text, "contiguous")) *out = DT_SPLIT_CONTIGUOUS;
    else return dt_fail(DT_ERR_ARG, "--split %s: expected random, class, equal, contiguous or stripe", text);
    return DT_OK;
}

dt_status dt_split(const uint8_t *labels, int n, int classes, int nranks, dt_split_kind kind,
                   uint64_t seed, int *idx, int *offsets) {
    if (nranks < 1) return dt_fail(DT_ERR_ARG, "split: need at least one rank");
    if (!labels && (kind == DT_SPLIT_CLASS || kind == DT_SPLIT_EQUAL))
        return dt_fail(DT_ERR_ARG, "--split %s: the examples have no classes (a text): random, contiguous or stripe",
                       kind == DT_SPLIT_CLASS ? "class" : "equal");
    dt_rng r;
    dt_rng_seed(&r, dt_seed_mix(seed, 0x5eed5917, (uint64_t)kind, 0));
    int *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
    int *count = calloc((size_t)classes, sizeof *count);
    if (!perm || !count) { free(perm); free(count); return dt_nomem("the split of %d examples", n); }
    for (int i = 0; i < n; i++) perm[i] = i;
    if (kind != DT_SPLIT_CONTIGUOUS) dt_shuffle(perm, n, &r);
    int pos = 0;
    offsets[0] = 0;
    if (kind == DT_SPLIT_RANDOM || kind == DT_SPLIT_CONTIGUOUS) {
        for (int s = 0; s < nranks; s++) {
            int lo = (int)((long long)n * s / nranks), hi = (int)((long long)n * (s + 1) / nranks);
            memcpy(idx + pos, perm + lo, (size_t)(hi - lo) * sizeof *idx);
            pos += hi - lo;
            offsets[s + 1] = pos;
        }
    } else if (kind == DT_SPLIT_CLASS && nranks <= classes) {
        for (int s = 0; s < nranks; s++) {
            for (int i = 0; i < n; i++)
                if (labels[perm[i]] % nranks == s) idx[pos++] = perm[i];
            offsets[s + 1] = pos;
        }
    } else if (kind == DT_SPLIT_CLASS) {
        /* more ranks than classes: rank s holds a piece of class s mod C alone; the ranks of a
         * class share its examples in near-equal contiguous pieces of the shuffled order */
        for (int i = 0; i < n; i++) count[labels[i]]++;
        for (int c = 0; c < classes; c++) {
            const int sharers = (nranks - 1 - c) / classes + 1;
            if (count[c] < sharers) {
                const int have = count[c];
                free(perm);
                free(count);
                return dt_fail(DT_ERR_ARG, "--split class: class %d has %d examples for the %d of %d training ranks that "
                               "share it (a rank would get no data)", c, have, sharers, nranks);
            }
        }
        for (int s = 0; s < nranks; s++) {
            const int c = s % classes, sharers = (nranks - 1 - c) / classes + 1, j = s / classes;
            for (int i = 0, k = 0; i < n; i++)
                if (labels[perm[i]] == c && (int)((long long)k++ * sharers / count[c]) == j) idx[pos++] = perm[i];
            offsets[s + 1] = pos;
        }
    } else {
        for (int i = 0; i < n; i++) count[labels[i]]++;
        /* in shuffled order, the k-th example of class c goes to shard k / (count_c / N) */
        int *seen = calloc((size_t)classes, sizeof *seen);
        if (!seen) { free(perm); free(count); return dt_nomem("the counts of %d classes", classes); }
        for (int s = 0; s < nranks; s++) {
            memset(seen, 0, (size_t)classes * sizeof *seen);
            for (int i = 0; i < n; i++) {
                int c = labels[perm[i]], per = count[c] / nranks, k = seen[c]++;
                if (per > 0 && k / per == s && k < per * nranks) idx[pos++] = perm[i];
            }
            offsets[s + 1] = pos;
        }
        free(seen);
    }
    free(perm);
    free(count);
    return DT_OK;
}
