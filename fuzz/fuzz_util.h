/* Shared by the fuzz targets: the readers under test take paths, so each input is written to
 * files in a private temporary folder (one per fuzzing process, removed at exit). */
#ifndef DT_FUZZ_UTIL_H
#define DT_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dt_fuzz_dir[64];
static char dt_fuzz_paths[8][96];
static int dt_fuzz_npaths;

static inline void dt_fuzz_cleanup(void) {
    for (int i = 0; i < dt_fuzz_npaths; i++) unlink(dt_fuzz_paths[i]);
    if (dt_fuzz_dir[0]) rmdir(dt_fuzz_dir);
}

/* The path of file `name` in the private folder (created on first use). */
static inline const char *dt_fuzz_path(const char *name) {
    if (!dt_fuzz_dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dt_fuzz_dir, sizeof dt_fuzz_dir, "%s/dtfuzz.XXXXXX", t && *t && strlen(t) < 40 ? t : "/tmp");
        if (!mkdtemp(dt_fuzz_dir)) { perror("dt_fuzz: mkdtemp"); abort(); }
        atexit(dt_fuzz_cleanup);
    }
    for (int i = 0; i < dt_fuzz_npaths; i++)
        if (!strcmp(strrchr(dt_fuzz_paths[i], '/') + 1, name)) return dt_fuzz_paths[i];
    if (dt_fuzz_npaths == 8) abort();
    snprintf(dt_fuzz_paths[dt_fuzz_npaths], sizeof dt_fuzz_paths[0], "%s/%s", dt_fuzz_dir, name);
    return dt_fuzz_paths[dt_fuzz_npaths++];
}

/* Writes len bytes to file `name`; returns its path. A failed write is the harness's fault:
 * abort rather than fuzz a file that is not what the input says. */
static inline const char *dt_fuzz_write(const char *name, const uint8_t *data, size_t len) {
    const char *path = dt_fuzz_path(name);
    /* a new file each time: ext4 flushes a file truncated and rewritten at its close
     * (auto_da_alloc), which made each input wait milliseconds for the disk */
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) { perror(path); abort(); }
    return path;
}

/* data as a NUL-terminated string (the caller frees). */
static inline char *dt_fuzz_str(const uint8_t *data, size_t len) {
    char *s = malloc(len + 1);
    if (!s) abort();
    memcpy(s, data, len);
    s[len] = 0;
    return s;
}

/* The text of a file this process wrote (at most 128 kB), in a static buffer: for the
 * targets that write a file twice and compare the two */
static inline const char *dt_fuzz_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) abort();
    static char buf[1 << 17];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

#endif
