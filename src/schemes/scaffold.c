/* SCAFFOLD's control variates (scaffold.h). */
#include "schemes/scaffold.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

struct dt_scaffold {
    size_t np;
    float *c, *ci;
    float *gsum;  /* the round's own gradients, summed */
    double steps; /* ... over this many steps (a double: a checkpoint record as it is) */
};

dt_status dt_scaffold_create(size_t np, dt_scaffold **out) {
    DT_TRY(dt_calloc(*out, 1, "SCAFFOLD's control variates"));
    dt_scaffold *s = *out;
    s->np = np;
    DT_TRY(dt_calloc(s->c, np, "the global control variate of %zu parameters", np));
    DT_TRY(dt_calloc(s->ci, np, "the rank's control variate of %zu parameters", np));
    return dt_calloc(s->gsum, np, "the round's gradients, %zu parameters", np);
}

void dt_scaffold_free(dt_scaffold *s) {
    if (s) dt_free_all(s->c, s->ci, s->gsum, s);
}

void dt_scaffold_correct(dt_scaffold *s, float *g) {
    for (size_t i = 0; i < s->np; i++) {
        s->gsum[i] += g[i];
        g[i] += s->c[i] - s->ci[i];
    }
    s->steps++;
}

void dt_scaffold_round_end(dt_scaffold *s, float w, float *out) {
    if (s->steps > 0) {
        const float inv = (float)(1.0 / s->steps);
        for (size_t i = 0; i < s->np; i++) s->ci[i] = s->gsum[i] * inv;
    }
    for (size_t i = 0; i < s->np; i++) out[i] = w * s->ci[i];
}

void dt_scaffold_round_start(dt_scaffold *s, const float *sum, float inv) {
    for (size_t i = 0; i < s->np; i++) s->c[i] = sum[i] * inv;
    memset(s->gsum, 0, s->np * sizeof(float));
    s->steps = 0;
}

dt_status dt_scaffold_save(const dt_scaffold *s, dt_records *out) {
    if (!s) return DT_OK;
    dt_status st = dt_records_add(out, "scaffold_c", s->c, s->np);
    if (st == DT_OK) st = dt_records_add(out, "scaffold_ci", s->ci, s->np);
    if (st == DT_OK) st = dt_records_add(out, "scaffold_round", s->gsum, s->np);
    if (st == DT_OK) st = dt_records_add_raw(out, "scaffold_steps", &s->steps, sizeof s->steps);
    return st;
}

dt_status dt_scaffold_load(dt_scaffold *s, const dt_tfile *f, const char *path) {
    const int saved = dt_tfile_find(f, "scaffold_c") != NULL;
    if (saved != (s != NULL))
        return dt_fail(DT_ERR_ARG, "--scaffold: %s was saved by a run %s SCAFFOLD's control variates, this run has %s",
                       path, saved ? "with" : "without", s ? "them" : "none");
    if (!s) return DT_OK;
    const size_t bytes = s->np * sizeof(float);
    dt_status st = dt_tfile_take(f, path, "scaffold_c", s->c, bytes);
    if (st == DT_OK) st = dt_tfile_take(f, path, "scaffold_ci", s->ci, bytes);
    if (st == DT_OK) st = dt_tfile_take(f, path, "scaffold_round", s->gsum, bytes);
    if (st == DT_OK) st = dt_tfile_take(f, path, "scaffold_steps", &s->steps, sizeof s->steps);
    if (st == DT_OK && !(s->steps >= 0 && s->steps <= 1e15))
        return dt_fail(DT_ERR_FORMAT, "%s: fedavg:scaffold_steps holds %g, expected a count >= 0 (a corrupt or forged "
                       "checkpoint)", path, s->steps);
    return st;
}
