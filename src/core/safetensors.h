/* Weights in the safetensors layout (what PyTorch users read without dtrain):
 *   u64 N (little-endian) | N bytes of JSON header, space-padded to a multiple of 8 |
 *   the tensors' bytes, little-endian, at the header's data_offsets (relative to the data).
 * The header maps each tensor name to {"dtype","shape","data_offsets":[begin,end]} and
 * "__metadata__" to string values ("format":"pt", and dtrain's model, spec, data, algo).
 * Written with dtrain's JSON writer (core/json.c), read with jansson. Files are written
 * atomically as the DTRTNS01 files are (dt_write_atomic). */
#ifndef DT_SAFETENSORS_H
#define DT_SAFETENSORS_H

#include <stdint.h>

#include "core/tensorfile.h"

/* A scalar int64 tensor (shape []): PyTorch's batch-norm num_batches_tracked. */
typedef struct dt_st_i64 {
    char name[64];
    int64_t value;
} dt_st_i64;

/* Writes the float records as F32 tensors in their order, then the I64 scalars. Records named
 * "meta:KEY" are not tensors: their text goes to __metadata__ as KEY. */
dt_status dt_safetensors_write(const char *path, const dt_record *recs, int n, const dt_st_i64 *i64, int ni64);

/* Reads a safetensors file into records: every F32 tensor a record (data copied), metadata
 * model/spec/data/algo as text records "meta:KEY" (as dt_tfile_read gives them). An I64
 * tensor is accepted only as NAME.num_batches_tracked of shape [] beside an F32
 * NAME.running_mean (dtrain keeps no such counter: checked, then left out); any other dtype
 * is refused. The header, every shape and the offsets are checked (the tensors must cover
 * the data exactly, without overlap or gap, as the reference implementation requires): any
 * fault is one line naming path, DT_ERR_FORMAT. */
dt_status dt_safetensors_read(const char *path, dt_tfile *out);

/* 1 when path names a safetensors file (it ends in ".safetensors"). */
int dt_is_safetensors(const char *path);

#endif
