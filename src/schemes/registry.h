/* The scheme interface as the library sees it. The interface itself, its contract (C1-C13)
 * and a worked example are the public header include/dtrain/scheme.h: a scheme in
 * src/schemes/ is written as one of a user's, and one file in src/schemes/ with its line
 * DT_SCHEME(x) in schemes.def makes it built in. Here: the library's own headers a built-in
 * scheme may use (codecs, JSON, checkpoint files) and the registry's internal calls. */
#ifndef DT_SCHEMES_REGISTRY_H
#define DT_SCHEMES_REGISTRY_H

#include "comm/codec.h"
#include "comm/world.h"
#include "core/flag_table.h"
#include "core/json.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "dtrain/scheme.h"

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
const dt_scheme_def *dt_scheme_find(const char *name);
/* Writes every flag of the scheme with its value in force as members of line (numbers as
 * numbers, switches as booleans). */
void dt_scheme_flags_json(const dt_scheme *s, dt_json *line);

#endif
