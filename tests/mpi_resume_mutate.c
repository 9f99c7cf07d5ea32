/* A checkpoint set against its manifest, randomized (2 ranks, under mpiexec): a valid set is
 * written, then in each trial the manifest and the parts are changed the ways a disk, a
 * crash or a careless copy change them (bytes flipped, files cut, a part removed, parts
 * swapped between ranks, a stale part of another run or of another epoch under the same
 * name, a part of another model, another run's manifest) and dt_train resumes from it.
 * Either every rank refuses, with a message naming a file of the set, or the run ends with
 * the very weights a resume of the untouched set ends with. Never a crash, a hang, or other
 * weights. The comparison can fail: another run's whole set resumes to other weights.
 * DTRAIN_TEST_SEED picks another sequence of trials, DTRAIN_TEST_TRIALS their number. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "dtrain.h"

static char dir[256];
static int rank;

typedef struct blob { char *p; size_t n; } blob;

static blob slurp(const char *path) {
    blob b = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return b;
    fseek(f, 0, SEEK_END);
    b.n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    b.p = malloc(b.n + 1);
    if (!b.p || fread(b.p, 1, b.n, f) != b.n) { free(b.p); b.p = NULL; b.n = 0; }
    else b.p[b.n] = 0; /* a manifest is read as text */
    fclose(f);
    return b;
}

static void put(const char *name, const char *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "cannot write %s", path);
}

static void train(const char *model, uint64_t seed, int epochs, const char *checkpoint, const char *resume,
                  const char *out, dt_status *st) {
    dt_train_config c;
    dt_train_config_defaults(&c);
    c.model = model;
    c.scheme.name = "allreduce";
    c.epochs = epochs;
    c.batch = 32;
    c.train_limit = 256;
    c.test_limit = 64;
    c.seed = seed;
    c.quiet = 1;
    c.checkpoint = checkpoint;
    c.resume = resume;
    c.weights_out = out;
    dt_train_result r;
    *st = dt_train(&c, &r);
}

