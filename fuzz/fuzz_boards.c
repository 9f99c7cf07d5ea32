/* libFuzzer target: the supervisor's reading of the ranks' boards (src/cli/boards.c). A board
 * is written by other processes (the rank, its guard), so here every byte of it is the
 * input's: host and note without a NUL, any state, signal, epoch, pid and clock, dropped
 * ranks out of range. Each board is read the two ways: mapped from its file DIR/rank.R, as
 * dt_boards_map does, or from a heap block of exactly its size, where AddressSanitizer sees a
 * read past its end. The kill function is a stub that ends nothing.
 *
 * Input: byte 0: bits 0-2 the number of ranks - 1, bit 3 from files, bit 4 the magic forced
 * (so the fuzzer spends its time past dt_boards_map's check), bit 5 the files cut short;
 * byte 1: the ranks with no board (a bit each); then the boards, sizeof(dt_board) bytes each
 * (zeros where the input ends).
 *
 * What must hold: the explanation is whole lines (none when a rank failed and said why), each "dtrain: error: ", with no control
 * bytes; a host or note printed is the board's field up to its first NUL and at most its
 * size; explain says 1 exactly when a rank was lost or timed out; only ranks that rank 0's
 * board names as dropped, with a pid > 0, are ever ended, and only once every other rank
 * finished; "completed with drops" only when every rank not dropped is done. */
#include "fuzz_util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>

#include "cli/boards.h"

#define MAX_RANKS 8

static pid_t killed[64];
static int nkilled;

static int no_kill(pid_t pid, int sig) {
    if (pid <= 0 || sig != SIGKILL || nkilled == 64) abort();
    killed[nkilled++] = pid;
    return 0;
}

/* a board's text field as the supervisor may print it: up to its first NUL, at most its size,
 * control bytes as '?' ("?" for an empty host) */
static void field(const char *f, size_t size, char *out) {
    size_t n = strnlen(f, size);
    for (size_t i = 0; i < n; i++) out[i] = (unsigned char)f[i] < 0x20 || f[i] == 0x7f ? '?' : f[i];
    out[n] = 0;
}

static int in_dropped(const dt_board *b0, int r) {
    for (int i = 0; i < 8; i++)
        if (atomic_load(&b0->dropped[i]) == r) return 1;
    return 0;
}

static int finished(const dt_board *b) {
    const int st = b ? atomic_load(&b->state) : -1;
    return st == DT_RANK_DONE || st == DT_RANK_FINISHING;
}

