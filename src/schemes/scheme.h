/* The scheme interface as the library sees it. The interface itself, its contract (C1-C13)
 * and a worked example are the public header include/dtrain/scheme.h: a scheme in
 * src/schemes/ is written as one of a user's, and one file in src/schemes/ with its line
 * DT_SCHEME(x) in schemes.def makes it built in. Here: the library's own headers a built-in
 * scheme may use (codecs, JSON, checkpoint files) and the registry's internal calls. */
#ifndef DT_SCHEME_H
#define DT_SCHEME_H

#include "comm/codec.h"
#include "comm/comm.h"
#include "core/flag.h"
#include "core/json.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "dtrain/scheme.h"

/* ------------------------------------------------------------------ the registry */

/* Checks the configuration without creating anything (no MPI): a known scheme, --compress
 * valid and taken by it, its flags' values of the right type and range. */
dt_status dt_scheme_check(const dt_scheme_config *a);
/* Creates the configured scheme (checked first); a is kept by pointer. */
dt_status dt_scheme_create(const dt_scheme_config *a, dt_scheme **out);
void dt_scheme_free(dt_scheme *s);
/* The schemes, in registry order; n set to their number. */
const dt_scheme_def *const *dt_schemes(int *n);
const dt_scheme_def *dt_scheme_find(const char *name);
/* Writes every flag of the configured scheme with its value in force as members of line
 * (numbers as numbers, switches as booleans), and "compress". */
void dt_scheme_config_json(const dt_scheme_config *a, dt_json *line);

#endif
