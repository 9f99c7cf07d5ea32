/* Datasets shared by the simulated ranks (the simulation build, docs/simulation.md): SMPI runs
 * every rank in one process, so one copy of the data in memory serves them all. 256 ranks of
 * MNIST held ~14 GB as private copies. The first rank to load a dataset hands it over; the
 * others take the same buffers, read-only. Outside simulation nothing is shared. */
#ifndef DT_DATASET_SHARE_H
#define DT_DATASET_SHARE_H

#include "dtrain.h"

#ifdef DT_SIM /* data/dataset_share.c, compiled into dtrain-sim only */
/* 1 and *out filled when the dataset (name, dir, train, its first max_n examples, 0: all) was
 * loaded by a rank already. */
int dt_dataset_share_find(const char *name, const char *dir, int train, int max_n, dt_dataset *out);
/* d (just loaded) is handed over: its buffers belong to the share from now on. */
void dt_dataset_share_add(const char *name, const char *dir, int train, int max_n, const dt_dataset *d);
/* 1 when d's buffers are the share's (not to be freed or resized). */
int dt_dataset_is_shared(const dt_dataset *d);
#else
static inline int dt_dataset_share_find(const char *name, const char *dir, int train, int max_n, dt_dataset *out) {
    (void)name, (void)dir, (void)train, (void)max_n, (void)out;
    return 0;
}
static inline void dt_dataset_share_add(const char *name, const char *dir, int train, int max_n,
                                        const dt_dataset *d) {
    (void)name, (void)dir, (void)train, (void)max_n, (void)d;
}
static inline int dt_dataset_is_shared(const dt_dataset *d) {
    (void)d;
    return 0;
}
#endif

#endif
