/* The safetensors layout (safetensors.h): written with core/json.c (one writer for every JSON
 * dtrain emits), read with jansson (Debian's libjansson-dev) rather than cJSON: it parses a
 * buffer of given length (no NUL needed), refuses duplicate keys (JSON_REJECT_DUPLICATES: two
 * entries for one tensor are a corrupt file, not a choice), keeps integers as 64-bit integers
 * (offsets past 2^53 are not rounded through a double) and says where the JSON is wrong. */
#include "core/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/json.h"
#include "core/paths.h"

/* the reference implementation's limit on the header's size */
#define MAX_HEADER 100000000ull
#define MAX_TENSORS 100000

int dt_is_safetensors(const char *path) {
    const size_t n = strlen(path), k = strlen(".safetensors");
    return n > k && !strcmp(path + n - k, ".safetensors");
}

/* ------------------------------------------------------------------ writing */

typedef struct {
    const dt_record *recs;
    int n;
    const dt_st_i64 *i64;
    int ni64;
    const char *path;
} st_ctx;

static size_t rec_bytes(const dt_record *r) { return r->numel * sizeof(float); }

static dt_status fill(void *vctx, void *file) {
    st_ctx *c = vctx;
    FILE *f = file;
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    unsigned long long off = 0;
    for (int i = 0; i < c->n; i++) {
        const dt_record *r = &c->recs[i];
        if (!strncmp(r->name, "meta:", 5)) continue;
        dt_json_begin(&j, r->name);
        dt_json_str(&j, "dtype", "F32");
        dt_json_begin_array(&j, "shape");
        for (int d = 0; d < r->ndim; d++) dt_json_int(&j, NULL, r->shape[d]);
        dt_json_end_array(&j);
        dt_json_begin_array(&j, "data_offsets");
        dt_json_int(&j, NULL, (long long)off);
        off += rec_bytes(r);
        dt_json_int(&j, NULL, (long long)off);
        dt_json_end_array(&j);
        dt_json_end(&j);
    }
    for (int i = 0; i < c->ni64; i++) {
        dt_json_begin(&j, c->i64[i].name);
        dt_json_str(&j, "dtype", "I64");
        dt_json_begin_array(&j, "shape");
        dt_json_end_array(&j);
        dt_json_begin_array(&j, "data_offsets");
        dt_json_int(&j, NULL, (long long)off);
        off += 8;
        dt_json_int(&j, NULL, (long long)off);
        dt_json_end_array(&j);
        dt_json_end(&j);
    }
    dt_json_begin(&j, "__metadata__");
    dt_json_str(&j, "format", "pt");
    for (int i = 0; i < c->n; i++) {
        const dt_record *r = &c->recs[i];
        if (strncmp(r->name, "meta:", 5) != 0) continue;
        /* a text record: its bytes up to the first NUL */
        const size_t bytes = rec_bytes(r);
        char *text = malloc(bytes + 1);
        if (!text) { dt_json_free(&j); return dt_nomem("the text of %s", r->name); }
        memcpy(text, r->data, bytes);
        text[bytes] = 0;
        dt_json_str(&j, r->name + 5, text);
        free(text);
    }
    dt_json_end(&j);
    dt_json_end(&j);
    const char *h = dt_json_text(&j);
    if (!h) { dt_json_free(&j); return dt_allocated(h); }
    const size_t len = strlen(h), padded = (len + 7) / 8 * 8; /* spaces to a multiple of 8, as the reference */
    const uint64_t n64 = padded; /* little-endian host, as tensorfile.c */
    int ok = fwrite(&n64, 8, 1, f) == 1 && fwrite(h, 1, len, f) == len;
    for (size_t k = len; ok && k < padded; k++) ok = fputc(' ', f) != EOF;
    dt_json_free(&j);
    for (int i = 0; ok && i < c->n; i++)
        if (strncmp(c->recs[i].name, "meta:", 5) != 0)
            ok = fwrite(c->recs[i].data, 1, rec_bytes(&c->recs[i]), f) == rec_bytes(&c->recs[i]);
    for (int i = 0; ok && i < c->ni64; i++) ok = fwrite(&c->i64[i].value, 8, 1, f) == 1;
    return ok ? DT_OK : dt_fail(DT_ERR_IO, "%s: write failed: %s", c->path, strerror(errno));
}

dt_status dt_safetensors_write(const char *path, const dt_record *recs, int n, const dt_st_i64 *i64, int ni64) {
    st_ctx c = {recs, n, i64, ni64, path};
    return dt_write_atomic(path, fill, &c);
}

/* ------------------------------------------------------------------ reading */

typedef struct {
    const char *name;
    int i64;                /* an I64 num_batches_tracked (checked, not kept) */
    int ndim, shape[4];
    size_t numel;
    unsigned long long begin, end;
} entry;

