/* MNIST's and Fashion-MNIST's IDX files (raw or gzip): an images file and its labels file
 * read into a dataset of uint8 images, every check on their contents a runtime error
 * (dt_fail), never an assertion. */
#include "data/idx.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/alloc.h"
#include "core/paths.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_CLASSES 10

static const char *errno_text(int e) { return e ? strerror(e) : "cannot open"; }

/* Reads up to len bytes; returns bytes read (short only at end of data) or -1 with the
 * error recorded. */
static long long gz_read_all(gzFile f, const char *path, uint8_t *buf, size_t len,
                             dt_status *st) {
    size_t got = 0;
    while (got < len) {
        size_t want = len - got;
        if (want > (1u << 30)) want = 1u << 30;
        int r = gzread(f, buf + got, (unsigned)want);
        if (r < 0) {
            int zerr = 0;
            const char *msg = gzerror(f, &zerr);
            if (zerr == Z_ERRNO) {
                *st = dt_fail(DT_ERR_IO, "%s: read error: %s", path, errno_text(errno));
            } else {
                *st = dt_fail(DT_ERR_FORMAT, "%s: corrupt or truncated gzip data (%s)", path,
                              msg ? msg : "unknown zlib error");
            }
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (long long)got;
}


static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* An IDX file's header: its magic, then dims (count nd) checked; per: the bytes of an item,
 * payload: of the items to read (max_n > 0: the first max_n only; dims[0] stays the header's
 * count). */
static dt_status idx_header(gzFile f, const char *path, int labels, int max_n, uint32_t dims[3], uint64_t *per,
                            uint64_t *payload) {
    const uint32_t magic_want = labels ? IDX_MAGIC_LABELS : IDX_MAGIC_IMAGES;
    const char *what = labels ? "labels" : "images";
    const int nd = labels ? 1 : 3;
    const size_t header = 4 + 4 * (size_t)nd;
    dt_status st = DT_OK;
    uint8_t hdr[16];
    long long got = gz_read_all(f, path, hdr, header, &st);
    if (got < 0) return st;
    if (got >= 4 && be32(hdr) != magic_want)
        return dt_fail(DT_ERR_FORMAT, "%s: bad IDX magic 0x%08x, expected 0x%08x (%s)%s", path,
                       be32(hdr), magic_want, what,
                       be32(hdr) == (labels ? IDX_MAGIC_IMAGES : IDX_MAGIC_LABELS)
                           ? " - images and labels files swapped?" : "");
    if ((size_t)got < header)
        return dt_fail(DT_ERR_FORMAT, "%s: truncated: IDX %s header needs %zu bytes, file has %lld",
                       path, what, header, got);
    for (int i = 0; i < nd; i++) dims[i] = be32(hdr + 4 + 4 * i);

    *per = 1;
    if (!labels) {
        if (dims[1] == 0 || dims[2] == 0 || dims[1] > 4096 || dims[2] > 4096)
            return dt_fail(DT_ERR_FORMAT, "%s: bad image size %ux%u in IDX header, expected 1..4096",
                           path, dims[1], dims[2]);
        *per = (uint64_t)dims[1] * dims[2];
    }
    if (dims[0] == 0 || dims[0] > INT_MAX)
        return dt_fail(DT_ERR_FORMAT, "%s: IDX header says %u %s, expected 1..%d", path, dims[0],
                       what, INT_MAX);
    *payload = (uint64_t)dt_first_count(max_n, dims[0]) * *per;
    if (*payload > (uint64_t)SIZE_MAX / 2)
        return dt_fail(DT_ERR_FORMAT, "%s: IDX header claims %llu bytes, too large", path,
                       (unsigned long long)*payload);
    return DT_OK;
}

/* The payload after the header (header bytes): payload bytes into *data. The buffer is the
 * file's size when the file is not compressed, else it grows as data arrives, so a corrupt
 * header cannot make us allocate more than the file really holds (plus a factor of two). */
static dt_status idx_payload(gzFile f, const char *path, int labels, long long file_bytes, size_t header,
                             const uint32_t dims[3], uint64_t per, uint64_t payload, uint8_t **data) {
    dt_status st = DT_OK;
    size_t cap = payload < ((size_t)1 << 24) ? (size_t)payload : ((size_t)1 << 24);
    /* a raw file's own size bounds what it holds: read it in one piece (no copies growing the
     * buffer) */
    if (gzdirect(f) && file_bytes > (long long)header && cap < payload)
        cap = (uint64_t)(file_bytes - (long long)header) < payload ? (size_t)(file_bytes - (long long)header)
                                                                 : (size_t)payload;
    size_t have = 0;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return dt_nomem("%s (%zu bytes)", path, cap);
    for (;;) {
        long long r = gz_read_all(f, path, buf + have, cap - have, &st);
        if (r < 0) { free(buf); return st; }
        have += (size_t)r;
        if (have < cap || cap == payload) break; /* end of data, or all we need */
        size_t ncap = cap * 2 < payload ? cap * 2 : (size_t)payload;
        uint8_t *nb = realloc(buf, ncap);
        if (!nb) {
            free(buf);
            return dt_nomem("%s (%zu bytes)", path, ncap);
        }
        buf = nb;
        cap = ncap;
    }
    if (have < payload) {
        const unsigned long long promised = header + (unsigned long long)dims[0] * per;
        if (labels) {
            st = dt_fail(DT_ERR_FORMAT,
                         "%s: truncated: header says %u labels (%llu bytes), file has %llu bytes",
                         path, dims[0], promised, (unsigned long long)(header + have));
        } else {
            st = dt_fail(DT_ERR_FORMAT,
                         "%s: truncated: header says %u images of %ux%u (%llu bytes), file has "
                         "%llu bytes",
                         path, dims[0], dims[1], dims[2], promised, (unsigned long long)(header + have));
        }
        free(buf);
        return st;
    }
    *data = buf;
    return DT_OK;
}

/* Reads one IDX file: magic, dims (count nd), then the payload of the size the header
 * promises, or of its first max_n items only (max_n > 0: a short run reads what it uses;
 * dims[0] stays the header's count). */
static dt_status idx_read(const char *path, int labels, int max_n, uint32_t dims[3], uint8_t **data) {
    *data = NULL;

    int fd;
    dt_status st = dt_open_regular_fd(path, &fd, NULL); /* a FIFO in a file's place is refused, not waited on */
    if (st != DT_OK) return st;
    struct stat sb;
    const long long file_bytes = fstat(fd, &sb) == 0 ? (long long)sb.st_size : -1;
    errno = 0;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        st = dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, errno_text(errno));
        close(fd);
        return st;
    }
    uint64_t per = 1, payload = 0;
    st = idx_header(f, path, labels, max_n, dims, &per, &payload);
    if (st == DT_OK) st = idx_payload(f, path, labels, file_bytes, 4 + 4 * (size_t)(labels ? 1 : 3), dims, per, payload, data);
    gzclose(f);
    return st;
}

