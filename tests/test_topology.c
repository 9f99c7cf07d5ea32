/* Communication graphs: every kind for N = 1..17 gives sorted, deduplicated, in-range lists
 * without the rank itself, symmetric (j in nbrs(i) iff i in nbrs(j)), with the expected
 * degrees; bad kinds and too-small buffers are errors with messages. */
#include "dtrain.h"
#include "check.h"
#include "comm/topology.h"

#include <string.h>

#define MAXN 17

static int has(const int *l, int n, int x) {
    for (int i = 0; i < n; i++)
        if (l[i] == x) return 1;
    return 0;
}

static void check_kind(const char *kind) {
    for (int size = 1; size <= MAXN; size++) {
        int nb[MAXN][MAXN], cnt[MAXN];
        for (int r = 0; r < size; r++) {
            dt_status st = dt_topology_neighbors(kind, r, size, nb[r], MAXN, &cnt[r]);
            CHECK_MSG(st == DT_OK, "%s N=%d r=%d: %s", kind, size, r, dt_last_error());
            CHECK(cnt[r] >= 0 && cnt[r] <= size - 1);
            for (int i = 0; i < cnt[r]; i++) {
                CHECK_MSG(nb[r][i] >= 0 && nb[r][i] < size, "%s N=%d r=%d", kind, size, r);
                CHECK_MSG(nb[r][i] != r, "%s N=%d r=%d lists itself", kind, size, r);
                if (i) CHECK_MSG(nb[r][i - 1] < nb[r][i], "%s N=%d r=%d not sorted/unique", kind, size, r);
            }
            /* the count alone (max = 0) agrees, and reports the shortage */
            int c0 = -1;
            dt_status s0 = dt_topology_neighbors(kind, r, size, NULL, 0, &c0);
            CHECK(c0 == cnt[r]);
            CHECK(s0 == (cnt[r] ? DT_ERR_ARG : DT_OK));
        }
        for (int i = 0; i < size; i++)
            for (int j = 0; j < size; j++)
                CHECK_MSG(has(nb[i], cnt[i], j) == has(nb[j], cnt[j], i),
                          "%s N=%d: asymmetric between %d and %d", kind, size, i, j);
        /* degrees */
        for (int r = 0; r < size; r++) {
            if (!strcmp(kind, "ring"))
                CHECK_MSG(cnt[r] == (size == 1 ? 0 : size == 2 ? 1 : 2), "ring N=%d", size);
            else if (!strcmp(kind, "complete"))
                CHECK(cnt[r] == size - 1);
            else if (!strcmp(kind, "torus"))
                CHECK(cnt[r] <= 4 && (size == 1 || cnt[r] >= 1));
            else if (!strcmp(kind, "exponential")) {
                /* all graphs here are circulant: every rank has the same degree */
                CHECK(cnt[r] == cnt[0]);
                CHECK(size == 1 || has(nb[r], cnt[r], (r + 1) % size));
            }
        }
    }
}

int main(void) {
    const char *kinds[] = {"ring", "torus", "exponential", "complete"};
    for (int k = 0; k < 4; k++) {
        CHECK(dt_topology_known(kinds[k]));
        check_kind(kinds[k]);
    }

    int nb[32], n = -1;
    /* ring */
    CHECK(dt_topology_neighbors("ring", 0, 5, nb, 32, &n) == DT_OK);
    CHECK(n == 2 && nb[0] == 1 && nb[1] == 4);
    CHECK(dt_topology_neighbors("ring", 1, 2, nb, 32, &n) == DT_OK);
    CHECK(n == 1 && nb[0] == 0);
    CHECK(dt_topology_neighbors("ring", 0, 1, nb, 32, &n) == DT_OK);
    CHECK(n == 0);

    /* torus shapes and neighbours */
    int rows, cols;
    dt_topology_torus_shape(16, &rows, &cols); CHECK(rows == 4 && cols == 4);
    dt_topology_torus_shape(12, &rows, &cols); CHECK(rows == 3 && cols == 4);
    dt_topology_torus_shape(6, &rows, &cols);  CHECK(rows == 2 && cols == 3);
    dt_topology_torus_shape(7, &rows, &cols);  CHECK(rows == 1 && cols == 7);
    CHECK(dt_topology_neighbors("torus", 5, 16, nb, 32, &n) == DT_OK); /* (1,1) in 4x4 */
    CHECK(n == 4 && nb[0] == 1 && nb[1] == 4 && nb[2] == 6 && nb[3] == 9);
    CHECK(dt_topology_neighbors("torus", 0, 16, nb, 32, &n) == DT_OK); /* wraparound */
    CHECK(n == 4 && nb[0] == 1 && nb[1] == 3 && nb[2] == 4 && nb[3] == 12);
    CHECK(dt_topology_neighbors("torus", 0, 6, nb, 32, &n) == DT_OK);  /* 2x3: up == down */
    CHECK(n == 3 && nb[0] == 1 && nb[1] == 2 && nb[2] == 3);
    CHECK(dt_topology_neighbors("torus", 0, 4, nb, 32, &n) == DT_OK);  /* 2x2 */
    CHECK(n == 2 && nb[0] == 1 && nb[1] == 2);

    /* exponential */
    CHECK(dt_topology_neighbors("exponential", 0, 8, nb, 32, &n) == DT_OK);
    CHECK(n == 5 && nb[0] == 1 && nb[1] == 2 && nb[2] == 4 && nb[3] == 6 && nb[4] == 7);
    CHECK(dt_topology_neighbors("exponential", 3, 16, nb, 32, &n) == DT_OK);
    CHECK(n == 7);
    CHECK(dt_topology_neighbors("exponential", 2, 5, nb, 32, &n) == DT_OK); /* +-1, +-2, +-4 */
    CHECK(n == 4 && nb[0] == 0 && nb[1] == 1 && nb[2] == 3 && nb[3] == 4);

    /* complete */
    CHECK(dt_topology_neighbors("complete", 2, 4, nb, 32, &n) == DT_OK);
    CHECK(n == 3 && nb[0] == 0 && nb[1] == 1 && nb[2] == 3);

    /* errors */
    CHECK(dt_topology_neighbors("star", 0, 4, nb, 32, &n) == DT_ERR_ARG);
    CHECK(!strcmp(dt_last_error(),
                  "--topology star: expected ring, torus, exponential or complete"));
    CHECK(!dt_topology_known("star") && !dt_topology_known("") && !dt_topology_known(NULL));
    CHECK(dt_topology_neighbors("complete", 0, 10, nb, 4, &n) == DT_ERR_ARG);
    CHECK(n == 9 && strstr(dt_last_error(), "room for 4") != NULL);

    return test_summary("test_topology");
}
