/* Inside the reading of dtrain sweep's experiment file (sweep_file.c): what the INI reader
 * (sweep_ini.c) leaves, the sections as given, and what the expansion into runs
 * (sweep_expand.c) takes from it. Not for the rest of the sweep: sweep.h. */
#ifndef DT_SWEEP_PARSE_H
#define DT_SWEEP_PARSE_H

#include <stddef.h>
#include <stdio.h>

#include "cli/sweep.h"

/* Bounds of what a file may ask for; the reader's memory grows with what it holds, not with
 * these (a file of a few lines costs a few allocations). */
#define DT_SWEEP_MAX_ITEMS 256    /* keys of a section, values of an axis, variants, seeds */
#define DT_SWEEP_MAX_RUNS 20000

typedef struct dt_sweep_axis {
    char *key;
    char **vals;
    int nvals, cap, line;
} dt_sweep_axis;

typedef struct dt_sweep_section {
    char name[128];
    int line;                      /* its [header] line; 0: not in the file */
    dt_sweep_flag *flags;
    int nflags, cap_flags;
    dt_sweep_axis *axes;
    int naxes, cap_axes;
} dt_sweep_section;

enum { DT_SWEEP_SEC_NONE, DT_SWEEP_SEC_SWEEP, DT_SWEEP_SEC_BASE, DT_SWEEP_SEC_AXES, DT_SWEEP_SEC_VARIANT };

typedef struct dt_sweep_parser {
    const char *path;
    FILE *fp;
    int line, bad;
    int cur;                       /* DT_SWEEP_SEC_* */
    dt_sweep_section *sec;                  /* the current section (not [sweep]) */
    int sweep_line;
    dt_sweep_flag sweep_keys[16];  /* [sweep]'s, as given (for duplicates) */
    int nsweep;
    dt_sweep_section base, axes, *variants;
    int nvariants, cap_variants;
} dt_sweep_parser;

/* sweep_ini.c: inih's line reader and key handler over a parser (p->path, p->fp open) */
char *dt_sweep_ini_reader(char *str, int num, void *user);
int dt_sweep_ini_handler(void *user, const char *section_name, const char *name, const char *value);
/* and the helpers the three share */
char *dt_sweep_copy_text(const char *s);                          /* strdup; out of memory: exits */
void *dt_sweep_grow(void *items, int n, int *cap, size_t size);   /* room for one more, new ones zeroed */
/* One error, the first: "PATH:LINE: ..." in dt_last_error(), p->bad set; 0 */
int dt_sweep_err(dt_sweep_parser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int dt_sweep_safe_char(char c);                                   /* a run's folder name's: letters, digits, ._+=- */
int dt_sweep_name_ok(const char *s);
char *dt_sweep_trim(char *s);
const dt_sweep_flag *dt_sweep_get(const dt_sweep_parser *p, const char *key); /* [sweep]'s KEY, or NULL */

/* sweep_expand.c: the runs of one [variant] (implicit: the [base] alone) crossed with the axes
 * and the seeds, added to s; then every run's folder name distinct. 1, or 0 after dt_sweep_err */
int dt_sweep_expand_variant(dt_sweep_parser *p, dt_sweep *s, const dt_sweep_section *v, const char **seeds, int nseeds,
                            int seeds_line);
int dt_sweep_distinct_names(dt_sweep_parser *p, const dt_sweep *s);

#endif
