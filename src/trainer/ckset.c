/* Checkpoint sets: the manifest that commits every rank's part at once (see ckset.h). */
#include "trainer/ckset.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/paths.h"
#include "core/tensorfile.h"

void dt_ckset_part_path(const char *path, int epoch, long mid, int rank, char *out, size_t len) {
    if (mid < 0) snprintf(out, len, "%s.e%d.rank%d", path, epoch, rank);
    else snprintf(out, len, "%s.e%d.s%ld.rank%d", path, epoch, mid, rank);
}

int dt_ckset_is_manifest(const char *text, size_t len) {
    const size_t m = strlen(DT_CKSET_MAGIC);
    return len >= m && memcmp(text, DT_CKSET_MAGIC, m) == 0;
}

dt_status dt_ckset_slurp(const char *path, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    FILE *f;
    dt_status st = dt_open_regular(path, &f, NULL);
    if (st != DT_OK) return st;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) st = dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    else if ((uint64_t)sb.st_size > DT_CKSET_MAX_BYTES)
        st = dt_fail(DT_ERR_FORMAT, "%s: %lld bytes, larger than any checkpoint manifest", path, (long long)sb.st_size);
    char *buf = st == DT_OK ? malloc((size_t)sb.st_size + 1) : NULL;
    if (st == DT_OK && !buf) st = dt_nomem("the checkpoint manifest %s", path);
    if (st == DT_OK && fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
        st = dt_fail(DT_ERR_IO, "%s: read failed", path);
    fclose(f);
    if (st != DT_OK) { free(buf); return st; }
    buf[sb.st_size] = 0;
    *text = buf;
    *len = (size_t)sb.st_size;
    return DT_OK;
}

/* The next line of the manifest (without its newline) into line; 0 at the end or when a line
 * is too long to be one of ours. */
static int next_line(const char **p, const char *end, char *line, size_t cap) {
    if (*p >= end) return 0;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    if (!nl) return 0; /* every line ends with a newline: a cut file does not */
    const size_t n = (size_t)(nl - *p);
    if (n >= cap || memchr(*p, 0, n)) return 0;
    memcpy(line, *p, n);
    line[n] = 0;
    *p = nl + 1;
    return 1;
}

