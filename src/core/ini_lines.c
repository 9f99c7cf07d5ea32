/* ini_lines.h: inih's line reader, with the lines it would misread refused. */
#include "core/ini_lines.h"

#include <ctype.h>
#include <string.h>

void dt_ini_keep(char *field, size_t cap, const char *value) {
    snprintf(field, cap, "%s", value);
    for (char *s = field; *s; s++)
        if (*s == ';' && (s == field || isspace((unsigned char)s[-1]))) { *s = 0; break; }
    for (size_t n = strlen(field); n > 0 && isspace((unsigned char)field[n - 1]); n--) field[n - 1] = 0;
}

char *dt_ini_lines_read(char *str, int num, void *stream) {
    dt_ini_lines *r = stream;
    if (*r->why) return NULL;
    int len = 0, c = EOF;
    while (len < num - 1 && (c = getc(r->f)) != EOF) {
        if (c == 0) {
            r->line++;
            snprintf(r->why, sizeof r->why, "a NUL byte: expected a text file");
            return NULL;
        }
        str[len++] = (char)c;
        if (c == '\n') break;
    }
    if (len == 0) return NULL;
    str[len] = 0;
    r->line++;
    if (str[len - 1] != '\n' && len == num - 1 && (c = getc(r->f)) != EOF) {
        snprintf(r->why, sizeof r->why, "a line longer than %d characters", num - 2);
        return NULL;
    }
    if (str[0] == ' ' || str[0] == '\t') {
        const char *t = str + strspn(str, " \t\r\n");
        if (*t && *t != ';' && *t != '#') {
            snprintf(r->why, sizeof r->why, "an indented line: start keys and [sections] at the beginning of the line");
            return NULL;
        }
    }
    return str;
}
