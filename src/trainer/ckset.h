/* A checkpoint of several ranks is a set: every rank writes its part (PATH.eE.rankR; a set
 * saved within an epoch, when a stop was asked: PATH.eE.sS.rankR, E the epochs done and S
 * the step), and once
 * every part is durable rank 0 writes the manifest PATH, naming the epoch, the step, the run
 * and each part's checksum. The rename of the manifest commits the set; until then the
 * previous set (and its manifest) stays whole, so a rank killed half-way through a save can
 * never leave ranks resuming from different epochs. The manifest is text:
 *
 *   dtrain checkpoint set 1
 *   epoch 2
 *   step 750
 *   ranks 4
 *   run --algo allreduce --compress none on 4 ranks
 *   part 0 ck.e2.rank0 1f0e3a9c
 *   ...
 *   part 3 ck.e2.rank3 77c1d2e0
 *   end
 *
 * Part names are file names in the manifest's folder. No MPI here: the supervisor reads
 * manifests too. */
#ifndef DT_CKSET_H
#define DT_CKSET_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain.h"

#define DT_CKSET_MAGIC "dtrain checkpoint set 1\n"
#define DT_CKSET_MAX_BYTES (64u << 20) /* ~1e6 ranks' lines: anything larger is not a manifest */

typedef struct dt_ckset {
    int epoch, ranks;
    long step;
    char run[64];      /* the run signature of the ranks' parts */
    char part[1100];   /* the path of the part asked for (the manifest's folder joined) */
    uint32_t crc;      /* and its checksum */
} dt_ckset;

/* PATH.eE.rankR into out; mid >= 0 (a set saved within an epoch, at step mid): PATH.eE.sMID.rankR */
void dt_ckset_part_path(const char *path, int epoch, long mid, int rank, char *out, size_t len);

/* 1 when text starts as a manifest does (a checkpoint of several ranks), else 0. */
int dt_ckset_is_manifest(const char *text, size_t len);

/* Reads a whole file (at most DT_CKSET_MAX_BYTES) into a NUL-terminated buffer the caller frees. */
dt_status dt_ckset_slurp(const char *path, char **text, size_t *len);

/* Parses a manifest's text (origin: its path, for errors and to find the parts) and fills
 * out, with the part of `rank` (-1: none). Every line is checked: the parts must be numbered
 * 0..ranks-1 in order, each named PATH.eE.rankR for the manifest's own epoch. */
dt_status dt_ckset_parse(const char *text, size_t len, const char *origin, int rank, dt_ckset *out);

/* Writes the manifest at path atomically (commits the set): parts named as
 * dt_ckset_part_path(path, epoch, mid, r) with crc[r]. */
dt_status dt_ckset_write(const char *path, int epoch, long step, long mid, const char *run, int ranks, const uint32_t *crc);

/* Removes rank's parts of every other set than (keep, keep_mid) (older sets, and the parts of
 * a save that never committed), and their temporary files whose writer is gone. */
void dt_ckset_remove_others(const char *path, int rank, int keep, long keep_mid);

/* Removes only the temporaries of rank's parts whose writer is gone (at a run's start). */
void dt_ckset_remove_stale_tmp(const char *path, int rank);

#endif
