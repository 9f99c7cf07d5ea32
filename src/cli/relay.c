/* The launcher's output on its way (relay.h). */
#include "cli/relay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int launcher_line(const char *l) {
    /* hydra's banner after a bad termination, and Open MPI's */
    return l[0] == '=' || !strncmp(l, "YOUR APPLICATION TERMINATED", 27) || !strncmp(l, "   This typically", 17) ||
           !strncmp(l, "----------", 10) || !strncmp(l, "Primary job", 11) || !strncmp(l, "mpiexec", 7) ||
           !strncmp(l, "mpirun", 6) || !strncmp(l, "[proxy:", 7) || !strncmp(l, "[mpiexec@", 9);
}

/* ssh's and the launchers' words for a host they could not start a process on: with these
 * MPICH's hydra waits forever for the proxy that never came, so the supervisor ends the job */
static int cannot_launch(const char *l) {
    static const char *const words[] = {"Could not resolve hostname", "Host key verification failed",
                                        "Permission denied (", "No route to host", "Connection refused",
                                        "Connection timed out", "Network is unreachable", "execvp error",
                                        "ORTE was unable to reliably start", "ssh: "};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(l, words[i])) return 1;
    return 0;
}

static int said_before(dt_relay *r, const char *l) {
    for (int i = 0; i < r->nsaid; i++)
        if (!strcmp(r->said[i], l)) return 1;
    if (r->nsaid == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        char **nl = realloc(r->said, (size_t)cap * sizeof *nl);
        if (!nl) return 0;
        r->said = nl;
        r->cap = cap;
    }
    r->said[r->nsaid] = strdup(l);
    if (r->said[r->nsaid]) r->nsaid++;
    return 0;
}

void dt_relay_line(dt_relay *r, dt_relay_stream *s, const char *line, size_t n) {
    char l[8200];
    if (n >= sizeof l) n = sizeof l - 1;
    memcpy(l, line, n);
    l[n] = 0;
    n = strlen(l);
    if (!s->is_err && !s->banner && launcher_line(l)) {
        s->banner = 1;
        /* the empty lines held back opened the banner: noise too, not lost */
        for (; s->blanks > 0; s->blanks--)
            if (r->noise) fputc('\n', r->noise);
    }
    if (!s->is_err && !s->banner && n == 0) { s->blanks++; return; }
    if (!s->is_err && !s->banner) {
        for (; s->blanks > 0; s->blanks--) fputc('\n', r->out);
        if (r->live && l[0] == '\r') { /* a live progress line: redrawn in place */
            fflush(r->out);
            fwrite(l, 1, n, r->live);
            fflush(r->live);
            return;
        }
        fwrite(l, 1, n, r->out);
        fputc('\n', r->out);
        fflush(r->out);
        return;
    }
    if (s->is_err && !strncmp(l, "dtrain: ", 8)) {
        if (said_before(r, l)) return;
        fprintf(r->err, "%s\n", l);
        fflush(r->err);
        return;
    }
    if (s->is_err && n > 0) { /* the launcher's own last word, for a launch that failed */
        const size_t k = n < sizeof r->launcher_said - 1 ? n : sizeof r->launcher_said - 1;
        memcpy(r->launcher_said, l, k);
        r->launcher_said[k] = 0;
        if (!r->cannot_launch[0] && cannot_launch(l)) memcpy(r->cannot_launch, r->launcher_said, k + 1);
    }
    if (r->noise) { fprintf(r->noise, "%s\n", l); fflush(r->noise); }
}

int dt_relay_pump(dt_relay *r, dt_relay_stream *s) {
    ssize_t got = read(s->fd, s->buf + s->len, sizeof s->buf - s->len);
    if (got < 0 && errno == EINTR) return 1;
    if (got <= 0) {
        if (s->len) dt_relay_line(r, s, s->buf, s->len);
        s->len = 0;
        if (s->blanks > 0) { /* no banner came: they were the ranks' own */
            for (; s->blanks > 0; s->blanks--) fputc('\n', r->out);
            fflush(r->out);
        }
        return 0;
    }
    const size_t first = s->len;
    s->len += (size_t)got;
    size_t start = s->cut && s->buf[first] == '\n' ? first + 1 : 0;
    s->cut = 0;
    for (size_t i = start; i < s->len; i++)
        if (s->buf[i] == '\n') { dt_relay_line(r, s, s->buf + start, i - start); start = i + 1; }
    if (start == 0 && s->len == sizeof s->buf) { dt_relay_line(r, s, s->buf, s->len); start = s->len; s->cut = 1; }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    return 1;
}

void dt_relay_free(dt_relay *r) {
    for (int i = 0; i < r->nsaid; i++) free(r->said[i]);
    free(r->said);
    r->said = NULL;
    r->nsaid = r->cap = 0;
}
