/* dtrain diff: the largest difference between two weights files. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/escape.h"
#include "core/flag_table.h"
#include "core/tensorfile.h"
#include "dtrain.h"

/* diff compares the model's tensors and a checkpoint's optimiser state (sgd's momentum, AdamW's
 * moments: "optim:"); the trainer's and the schemes' own records (train:..., allreduce:..., raw counters among them) differ between
 * ranks by design and are not floats to compare */
static int diffed(const char *name) { return !strchr(name, ':') || !strncmp(name, "optim:", 6); }

static int diffed_records(const dt_tfile *f) {
    int n = 0;
    for (int i = 0; i < f->n; i++) n += diffed(f->recs[i].name);
    return n;
}

/* Compares two weights files tensor by tensor: the tool behind "are these two runs the same
 * model?" (and the distributed equivalence tests). */
typedef struct {
    float tol;
} diff_opts;

static const dt_flag diff_flags[] = {
    {"tol", DT_AT_FLOAT(diff_opts, tol), .min = 0, .max = 1e30, .help = "exit 1 when the largest difference exceeds this",
     .zero = ""},
};

int dt_cmd_diff(int argc, char **argv) {
    diff_opts o = {.tol = -1};
    const dt_flag_list list = {.flags = diff_flags, .n = NOPTS(diff_flags), .base = &o};
    const char *files[2] = {NULL, NULL};
    int nf = 0, k = 2;
    while (k < argc && strncmp(argv[k], "--", 2) != 0 && nf < 2) files[nf++] = argv[k++];
    const int parsed = dt_cli_flags("diff", argc, argv, k, &list,
                                    "A.weights B.weights [--tol X]\n\nLargest absolute difference between two weights files (or checkpoints: their\nmodel and optimiser moments; the schemes' own state is not compared).");
    if (parsed >= 0) return parsed;
    const float tol = o.tol;
    if (nf != 2) { dt_fail(DT_ERR_ARG, "dtrain diff: expected two weights files"); return dt_cli_fail(); }
    dt_tfile a, b;
    if (dt_tfile_read(files[0], &a) != DT_OK) return dt_cli_fail();
    if (dt_tfile_read(files[1], &b) != DT_OK) { dt_tfile_free(&a); return dt_cli_fail(); }
    double worst = 0, scale = 0;
    const char *where = "-";
    dt_status st = DT_OK;
    const int na = diffed_records(&a), nb = diffed_records(&b);
    if (na != nb) st = dt_fail(DT_ERR_FORMAT, "%s has %d tensors, %s has %d", files[0], na, files[1], nb);
    for (int i = 0; st == DT_OK && i < a.n; i++) {
        if (!diffed(a.recs[i].name)) continue;
        const dt_record *ra = &a.recs[i], *rb = dt_tfile_find(&b, ra->name);
        if (!rb || rb->numel != ra->numel) {
            st = dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' missing or of another size", files[1], ra->name);
            break;
        }
        for (size_t j = 0; j < ra->numel; j++) {
            double d = fabs((double)ra->data[j] - rb->data[j]);
            if (d > worst || d != d) { worst = d; where = ra->name; }
            if (fabs(ra->data[j]) > scale) scale = fabs(ra->data[j]);
        }
    }
    char name[4 * sizeof a.recs[0].name]; /* a name from the file: printed escaped, as errors are */
    if (st == DT_OK)
        printf("max |a-b| = %.3g (in %s), max |a| = %.3g, %s\n", worst, dt_escape(name, sizeof name, where), scale,
               worst == 0 ? "identical" : "different");
    dt_tfile_free(&a);
    dt_tfile_free(&b);
    if (st != DT_OK) return dt_cli_fail();
    return tol >= 0 && !(worst <= tol) ? 1 : 0;
}
