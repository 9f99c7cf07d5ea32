/* The experiment file's lines read with inih into its sections as given (sweep_parse.h):
 * [sweep]'s keys, [base]'s, [axes]' and each [variant]'s flags and axes, every line checked
 * where inih would misread it; and the small helpers the reading and the expansion share. */
#include "cli/sweep_parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

char *dt_sweep_copy_text(const char *s) {
    char *d = strdup(s ? s : "");
    if (!d) dt_nomem_exit("a copy of %s", s ? s : "");
    return d;
}

/* room for one more of n items of `size` bytes in *items (capacity *cap), new ones zeroed */
void *dt_sweep_grow(void *items, int n, int *cap, size_t size) {
    if (n < *cap) return items;
    const int more = *cap ? 2 * *cap : 4;
    char *bigger = realloc(items, (size_t)more * size);
    if (!bigger) dt_nomem_exit("a list of %d items", more);
    memset(bigger + (size_t)*cap * size, 0, (size_t)(more - *cap) * size);
    *cap = more;
    return bigger;
}

/* One error, the first: "PATH:LINE: ..." */
int dt_sweep_err(dt_sweep_parser *p, int line, const char *fmt, ...) {
    if (p->bad) return 0;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dt_fail(DT_ERR_ARG, "%s:%d: %s", p->path, line, msg);
    p->bad = 1;
    return 0;
}

/* '_' too: local_steps is refused later naming local-steps (sweep_keys.c) */
static int flag_name_ok(const char *k) {
    if (!*k) return 0;
    for (; *k; k++)
        if (!isalnum((unsigned char)*k) && *k != '-' && *k != '_') return 0;
    return 1;
}

/* a run's folder name: letters, digits and ._+=- */
int dt_sweep_safe_char(char c) { return isalnum((unsigned char)c) || strchr("._+=-", c); }

int dt_sweep_name_ok(const char *s) {
    if (!*s || *s == '.' || strlen(s) > 100) return 0;
    for (; *s; s++)
        if (!dt_sweep_safe_char(*s)) return 0;
    return 1;
}

char *dt_sweep_trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

/* inih's line reader, wrapped: counts lines (inih's own number is not passed to handlers in
 * Debian's build), sees the [section] headers (inih only passes sections with keys), and
 * refuses what inih would silently misread: over-long lines (cut in two), NUL bytes (a line
 * cut short), indented lines (taken as a continuation of the previous value), KEY: VALUE
 * (inih takes ':' for '=') and text after a [section]'s closing bracket (dropped). */
