/* Flags: one declaration per flag, used by the command line and by the schemes alike. The
 * declaration (dt_flag, its kinds, DT_AT_*) is public: include/dtrain/flag.h, which says how a
 * table of them is written. Here what the library does with a table: defaults, parsing,
 * formatting, the command lines and their --help. */
#ifndef DT_FLAG_TABLE_H
#define DT_FLAG_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "dtrain.h"
#include "dtrain/flag.h"

/* The flag named name among flags[0..n), or NULL. */
const dt_flag *dt_flag_find(const dt_flag *flags, int n, const char *name);
/* Sets f's member in the struct at base from text (and its DT_GIVEN int); on a bad value
 * DT_ERR_ARG with "--name text: expected ..." and the member untouched. */
dt_status dt_flag_set(const dt_flag *f, void *base, const char *text);
/* Sets every flag that declares a default to it (their DT_GIVEN ints to 0). DT_ERR_STATE when a
 * declared default does not parse: a mistake in the table, named. */
dt_status dt_flags_defaults(const dt_flag *flags, int n, void *base);
/* f's value in the struct at base as text that dt_flag_set takes back to the same value
 * (a float: its shortest such decimal). TEXT NULL: "". */
void dt_flag_format(const dt_flag *f, const void *base, char *out, size_t len);
/* The shortest decimal that reads back as the same float (is_float) or double. */
void dt_flag_shortest(double x, int is_float, char *out, size_t len);
/* f's value as a member of line: numbers as numbers, switches as booleans, the rest as text. */
void dt_flag_json(const dt_flag *f, const void *base, dt_json *line);

/* ------------------------------------------------------------------ command lines */

/* Flags of one table, and what is done with the values given. */
typedef struct dt_flag_list {
    const dt_flag *flags;
    int n;
    void *base;  /* the struct the flags' members are in */
    /* or, when set: each flag given is handed on as text, unparsed (a switch as "1"), to be
     * checked by whoever owns the flags (the schemes' flags: dt_scheme_config_set) */
    dt_status (*take)(void *ctx, const dt_flag *f, const char *text);
    void *ctx;
} dt_flag_list;

/* argv[first..argc) against the lists: --name VALUE, --name=VALUE, a switch as --name alone.
 * *help set when --help or -h is there. Errors in one line, "dtrain CMD: ...": a bad value,
 * a missing one, an unknown flag with the nearest name ("did you mean --epochs?"). */
dt_status dt_flags_parse_argv(const char *cmd, int argc, char **argv, int first, const dt_flag_list *lists, int nlists,
                              int *help);
/* The flag named by argument a ("--name" or "--name=VALUE") in the lists, or NULL. */
const dt_flag *dt_flags_lookup(const dt_flag_list *lists, int nlists, const char *a, const dt_flag_list **in);
/* "usage: dtrain CMD USAGE", then one line per flag: --name METAVAR, its help, its default. */
void dt_flags_help(const char *cmd, const char *usage, const dt_flag_list *lists, int nlists);

#endif
