#include "core/suggest.h"

#include <string.h>

/* Optimal string alignment distance, capped: words longer than 63 are not typos we help with. */
static int distance(const char *a, const char *b) {
    const int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 1000;
    int d[64][64];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *dt_suggest(const char *word, const char *const *names, int n) {
    const char *best = NULL;
    int bd = 3;
    const int len = (int)strlen(word);
    for (int i = 0; i < n; i++) {
        if (!names[i]) continue;
        const int d = distance(word, names[i]);
        if (d < bd && 2 * d < len) { bd = d; best = names[i]; }
    }
    return best;
}
