/* The supervisor's explanation of a stalled job (src/cli/boards.c, dt_boards_explain), on
 * boards laid out as the two launchers leave them when one rank of four is stopped (kill
 * -STOP) and the others' watchdogs end the job:
 * - MPICH's hydra ends the job with the stopped rank still stopped: its board is RUNNING,
 *   its ticks stale;
 * - Open MPI's mpirun continues the stopped rank (SIGCONT) before ending it: its watchdog
 *   ticks again, on that first tick finds its own wait older than --timeout and signs the
 *   board TIMED_OUT; its guard, ended by the launcher, may not have signed the end (0).
 * Either way the first line quotes a rank that waited, and the second names the stopped one.
 * (Seen in CI under Open MPI before the fix: the stopped rank's own timeout was quoted, and
 * nobody was named as stopped.) */
#include "cli/boards.h"
#include "comm/watch.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define S 1000000000LL /* ns per second */

static dt_board boards[4];
static dt_board *ptrs[4];

/* Four ranks of host "vm" at step 103 of epoch 2; the others (0, 2, 3) time out waiting in
 * MPI_Waitall at t = 100 s (monotonic), their guards seeing them end in the order 2, 0, 3. */
static dt_boards stalled_job(void) {
    memset(boards, 0, sizeof boards);
    const long long ended[4] = {5000 * S + 20, 0, 5000 * S + 10, 5000 * S + 30};
    for (int r = 0; r < 4; r++) {
        dt_board *b = &boards[r];
        b->magic = DT_BOARD_MAGIC;
        b->rank = r;
        b->pid = 100 + r;
        snprintf(b->host, sizeof b->host, "vm");
        atomic_store(&b->epoch, 2);
        atomic_store(&b->step, 103);
        for (int i = 0; i < 8; i++) atomic_store(&b->dropped[i], -1);
        if (r == 1) continue;
        atomic_store(&b->state, DT_RANK_TIMED_OUT);
        atomic_store(&b->tick_ns, 100 * S + r);
        atomic_store(&b->ended_ns, ended[r]);
        snprintf(b->note, sizeof b->note, "rank %d waited 4 s in MPI_Waitall (allreduce after_backward, epoch 2, "
                 "step 103) with no progress: --timeout 4", r);
        ptrs[r] = b;
    }
    ptrs[1] = &boards[1];
    return (dt_boards){.n = 4, .b = ptrs};
}

static char *explain(const dt_boards *bs, int *said) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    *said = dt_boards_explain(bs, "NOISE", f);
    fclose(f);
    return text;
}

static void expect(const char *how, const dt_boards *bs) {
    int said = 0;
    char *text = explain(bs, &said);
    CHECK_MSG(said == 1, "%s: explain says %d", how, said);
    CHECK_MSG(strncmp(text, "dtrain: error: rank 2 waited 4 s in MPI_Waitall", 47) == 0,
              "%s: the first line quotes the rank whose guard saw it end first of those that waited:\n%s", how, text);
    CHECK_MSG(strstr(text, "\ndtrain: error: rank 1 on vm (pid 101) stopped responding during epoch 2, step 103 (for ")
              != NULL, "%s: the second line names the stopped rank:\n%s", how, text);
    int lines = 0;
    for (const char *c = text; *c; c++) lines += *c == '\n';
    CHECK_MSG(lines == 2, "%s: two lines, not %d:\n%s", how, lines, text);
    free(text);
}

int main(void) {
    /* MPICH: rank 1 is still stopped, its last tick 5 s before the others gave up */
    dt_boards bs = stalled_job();
    atomic_store(&boards[1].state, DT_RANK_RUNNING);
    atomic_store(&boards[1].tick_ns, 95 * S);
    atomic_store(&boards[1].wait_since_ns, 95 * S - S / 2);
    expect("still stopped", &bs);

    /* Open MPI: rank 1 continued at 101.2 s and timed out on that tick, its wait counting its
     * stop; its end unseen (0) or seen last, either way it is not the one quoted */
    for (int seen = 0; seen < 2; seen++) {
        bs = stalled_job();
        dt_board *b = &boards[1];
        atomic_store(&b->state, DT_RANK_TIMED_OUT);
        atomic_store(&b->gap_from_ns, 95 * S);
        atomic_store(&b->gap_to_ns, 101 * S + S / 5);
        atomic_store(&b->tick_ns, 101 * S + S / 5);
        atomic_store(&b->ended_ns, seen ? 5001 * S : 0);
        snprintf(b->note, sizeof b->note, "rank 1 waited 5 s in MPI_Waitall (allreduce after_backward, epoch 2, "
                 "step 103) with no progress: --timeout 4");
        expect(seen ? "continued, timed out, its end seen" : "continued, timed out, its end unseen", &bs);
        CHECK(dt_boards_first(&bs, DT_RANK_TIMED_OUT) == 2);
    }

    /* when the stopped rank is the only one that timed out, its own words are all there is */
    bs = stalled_job();
    for (int r = 0; r < 4; r++) atomic_store(&boards[r].state, r == 1 ? DT_RANK_TIMED_OUT : DT_RANK_RUNNING);
    atomic_store(&boards[1].gap_to_ns, 101 * S);
    atomic_store(&boards[1].tick_ns, 101 * S);
    snprintf(boards[1].note, sizeof boards[1].note, "rank 1 waited 5 s in MPI_Recv");
    CHECK(dt_boards_first(&bs, DT_RANK_TIMED_OUT) == 1);

    /* the watchdog's clock starts when it does, not at its first look a second later: a rank
     * stopped in its first second (an epoch of cnn1 takes half of one) showed no tick at all,
     * and Open MPI's CI saw it named "stuck in its own work" instead of stopped */
    dt_board *own = dt_watch_board();
    CHECK(own != NULL && dt_watch_start(60, "test") == 0);
    CHECK_MSG(own && atomic_load(&own->tick_ns) > 0, "no tick on the board as the watchdog starts");
    return test_summary("test_boards");
}
