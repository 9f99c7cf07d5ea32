#include "comm/topology.h"
#include "core/alloc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

const char *const dt_topology_kinds[] = {"ring", "torus", "exponential", "complete", NULL};

int dt_topology_known(const char *kind) {
    if (!kind) return 0;
    for (size_t i = 0; dt_topology_kinds[i]; i++)
        if (!strcmp(kind, dt_topology_kinds[i])) return 1;
    return 0;
}

void dt_topology_torus_shape(int size, int *rows, int *cols) {
    assert(size >= 1 && rows && cols);
    int r = 1;
    for (int d = 1; (long)d * d <= size; d++)
        if (size % d == 0) r = d;
    *rows = r;
    *cols = size / r;
}

static int mod(long a, int n) {
    long m = a % n;
    return (int)(m < 0 ? m + n : m);
}

dt_status dt_topology_neighbors(const char *kind, int rank, int size, int *nbrs, int max,
                                int *count) {
    assert(kind && count && size >= 1 && rank >= 0 && rank < size && max >= 0);
    assert(nbrs || max == 0);
    *count = 0;
    if (!dt_topology_known(kind))
        return dt_fail(DT_ERR_ARG, "--topology %s: expected ring, torus, exponential or complete",
                       kind);

    /* mark[j] = 1 for every neighbour j; scanning 0..N-1 gives a sorted, deduplicated list */
    unsigned char *mark;
    DT_TRY(dt_calloc(mark, (size_t)size, "the topology of %d ranks", size));

    if (!strcmp(kind, "ring")) {
        mark[mod((long)rank - 1, size)] = 1;
        mark[mod((long)rank + 1, size)] = 1;
    } else if (!strcmp(kind, "torus")) {
        int rows, cols;
        dt_topology_torus_shape(size, &rows, &cols);
        int i = rank / cols, j = rank % cols;
        mark[mod((long)i - 1, rows) * cols + j] = 1;
        mark[mod((long)i + 1, rows) * cols + j] = 1;
        mark[i * cols + mod((long)j - 1, cols)] = 1;
        mark[i * cols + mod((long)j + 1, cols)] = 1;
    } else if (!strcmp(kind, "exponential")) {
        for (long p = 1; p < size; p *= 2) {
            mark[mod((long)rank + p, size)] = 1;
            mark[mod((long)rank - p, size)] = 1;
        }
    } else { /* complete */
        memset(mark, 1, (size_t)size);
    }
    mark[rank] = 0;

    int n = 0;
    for (int j = 0; j < size; j++) {
        if (!mark[j]) continue;
        if (n < max) nbrs[n] = j;
        n++;
    }
    free(mark);
    *count = n;
    if (n > max)
        return dt_fail(DT_ERR_ARG, "topology %s: rank %d of %d has %d neighbours, room for %d",
                       kind, rank, size, n, max);
    return DT_OK;
}
