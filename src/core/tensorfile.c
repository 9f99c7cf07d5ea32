#include "core/tensorfile.h"

#include "core/alloc.h"
#include "core/paths.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const char MAGIC[8] = {'D', 'T', 'R', 'T', 'N', 'S', '0', '1'};

typedef struct { const dt_record *recs; int n; const char *path; uint32_t crc; } write_ctx;

static int put(FILE *f, const void *p, size_t len, uLong *crc) {
    *crc = crc32(*crc, p, (uInt)len);
    return fwrite(p, 1, len, f) == len;
}

static dt_status fill_tensors(void *vctx, void *file) {
    write_ctx *c = vctx;
    FILE *f = file;
    uLong crc = crc32(0L, Z_NULL, 0);
    uint32_t count = (uint32_t)c->n;
    int ok = put(f, MAGIC, 8, &crc) && put(f, &count, 4, &crc);
    for (int i = 0; ok && i < c->n; i++) {
        const dt_record *r = &c->recs[i];
        uint16_t nl = (uint16_t)strlen(r->name);
        uint8_t nd = (uint8_t)r->ndim;
        ok = put(f, &nl, 2, &crc) && put(f, r->name, nl, &crc) && put(f, &nd, 1, &crc);
        for (int d = 0; ok && d < r->ndim; d++) {
            uint32_t dim = (uint32_t)r->shape[d];
            ok = put(f, &dim, 4, &crc);
        }
        /* crc32 takes uInt lengths: feed large tensors in chunks */
        for (size_t off = 0; ok && off < r->numel; off += 1u << 24) {
            size_t cnt = r->numel - off < (1u << 24) ? r->numel - off : (1u << 24);
            ok = put(f, r->data + off, cnt * sizeof(float), &crc);
        }
    }
    uint32_t crc32v = (uint32_t)crc;
    if (ok) ok = fwrite(&crc32v, 4, 1, f) == 1;
    c->crc = crc32v;
    return ok ? DT_OK : dt_fail(DT_ERR_IO, "%s: write failed: %s", c->path, strerror(errno));
}

dt_status dt_tfile_write_crc(const char *path, const dt_record *recs, int n, uint32_t *crc) {
    write_ctx c = {recs, n, path, 0};
    dt_status st = dt_write_atomic(path, fill_tensors, &c);
    if (crc) *crc = c.crc;
    return st;
}

dt_status dt_tfile_write(const char *path, const dt_record *recs, int n) { return dt_tfile_write_crc(path, recs, n, NULL); }

void dt_tfile_free(dt_tfile *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->recs[i].data);
    free(f->recs);
    f->recs = NULL;
    f->n = 0;
}

typedef struct { FILE *f; uLong crc; size_t left; } reader; /* left: bytes not read yet */

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Each record once: a second record of a name would be the one dt_tfile_find never returns,
 * or, read by another program, the one it does. Sorted names, so 100,000 records take no
 * quadratic time. */
static dt_status check_unique(const char *path, const dt_tfile *f) {
    if (f->n < 2) return DT_OK;
    const char **names = malloc((size_t)f->n * sizeof *names);
    if (!names) return dt_nomem("the names of %d records in %s", f->n, path);
    for (int i = 0; i < f->n; i++) names[i] = f->recs[i].name;
    qsort(names, (size_t)f->n, sizeof *names, by_name);
    dt_status st = DT_OK;
    for (int i = 1; i < f->n && st == DT_OK; i++)
        if (!strcmp(names[i - 1], names[i]))
            st = dt_fail(DT_ERR_FORMAT, "%s: record '%s' appears twice (a file holds each record once)", path, names[i]);
    free(names);
    return st;
}

static int get(reader *r, void *p, size_t len) {
    if (len > r->left || fread(p, 1, len, r->f) != len) return 0;
    r->left -= len;
    r->crc = crc32(r->crc, p, (uInt)len);
    return 1;
}