static int by_begin(const void *a, const void *b) {
    const entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* One tensor's header entry into e; a one-line error otherwise. */
static dt_status parse_entry(const char *path, const char *name, json_t *v, entry *e) {
    memset(e, 0, sizeof *e);
    e->name = name;
    if (!*name || strlen(name) >= sizeof ((dt_record *)0)->name || strchr(name, ':'))
        return dt_fail(DT_ERR_FORMAT, "%s: tensor name '%.80s' is empty, longer than 63 bytes or has a ':'", path, name);
    if (!json_is_object(v)) return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' is not a JSON object", path, name);
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *of = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' has no \"dtype\" string", path, name);
    const char *dtype = json_string_value(dt);
    const char *nbt = ".num_batches_tracked";
    const size_t nl = strlen(name), bl = strlen(nbt);
    if (!strcmp(dtype, "I64") && nl > bl && !strcmp(name + nl - bl, nbt)) e->i64 = 1;
    else if (strcmp(dtype, "F32") != 0)
        return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' has dtype %.20s, dtrain reads F32 (and I64 for "
                       "num_batches_tracked)", path, name, dtype);
    if (!json_is_array(sh) || json_array_size(sh) > 4)
        return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s': \"shape\" is not an array of at most 4 sizes", path, name);
    e->ndim = (int)json_array_size(sh);
    e->numel = 1;
    for (int d = 0; d < e->ndim; d++) {
        json_t *x = json_array_get(sh, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1 << 30))
            return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s': shape size %d is not a whole number 0..2^30", path, name, d);
        e->shape[d] = (int)json_integer_value(x);
        e->numel *= (size_t)e->shape[d];
        if (e->numel > ((size_t)1 << 32)) /* checked per size: no wrap-around */
            return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s': shape of more than 2^32 values", path, name);
    }
    if (e->i64 && e->ndim != 0)
        return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' (I64) has %d dimensions, expected a scalar (shape [])", path, name, e->ndim);
    if (!json_is_array(of) || json_array_size(of) != 2 || !json_is_integer(json_array_get(of, 0)) ||
        !json_is_integer(json_array_get(of, 1)) || json_integer_value(json_array_get(of, 0)) < 0 ||
        json_integer_value(json_array_get(of, 1)) < json_integer_value(json_array_get(of, 0)))
        return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" is not [begin, end] with 0 <= begin <= end", path, name);
    e->begin = (unsigned long long)json_integer_value(json_array_get(of, 0));
    e->end = (unsigned long long)json_integer_value(json_array_get(of, 1));
    const unsigned long long want = (unsigned long long)e->numel * (e->i64 ? 8u : 4u);
    if (e->end - e->begin != want)
        return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, its shape needs %llu",
                       path, name, e->begin, e->end, e->end - e->begin, want);
    return DT_OK;
}

/* __metadata__: string values; model/spec/data/algo become "meta:KEY" text records. */
static dt_status parse_meta(const char *path, json_t *meta, dt_records *l) {
    if (!json_is_object(meta)) return dt_fail(DT_ERR_FORMAT, "%s: \"__metadata__\" is not a JSON object", path);
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v) {
        if (!json_is_string(v))
            return dt_fail(DT_ERR_FORMAT, "%s: __metadata__ \"%.40s\" is not a string", path, key);
        static const char *ours[] = {"model", "spec", "data", "algo"};
        for (int i = 0; i < 4; i++)
            if (!strcmp(key, ours[i])) {
                char name[16];
                snprintf(name, sizeof name, "meta:%s", key);
                dt_status st = dt_records_add_text(l, name, json_string_value(v));
                if (st != DT_OK) return st;
            }
    }
    return DT_OK;
}