/* "KEY N" with N a whole number in [lo, hi] */
static int key_number(const char *line, const char *key, long lo, long hi, long *out) {
    const size_t k = strlen(key);
    if (strncmp(line, key, k) != 0 || line[k] != ' ' || line[k + 1] < '0' || line[k + 1] > '9') return 0;
    char *e;
    errno = 0;
    const long v = strtol(line + k + 1, &e, 10);
    if (*e || errno || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* name in the manifest's folder into out; 0 when it does not fit */
static int folder_join(const char *manifest, const char *name, char *out, size_t len) {
    const char *slash = strrchr(manifest, '/');
    const int n = slash ? snprintf(out, len, "%.*s/%s", (int)(slash - manifest), manifest, name) : snprintf(out, len, "%s", name);
    return n >= 0 && (size_t)n < len;
}

dt_status dt_ckset_parse(const char *text, size_t len, const char *origin, int rank, dt_ckset *out) {
    memset(out, 0, sizeof *out);
    const char *p = text, *end = text + len;
    char line[1200];
    long epoch, step, ranks;
#define BAD(what) dt_fail(DT_ERR_FORMAT, "%s: not a whole checkpoint manifest (%s); expected the file dtrain writes " \
                          "after every rank's part of a set is saved", origin, what)
    if (!dt_ckset_is_manifest(text, len)) return BAD("no 'dtrain checkpoint set 1' first line");
    p += strlen(DT_CKSET_MAGIC);
    if (!next_line(&p, end, line, sizeof line) || !key_number(line, "epoch", 0, 1000000, &epoch)) return BAD("line 2: epoch");
    if (!next_line(&p, end, line, sizeof line) || !key_number(line, "step", 0, (long)1e15, &step)) return BAD("line 3: step");
    if (!next_line(&p, end, line, sizeof line) || !key_number(line, "ranks", 2, 1000000, &ranks)) return BAD("line 4: ranks");
    if (!next_line(&p, end, line, sizeof line) || strncmp(line, "run ", 4) != 0 || strlen(line + 4) >= sizeof out->run)
        return BAD("line 5: run");
    memcpy(out->run, line + 4, strlen(line + 4) + 1); /* fits: checked above */
    out->epoch = (int)epoch;
    out->step = step;
    out->ranks = (int)ranks;
    for (long r = 0; r < ranks; r++) {
        char name[1100], tail[64], tail_mid[80], extra;
        long idx;
        unsigned crc;
        if (!next_line(&p, end, line, sizeof line) || sscanf(line, "part %ld %1099s %8x%c", &idx, name, &crc, &extra) != 3 ||
            idx != r) {
            char what[64];
            snprintf(what, sizeof what, "the line of part %ld", r);
            return BAD(what);
        }
        /* a plain file name in the manifest's folder, and a part of this set's own epoch (a set
         * saved within an epoch: and its own step) */
        snprintf(tail, sizeof tail, ".e%ld.rank%ld", epoch, r);
        snprintf(tail_mid, sizeof tail_mid, ".e%ld.s%ld.rank%ld", epoch, step, r);
        const size_t nl = strlen(name), tl = strlen(tail), ml = strlen(tail_mid);
        const int ours = (nl > tl && !strcmp(name + nl - tl, tail)) || (nl > ml && !strcmp(name + nl - ml, tail_mid));
        if (strchr(name, '/') || !ours)
            return dt_fail(DT_ERR_FORMAT, "%s: part %ld is '%s', expected a file name ending in '%s' (the set's epoch %ld): "
                           "a set mixed from two epochs", origin, r, name, tail, epoch);
        if (r == rank) {
            if (!folder_join(origin, name, out->part, sizeof out->part))
                return dt_fail(DT_ERR_FORMAT, "%s: the path of part %ld is too long", origin, r);
            out->crc = (uint32_t)crc;
        }
    }
    if (!next_line(&p, end, line, sizeof line) || strcmp(line, "end") != 0 || p != end) return BAD("no 'end' line after the parts");
#undef BAD
    return DT_OK;
}

typedef struct { int epoch, ranks; long step, mid; const char *path, *run; const uint32_t *crc; } manifest_ctx;

static dt_status fill_manifest(void *vctx, void *file) {
    const manifest_ctx *c = vctx;
    FILE *f = file;
    const char *base = strrchr(c->path, '/') ? strrchr(c->path, '/') + 1 : c->path;
    fprintf(f, "%sepoch %d\nstep %ld\nranks %d\nrun %s\n", DT_CKSET_MAGIC, c->epoch, c->step, c->ranks, c->run);
    for (int r = 0; r < c->ranks; r++) {
        char name[1100];
        dt_ckset_part_path(base, c->epoch, c->mid, r, name, sizeof name);
        fprintf(f, "part %d %s %08" PRIx32 "\n", r, name, c->crc[r]);
    }
    fputs("end\n", f);
    return ferror(f) ? dt_fail(DT_ERR_IO, "%s: write failed: %s", c->path, strerror(errno)) : DT_OK;
}

dt_status dt_ckset_write(const char *path, int epoch, long step, long mid, const char *run, int ranks, const uint32_t *crc) {
    manifest_ctx c = {epoch, ranks, step, mid, path, run, crc};
    return dt_write_atomic(path, fill_manifest, &c);
}

/* rank's parts of sets other than keep's (epoch, mid; none when parts is 0), and their
 * temporaries whose writer is gone */
static void sweep(const char *path, int rank, int keep, long keep_mid, int parts) {
    char dir[1100];
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    dt_path_folder(path, dir, sizeof dir);
    const size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        /* BASE.eE[.sS].rankR, or the same with .tmp.PID.RANDOM (dt_write_atomic's temporary) */
        const char *n = e->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".e", 2) != 0) continue;
        char *q;
        const long epoch = strtol(n + blen + 2, &q, 10);
        long mid = -1;
        if (q != n + blen + 2 && !strncmp(q, ".s", 2)) {
            char *qs;
            mid = strtol(q + 2, &qs, 10);
            if (qs == q + 2) continue;
            q = qs;
        }
        if (q == n + blen + 2 || strncmp(q, ".rank", 5) != 0) continue;
        char *r;
        const long who = strtol(q + 5, &r, 10);
        if (r == q + 5 || who != rank) continue;
        if (*r == 0) {
            if (!parts || (epoch == keep && mid == keep_mid)) continue;
        } else if (strncmp(r, ".tmp.", 5) != 0 || !dt_tmp_writer_gone(r + 5)) {
            continue;
        }
        char victim[2300];
        snprintf(victim, sizeof victim, "%s/%s", dir, n);
        unlink(victim);
    }
    closedir(d);
}

void dt_ckset_remove_others(const char *path, int rank, int keep, long keep_mid) { sweep(path, rank, keep, keep_mid, 1); }

void dt_ckset_remove_stale_tmp(const char *path, int rank) { sweep(path, rank, 0, -1, 0); }
