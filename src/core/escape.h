/* Text that came from a file, made safe to print: every message is one line that cannot act
 * on the terminal. A name inside a weights file or a spec file can hold any byte: an ESC
 * would recolour the terminal or set its title, a newline would forge a second line. */
#ifndef DT_ESCAPE_H
#define DT_ESCAPE_H

#include <stddef.h>

/* in into out (len bytes, NUL included), every byte that is a control character (below 0x20,
 * DEL), part of a C1 control (U+0080..U+009F) or not part of valid UTF-8 written as \xNN;
 * valid UTF-8 otherwise as it is. Cut before an escape or a character that would not fit
 * whole. Returns out. */
char *dt_escape(char *out, size_t len, const char *in);

#endif