/* The header (already parsed) against the file: entries, metadata, offsets. */
static dt_status check_header(const char *path, json_t *root, unsigned long long data_bytes, entry **out, int *nout,
                              dt_records *meta) {
    if (!json_is_object(root)) return dt_fail(DT_ERR_FORMAT, "%s: the header is not a JSON object", path);
    size_t n = json_object_size(root);
    if (n > MAX_TENSORS) return dt_fail(DT_ERR_FORMAT, "%s: the header has %zu entries, more than %d", path, n, MAX_TENSORS);
    entry *es;
    DT_TRY(dt_calloc(es, n, "the %zu entries of %s's header", n, path));
    int k = 0;
    dt_status st = DT_OK;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) st = parse_meta(path, v, meta);
        else st = parse_entry(path, key, v, &es[k++]);
        if (st != DT_OK) break;
    }
    /* the tensors cover the data exactly, in any order: no overlap, no gap, nothing past it */
    if (st == DT_OK) qsort(es, (size_t)k, sizeof *es, by_begin);
    unsigned long long at = 0;
    for (int i = 0; st == DT_OK && i < k; i++) {
        if (es[i].begin != at)
            st = dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' begins at data offset %llu, expected %llu (%s)", path, es[i].name,
                         es[i].begin, at, es[i].begin < at ? "overlaps another" : "a gap before it");
        else if (es[i].end > data_bytes)
            st = dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' ends at data offset %llu, past the file's %llu data bytes", path,
                         es[i].name, es[i].end, data_bytes);
        at = es[i].end;
    }
    if (st == DT_OK && at != data_bytes)
        st = dt_fail(DT_ERR_FORMAT, "%s: the tensors hold %llu data bytes, the file has %llu after the header", path, at, data_bytes);
    /* a step counter belongs to a batch norm whose statistics are in the file */
    for (int i = 0; st == DT_OK && i < k; i++) {
        if (!es[i].i64) continue;
        char mean[80];
        snprintf(mean, sizeof mean, "%.*s.running_mean", (int)(strlen(es[i].name) - strlen(".num_batches_tracked")), es[i].name);
        int found = 0;
        for (int m = 0; m < k && !found; m++) found = !es[m].i64 && !strcmp(es[m].name, mean);
        if (!found) st = dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' without a '%s' (not a batch norm's)", path, es[i].name, mean);
    }
    if (st != DT_OK) { free(es); return st; }
    *out = es;
    *nout = k;
    return DT_OK;
}

dt_status dt_safetensors_read(const char *path, dt_tfile *out) {
    memset(out, 0, sizeof *out);
    FILE *f;
    unsigned long long size = 0;
    dt_status st = dt_open_regular(path, &f, &size);
    if (st != DT_OK) return st;
    unsigned char lenb[8];
    char *h = NULL;
    json_t *root = NULL;
    entry *es = NULL;
    int ne = 0;
    dt_records meta = {0};
    if (size < 8 || fread(lenb, 1, 8, f) != 8) {
        st = dt_fail(DT_ERR_FORMAT, "%s: not a safetensors file: %llu bytes, shorter than the 8-byte header length", path, size);
        goto done;
    }
    if (!memcmp(lenb, "DTRTNS01", 8)) {
        st = dt_fail(DT_ERR_FORMAT, "%s: a dtrain DTRTNS01 weights file, not safetensors (name it otherwise than *.safetensors)", path);
        goto done;
    }
    unsigned long long hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | lenb[i];
    if (hn < 2 || hn > MAX_HEADER || hn > size - 8) {
        st = dt_fail(DT_ERR_FORMAT, "%s: header length %llu is not 2..%llu bytes within the file's %llu", path, hn,
                     MAX_HEADER, size);
        goto done;
    }
    if ((st = dt_malloc(h, hn, "the header of %s (%llu bytes)", path, hn)) != DT_OK) goto done;
    if (fread(h, 1, hn, f) != hn) { st = dt_fail(DT_ERR_IO, "%s: read failed: %s", path, strerror(errno)); goto done; }
    json_error_t err;
    if (h[0] != '{' || !(root = json_loadb(h, hn, JSON_REJECT_DUPLICATES, &err))) {
        st = dt_fail(DT_ERR_FORMAT, "%s: the header is not valid JSON: %s", path,
                     h[0] != '{' ? "it does not begin with '{'" : err.text);
        goto done;
    }
    if ((st = check_header(path, root, size - 8 - hn, &es, &ne, &meta)) != DT_OK) goto done;
    if ((st = dt_calloc(out->recs, (size_t)ne + (size_t)meta.n + 1, "the records of %s", path)) != DT_OK) goto done;
    /* in the file's order, as the tensors lie: reads go forward */
    for (int i = 0; i < ne; i++) {
        if (es[i].i64) continue;
        dt_record *r = &out->recs[out->n];
        snprintf(r->name, sizeof r->name, "%s", es[i].name);
        r->ndim = es[i].ndim;
        memcpy(r->shape, es[i].shape, sizeof r->shape);
        r->numel = es[i].numel;
        if ((st = dt_malloc(r->data, r->numel, "'%s' in %s", r->name, path)) != DT_OK) goto done;
        out->n++;
        if (fseek(f, (long)(8 + hn + es[i].begin), SEEK_SET) != 0 || fread(r->data, sizeof(float), r->numel, f) != r->numel) {
            st = dt_fail(DT_ERR_IO, "%s: read failed in the data of '%s'", path, r->name);
            goto done;
        }
    }
    for (int i = 0; i < meta.n; i++) {
        dt_record *r = &out->recs[out->n];
        *r = meta.r[i];
        if ((st = dt_malloc(r->data, r->numel, "'%s' in %s", r->name, path)) != DT_OK) goto done;
        memcpy(r->data, meta.r[i].data, r->numel * sizeof(float));
        out->n++;
    }
done:
    fclose(f);
    free(h);
    free(es);
    if (root) json_decref(root);
    dt_records_free(&meta);
    if (st != DT_OK) dt_tfile_free(out);
    return st;
}
