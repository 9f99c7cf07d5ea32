/* A line reader for inih's ini_parse_stream that refuses what inih would silently misread in
 * a file dtrain writes and reads back (kernel plans, calibration files): an indented line
 * (inih takes it as a continuation of the previous key's value), a NUL byte (a line cut short)
 * and a line longer than inih's buffer (cut in two). The sweep files' reader (cli/sweep_file.c)
 * refuses the same and more. */
#ifndef DT_INI_LINES_H
#define DT_INI_LINES_H

#include <stdio.h>

typedef struct {
    FILE *f;
    int line;      /* lines read so far: the bad one's number when why is set */
    char why[160]; /* "" or what was refused */
} dt_ini_lines;

/* ini_parse_stream's reader (stream: a dt_ini_lines *); returns NULL at the end or at a
 * refused line (then why says which). */
char *dt_ini_lines_read(char *str, int num, void *stream);

/* value into a fixed field as it will read back once written as "key = value": cut to fit, at
 * a ';' that comes first or after a blank (inih's inline comment), and trimmed at the end */
void dt_ini_keep(char *field, size_t cap, const char *value);

#endif
