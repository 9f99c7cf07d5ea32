/* libFuzzer target: the experiment file of `dtrain sweep` (src/cli/sweep_file.c): read through
 * inih and expanded into runs. What it accepts must hold together: at least one run, each
 * with a folder name of its own that stays inside the sweep's folder, ranks >= 1, flags with
 * names, and a command that ends (dt_sweep_command) naming the folder's log. */
#include "cli/sweep.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = dt_fuzz_write("exp.ini", data, size);
    dt_sweep s;
    if (dt_sweep_read(path, &s) != DT_OK) return 0;
    if (s.nruns < 1 || !s.out[0] || !s.name[0]) abort();
    for (int i = 0; i < s.nruns; i++) {
        const dt_sweep_run *r = &s.runs[i];
        if (!r->name[0] || r->name[0] == '.' || strchr(r->name, '/') || r->ranks < 1) abort();
        for (int j = 0; j < i; j++)
            if (!strcmp(s.runs[j].name, r->name)) abort();
        for (int j = 0; j < r->nflags; j++)
            if (!r->flags[j].key || !r->flags[j].key[0] || !strcmp(r->flags[j].key, "n")) abort();
        if (i < 64) { /* the commands of the first runs: every string set, the list ended */
            char **av = dt_sweep_command(r, "out/run", 0);
            int n = 0;
            while (av[n]) n++;
            if (n < 2) abort();
            dt_sweep_free_command(av);
        }
    }
    dt_sweep_free(&s);
    return 0;
}