/* every line of err: "dtrain: error: ", printable, and each "rank R on " followed by R's host */
static void check_explain(const dt_boards *bs, const char *err, size_t len, int note_first) {
    if (len == 0) { /* nothing to say only when a rank failed, and said why itself */
        if (dt_boards_first(bs, DT_RANK_FAILED) < 0) abort();
        return;
    }
    if (err[len - 1] != '\n' || strlen(err) != len) abort();
    for (const char *l = err; l < err + len;) {
        const char *nl = strchr(l, '\n');
        if (strncmp(l, "dtrain: error: ", 15) != 0) abort();
        for (const char *c = l; c < nl; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) abort();
        int r, off = 0;
        const char *at = strstr(l, "error: rank ");
        if (!note_first && at && at < nl && sscanf(at, "error: rank %d on%n", &r, &off) == 1 && off > 0) {
            /* (not "on %n": a space in sscanf's format would also skip a host's own spaces) */
            if (r < 0 || r >= bs->n || !bs->b[r]) abort();
            char host[sizeof bs->b[r]->host + 1], want[sizeof host + 40];
            field(bs->b[r]->host, sizeof bs->b[r]->host, host);
            snprintf(want, sizeof want, "%s (pid %d)", host[0] ? host : "?", (int)bs->b[r]->pid);
            if (at[off] != ' ' || strncmp(at + off + 1, want, strlen(want)) != 0) abort();
        }
        l = nl + 1;
        note_first = 0; /* a timed-out rank's note, its own words, opens the explanation */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const int n = 1 + (data[0] & 7), from_files = data[0] & 8, force_magic = data[0] & 16, cut = data[0] & 32;
    const uint8_t absent = data[1];
    data += 2;
    size -= 2;
    dt_board *mem[MAX_RANKS] = {0}, *b[MAX_RANKS] = {0};
    dt_boards bs = {.n = n, .b = b, .kill = no_kill};
    const char *dir = NULL;
    for (int r = 0; r < n; r++) {
        if (absent >> r & 1) continue;
        dt_board *x = calloc(1, sizeof *x);
        if (!x) abort();
        const size_t at = (size_t)r * sizeof *x;
        if (at < size) memcpy(x, data + at, size - at < sizeof *x ? size - at : sizeof *x);
        if (force_magic) x->magic = DT_BOARD_MAGIC;
        if (!from_files) { mem[r] = b[r] = x; continue; }
        char name[16];
        snprintf(name, sizeof name, "rank.%d", r);
        const char *path = dt_fuzz_write(name, (const uint8_t *)x, cut ? sizeof *x - 1 : sizeof *x);
        dir = dt_fuzz_dir;
        (void)path;
        free(x);
    }
    if (from_files) {
        if (!dir) dt_fuzz_path("rank.0");
        snprintf(bs.dir, sizeof bs.dir, "%s", dt_fuzz_dir);
        dt_boards_map(&bs);
        for (int r = 0; r < n; r++)
            if (b[r] && (cut || b[r]->magic != DT_BOARD_MAGIC)) abort(); /* a cut or foreign file is no board */
    }

    /* the furthest step, and the first rank in each state */
    long most = 0;
    for (int r = 0; r < n; r++)
        if (b[r] && atomic_load(&b[r]->step) > most) most = (long)atomic_load(&b[r]->step);
    if (dt_boards_furthest_step(&bs) != most) abort();
    for (int st = -1; st <= DT_RANK_STATES; st++) {
        const int who = dt_boards_first(&bs, st);
        const int got = who >= 0 && b[who] ? atomic_load(&b[who]->state) : -2;
        /* a rank lost with its guard or its launcher's process counts as lost */
        const int as_lost = st == DT_RANK_LOST && (got == DT_RANK_GUARD_LOST || got == DT_RANK_PROXY_LOST);
        if (who < -1 || who >= n || (who >= 0 && (!b[who] || (got != st && !as_lost)))) abort();
    }

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    const int lost = dt_boards_first(&bs, DT_RANK_LOST) >= 0 || dt_boards_first(&bs, DT_RANK_TIMED_OUT) >= 0;
    const int said = dt_boards_explain(&bs, "NOISE", f);
    fclose(f);
    if (said != lost) abort();
    check_explain(&bs, text, len, dt_boards_first(&bs, DT_RANK_LOST) < 0 && dt_boards_first(&bs, DT_RANK_TIMED_OUT) >= 0);
    free(text);

    /* the note of the rank that timed out is the explanation's first line */
    const int t = dt_boards_first(&bs, DT_RANK_TIMED_OUT);
    if (t >= 0 && dt_boards_first(&bs, DT_RANK_LOST) < 0) {
        char note[sizeof b[t]->note + 1];
        field(b[t]->note, sizeof b[t]->note, note);
        f = open_memstream(&text, &len);
        dt_boards_explain(&bs, "NOISE", f);
        fclose(f);
        if (strncmp(text + 15, note, strlen(note)) != 0 || text[15 + strlen(note)] != '\n') abort();
        free(text);
    }

    f = open_memstream(&text, &len);
    dt_boards_record(&bs, f);
    fclose(f);
    free(text);

    /* ranks ended: only dropped ones (rank 0's board), once every other rank finished */
    int done_before[MAX_RANKS] = {0};
    for (int r = 0; r < n; r++) done_before[r] = finished(b[r]);
    nkilled = 0;
    f = fopen("/dev/null", "w");
    dt_boards_end_dropped(&bs, f);
    if (f) fclose(f);
    for (int k = 0; k < nkilled; k++) {
        int ok = 0;
        for (int r = 0; r < n && !ok; r++)
            ok = b[r] && b[0] && b[r]->pid == killed[k] && in_dropped(b[0], r) && atomic_load(&b[r]->state) == DT_RANK_DROPPED;
        if (!ok) abort();
    }
    if (nkilled > 0)
        for (int r = 0; r < n; r++)
            if (!in_dropped(b[0], r) && !done_before[r]) abort();

    if (dt_boards_completed_with_drops(&bs)) {
        if (!b[0] || atomic_load(&b[0]->dropped[0]) < 0) abort();
        for (int r = 0; r < n; r++)
            if (!in_dropped(b[0], r) && !finished(b[r])) abort();
    }

    /* the supervisor's other readings: counts within bounds, and every text one line */
    const int started = dt_boards_started(&bs);
    if (started < 0 || started > n) abort();
    (void)dt_boards_work_done(&bs);
    (void)dt_boards_all_left(&bs);
    (void)dt_boards_all_exited(&bs, 5);
    const int passed = dt_boards_passed_signal(&bs);
    if (passed != 0 && passed != SIGTERM && passed != SIGINT) abort();
    const int frozen = dt_boards_frozen(&bs, 1.0);
    if (frozen < -1 || frozen >= n) abort();
    char line[640];
    int pid = 0;
    const int held = dt_boards_held(&bs, line, sizeof line, &pid);
    if (held < -1 || held >= n || (held >= 0 && strchr(line, '\n'))) abort();
    dt_boards_where(&bs, line, sizeof line);
    if (strchr(line, '\n')) abort();
    for (int r = -1; r <= n; r++) {
        dt_boards_name(&bs, r, line, sizeof line);
        if (strchr(line, '\n')) abort();
    }

    if (from_files) dt_boards_clear(&bs); /* unmaps, and removes the files */
    for (int r = 0; r < n; r++) free(mem[r]);
    return 0;
}
