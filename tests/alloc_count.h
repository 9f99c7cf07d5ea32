/* Counting allocations in a test: malloc/calloc/realloc are interposed (glibc's __libc_* entry
 * points underneath), so allocations by the library and by BLAS are counted too. The sanitizers
 * replace the allocator themselves: there COUNTING is 0 and the count stays 0 (tests skip the
 * check and say so). Include from one file of a test program only, with _GNU_SOURCE defined
 * before its first include (dl_iterate_phdr). */
#ifndef DTRAIN_TEST_ALLOC_COUNT_H
#define DTRAIN_TEST_ALLOC_COUNT_H
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* allocations: the library's and BLAS's; cxx_allocations: those made through C++'s operator
 * new (libstdc++), which only oneDNN uses in dtrain's process (its primitive execution builds a
 * std::unordered_map of the arguments at every call: oneDNN 2.6's C API has no way around it) */
static volatile long allocations, cxx_allocations; /* volatile: GCC assumes malloc touches no global */
static uintptr_t cxx_lo[8], cxx_hi[8];
static int cxx_ranges;

#if COUNTING
static int from_cxx(const void *ret) {
    const uintptr_t a = (uintptr_t)ret;
    for (int i = 0; i < cxx_ranges; i++)
        if (a >= cxx_lo[i] && a < cxx_hi[i]) return 1;
    return 0;
}
#endif

/* libstdc++'s loaded segments, if it is loaded (dl_iterate_phdr does not allocate) */
static int find_cxx(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size; (void)arg;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libstdc++")) return 0;
    for (int i = 0; i < info->dlpi_phnum && cxx_ranges < 8; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            cxx_lo[cxx_ranges] = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            cxx_hi[cxx_ranges++] = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz;
        }
    return 1;
}

#if COUNTING
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
#define COUNT() (from_cxx(__builtin_return_address(0)) ? cxx_allocations++ : allocations++)
void *malloc(size_t n) { COUNT(); return __libc_malloc(n); }
void *calloc(size_t n, size_t k) { COUNT(); return __libc_calloc(n, k); }
void *realloc(void *p, size_t n) { COUNT(); return __libc_realloc(p, n); }
#endif

/* the counter works: an allocation outside the library is seen */
static inline void check_alloc_counter(void) {
    dl_iterate_phdr(find_cxx, NULL);
    const long before = allocations;
    void *p = malloc(16);
    CHECK_MSG(!COUNTING || allocations == before + 1, "the allocation counter missed a malloc");
    free(p);
}
#endif