char *dt_sweep_ini_reader(char *str, int num, void *user) {
    dt_sweep_parser *p = user;
    if (p->bad) return NULL;
    int len = 0, c = EOF;
    while (len < num - 1 && (c = getc(p->fp)) != EOF) {
        if (c == 0) { dt_sweep_err(p, p->line + 1, "a NUL byte: expected a text file"); return NULL; }
        str[len++] = (char)c;
        if (c == '\n') break;
    }
    if (len == 0) return NULL;
    str[len] = 0;
    p->line++;
    if (str[len - 1] != '\n' && len == num - 1) {
        const int next = getc(p->fp);
        if (next != EOF) { dt_sweep_err(p, p->line, "line longer than %d characters", num - 2); return NULL; }
    }
    char *t = str;
    if (p->line == 1 && !strncmp(t, "\xEF\xBB\xBF", 3)) t += 3;
    if ((*t == ' ' || *t == '\t') && *dt_sweep_trim(t) && *dt_sweep_trim(t) != ';' && *dt_sweep_trim(t) != '#') {
        dt_sweep_err(p, p->line, "indented line: start keys and [sections] at the beginning of the line");
        return NULL;
    }
    char copy[512];
    snprintf(copy, sizeof copy, "%s", t);
    char *h = dt_sweep_trim(copy);
    if (*h != '[') {
        const size_t at = strcspn(h, "=:");
        if (*h && *h != ';' && *h != '#' && h[at] == ':')
            dt_sweep_err(p, p->line, "expected KEY = VALUE, got ':' after '%.*s' (write '%.*s = ...')", (int)at, h, (int)at, h);
        return p->bad ? NULL : str;
    }
    char *close = strchr(h, ']');
    if (!close) return str; /* inih reports it */
    *close = 0;
    const char *after = dt_sweep_trim(close + 1);
    if (*after && *after != ';' && *after != '#') {
        dt_sweep_err(p, p->line, "text after [%s]: expected nothing or a ; comment, got '%s'", dt_sweep_trim(h + 1), after);
        return NULL;
    }
    char *name = dt_sweep_trim(h + 1);
    dt_sweep_section *s = NULL;
    if (!strcmp(name, "sweep")) {
        if (p->sweep_line) { dt_sweep_err(p, p->line, "section [sweep] given twice (first on line %d)", p->sweep_line); return NULL; }
        p->sweep_line = p->line;
        p->cur = DT_SWEEP_SEC_SWEEP;
        p->sec = NULL;
        return str;
    }
    if (!strcmp(name, "base")) { s = &p->base; p->cur = DT_SWEEP_SEC_BASE; }
    else if (!strcmp(name, "axes")) { s = &p->axes; p->cur = DT_SWEEP_SEC_AXES; }
    else if (!strncmp(name, "variant", 7) && (name[7] == ' ' || name[7] == '\t' || !name[7])) {
        const char *vn = dt_sweep_trim(name + 7);
        if (!dt_sweep_name_ok(vn)) {
            dt_sweep_err(p, p->line, "section [%s]: expected [variant NAME], NAME of letters, digits and ._+=- (at most 100)", name);
            return NULL;
        }
        for (int i = 0; i < p->nvariants; i++)
            if (!strcmp(p->variants[i].name, vn)) {
                dt_sweep_err(p, p->line, "section [variant %s] given twice (first on line %d)", vn, p->variants[i].line);
                return NULL;
            }
        if (p->nvariants == DT_SWEEP_MAX_ITEMS) { dt_sweep_err(p, p->line, "more than %d variants", DT_SWEEP_MAX_ITEMS); return NULL; }
        p->variants = dt_sweep_grow(p->variants, p->nvariants, &p->cap_variants, sizeof *p->variants);
        s = &p->variants[p->nvariants++];
        snprintf(s->name, sizeof s->name, "%s", vn);
        p->cur = DT_SWEEP_SEC_VARIANT;
    } else {
        dt_sweep_err(p, p->line, "unknown section [%s] (expected [sweep], [base], [axes] or [variant NAME])", name);
        return NULL;
    }
    if (s->line) { dt_sweep_err(p, p->line, "section [%s] given twice (first on line %d)", name, s->line); return NULL; }
    s->line = p->line;
    p->sec = s;
    return str;
}

static int check_ranks(dt_sweep_parser *p, int line, const char *v) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < 1 || n > 100000)
        return dt_sweep_err(p, line, "key 'n': expected a number of ranks, an integer >= 1, got '%s'", v);
    return 1;
}

static int sweep_key(dt_sweep_parser *p, const char *key, const char *value) {
    char why[400];
    if (dt_sweep_sweep_key_unknown(key, why, sizeof why)) return dt_sweep_err(p, p->line, "%s", why);
    if (!*value) return dt_sweep_err(p, p->line, "key '%s': expected a value, got nothing", key);
    p->sweep_keys[p->nsweep++] = (dt_sweep_flag){dt_sweep_copy_text(key), dt_sweep_copy_text(value), p->line};
    return 1;
}

