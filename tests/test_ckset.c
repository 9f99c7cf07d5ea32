/* Checkpoint sets (src/trainer/ckset.c), without MPI: a manifest written and read back names
 * each rank's part and checksum; every cut of it, and every line changed out of its form
 * (parts out of order, a part of another epoch, a path in a name, trailing bytes), is refused
 * with an error naming the file; removing a rank's other sets keeps the committed epoch, the
 * other ranks' parts, unrelated files and a live writer's temporary file. */
#include "trainer/ckset.h"
#include "check.h"
#include "dtrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void touch(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) { fputs("x", f); fclose(f); }
}

static int exists(const char *name) {
    char p[512];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0;
}

/* parse after replacing the first `from` by `to` in text: the status */
static dt_status parse_edited(const char *text, const char *from, const char *to, const char *origin) {
    char buf[4096];
    const char *at = strstr(text, from);
    if (!at) return DT_OK + 1000; /* the test's own mistake: fails the CHECK */
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    dt_ckset s;
    return dt_ckset_parse(buf, strlen(buf), origin, 0, &s);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/dtrain-test-ckset.%ld", (long)getpid());
    CHECK(mkdir(dir, 0700) == 0);
    char path[512];
    snprintf(path, sizeof path, "%s/ck", dir);

    /* written and read back */
    const uint32_t crc[3] = {0x0858299a, 0xd6862265, 0x00000001};
    CHECK(dt_ckset_write(path, 7, 1234, -1, "--algo allreduce --compress none on 3 ranks", 3, crc) == DT_OK);
    char *text = NULL;
    size_t len = 0;
    CHECK(dt_ckset_slurp(path, &text, &len) == DT_OK && text);
    if (!text) return test_summary("test_ckset");
    CHECK(dt_ckset_is_manifest(text, len));
    for (int r = 0; r < 3; r++) {
        dt_ckset s;
        CHECK(dt_ckset_parse(text, len, path, r, &s) == DT_OK);
        char want[600];
        dt_ckset_part_path(path, 7, -1, r, want, sizeof want);
        CHECK_MSG(s.epoch == 7 && s.step == 1234 && s.ranks == 3 && s.crc == crc[r] && !strcmp(s.part, want),
                  "rank %d: epoch %d step %ld ranks %d crc %08x part %s", r, s.epoch, s.step, s.ranks, (unsigned)s.crc, s.part);
        CHECK(!strcmp(s.run, "--algo allreduce --compress none on 3 ranks"));
    }
    /* relative to the folder the manifest is read from (a moved set still resumes) */
    dt_ckset s;
    CHECK(dt_ckset_parse(text, len, "elsewhere/ck2", 1, &s) == DT_OK && !strcmp(s.part, "elsewhere/ck.e7.rank1"));
    CHECK(dt_ckset_parse(text, len, "ck2", 2, &s) == DT_OK && !strcmp(s.part, "ck.e7.rank2"));

    /* every cut is refused, with the file named */
    int cuts_refused = 1;
    for (size_t n = 0; n < len; n++) {
        if (dt_ckset_parse(text, n, path, 0, &s) == DT_OK || !strstr(dt_last_error(), path)) {
            cuts_refused = 0;
            fprintf(stderr, "a cut at %zu bytes was accepted or not named: %s\n", n, dt_last_error());
        }
    }
    CHECK(cuts_refused);

    /* lines out of their form */
    CHECK(parse_edited(text, "part 1 ck.e7.rank1", "part 2 ck.e7.rank1", path) != DT_OK);   /* out of order */
    CHECK(parse_edited(text, "part 1 ck.e7.rank1", "part 1 ck.e6.rank1", path) != DT_OK);   /* another epoch */
    CHECK(strstr(dt_last_error(), "a set mixed from two epochs"));
    CHECK(parse_edited(text, "part 1 ck.e7.rank1", "part 1 ck.e7.rank2", path) != DT_OK);   /* another rank's */
    CHECK(parse_edited(text, "part 1 ck.e7.rank1", "part 1 ../ck.e7.rank1", path) != DT_OK); /* not in the folder */
    CHECK(parse_edited(text, "epoch 7", "epoch 0", path) != DT_OK);
    CHECK(parse_edited(text, "epoch 7", "epoch 7x", path) != DT_OK);
    CHECK(parse_edited(text, "step 1234", "step -4", path) != DT_OK);
    CHECK(parse_edited(text, "ranks 3", "ranks 4", path) != DT_OK);     /* a part missing */
    CHECK(parse_edited(text, "ranks 3", "ranks 2", path) != DT_OK);     /* a part too many */
    CHECK(parse_edited(text, "d6862265", "d686226", path) == DT_OK);    /* hex: fewer digits read the same */
    CHECK(parse_edited(text, "d6862265", "d6862265 x", path) != DT_OK); /* trailing words */
    CHECK(parse_edited(text, "d6862265", "zz", path) != DT_OK);
    CHECK(parse_edited(text, "end\n", "end\nmore\n", path) != DT_OK);
    CHECK(parse_edited(text, "dtrain checkpoint set 1", "dtrain checkpoint set 2", path) != DT_OK);
    CHECK(parse_edited(text, "epoch 7", "epoch 8", path) != DT_OK);     /* parts named for epoch 7 */
    free(text);

    /* a set saved within an epoch (a stop asked): parts named by epoch and step, epoch 0 allowed */
    CHECK(dt_ckset_write(path, 0, 57, 57, "--algo allreduce --compress none on 3 ranks", 3, crc) == DT_OK);
    CHECK(dt_ckset_slurp(path, &text, &len) == DT_OK && text);
    if (!text) return test_summary("test_ckset");
    CHECK(dt_ckset_parse(text, len, path, 2, &s) == DT_OK && s.epoch == 0 && s.step == 57 && s.crc == crc[2]);
    char want_mid[600];
    dt_ckset_part_path(path, 0, 57, 2, want_mid, sizeof want_mid);
    CHECK_MSG(!strcmp(s.part, want_mid) && strstr(s.part, "ck.e0.s57.rank2"), "part %s", s.part);
    CHECK(parse_edited(text, "step 57", "step 58", path) != DT_OK);      /* parts named for step 57 */
    CHECK(parse_edited(text, "part 1 ck.e0.s57.rank1", "part 1 ck.e0.s56.rank1", path) != DT_OK);
    free(text);
    CHECK(dt_ckset_write(path, 7, 1234, -1, "--algo allreduce --compress none on 3 ranks", 3, crc) == DT_OK);

    /* a rank's other sets go; the kept epoch, other ranks, other files and live writers stay */
    const char *made[] = {"ck.e6.rank1", "ck.e7.rank1", "ck.e8.rank1", "ck.e6.rank0", "ck.e6.rank1.tmp.999999999",
                          "ck.e7.rank1.tmp.999999998", "ck.e6.rank12", "ck.e6.rank1x", "ckx.e6.rank1", "ck.weights",
                          "ck.e7.s900.rank1", "ck.e6.s700.rank1", "ck.e7.s900.rank0", "ck.e7.sx.rank1"};
    for (size_t i = 0; i < sizeof made / sizeof *made; i++) touch(made[i]);
    char live[64];
    snprintf(live, sizeof live, "ck.e6.rank1.tmp.%ld", (long)getppid()); /* a process that runs */
    touch(live);
    dt_ckset_remove_others(path, 1, 7, -1);
    CHECK(!exists("ck.e6.rank1") && !exists("ck.e8.rank1"));
    /* sets saved within an epoch: another step's part is another set */
    CHECK(!exists("ck.e7.s900.rank1") && !exists("ck.e6.s700.rank1"));
    CHECK(exists("ck.e7.s900.rank0") && exists("ck.e7.sx.rank1"));
    touch("ck.e7.s900.rank1");
    dt_ckset_remove_others(path, 1, 7, 900);
    CHECK(exists("ck.e7.s900.rank1") && !exists("ck.e7.rank1"));
    touch("ck.e7.rank1");
    CHECK(!exists("ck.e6.rank1.tmp.999999999") && !exists("ck.e7.rank1.tmp.999999998"));
    CHECK(exists("ck.e7.rank1") && exists("ck.e6.rank0") && exists("ck.e6.rank12") && exists("ck.e6.rank1x"));
    CHECK(exists("ckx.e6.rank1") && exists("ck.weights") && exists("ck") && exists(live));

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return test_summary("test_ckset");
}
