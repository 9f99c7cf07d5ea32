/* Named float tensors in one file: weights, checkpoints. Little-endian layout:
 *   "DTRTNS01" | u32 count | count x (u16 name_len, name, u8 ndim, u32 dims[ndim], f32 data)
 *   | u32 crc32 of all preceding bytes.
 * Written atomically: a temporary file in the same folder, fsync, rename; a path that exists and
 * is not a regular file (a device, a FIFO) is refused, never replaced. Read: a regular file
 * only, never waiting on a FIFO, and nothing after the checksum. */
#ifndef DT_TENSORFILE_H
#define DT_TENSORFILE_H

#include <stdint.h>

#include "dtrain.h"

/* (DT_API: dt_records_add, _add_raw and dt_tfile_take are public, dtrain/scheme.h) */

typedef struct dt_record {
    char name[64];
    int ndim;
    int shape[4];
    size_t numel;
    float *data;
} dt_record;

typedef struct dt_tfile {
    int n;
    dt_record *recs;
    uint32_t crc;            /* the file's checksum (verified when read) */
    /* NULL, or while a scheme loads its state: records are looked up (dt_tfile_find, _take,
     * _text) as "PREFIX:name" (the trainer sets the scheme's name, dtrain/scheme.h) */
    const char *prefix;
} dt_tfile;

dt_status dt_tfile_write(const char *path, const dt_record *recs, int n);
/* The same, giving the written file's checksum (a checkpoint set's manifest names its parts by it). */
dt_status dt_tfile_write_crc(const char *path, const dt_record *recs, int n, uint32_t *crc);
dt_status dt_tfile_read(const char *path, dt_tfile *out);
const dt_record *dt_tfile_find(const dt_tfile *f, const char *name);
void dt_tfile_free(dt_tfile *f);

/* A list of records to write, growing as they are added. The data is not copied: it must
 * stay valid until dt_tfile_write. Raw records keep non-float state (counters, doubles)
 * bit for bit: their size must be a multiple of 4 bytes. */
typedef struct dt_records {
    dt_record *r;
    int n, cap;
    char **owned;            /* the texts' padded copies (dt_records_add_text), freed with the list */
    int nowned;
    /* NULL, or while a scheme saves its state: records are added as "PREFIX:name" */
    const char *prefix;
} dt_records;

DT_API dt_status dt_records_add(dt_records *l, const char *name, const float *data, size_t numel);
/* a record as it is, shape included */
dt_status dt_records_put(dt_records *l, const dt_record *r);
DT_API dt_status dt_records_add_raw(dt_records *l, const char *name, const void *data, size_t bytes);
/* A short text (metadata: the model, the dataset) as a raw record: its bytes, NUL-padded to a
 * whole number of floats (copied; freed by dt_records_free). Name it "owner:what": the model's
 * loader and dtrain diff leave such records alone, so files with them load in older builds. */
dt_status dt_records_add_text(dt_records *l, const char *name, const char *text);
void dt_records_free(dt_records *l);
/* The text of record `name` (up to its first NUL), malloc'd; NULL when the file has no such
 * record (or no memory). */
char *dt_tfile_text(const dt_tfile *f, const char *name);
/* Copies record `name` of exactly `bytes` bytes into dst; otherwise a one-line error naming
 * path and the record. */
DT_API dt_status dt_tfile_take(const dt_tfile *f, const char *path, const char *name, void *dst, size_t bytes);

#endif
