/* Minimal test helpers: CHECK prints file:line and the failed expression, counts failures;
 * main returns test_summary(), non-zero when anything failed. */
#ifndef DTRAIN_TEST_CHECK_H
#define DTRAIN_TEST_CHECK_H
#include <math.h>
#include <stdio.h>

static int test_failures = 0, test_checks = 0;

#define CHECK(cond) do { test_checks++; if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_MSG(cond, ...) do { test_checks++; if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double _a = (a), _b = (b); test_checks++; \
    if (!(fabs(_a - _b) <= (tol))) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %g, %s = %g, tol %g\n", \
            __FILE__, __LINE__, #a, _a, #b, _b, (double)(tol)); } } while (0)

static inline int test_summary(const char *name) {
    printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
    return test_failures ? 1 : 0;
}
#endif
