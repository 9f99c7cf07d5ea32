/* dt_version(): the build's version and commit (written by cmake/version.cmake). */
#include <stdio.h>

#include "dtrain.h"

extern const char dt_build_commit[];
extern const char dt_build_version[];

const char *dt_version(void) {
    static char text[128];
    if (!text[0]) snprintf(text, sizeof text, "%s (commit %s)", dt_build_version, dt_build_commit);
    return text;
}
