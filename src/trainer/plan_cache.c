/* --plan auto|off|FILE (plan_cache.h): a named plan is used as it is or refused; auto keeps one
 * plan a model, batch, precision and CPU in the user's cache folder, made on first use. */
#include "trainer/plan_cache.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/hash.h"
#include "trainer/plan_tune.h"

/* $XDG_CACHE_HOME/dtrain, else ~/.cache/dtrain, made if missing (0700 for the new folders) */
static dt_status cache_dir(char *out, size_t cap) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[3072];
    if (xdg && *xdg == '/') snprintf(base, sizeof base, "%s", xdg);
    else if (home && *home == '/') snprintf(base, sizeof base, "%s/.cache", home);
    else return dt_fail(DT_ERR_ARG, "--plan auto: no cache folder (set XDG_CACHE_HOME or HOME), or give --plan FILE");
    if (mkdir(base, 0700) != 0 && errno != EEXIST)
        return dt_fail(DT_ERR_IO, "--plan auto: cannot make %s: %s", base, strerror(errno));
    if ((size_t)snprintf(out, cap, "%s/dtrain", base) >= cap) return dt_fail(DT_ERR_ARG, "--plan auto: %s: path too long", base);
    if (mkdir(out, 0700) != 0 && errno != EEXIST)
        return dt_fail(DT_ERR_IO, "--plan auto: cannot make %s: %s", out, strerror(errno));
    return DT_OK;
}

dt_status dt_plan_auto_path(const char *model, int batch, int precision, char *out, size_t cap) {
    char dir[3200], cpu[200], key[512];
    dt_status st = cache_dir(dir, sizeof dir);
    if (st != DT_OK) return st;
    dt_plan_cpu(cpu, sizeof cpu);
    /* one file a model, batch, precision, CPU and version: a hash of them names it, the model's
     * name (its last path part, made safe) leads for a reader of the folder */
    snprintf(key, sizeof key, "%s|%d|%d|%s|%s", model, batch, precision, cpu, dt_version());
    const uint64_t h = dt_hash64(key, strlen(key), 0);
    const char *base = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
    char safe[64];
    size_t k = 0;
    for (; base[k] && k < sizeof safe - 1; k++) {
        const char c = base[k];
        safe[k] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ? c : '_';
    }
    safe[k] = 0;
    if ((size_t)snprintf(out, cap, "%s/plan-%s-b%d-%s-%016llx.ini", dir, safe, batch,
                         dt_precision_name((dt_precision)precision), (unsigned long long)h) >= cap)
        return dt_fail(DT_ERR_ARG, "--plan auto: the cache path is too long");
    return DT_OK;
}

dt_status dt_plan_ensure(const char *spec, const char *model, int batch, int precision, FILE *log, char *path, size_t cap) {
    *path = 0;
    if (!spec || !strcmp(spec, "off")) return DT_OK;
    dt_plan p;
    dt_status st;
    if (strcmp(spec, "auto") != 0) {
        if ((size_t)snprintf(path, cap, "%s", spec) >= cap) return dt_fail(DT_ERR_ARG, "--plan %s: path too long", spec);
        if ((st = dt_plan_read(path, &p)) == DT_OK) st = dt_plan_matches(&p, path, model, batch, precision);
        dt_plan_free(&p);
        return st;
    }
    if ((st = dt_plan_auto_path(model, batch, precision, path, cap)) != DT_OK) return st;
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if ((st = dt_plan_read(path, &p)) == DT_OK) st = dt_plan_matches(&p, path, model, batch, precision);
        dt_plan_free(&p);
        if (st == DT_OK) return DT_OK;
        if (log) fprintf(log, "dtrain: note: %s; planning again\n", dt_last_error());
    }
    const dt_plan_opts o = {.repeats = 3, .steps = 2, .tie = 0.03, .log = NULL};
    if (log) fprintf(log, "dtrain: planning the kernels of %s (batch %d, %s) on this CPU, once...\n", model, batch,
                     dt_precision_name((dt_precision)precision));
    if ((st = dt_plan_make(model, batch, precision, &o, &p)) == DT_OK) st = dt_plan_write(path, &p);
    if (st == DT_OK && log)
        fprintf(log, "dtrain: plan made in %.1f s (runs %s), kept in %s\n", p.made_s, dt_precision_name((dt_precision)p.runs), path);
    dt_plan_free(&p);
    return st;
}

dt_status dt_plan_use(const char *spec, const char *model, int batch, int precision, dt_model *m, FILE *log, char *path,
                      size_t cap) {
    dt_status st = dt_plan_ensure(spec, model, batch, precision, log, path, cap);
    if (st != DT_OK || !*path) return st;
    dt_plan p;
    if ((st = dt_plan_read(path, &p)) == DT_OK && (st = dt_plan_matches(&p, path, model, batch, precision)) == DT_OK)
        st = dt_plan_apply(&p, path, m);
    dt_plan_free(&p);
    return st;
}
