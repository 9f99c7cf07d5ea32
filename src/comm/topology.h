/* Communication graphs for decentralized schemes (dpsgd, eventgrad): which ranks a rank
 * exchanges parameters with. Every graph is undirected (j is a neighbour of i iff i is a
 * neighbour of j), lists are sorted ascending, deduplicated and never contain the rank
 * itself, so small N degrade gracefully (ring with N = 2: one neighbour; N = 1: none). */
#ifndef DT_TOPOLOGY_H
#define DT_TOPOLOGY_H

#include "dtrain.h"

/* Neighbours of rank (0 <= rank < size) in the graph named kind:
 *   "ring"        r - 1 and r + 1 (mod N)
 *   "torus"       2-D grid rows x cols = N, as square as possible (rows = largest divisor of
 *                 N not above sqrt(N); prime N gives a 1 x N grid, i.e. a ring), 4 neighbours
 *                 with wraparound
 *   "exponential" r +- 2^i (mod N) for every i with 2^i < N
 *   "complete"    every other rank
 * Writes up to max ranks to nbrs and the neighbour count to *count (also when it does not
 * fit: then returns DT_ERR_ARG, so a caller may ask with max = 0 for the count). nbrs may be
 * NULL when max == 0. Unknown kind: DT_ERR_ARG. */
dt_status dt_topology_neighbors(const char *kind, int rank, int size, int *nbrs, int max,
                                int *count);

/* The graphs' names above, NULL-terminated (the --topology flag's words). */
extern const char *const dt_topology_kinds[];

/* 1 if kind names a graph above, else 0 (no error recorded). */
int dt_topology_known(const char *kind);

/* Grid shape "torus" uses for size ranks. */
void dt_topology_torus_shape(int size, int *rows, int *cols);

#endif
