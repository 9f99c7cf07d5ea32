/* The launcher's output on its way: `dtrain run` reads what mpiexec and the ranks print on
 * two pipes and passes dtrain's own lines to the user (each error line at most once, however
 * many ranks say it; rank 0's live progress line redrawn in place), while the launcher's and MPI's own messages (hydra's banner, ssh's
 * complaints) go into a file the user is pointed to. */
#ifndef DT_RELAY_H
#define DT_RELAY_H

#include <stddef.h>
#include <stdio.h>

typedef struct dt_relay {
    FILE *out, *err;  /* the user's terminal: stdout, stderr */
    FILE *noise;      /* the launcher's messages (may be NULL) */
    FILE *live;       /* the user's stdout when it is a terminal, else NULL: rank 0's live progress
                       * (trainer/progress.c) comes as stdout lines that start with '\r'; these are
                       * written here as they are, without their newline, so the line is redrawn in
                       * place. Still routed a whole line at a time. NULL: like any other line. */
    char **said;      /* dtrain's lines already passed on */
    int nsaid, cap;
    char launcher_said[512]; /* the launcher's last line on stderr that was not dtrain's */
    char cannot_launch[512]; /* its first line saying a host could not be reached (ssh's) */
} dt_relay;

/* One of the two pipes. */
typedef struct dt_relay_stream {
    int fd;
    int is_err;       /* the launcher's stderr (else its stdout) */
    int banner;       /* the launcher's banner began: the rest of it is noise */
    int blanks;       /* empty lines held back: they may open the banner */
    int cut;          /* the last line was cut at the buffer's end: a newline right after it
                       * ends that line, it is not an empty line of its own */
    char buf[8192];
    size_t len;
} dt_relay_stream;

/* Reads what is there on s->fd and routes every whole line; returns 0 at end of file (after
 * routing a last line without its newline). */
int dt_relay_pump(dt_relay *r, dt_relay_stream *s);
/* Routes one line (n bytes, no newline; NUL bytes are cut). */
void dt_relay_line(dt_relay *r, dt_relay_stream *s, const char *line, size_t n);
void dt_relay_free(dt_relay *r);

#endif
