/* libFuzzer target: the launcher's output on its way (src/cli/relay.c). The input is what
 * mpiexec prints on its stdout and its stderr: it goes through two real pipes in chunks of
 * sizes the input picks, the two streams interleaved, and dt_relay_pump routes it into
 * out/err/noise (memory streams), as `dtrain run` does.
 *
 * Input: byte 0: the seed of the chunk sizes and of the interleaving, and its high bit the live
 * mode (dt_relay.live set, as `dtrain run` on a terminal); bytes 1-2: how many of
 * the bytes that follow are stdout's (the rest are stderr's); then the bytes, where 0x01 K
 * stands for the byte before it repeated 64 K times more (so a short input makes lines longer
 * than the relay's 8 KiB buffer).
 *
 * What must hold, from the input alone: each stream is cut into lines at its newlines, a
 * line longer than the buffer into pieces of 8192 bytes (a newline right after such a piece
 * ends it), a line ends at its first NUL byte. Then stdout's lines are out's followed by
 * stdout's share of noise (from the launcher's banner on), in order, none lost, except that in
 * live mode those before the banner that start with '\r' are in live instead, in order, as they
 * are (without a newline), and live has nothing else; stderr's
 * "dtrain: " lines are err's, each once, in order of first appearance; stderr's other lines
 * are its share of noise, in order; launcher_said is the last non-empty of those. */
#include "fuzz_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>

#include "cli/relay.h"

#define PIECE 8192            /* the relay's buffer (dt_relay_stream.buf) */
#define MAX_EXPANDED (5 * PIECE) /* lines longer than the buffer, and not many more bytes */

typedef struct lines { char **l; size_t n, cap; } lines;

static void push(lines *ls, const char *s, size_t n) {
    if (ls->n == ls->cap) {
        ls->cap = ls->cap ? 2 * ls->cap : 64;
        if (!(ls->l = realloc(ls->l, ls->cap * sizeof *ls->l))) abort();
    }
    char *c = malloc(n + 1);
    if (!c) abort();
    memcpy(c, s, n);
    c[n] = 0;
    ls->l[ls->n++] = c;
}

static void drop(lines *ls) {
    for (size_t i = 0; i < ls->n; i++) free(ls->l[i]);
    free(ls->l);
}

/* the lines the relay should see in a stream's bytes, each cut at its first NUL */
static void expected_lines(const uint8_t *d, size_t n, lines *out) {
    size_t start = 0;
    int after_piece = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i] == '\n') {
            if (!(after_piece && i == start)) push(out, (const char *)d + start, strnlen((const char *)d + start, i - start));
            start = i + 1;
            after_piece = 0;
        } else if (i + 1 - start == PIECE) {
            push(out, (const char *)d + start, strnlen((const char *)d + start, PIECE));
            start = i + 1;
            after_piece = 1;
        } else {
            after_piece = 0;
        }
    }
    if (start < n) push(out, (const char *)d + start, strnlen((const char *)d + start, n - start));
}

/* text (whole lines) appended to ls */
static void split_lines(const char *t, size_t n, lines *ls) {
    if (n && t[n - 1] != '\n') abort(); /* every routed line ends with its newline */
    if (memchr(t, 0, n)) abort();
    for (size_t s = 0; s < n;) {
        const char *nl = memchr(t + s, '\n', n - s);
        push(ls, t + s, (size_t)(nl - (t + s)));
        s = (size_t)(nl - t) + 1;
    }
}

