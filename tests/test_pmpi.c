/* The profiling-interface wrappers (src/comm/pmpi.c; include/dtrain.h: "MPI calls libdtrain
 * intercepts"): a program's own calls of the intercepted MPI functions, linked with libdtrain,
 * go through them: each returns MPI's result and, while a trace records, is a span on the
 * timeline's MPI lane named after the call. A call libdtrain does not intercept (MPI_Iprobe)
 * is not on it, nor an intercepted one outside the traced steps. One MPI process (singleton). */
#include "comm/world.h"
#include "comm/trace.h"
#include "comm/watch.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The lane of the first complete event named `name` in a trace file's text; -1: none. */
static int lane_of(const char *text, const char *name) {
    char key[96];
    snprintf(key, sizeof key, "{\"name\":\"%s\",\"cat\":", name);
    const char *p = strstr(text, key);
    if (!p) return -1;
    const char *tid = strstr(p, "\"tid\":"), *end = strchr(p, '}');
    if (!tid || !end || tid > end) return -1;
    return atoi(tid + 6);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    if (buf && fread(buf, 1, (1 << 20) - 1, f) == 0 && ferror(f)) { free(buf); buf = NULL; }
    fclose(f);
    return buf;
}

int main(void) {
    dt_comm comm;
    if (dt_comm_init(NULL, NULL, &comm) != DT_OK) {
        CHECK_MSG(0, "dt_comm_init: %s", dt_last_error());
        return test_summary("test_pmpi");
    }
    CHECK(dt_trace_open(0, 1) == DT_OK);
    dt_trace_step(0); /* recording: step 0 is in the window [0, 1) */
    CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
    int v = 7, sum = 0;
    CHECK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(sum == 7);
    int b = 3;
    CHECK(MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS && b == 3);
    int flag = 1;
    CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    /* no wait is left open once the calls returned */
    CHECK(atomic_load(&dt_watch_board()->wait_since_ns) == 0);
    dt_trace_step(1); /* outside the window: not recorded */
    int r = 0;
    CHECK(MPI_Reduce(&v, &r, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD) == MPI_SUCCESS && r == 7);
    dt_trace_stop();

    char path[64];
    snprintf(path, sizeof path, "/tmp/test_pmpi.%d.json", (int)getpid());
    CHECK(dt_trace_write(MPI_COMM_WORLD, path, "localhost", "none") == DT_OK);
    char *text = slurp(path);
    CHECK_MSG(text != NULL, "%s not written", path);
    if (text) {
        CHECK_MSG(lane_of(text, "MPI_Barrier") == DT_TRACE_MPI, "MPI_Barrier on lane %d", lane_of(text, "MPI_Barrier"));
        CHECK_MSG(lane_of(text, "MPI_Allreduce") == DT_TRACE_MPI, "MPI_Allreduce on lane %d",
                  lane_of(text, "MPI_Allreduce"));
        CHECK_MSG(lane_of(text, "MPI_Bcast") == DT_TRACE_MPI, "MPI_Bcast on lane %d", lane_of(text, "MPI_Bcast"));
        CHECK_MSG(lane_of(text, "MPI_Iprobe") == -1, "MPI_Iprobe is not intercepted, yet traced");
        CHECK_MSG(lane_of(text, "MPI_Reduce") == -1, "MPI_Reduce traced outside the traced steps");
        free(text);
    }
    remove(path);
    dt_comm_finalize();
    return test_summary("test_pmpi");
}
