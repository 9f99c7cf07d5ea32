/* The files a user gives dtrain sim, checked before SimGrid reads them (sim_platform.h): SimGrid
 * puts rank r on the hostfile's line r modulo its length (a short file stacked ranks on the
 * first hosts, silently), takes a host name with its spaces, and meets a bandwidth or speed of 0
 * with "The Impossible Did Happen" and a negative latency with nothing at all. */
#include "cli/sim_platform.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/paths.h"

dt_status dt_sim_check_hostfile(const char *path, int ranks) {
    FILE *f = NULL;
    dt_status st = dt_open_regular(path, &f, NULL);
    if (st != DT_OK) return dt_fail(DT_ERR_ARG, "--hostfile %s", dt_last_error());
    char line[1024];
    int hosts = 0, lineno = 0;
    while (st == DT_OK && fgets(line, sizeof line, f)) {
        lineno++;
        const size_t n = strcspn(line, "\n");
        if (line[n] != '\n' && !feof(f))
            st = dt_fail(DT_ERR_ARG, "--hostfile %s: line %d is longer than %zu characters: expected a host's name", path, lineno,
                         sizeof line - 2);
        line[n] = 0;
        if (st != DT_OK || n == 0) continue; /* SimGrid skips empty lines */
        for (size_t i = 0; i < n && st == DT_OK; i++)
            if (isspace((unsigned char)line[i]) || !isprint((unsigned char)line[i]))
                st = dt_fail(DT_ERR_ARG, "--hostfile %s: line %d has a space, a tab, a carriage return or a control "
                             "character: expected a host's name alone on the line (SimGrid takes it whole)", path, lineno);
        hosts++;
    }
    if (st == DT_OK && ferror(f)) st = dt_fail(DT_ERR_IO, "--hostfile %s: cannot read", path);
    fclose(f);
    if (st == DT_OK && hosts < ranks)
        st = dt_fail(DT_ERR_ARG, "--hostfile %s: %d host%s for -n %d: expected a host per rank, rank r on line r (write a host "
                     "twice to put two ranks on it)", path, hosts, hosts == 1 ? "" : "s", ranks);
    return st;
}

/* The attributes of SimGrid's platform format that hold a host's speed, a link's bandwidth or
 * a latency, and what each must be. */
static const struct {
    const char *name;
    int positive; /* 1: above 0 (speed, bandwidth); 0: 0 or above (latency) */
    const char *what;
} checked[] = {
    {"speed", 1, "a speed above 0"},       {"bw", 1, "a bandwidth above 0"}, {"bandwidth", 1, "a bandwidth above 0"},
    {"lat", 0, "a latency of 0 or more"}, {"latency", 0, "a latency of 0 or more"},
};

/* Each number of value (a speed may be a list of power states, "1Gf,500Mf"): fine? */
static int value_ok(const char *v, size_t len, int positive) {
    char text[128];
    if (len >= sizeof text) return 1; /* not ours to judge: SimGrid parses it */
    memcpy(text, v, len);
    text[len] = 0;
    for (char *p = text, *tok; (tok = strtok(p, ",")) != NULL; p = NULL) {
        while (isspace((unsigned char)*tok)) tok++;
        char *end;
        const double x = strtod(tok, &end);
        if (end == tok) continue; /* a unit or a name SimGrid will say it cannot read */
        if (x < 0 || (positive && !(x > 0))) return 0;
    }
    return 1;
}

dt_status dt_sim_check_platform_file(const char *path) {
    FILE *f = NULL;
    dt_status st = dt_open_regular(path, &f, NULL);
    if (st != DT_OK) return dt_fail(DT_ERR_ARG, "--platform %s", dt_last_error());
    char line[4096];
    int lineno = 0;
    while (st == DT_OK && fgets(line, sizeof line, f)) {
        lineno++;
        for (size_t a = 0; a < sizeof checked / sizeof checked[0] && st == DT_OK; a++) {
            const size_t len = strlen(checked[a].name);
            for (const char *p = line; (p = strstr(p, checked[a].name)) != NULL; p += len) {
                if (p == line || !isspace((unsigned char)p[-1])) continue; /* part of another name */
                const char *q = p + len;
                while (isspace((unsigned char)*q)) q++;
                if (*q++ != '=') continue;
                while (isspace((unsigned char)*q)) q++;
                const char quote = *q;
                if (quote != '"' && quote != '\'') continue;
                const char *v = q + 1, *close = strchr(v, quote);
                if (!close) continue;
                if (!value_ok(v, (size_t)(close - v), checked[a].positive)) {
                    st = dt_fail(DT_ERR_ARG, "--platform %s: line %d: %s=%c%.*s%c: expected %s (SimGrid cannot simulate it)",
                                 path, lineno, checked[a].name, quote, (int)(close - v), v, quote, checked[a].what);
                    break;
                }
            }
        }
    }
    if (st == DT_OK && ferror(f)) st = dt_fail(DT_ERR_IO, "--platform %s: cannot read", path);
    fclose(f);
    return st;
}
