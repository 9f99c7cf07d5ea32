/* The simulated ranks' shared datasets (dataset_share.h), compiled into dtrain-sim only. SMPI gives each rank its own copy of
 * the program's statics, but the heap is the process's: the buffers can be shared, what is
 * needed is a place every rank finds them. SMPI_SHARED_MALLOC is that place: every call from
 * the same line returns the same memory (SMPI's "local" shared malloc, its default), zeroed
 * when first made. Ranks run one at a time and a load makes no MPI call, so the table is
 * never read half-written. */
#include "data/dataset_share.h"

#include <mpi.h> /* SMPI's: SMPI_SHARED_MALLOC */
#include <stdio.h>
#include <string.h>

#define SHARE_MAGIC 0x64747368u /* "dtsh" */
#define SHARE_MAX 8

typedef struct {
    unsigned magic;
    int n;
    struct {
        char key[1100];
        dt_dataset d;
    } e[SHARE_MAX];
} share_table;

static share_table *table(void) {
    static share_table *t; /* this rank's pointer to the one table */
    if (!t) t = SMPI_SHARED_MALLOC(sizeof *t);
    if (t && t->magic != SHARE_MAGIC) {
        memset(t, 0, sizeof *t);
        t->magic = SHARE_MAGIC;
    }
    return t;
}

static void make_key(char *key, size_t len, const char *name, const char *dir, int train, int max_n) {
    snprintf(key, len, "%s\n%s\n%d\n%d", name ? name : "", dir ? dir : "", train, max_n);
}

int dt_dataset_share_find(const char *name, const char *dir, int train, int max_n, dt_dataset *out) {
    share_table *t = table();
    char key[1100];
    make_key(key, sizeof key, name, dir, train, max_n);
    for (int i = 0; t && i < t->n; i++)
        if (!strcmp(t->e[i].key, key)) {
            *out = t->e[i].d;
            return 1;
        }
    return 0;
}

void dt_dataset_share_add(const char *name, const char *dir, int train, int max_n, const dt_dataset *d) {
    share_table *t = table();
    if (!t || t->n == SHARE_MAX) return; /* not shared: this rank keeps its own */
    make_key(t->e[t->n].key, sizeof t->e[t->n].key, name, dir, train, max_n);
    t->e[t->n].d = *d;
    t->n++;
}

int dt_dataset_is_shared(const dt_dataset *d) {
    share_table *t = table();
    for (int i = 0; t && (d->images || d->tokens) && i < t->n; i++)
        if ((d->images && t->e[i].d.images == d->images) || (d->tokens && t->e[i].d.tokens == d->tokens)) return 1;
    return 0;
}