static uint32_t rnd(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

typedef struct sink { FILE *f; char *buf; size_t len, seen; } sink;

/* what was written to k since the last look */
static size_t fresh(sink *k, const char **at) {
    fflush(k->f);
    *at = k->buf + k->seen;
    const size_t n = k->len - k->seen;
    k->seen = k->len;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    uint32_t seed = 0x9e3779b9u ^ data[0] * 0x01000193u;
    const int live_mode = data[0] & 0x80;
    size_t nout = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    uint8_t *x = malloc(MAX_EXPANDED);
    size_t nx = 0, split = 0;
    if (!x) abort();
    for (size_t i = 0; i < size && nx < MAX_EXPANDED; i++) {
        if (i == nout) split = nx;
        if (data[i] == 1 && i + 1 < size && nx > 0) {
            for (size_t k = 64 * (size_t)data[++i]; k > 0 && nx < MAX_EXPANDED; k--) { x[nx] = x[nx - 1]; nx++; }
            if (i == nout) split = nx;
        } else {
            x[nx++] = data[i];
        }
    }
    if (nout >= size) split = nx;
    const uint8_t *src[2] = {x, x + split};
    const size_t len[2] = {split, nx - split};

    int p[2][2];
    for (int s = 0; s < 2; s++) {
        if (pipe(p[s]) != 0) abort();
        fcntl(p[s][1], F_SETFL, O_NONBLOCK);
    }
    sink out = {0}, err = {0}, noise = {0}, live = {0};
    if (!(out.f = open_memstream(&out.buf, &out.len)) || !(err.f = open_memstream(&err.buf, &err.len)) ||
        !(noise.f = open_memstream(&noise.buf, &noise.len)) || !(live.f = open_memstream(&live.buf, &live.len)))
        abort();
    dt_relay r = {.out = out.f, .err = err.f, .noise = noise.f, .live = live_mode ? live.f : NULL};
    static dt_relay_stream st[2];
    memset(st, 0, sizeof st);
    st[0].fd = p[0][0];
    st[1].fd = p[1][0];
    st[1].is_err = 1;
    lines got_out = {0}, got_err = {0}, got_noise[2] = {{0}};
    size_t sent[2] = {0, 0};
    int open_[2] = {1, 1}, ended[2] = {0, 0};
    while (!ended[0] || !ended[1]) {
        const int s = ended[0] ? 1 : ended[1] ? 0 : (int)(rnd(&seed) & 1);
        if (open_[s] && sent[s] < len[s]) {
            size_t want = 1 + rnd(&seed) % (rnd(&seed) & 3 ? 3 * PIECE : 64);
            if (want > len[s] - sent[s]) want = len[s] - sent[s];
            const ssize_t w = write(p[s][1], src[s] + sent[s], want);
            if (w < 0 && errno != EAGAIN) abort();
            if (w > 0) sent[s] += (size_t)w;
        } else if (open_[s]) {
            close(p[s][1]);
            open_[s] = 0;
        }
        /* read what is there (all of it, once the writer is gone), and see where it went */
        for (;;) {
            int avail = 0;
            if (ioctl(p[s][0], FIONREAD, &avail) != 0) abort();
            if (avail == 0 && open_[s]) break;
            if (!dt_relay_pump(&r, &st[s])) { ended[s] = 1; break; }
        }
        const char *t;
        size_t n = fresh(&out, &t);
        if (n && s == 1) abort(); /* stderr's lines never reach out */
        split_lines(t, n, &got_out);
        n = fresh(&err, &t);
        if (n && s == 0) abort(); /* nor stdout's err */
        split_lines(t, n, &got_err);
        n = fresh(&noise, &t);
        split_lines(t, n, &got_noise[s]);
        n = fresh(&live, &t);
        if (n && s == 1) abort(); /* nor live */
    }

    lines want[2] = {{0}};
    expected_lines(src[0], len[0], &want[0]);
    expected_lines(src[1], len[1], &want[1]);
    /* stdout: out (and in live mode live), then the banner on in noise */
    if (got_noise[0].n > want[0].n) abort();
    const size_t before_banner = want[0].n - got_noise[0].n;
    size_t io = 0, il = 0;
    for (size_t i = 0; i < want[0].n; i++) {
        const char *w = want[0].l[i];
        if (i >= before_banner) {
            if (strcmp(got_noise[0].l[i - before_banner], w) != 0) abort();
        } else if (live_mode && w[0] == '\r') { /* live's bytes, in order, as they are */
            const size_t k = strlen(w);
            if (il + k > live.len || memcmp(live.buf + il, w, k) != 0) abort();
            il += k;
        } else if (io == got_out.n || strcmp(got_out.l[io++], w) != 0) {
            abort();
        }
    }
    if (io != got_out.n || il != live.len) abort();
    /* stderr: dtrain's lines once each, the others in noise */
    size_t ie = 0, in = 0;
    const char *last = "";
    for (size_t i = 0; i < want[1].n; i++) {
        const char *w = want[1].l[i];
        if (!strncmp(w, "dtrain: ", 8)) {
            int before = 0;
            for (size_t k = 0; k < ie && !before; k++) before = !strcmp(got_err.l[k], w);
            if (before) continue;
            if (ie == got_err.n || strcmp(got_err.l[ie++], w) != 0) abort();
        } else {
            if (in == got_noise[1].n || strcmp(got_noise[1].l[in++], w) != 0) abort();
            if (*w) last = w;
        }
    }
    if (ie != got_err.n || in != got_noise[1].n) abort();
    if (strncmp(r.launcher_said, last, sizeof r.launcher_said - 1) != 0) abort();

    dt_relay_free(&r);
    fclose(out.f);
    fclose(err.f);
    fclose(noise.f);
    fclose(live.f);
    free(live.buf);
    free(out.buf);
    free(err.buf);
    free(noise.buf);
    close(p[0][0]);
    close(p[1][0]);
    drop(&got_out);
    drop(&got_err);
    drop(&got_noise[0]);
    drop(&got_noise[1]);
    drop(&want[0]);
    drop(&want[1]);
    free(x);
    return 0;
}