/* The first max_n examples (0: all) of an images file and its labels file. */
dt_status dt_idx_load_first(const char *images_path, const char *labels_path, int max_n, dt_dataset *out) {
    assert(images_path && labels_path && out);
    memset(out, 0, sizeof *out);
    uint32_t idim[3] = {0}, ldim[3] = {0};
    uint8_t *images = NULL, *labels = NULL;
    dt_status st = idx_read(images_path, 0, max_n, idim, &images);
    if (st != DT_OK) return st;
    st = idx_read(labels_path, 1, max_n, ldim, &labels);
    if (st != DT_OK) { free(images); return st; }
    if (idim[0] != ldim[0]) {
        st = dt_fail(DT_ERR_FORMAT, "%s: image count %u does not match label count %u in %s",
                     images_path, idim[0], ldim[0], labels_path);
        goto fail;
    }
    const int n = (int)dt_first_count(max_n, idim[0]);
    for (int i = 0; i < n; i++) {
        if (labels[i] >= IDX_CLASSES) {
            st = dt_fail(DT_ERR_FORMAT, "%s: label %u at index %u out of range 0..%d",
                         labels_path, labels[i], i, IDX_CLASSES - 1);
            goto fail;
        }
    }
    snprintf(out->name, sizeof out->name, "idx");
    out->n = n;
    out->c = 1;
    out->h = (int)idim[1];
    out->w = (int)idim[2];
    out->classes = IDX_CLASSES;
    out->images = images;
    out->labels = labels;
    out->mean[0] = out->mean[1] = out->mean[2] = 0.0f; /* generic: values are pixel/255 */
    out->std[0] = out->std[1] = out->std[2] = 1.0f;
    out->augment = 0;
    return DT_OK;
fail:
    free(images);
    free(labels);
    return st;
}

dt_status dt_idx_load(const char *images_path, const char *labels_path, dt_dataset *out) {
    return dt_idx_load_first(images_path, labels_path, 0, out);
}