static char *path_of(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

enum { MANIFEST, PART0, PART1, NFILES };
static const char *names[NFILES] = {"ck", "ck.e1.rank0", "ck.e1.rank1"};

/* One change of the set (rank 0), described in what. */
static void mutate(dt_rng *g, const blob *good, const blob *other, const blob *two, const blob *cnn, char *what, size_t len) {
    const int kind = (int)dt_rng_below(g, 11), f = (int)dt_rng_below(g, NFILES), r = 1 + (int)dt_rng_below(g, 2);
    const blob *b = &good[f];
    char *copy = malloc(b->n + 16);
    memcpy(copy, b->p, b->n);
    const size_t at = b->n ? dt_rng_below(g, (uint32_t)b->n) : 0;
    switch (kind) {
    case 0: { /* a bit flipped */
        const int bit = (int)dt_rng_below(g, 8);
        copy[at] ^= (char)(1 << bit);
        put(names[f], copy, b->n);
        snprintf(what, len, "%s: bit %d of byte %zu flipped", names[f], bit, at);
        break;
    }
    case 1:
        put(names[f], copy, at);
        snprintf(what, len, "%s: cut to %zu bytes", names[f], at);
        break;
    case 2:
        memcpy(copy + b->n, "junk", 4);
        put(names[f], copy, b->n + 4);
        snprintf(what, len, "%s: 4 bytes appended", names[f]);
        break;
    case 3:
        unlink(path_of(names[r]));
        snprintf(what, len, "%s removed", names[r]);
        break;
    case 4:
        put(names[PART0], good[PART1].p, good[PART1].n);
        put(names[PART1], good[PART0].p, good[PART0].n);
        snprintf(what, len, "the parts of ranks 0 and 1 swapped");
        break;
    case 5:
    case 6:
    case 7: { /* another file under the part's name */
        static const char *whose[] = {"a stale part of another run (another seed)", "the part of epoch 2 of another run",
                                      "a part of another model (cnn1)"};
        const blob *from = kind == 5 ? &other[r] : kind == 6 ? &two[r] : &cnn[r];
        put(names[r], from->p, from->n);
        snprintf(what, len, "%s: %s under its name", names[r], whose[kind - 5]);
        break;
    }
    case 8:
        put(names[MANIFEST], other[MANIFEST].p, other[MANIFEST].n);
        snprintf(what, len, "ck: another run's manifest over this run's parts");
        break;
    case 9: { /* the manifest forged to name another epoch's part, with that part's checksum */
        char mine[64], theirs[64];
        snprintf(mine, sizeof mine, "part %d ck.e1.rank%d ", r - 1, r - 1);
        snprintf(theirs, sizeof theirs, "part %d ck.e2.rank%d ", r - 1, r - 1);
        char *m = strdup(good[MANIFEST].p), *l = m ? strstr(m, mine) : NULL;
        const char *c = strstr(two[MANIFEST].p, theirs);
        if (l && c && strlen(l) >= strlen(mine) + 8 && strlen(c) >= strlen(theirs) + 8) {
            memcpy(l + strlen(mine), c + strlen(theirs), 8);
            put(names[MANIFEST], m, good[MANIFEST].n);
            put(names[r], two[r].p, two[r].n);
            snprintf(what, len, "ck names %s with the checksum of the part of epoch 2 it now holds", names[r]);
        } else {
            CHECK_MSG(0, "the manifests have no line '%s' or '%s'", mine, theirs);
        }
        free(m);
        break;
    }
    default:
        snprintf(what, len, "nothing changed");
    }
    free(copy);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    dt_runtime_init();
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "mpi_resume_mutate: run with mpiexec -n 2\n");
        MPI_Finalize();
        return 2;
    }
    long id = (long)getpid();
    MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(dir, sizeof dir, "/tmp/dtrain-test-resume-mutate.%ld", id);
    if (rank == 0) {
        CHECK(mkdir(dir, 0700) == 0);
        for (const char *s = "abc"; *s; s++) {
            char sub[300];
            snprintf(sub, sizeof sub, "%s/%c", dir, *s);
            CHECK(mkdir(sub, 0700) == 0);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* the set under test, another run's (seed 2), another run's epoch 2, another model's */
    dt_status st;
    train("mlp", 1, 1, path_of("ck"), NULL, NULL, &st);
    CHECK_MSG(st == DT_OK, "%s", dt_last_error());
    train("mlp", 2, 1, path_of("a/ck"), NULL, NULL, &st);
    CHECK_MSG(st == DT_OK, "%s", dt_last_error());
    train("mlp", 3, 2, path_of("b/ck"), NULL, NULL, &st);
    CHECK_MSG(st == DT_OK, "%s", dt_last_error());
    train("cnn1", 1, 1, path_of("c/ck"), NULL, NULL, &st);
    CHECK_MSG(st == DT_OK, "%s", dt_last_error());
    blob good[NFILES], other[NFILES], two[NFILES], cnn[NFILES];
    const char *two_names[NFILES] = {"b/ck", "b/ck.e2.rank0", "b/ck.e2.rank1"};
    for (int f = 0; f < NFILES; f++) {
        char n[64];
        good[f] = slurp(path_of(names[f]));
        snprintf(n, sizeof n, "a/%s", names[f]);
        other[f] = slurp(path_of(n));
        two[f] = slurp(path_of(two_names[f]));
        snprintf(n, sizeof n, "c/%s", names[f]);
        cnn[f] = slurp(path_of(n));
        CHECK(good[f].p && other[f].p && two[f].p && cnn[f].p);
    }

    /* the untouched set: what every accepted trial must end with */
    train("mlp", 1, 2, NULL, path_of("ck"), path_of("ref.w"), &st);
    CHECK_MSG(st == DT_OK, "%s", dt_last_error());
    blob ref = slurp(path_of("ref.w"));
    if (rank == 0) CHECK_MSG(ref.p, "no %s", path_of("ref.w"));
    /* the comparison can fail: another run's whole set resumes to other weights */
    train("mlp", 1, 2, NULL, path_of("a/ck"), path_of("other.w"), &st);
    blob ow = slurp(path_of("other.w"));
    if (rank == 0) /* (rank 0 writes the weights) */
        CHECK_MSG(st == DT_OK && ref.p && ow.p && (ow.n != ref.n || memcmp(ow.p, ref.p, ref.n) != 0), "%s",
                  st == DT_OK ? "the same weights" : dt_last_error());

    const char *seed_env = getenv("DTRAIN_TEST_SEED"), *trials_env = getenv("DTRAIN_TEST_TRIALS");
    const int trials = trials_env ? atoi(trials_env) : 40;
    dt_rng g;
    dt_rng_seed(&g, seed_env ? strtoull(seed_env, NULL, 10) : 16);
    int refused = 0, accepted = 0;
    for (int t = 0; t < trials; t++) {
        char what[200] = "";
        if (rank == 0) {
            for (int f = 0; f < NFILES; f++) put(names[f], good[f].p, good[f].n);
            unlink(path_of("out.w"));
            mutate(&g, good, other, two, cnn, what, sizeof what);
        }
        MPI_Bcast(what, sizeof what, MPI_CHAR, 0, MPI_COMM_WORLD);
        train("mlp", 1, 2, NULL, path_of("ck"), path_of("out.w"), &st);
        int mine[2] = {st != DT_OK, st != DT_OK && strstr(dt_last_error(), dir) != NULL}, all[2][2];
        MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
        if (rank == 0) {
            CHECK_MSG(all[0][0] == all[1][0], "trial %d (%s): one rank refused, the other did not", t, what);
            if (all[0][0]) {
                refused++;
                CHECK_MSG(all[0][1] || all[1][1], "trial %d (%s): refused without naming a file of the set: %s", t,
                          what, dt_last_error());
            } else {
                accepted++;
                blob w = slurp(path_of("out.w"));
                CHECK_MSG(w.p && w.n == ref.n && !memcmp(w.p, ref.p, ref.n),
                          "trial %d (%s): accepted, and resumed to other weights than the set's", t, what);
                free(w.p);
            }
            if (getenv("DTRAIN_TEST_VERBOSE"))
                printf("trial %d: %s: %s\n", t, what, all[0][0] ? dt_last_error() : "accepted, same weights");
        }
    }
    if (rank == 0) {
        printf("mpi_resume_mutate: %d trials, %d refused, %d accepted with the set's weights\n", trials, refused, accepted);
        CHECK(trials < 10 || refused > 0); /* the trials change something */
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (!getenv("DTRAIN_TEST_KEEP")) CHECK(system(cmd) == 0);
    }
    for (int f = 0; f < NFILES; f++) { free(good[f].p); free(other[f].p); free(two[f].p); free(cnn[f].p); }
    free(ref.p);
    free(ow.p);
    int failures = test_failures, any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    test_failures = any;
    return rank == 0 ? test_summary("mpi_resume_mutate") : any != 0;
}