dt_status dt_tfile_read(const char *path, dt_tfile *out) {
    memset(out, 0, sizeof *out);
    FILE *f;
    /* what the header claims is checked against what the file holds before anything is
     * allocated: a 24-byte file must not ask for 16 GiB */
    unsigned long long size = 0;
    dt_status st = dt_open_regular(path, &f, &size);
    if (st != DT_OK) return st;
    reader r = {f, crc32(0L, Z_NULL, 0), (size_t)size};
    char magic[8];
    uint32_t count = 0;
    if (!get(&r, magic, 8) || memcmp(magic, MAGIC, 8) != 0) {
        st = dt_fail(DT_ERR_FORMAT, "%s: not a dtrain weights file (bad magic, expected DTRTNS01)", path);
        goto done;
    }
    if (!get(&r, &count, 4) || count > 100000) {
        st = dt_fail(DT_ERR_FORMAT, "%s: truncated or corrupt header", path);
        goto done;
    }
    if ((st = dt_calloc(out->recs, count, "%u records of %s", (unsigned)count, path)) != DT_OK) goto done;
    for (uint32_t i = 0; i < count; i++) {
        dt_record *rec = &out->recs[i];
        uint16_t nl;
        uint8_t nd;
        if (!get(&r, &nl, 2) || nl == 0 || nl >= sizeof rec->name || !get(&r, rec->name, nl) ||
            !get(&r, &nd, 1) || nd > 4) {
            st = dt_fail(DT_ERR_FORMAT, "%s: truncated or corrupt record %u", path, i);
            goto done;
        }
        rec->name[nl] = 0;
        rec->ndim = nd;
        size_t numel = 1;
        for (int d = 0; d < nd; d++) {
            uint32_t dim;
            if (!get(&r, &dim, 4) || dim > (1u << 30)) {
                st = dt_fail(DT_ERR_FORMAT, "%s: truncated or corrupt shape of '%s'", path, rec->name);
                goto done;
            }
            rec->shape[d] = (int)dim;
            numel *= dim;
            /* checked per dimension: four dimensions of up to 2^30 could wrap a 64-bit
             * product around to a small count that no longer matches the shape */
            if (numel > ((size_t)1 << 32)) {
                st = dt_fail(DT_ERR_FORMAT, "%s: corrupt shape of '%s': more than 2^32 values", path, rec->name);
                goto done;
            }
        }
        if (numel * sizeof(float) > r.left) {
            st = dt_fail(DT_ERR_FORMAT, "%s: truncated or corrupt: tensor '%s' claims %zu values, more than the %zu "
                         "bytes left in the file", path, rec->name, numel, r.left);
            goto done;
        }
        rec->numel = numel;
        st = dt_malloc(rec->data, numel, "'%s' in %s (%zu values)", rec->name, path, numel);
        out->n = (int)i + 1;
        if (st != DT_OK) goto done;
        for (size_t off = 0; off < numel; off += 1u << 24) {
            size_t cnt = numel - off < (1u << 24) ? numel - off : (1u << 24);
            if (!get(&r, rec->data + off, cnt * sizeof(float))) {
                st = dt_fail(DT_ERR_FORMAT, "%s: truncated in the data of '%s'", path, rec->name);
                goto done;
            }
        }
    }
    uint32_t stored, computed = (uint32_t)r.crc;
    /* the checksum ends the file: bytes after it are not ours (two files joined, a cut copy
     * with another's tail), whatever the checksum says */
    if (r.left > 4) {
        st = dt_fail(DT_ERR_FORMAT, "%s: %zu bytes after the checksum (the file should end with it)", path, r.left - 4);
        goto done;
    }
    if (fread(&stored, 4, 1, f) != 1) {
        st = dt_fail(DT_ERR_FORMAT, "%s: truncated (no checksum)", path);
        goto done;
    }
    if (stored != computed) {
        st = dt_fail(DT_ERR_FORMAT, "%s: checksum mismatch (file corrupt)", path);
        goto done;
    }
    out->crc = stored;
    st = check_unique(path, out);
done:
    fclose(f);
    if (st != DT_OK) dt_tfile_free(out);
    return st;
}

