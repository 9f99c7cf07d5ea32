/* How dtrain writes a whole file (dt_write_atomic, src/core/files.c): under a temporary name
 * nobody can know in advance, so nothing planted beside the output redirects the write or
 * makes it fail after a run's work; killed writers' temporaries removed, live ones kept; the
 * owner can always read back what was written, whatever the umask. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "core/paths.h"

/* the temporary's name (read from the open descriptor) and the text written */
typedef struct { char name[600]; const char *text; } capture;

static dt_status fill(void *vctx, void *file) {
    capture *c = vctx;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fileno((FILE *)file));
    const ssize_t n = readlink(link, c->name, sizeof c->name - 1);
    c->name[n > 0 ? n : 0] = 0;
    fputs(c->text, file);
    return DT_OK;
}

static int holds(const char *path, const char *text) {
    char buf[64] = "";
    FILE *f = fopen(path, "r");
    const size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[got] = 0;
    return !strcmp(buf, text);
}

static int exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* PATH.tmp.PID.RANDOM: the pid (a killed writer's file is known as such) and 12 letters or
 * digits that differ from one write to the next */
static void test_unguessable(const char *dir) {
    char path[300], head[400];
    snprintf(path, sizeof path, "%s/out.weights", dir);
    snprintf(head, sizeof head, "%s.tmp.%ld.", path, (long)getpid());
    capture a = {.text = "one"}, b = {.text = "two"};
    CHECK(dt_write_atomic(path, fill, &a) == DT_OK && holds(path, "one"));
    CHECK(dt_write_atomic(path, fill, &b) == DT_OK && holds(path, "two"));
    const size_t h = strlen(head);
    const capture *both[] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        const capture *c = both[k];
        int random = strlen(c->name) == h + 12 && !strncmp(c->name, head, h);
        for (size_t i = h; random && i < h + 12; i++) random = isalnum((unsigned char)c->name[i]) != 0;
        CHECK_MSG(random, "temporary '%s', expected '%s' and 12 letters or digits", c->name, head);
    }
    CHECK_MSG(strcmp(a.name, b.name) != 0, "two writes used the same temporary %s", a.name);
    CHECK(!exists(a.name) && !exists(b.name));
    unlink(path);
}

/* what an older build's name would have been (PATH.tmp.PID), planted before the write: a
 * symbolic link and a directory; the write goes elsewhere, leaves them as they are */
static void test_planted(const char *dir) {
    char path[300], victim[300], guess[400];
    snprintf(path, sizeof path, "%s/w.weights", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(guess, sizeof guess, "%s.tmp.%ld", path, (long)getpid());
    FILE *v = fopen(victim, "w");
    fputs("precious", v);
    fclose(v);
    for (int kind = 0; kind < 2; kind++) {
        CHECK(kind == 0 ? symlink(victim, guess) == 0 : mkdir(guess, 0755) == 0);
        capture c = {.text = "weights"};
        const dt_status st = dt_write_atomic(path, fill, &c);
        CHECK_MSG(st == DT_OK, "a %s at %s: %s", kind ? "directory" : "link", guess, dt_last_error());
        struct stat sb;
        CHECK(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && holds(path, "weights"));
        CHECK(holds(victim, "precious"));
        CHECK(lstat(guess, &sb) == 0 && (kind == 0 ? S_ISLNK(sb.st_mode) : S_ISDIR(sb.st_mode)));
        if (kind == 0) unlink(guess);
        else rmdir(guess);
        unlink(path);
    }
    unlink(victim);
}

/* a killed writer's temporaries go at the next write, in either form; a live writer's stay,
 * and so does a name that only looks like one */
static void test_stale(const char *dir) {
    long dead = 4000000;
    while (dead > 1000 && !(kill((pid_t)dead, 0) != 0 && errno == ESRCH)) dead--;
    char path[300], names[5][400];
    snprintf(path, sizeof path, "%s/ck", dir);
    snprintf(names[0], sizeof names[0], "%s.tmp.%ld", path, dead);
    snprintf(names[1], sizeof names[1], "%s.tmp.%ld.Ab3dEf6hIj9L", path, dead);
    snprintf(names[2], sizeof names[2], "%s.tmp.%ld.Ab3dEf6hIj9L", path, (long)getppid());
    snprintf(names[3], sizeof names[3], "%s.tmp.%ld.short", path, dead);
    snprintf(names[4], sizeof names[4], "%s.tmp.%ld.Ab3dEf6hIj9L.x", path, dead);
    for (int i = 0; i < 5; i++) fclose(fopen(names[i], "w"));
    capture c = {.text = "ck"};
    CHECK(dt_write_atomic(path, fill, &c) == DT_OK);
    CHECK_MSG(!exists(names[0]) && !exists(names[1]), "a killed writer's temporary left: %s", names[1]);
    CHECK_MSG(exists(names[2]), "a live writer's temporary removed: %s", names[2]);
    CHECK(exists(names[3]) && exists(names[4]));
    for (int i = 0; i < 5; i++) unlink(names[i]);
    unlink(path);
}

/* the group's and others' bits follow the umask; the owner's read and write do not: under
 * umask 0777 the file is 0600, not 000 (which its owner could not read back) */
static void test_modes(const char *dir) {
    char path[300];
    snprintf(path, sizeof path, "%s/m.weights", dir);
    const mode_t masks[] = {022, 077, 0777, 0277}, want[] = {0644, 0600, 0600, 0600};
    for (int i = 0; i < 4; i++) {
        const mode_t old = umask(masks[i]);
        capture c = {.text = "m"};
        const dt_status st = dt_write_atomic(path, fill, &c);
        umask(old);
        struct stat sb;
        CHECK(st == DT_OK && stat(path, &sb) == 0);
        CHECK_MSG((sb.st_mode & 07777) == want[i], "umask %04o: mode %04o, expected %04o", (unsigned)masks[i],
                  (unsigned)(sb.st_mode & 07777), (unsigned)want[i]);
        unlink(path);
    }
}

int main(void) {
    char dir[] = "/tmp/dtrain-files-XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_unguessable(dir);
    test_planted(dir);
    test_stale(dir);
    test_modes(dir);
    CHECK_MSG(rmdir(dir) == 0, "%s: left files behind", dir);
    return test_summary("test_files");
}
