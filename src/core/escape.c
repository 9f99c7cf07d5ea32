/* Text from files made safe to print (escape.h). */
#include "core/escape.h"

#include <stdio.h>

/* The length of the valid UTF-8 character at p (1..4), or 0 when p does not start one:
 * overlong forms, surrogates and code points past U+10FFFF are not valid (RFC 3629). */
static int utf8_len(const unsigned char *p) {
    const unsigned char c = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
    } else return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0; /* a NUL ends the check here too */
    return n;
}

char *dt_escape(char *out, size_t len, const char *in) {
    if (!len) return out;
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0;
    while (*p) {
        int n = utf8_len(p);
        const int control = n == 1 && (*p < 0x20 || *p == 0x7F);
        const int c1 = n == 2 && p[0] == 0xC2 && p[1] <= 0x9F;
        if (control || c1 || n == 0) {
            /* every byte of a C1 control escaped: \xc2\x9b, as it is in the file */
            const int bytes = c1 ? 2 : 1;
            if (o + 4 * (size_t)bytes >= len) break;
            for (int i = 0; i < bytes; i++, o += 4) snprintf(out + o, 5, "\\x%02x", p[i]);
            p += bytes;
            continue;
        }
        if (o + (size_t)n >= len) break;
        for (int i = 0; i < n; i++) out[o++] = (char)p[i];
        p += n;
    }
    out[o] = 0;
    return out;
}
