/* "did you mean": the closest of a list of names to a misspelt one. */
#ifndef DT_SUGGEST_H
#define DT_SUGGEST_H

/* The name among names[0..n) (NULL entries skipped) closest to word by edit distance
 * (insertions, deletions, substitutions, and a swap of neighbours), if close enough to be a
 * likely typo: at most 2 edits and fewer than half of word's length; else NULL. */
const char *dt_suggest(const char *word, const char *const *names, int n);

#endif
