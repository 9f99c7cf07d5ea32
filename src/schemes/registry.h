/* The scheme interface as the library sees it. The interface itself, its contract (C1-C13)
 * and a worked example are the public header include/dtrain/scheme.h: a scheme in
 * src/schemes/ is written as one of a user's, and one file in src/schemes/ with its line
 * DT_SCHEME(x) in schemes.def makes it built in. Here: the library's own headers a built-in
 * scheme may use (codecs, JSON, checkpoint files) and the registry's internal calls. */
#ifndef DT_SCHEMES_REGISTRY_H
#define DT_SCHEMES_REGISTRY_H

#include "comm/codec.h"
#include "comm/world.h"
#include "core/alloc.h"
#include "core/flag_table.h"
#include "core/json.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "dtrain/scheme.h"

/* ------------------------------------------------------------------ a built-in scheme's create */

/* What dt_scheme_new sets in s besides impl and ops (C7, C9). */
enum { DT_SCHEME_DECENTRALIZED = 1, DT_SCHEME_OWN_BASELINE = 2 };

/* p = a zeroed impl for s (sizeof *p bytes), set as s->impl together with s->ops = ops and
 * the traits (DT_SCHEME_*): a built-in create's "allocate, hook up" in one call. impl is
 * never NULL once ops is set, so a destroy need not check it. Out of memory: "out of memory
 * for the <name> scheme (<the caller's place>)", nothing set. */
#define dt_scheme_new(s, p, ops, traits) \
    dt_allocated((p) = dt_scheme_new_at((s), sizeof *(p), (ops), (traits), __FILE__, __LINE__))
void *dt_scheme_new_at(dt_scheme *s, size_t size, const dt_scheme_ops *ops, int traits, const char *file, int line);

/* ------------------------------------------------------------------ the registry */

/* A configuration checked, the text of its flags parsed (once, by dt_scheme_check): what
 * dt_scheme_create takes. */
typedef struct dt_scheme_choice {
    const dt_scheme_def *def;
    void *opts;                   /* the filled options struct (NULL: no flags); owned */
    dt_codec_spec codec;          /* --compress */
} dt_scheme_choice;

/* Checks the configuration without MPI: a known scheme, --compress valid and taken by it,
 * its flags' values of the right type and range, and what its create checks across them (a
 * trial create, C2). out gets the choice (NULL: only checked), freed by dt_scheme_choice_free
 * unless dt_scheme_create takes it. */
dt_status dt_scheme_check(const dt_scheme_config *a, dt_scheme_choice *out);
void dt_scheme_choice_free(dt_scheme_choice *c);
/* Creates the chosen scheme, which takes the choice's options (c->opts is NULL after). */
dt_status dt_scheme_create(dt_scheme_choice *c, dt_scheme **out);
/* Both in one: the configuration checked, and the scheme created from that choice. */
dt_status dt_scheme_make(const dt_scheme_config *a, dt_scheme **out);
void dt_scheme_free(dt_scheme *s);
/* The schemes, in registry order; n set to their number. */
const dt_scheme_def *const *dt_schemes(int *n);
/* What dt_schemes_where asks of each scheme: NULL, not this one; else the text to follow its
 * name ("" for none). arg is dt_schemes_where's. */
typedef const char *(*dt_scheme_where_fn)(const dt_scheme_def *sc, const void *arg);
const char *dt_scheme_any(const dt_scheme_def *sc, const void *arg);          /* every scheme */
const char *dt_scheme_takes_flag(const dt_scheme_def *sc, const void *name); /* declares --name */
const char *dt_scheme_compresses(const dt_scheme_def *sc, const void *arg);  /* " with --sync" where so */
/* The one loop behind every "the schemes that ...": the names of those where says so, in
 * registry order, each with where's text, joined by sep, into out (len bytes, NUL-terminated,
 * cut short as snprintf). Returns the length the whole would have, as snprintf (0: none). */
size_t dt_schemes_where(char *out, size_t len, const char *sep, dt_scheme_where_fn where, const void *arg);
const dt_scheme_def *dt_scheme_find(const char *name);
/* Writes every flag of the scheme with its value in force as members of line (numbers as
 * numbers, switches as booleans). */
void dt_scheme_flags_json(const dt_scheme *s, dt_json *line);

#endif