int dt_sweep_ini_handler(void *user, const char *section_name, const char *name, const char *value) {
    dt_sweep_parser *p = user;
    (void)section_name; /* the reader keeps the section, with its line */
    if (p->bad) return 1;
    char key[128];
    snprintf(key, sizeof key, "%s", name);
    if (p->cur == DT_SWEEP_SEC_NONE) return dt_sweep_err(p, p->line, "key '%s' before any [section]", key), 1;
    int is_axis = p->cur == DT_SWEEP_SEC_AXES;
    char *k = key;
    if (p->cur == DT_SWEEP_SEC_VARIANT && !strncmp(k, "axis", 4) && (k[4] == ' ' || k[4] == '\t')) { k = dt_sweep_trim(k + 4); is_axis = 1; }
    if (p->cur == DT_SWEEP_SEC_SWEEP) {
        for (int i = 0; i < p->nsweep; i++)
            if (!strcmp(p->sweep_keys[i].key, k)) return dt_sweep_err(p, p->line, "key '%s' given twice in [sweep] (first on line %d)", k, p->sweep_keys[i].line), 1;
        return sweep_key(p, k, value), 1;
    }
    if (!flag_name_ok(k))
        return dt_sweep_err(p, p->line, "key '%s': expected a dtrain train/run flag name without -- (letters, digits, '-')%s", k,
                   p->cur == DT_SWEEP_SEC_VARIANT ? ", or 'axis NAME'" : ""), 1;
    if (!strcmp(k, "help")) return dt_sweep_err(p, p->line, "key 'help': not a flag for a run (dtrain sweep --help, docs/sweep.md)"), 1;
    dt_sweep_section *s = p->sec;
    for (int i = 0; i < s->nflags; i++)
        if (!strcmp(s->flags[i].key, k)) return dt_sweep_err(p, p->line, "key '%s' given twice in this section (first on line %d)", k, s->flags[i].line), 1;
    for (int i = 0; i < s->naxes; i++)
        if (!strcmp(s->axes[i].key, k)) return dt_sweep_err(p, p->line, "key '%s' given twice in this section (first on line %d)", k, s->axes[i].line), 1;
    if (s->nflags == DT_SWEEP_MAX_ITEMS || s->naxes == DT_SWEEP_MAX_ITEMS) return dt_sweep_err(p, p->line, "more than %d keys in a section", DT_SWEEP_MAX_ITEMS), 1;
    if (!is_axis) {
        if (!*value) return dt_sweep_err(p, p->line, "key '%s': expected a value (true for a switch), got nothing", k), 1;
        if (!strcmp(k, "n") && !check_ranks(p, p->line, value)) return 1;
        s->flags = dt_sweep_grow(s->flags, s->nflags, &s->cap_flags, sizeof *s->flags);
        s->flags[s->nflags++] = (dt_sweep_flag){dt_sweep_copy_text(k), dt_sweep_copy_text(value), p->line};
        return 1;
    }
    s->axes = dt_sweep_grow(s->axes, s->naxes, &s->cap_axes, sizeof *s->axes);
    dt_sweep_axis *a = &s->axes[s->naxes++]; /* counted at once: its values are freed with it, even on an error */
    a->key = dt_sweep_copy_text(k);
    a->line = p->line;
    char list[512];
    snprintf(list, sizeof list, "%s", value);
    if (!*dt_sweep_trim(list)) return dt_sweep_err(p, p->line, "axis '%s': expected values separated by commas, got nothing", k), 1;
    char *at = list;
    for (char *next; at; at = next) {
        next = strchr(at, ',');
        if (next) *next++ = 0;
        char *v = dt_sweep_trim(at);
        if (!*v) return dt_sweep_err(p, p->line, "axis '%s': an empty value in '%s'", k, value), 1;
        for (int i = 0; i < a->nvals; i++)
            if (!strcmp(a->vals[i], v)) return dt_sweep_err(p, p->line, "axis '%s': value '%s' given twice", k, v), 1;
        if (a->nvals == DT_SWEEP_MAX_ITEMS) return dt_sweep_err(p, p->line, "axis '%s': more than %d values", k, DT_SWEEP_MAX_ITEMS), 1;
        if (!strcmp(k, "n") && !check_ranks(p, p->line, v)) return 1;
        a->vals = dt_sweep_grow(a->vals, a->nvals, &a->cap, sizeof *a->vals);
        a->vals[a->nvals++] = dt_sweep_copy_text(v);
    }
    return 1;
}

const dt_sweep_flag *dt_sweep_get(const dt_sweep_parser *p, const char *key) {
    for (int i = 0; i < p->nsweep; i++)
        if (!strcmp(p->sweep_keys[i].key, key)) return &p->sweep_keys[i];
    return NULL;
}
