/* Counting allocations in a test: malloc/calloc/realloc are interposed (glibc's __libc_* entry
 * points underneath), so allocations by the library and by BLAS are counted too. The sanitizers
 * replace the allocator themselves: there COUNTING is 0 and the count stays 0 (tests skip the
 * check and say so). Include from one file of a test program only. */
#ifndef DTRAIN_TEST_ALLOC_COUNT_H
#define DTRAIN_TEST_ALLOC_COUNT_H
#include <stdlib.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
#define COUNTING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COUNTING 0
#endif
#endif
#ifndef COUNTING
#define COUNTING 1
#endif

static long allocations;

#if COUNTING
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
void *malloc(size_t n) { allocations++; return __libc_malloc(n); }
void *calloc(size_t n, size_t k) { allocations++; return __libc_calloc(n, k); }
void *realloc(void *p, size_t n) { allocations++; return __libc_realloc(p, n); }
#endif

/* the counter works: an allocation outside the library is seen */
static inline void check_alloc_counter(void) {
    const long before = allocations;
    void *p = malloc(16);
    CHECK_MSG(!COUNTING || allocations == before + 1, "the allocation counter missed a malloc");
    free(p);
}
#endif
