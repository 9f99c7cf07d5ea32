/* libFuzzer target: the checkpoint set's manifest (src/trainer/ckset.c), as --resume and the
 * supervisor read it: parsed for every rank it names (and for none), and what it accepts must
 * hold together: a whole epoch and rank count, each part's path in the manifest's folder
 * ending in the set's own .eE.rankR, or .eE.sS.rankR for a set taken mid-epoch (step S). */
#include "fuzz_util.h"
#include "trainer/ckset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dt_ckset s;
    if (dt_ckset_parse((const char *)data, size, "dir/ck", -1, &s) != DT_OK) return 0;
    if (s.epoch < 1 || s.ranks < 2 || s.step < 0) abort();
    for (int r = 0; r < s.ranks && r < 64; r++) {
        dt_ckset p;
        if (dt_ckset_parse((const char *)data, size, "dir/ck", r, &p) != DT_OK) abort(); /* the same text */
        char tail[64], tail_mid[96];
        snprintf(tail, sizeof tail, ".e%d.rank%d", s.epoch, r);
        snprintf(tail_mid, sizeof tail_mid, ".e%d.s%ld.rank%d", s.epoch, (long)s.step, r);
        const size_t n = strlen(p.part), t = strlen(tail), tm = strlen(tail_mid);
        const int own = (n > t && !strcmp(p.part + n - t, tail)) || (n > tm && !strcmp(p.part + n - tm, tail_mid));
        if (strncmp(p.part, "dir/", 4) != 0 || strchr(p.part + 4, '/') || !own) abort();
    }
    return 0;
}
