/* dtrain sweep: is a key of the experiment file a flag of its runs? A key of [base], [axes] or
 * a [variant] is a flag of the runs' command without its -- (dtrain train and run, or dtrain
 * sim with simulate = true), a key of [sweep] one of the sweep's own. An unknown key is one
 * line that says what was likely meant, with the nearest name as the command line's misspelt
 * flags get it (core/suggest.h): `local_steps` is `local-steps` (INI habits write '_'), `modle`
 * is `model`; a flag of dtrain sim without simulate = true says that simulate = true makes the
 * runs simulated; a key of [sweep] in a run's section, or a flag of the runs in [sweep], says
 * where it goes. Read from the very tables the commands parse (train_flags.c, cmd_sim.c), so
 * a flag added there is known here. Checked while the file is read, before every run's flags
 * are checked by dtrain itself (sweep_check.c), whose "unknown flag" could not name the file's
 * key nor what else it might be. */
#include "cli/sweep.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_flags.h"
#include "core/suggest.h"

/* [sweep]'s keys (sweep_file.c reads them), and those of them that are no flag of a run */
static const char *const sweep_keys[] = {"name", "seeds", "out", "parallel", "hosts", "hostfile", "simulate"};
static const char *const sweep_only[] = {"name", "seeds", "parallel", "simulate"};
#define NSWEEP_KEYS (int)(sizeof sweep_keys / sizeof *sweep_keys)
#define NSWEEP_ONLY (int)(sizeof sweep_only / sizeof *sweep_only)

/* The names of a set of flag tables; hidden ones (the tests') are flags all the same, but are
 * never suggested, as on the command line. */
#define MAX_NAMES 512
typedef struct names {
    const char *name[MAX_NAMES];
    int n, visible[MAX_NAMES];
} names;

static int find(const names *ns, const char *key) {
    for (int i = 0; i < ns->n; i++)
        if (!strcmp(ns->name[i], key)) return i;
    return -1;
}

static void add(names *ns, const dt_flag *flags, int n) {
    for (int i = 0; i < n && ns->n < MAX_NAMES; i++)
        if (find(ns, flags[i].name) < 0) {
            ns->visible[ns->n] = !flags[i].hidden;
            ns->name[ns->n++] = flags[i].name;
        }
}

/* What a command takes: train's flags and the schemes' (both), then run's own or sim's own;
 * made once (the names are the tables' own strings, which stay). */
enum { TRAIN_RUN, SIM };
static const names *flags_of(int cmd) {
    static names made[2];
    static int ready[2];
    names *ns = &made[cmd];
    if (ready[cmd]) return ns;
    static dt_train_flags f; /* the tables point into it (the schemes' flags) */
    dt_flag_list lists[DT_RUN_LISTS];
    dt_run_flag_lists(&f, lists);
    for (int l = 0; l < DT_TRAIN_LISTS; l++) add(ns, lists[l].flags, lists[l].n);
    if (cmd == SIM) {
        int n;
        const dt_flag *sim = dt_sim_own_flags(&n);
        add(ns, sim, n);
    } else {
        add(ns, lists[DT_RUN_LISTS - 1].flags, lists[DT_RUN_LISTS - 1].n);
    }
    ready[cmd] = 1;
    return ns;
}

/* the visible name nearest to word, or NULL */
static const char *nearest(const names *ns, const char *word) {
    const char *vis[MAX_NAMES];
    for (int i = 0; i < ns->n; i++) vis[i] = ns->visible[i] ? ns->name[i] : NULL;
    return dt_suggest(word, vis, ns->n);
}

static int listed(const char *key, const char *const *list, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(key, list[i])) return 1;
    return 0;
}

int dt_sweep_key_unknown(const char *key, int sim, char *msg, size_t len) {
    /* the runs' command's flags, and the other command's */
    const names *mine = flags_of(sim ? SIM : TRAIN_RUN), *other = flags_of(sim ? TRAIN_RUN : SIM);
    if (find(mine, key) >= 0) return 0;
    const char *cmd = sim ? "dtrain sim or train" : "dtrain train or run";
    if (listed(key, sweep_only, NSWEEP_ONLY)) {
        snprintf(msg, len, "key '%s': a key of [sweep], not a flag of the runs: give it in [sweep]", key);
        return 1;
    }
    if (find(other, key) >= 0) {
        if (sim) snprintf(msg, len, "key '%s': a flag of dtrain run, not of dtrain sim (simulate = true in [sweep]: the runs "
                          "are simulated, their hosts too)", key);
        else snprintf(msg, len, "key '%s': a flag of dtrain sim, not of dtrain train or run: simulate = true in [sweep] makes "
                      "the runs simulated (dtrain sim -n N)", key);
        return 1;
    }
    /* --lr: the command line's spelling */
    const char *bare = key + strspn(key, "-");
    if (bare != key && find(mine, bare) >= 0) {
        snprintf(msg, len, "key '%s': write the flag without its dashes ('%s = ...')", key, bare);
        return 1;
    }
    /* local_steps: every '_' a '-', however many (more than two are no typo to dt_suggest) */
    char dashed[128];
    snprintf(dashed, sizeof dashed, "%s", key);
    for (char *c = dashed; *c; c++)
        if (*c == '_') *c = '-';
    const int at = find(mine, dashed);
    const char *near = at >= 0 && mine->visible[at] ? mine->name[at] : nearest(mine, key);
    if (near) {
        snprintf(msg, len, "unknown flag '%s' (did you mean '%s'?)", key, near);
        return 1;
    }
    const int other_at = find(other, dashed);
    if ((near = other_at >= 0 && other->visible[other_at] ? other->name[other_at] : nearest(other, key))) {
        snprintf(msg, len, "unknown flag '%s' (did you mean '%s'? a flag of dtrain %s%s)", key, near, sim ? "run" : "sim",
                 sim ? "" : ": simulate = true in [sweep] makes the runs simulated");
        return 1;
    }
    snprintf(msg, len, "key '%s': not a flag of %s (see dtrain %s --help)", key, cmd, sim ? "sim" : "run");
    return 1;
}

int dt_sweep_sweep_key_unknown(const char *key, char *msg, size_t len) {
    if (listed(key, sweep_keys, NSWEEP_KEYS)) return 0;
    const char *near = dt_suggest(key, sweep_keys, NSWEEP_KEYS);
    if (near) snprintf(msg, len, "unknown key '%s' in [sweep] (did you mean '%s'?)", key, near);
    else if (find(flags_of(TRAIN_RUN), key) >= 0 || find(flags_of(SIM), key) >= 0)
        snprintf(msg, len, "key '%s' in [sweep]: a flag of the runs: give it in [base] (every run), [axes] or a [variant]", key);
    else snprintf(msg, len, "unknown key '%s' in [sweep] (expected name, seeds, out, parallel, hosts, hostfile or simulate)", key);
    return 1;
}
