/* The allocation checks (src/core/alloc.h): a failure is DT_ERR_NOMEM and its message names
 * the thing and the place (from src/ on); the allocating forms refuse an n * size that
 * overflows, leaving the pointer NULL, and allocate otherwise (zeroed for dt_calloc, one
 * element for none). */
#include "core/alloc.h"
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    /* the helper: the status, the thing's name, this file's place (outside src/: as the build
     * named it) */
    const int line = __LINE__ + 1;
    CHECK(dt_nomem("the test buffer of %d values", 42) == DT_ERR_NOMEM);
    const char *msg = dt_last_error(), *head = "out of memory for the test buffer of 42 values (";
    char tail[64];
    snprintf(tail, sizeof tail, "test_alloc.c:%d)", line);
    const size_t len = strlen(msg);
    CHECK_MSG(strncmp(msg, head, strlen(head)) == 0 && len > strlen(tail) && !strcmp(msg + len - strlen(tail), tail),
              "got \"%s\", want \"%s...%s\"", msg, head, tail);

    /* the place relative to src/, however the build named the file */
    dt_nomem_at("/home/x/src/dtrain/src/optim/sgd.c", 21, "the momentum buffer");
    CHECK_MSG(strcmp(dt_last_error(), "out of memory for the momentum buffer (optim/sgd.c:21)") == 0, "got \"%s\"",
              dt_last_error());
    dt_nomem_at("src/optim/sgd.c", 7, "x");
    CHECK_MSG(strcmp(dt_last_error(), "out of memory for x (optim/sgd.c:7)") == 0, "got \"%s\"", dt_last_error());

    /* n * size overflows (wrapping to 8 and to 4 bytes): refused, the pointer NULL */
    double one_d, *d = &one_d; /* set, so that NULL is the call's doing */
    CHECK(dt_malloc(d, SIZE_MAX / 8 + 2, "the huge buffer") == DT_ERR_NOMEM);
    CHECK(d == NULL);
    CHECK_MSG(strstr(dt_last_error(), "out of memory for the huge buffer (") != NULL, "got \"%s\"", dt_last_error());
    CHECK(strstr(dt_last_error(), "test_alloc.c:") != NULL);
    float one_f, *f = &one_f;
    CHECK(dt_calloc(f, SIZE_MAX / 2 + 2, "the zeroed huge buffer of %zu values", (size_t)3) == DT_ERR_NOMEM);
    CHECK(f == NULL);
    CHECK(strstr(dt_last_error(), "the zeroed huge buffer of 3 values") != NULL);

    /* ordinary allocations succeed; dt_calloc zeroes; none is still one element */
    int *p = NULL;
    CHECK(dt_malloc(p, 1000, "a thousand ints") == DT_OK);
    CHECK(p != NULL);
    if (p) { p[999] = 7; CHECK(p[999] == 7); }
    free(p);
    long *z = NULL;
    CHECK(dt_calloc(z, 1000, "a thousand zeroed longs") == DT_OK);
    CHECK(z != NULL);
    if (z) {
        long sum = 0;
        for (int i = 0; i < 1000; i++) sum |= z[i];
        CHECK(sum == 0);
    }
    free(z);
    double *none = NULL;
    CHECK(dt_calloc(none, 0, "no values") == DT_OK);
    CHECK(none != NULL);
    if (none) CHECK(none[0] == 0);
    free(none);
    return test_summary("test_alloc");
}