/* name as it is in the file: "PREFIX:name" while a prefix is set (a scheme's records) */
static const char *full_name(const char *prefix, const char *name, char *buf, size_t len) {
    if (!prefix) return name;
    const size_t p = strlen(prefix), n = strlen(name);
    assert(p + 1 + n < len && "a record name too long");
    if (p + 1 + n >= len) return name;
    memcpy(buf, prefix, p);
    buf[p] = ':';
    memcpy(buf + p + 1, name, n + 1);
    return buf;
}

const dt_record *dt_tfile_find(const dt_tfile *f, const char *name) {
    char buf[sizeof f->recs[0].name];
    name = full_name(f->prefix, name, buf, sizeof buf);
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->recs[i].name, name)) return &f->recs[i];
    return NULL;
}

/* ------------------------------------------------------------------ building a record list */

static dt_status records_push(dt_records *l, const char *name, const void *data, size_t numel) {
    char buf[sizeof l->r[0].name];
    name = full_name(l->prefix, name, buf, sizeof buf);
    assert(strlen(name) < sizeof l->r[0].name);
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        dt_record *nr = realloc(l->r, (size_t)cap * sizeof *nr);
        if (!nr) return dt_nomem("%d records", cap);
        l->r = nr;
        l->cap = cap;
    }
    dt_record *r = &l->r[l->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->ndim = 1;
    r->shape[0] = (int)numel;
    r->numel = numel;
    r->data = (float *)data; /* not owned; written as bytes, never read as floats here */
    return DT_OK;
}

dt_status dt_records_add(dt_records *l, const char *name, const float *data, size_t numel) {
    return records_push(l, name, data, numel);
}

dt_status dt_records_put(dt_records *l, const dt_record *r) {
    dt_status st = records_push(l, r->name, r->data, r->numel);
    if (st == DT_OK) {
        dt_record *mine = &l->r[l->n - 1];
        mine->ndim = r->ndim;
        memcpy(mine->shape, r->shape, sizeof mine->shape);
    }
    return st;
}

dt_status dt_records_add_raw(dt_records *l, const char *name, const void *data, size_t bytes) {
    assert(bytes % sizeof(float) == 0);
    return records_push(l, name, data, bytes / sizeof(float));
}

dt_status dt_records_add_text(dt_records *l, const char *name, const char *text) {
    const size_t len = strlen(text), bytes = (len / 4 + 1) * 4; /* at least one NUL */
    char **owned = realloc(l->owned, (size_t)(l->nowned + 1) * sizeof *owned);
    if (!owned) return dt_nomem("the text records");
    l->owned = owned;
    char *copy = calloc(bytes, 1);
    if (!copy) return dt_nomem("the text of %s", name);
    memcpy(copy, text, len);
    l->owned[l->nowned++] = copy;
    return records_push(l, name, copy, bytes / sizeof(float));
}

char *dt_tfile_text(const dt_tfile *f, const char *name) {
    const dt_record *r = dt_tfile_find(f, name);
    if (!r) return NULL;
    const size_t bytes = r->numel * sizeof(float);
    char *text = malloc(bytes + 1);
    if (!text) return NULL;
    memcpy(text, r->data, bytes);
    text[bytes] = 0;
    return text;
}

void dt_records_free(dt_records *l) {
    for (int i = 0; i < l->nowned; i++) free(l->owned[i]);
    free(l->owned);
    free(l->r);
    memset(l, 0, sizeof *l);
}

dt_status dt_tfile_take(const dt_tfile *f, const char *path, const char *name, void *dst, size_t bytes) {
    const dt_record *r = dt_tfile_find(f, name);
    char buf[sizeof f->recs[0].name];
    name = full_name(f->prefix, name, buf, sizeof buf);
    if (!r)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint has no '%s' (saved by another --algo, --compress or "
                       "number of ranks?)", path, name);
    if (r->numel * sizeof(float) != bytes)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint record '%s' has %zu bytes, this run expects %zu (saved by "
                       "another model, --algo, --compress or number of ranks?)", path, name,
                       r->numel * sizeof(float), bytes);
    memcpy(dst, r->data, bytes);
    return DT_OK;
}
