/* `dtrain sweep FILE`: the runs of an experiment file (sweep_file.c), each in its own folder
 * OUT/NAME (command.txt, console.txt, log.jsonl, model.weights, status.json when it ends),
 * as many at once as the cores hold. Every run's flags are checked by `dtrain run` itself
 * (DTRAIN_CHECK_ONLY, sweep_check.c) before any starts, so a typo in the 20th run stops the
 * sweep before the first. A restart skips what is done (and what failed, unless
 * --retry-failed), resumes in its folder a run stopped with its checkpoint (status 5) or cut
 * short beside one, and redoes what else has no status.json (a run killed with the sweep).
 * Here: the command, and which runs start where; sweep_run.c starts them and waits. */
#include "cli/sweep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/flag_table.h"
#include "core/paths.h"

/* Where a run to start goes: back into its folder when it stopped (status 5) or its
 * checkpoint is there to resume from (a run cut short, or failed and retried), its log and
 * console.txt going on; else into a folder made anew. A checkpoint outside any folder of this
 * sweep is not resumed into a new log, which would hold only the epochs after it: refused in
 * one line, 1. was: the state its status.json gave. A dry run says what a start would do. */
static int place(const dt_sweep *s, const dt_sweep_run *r, dt_sweep_slot *sl, int folder, int was, int dry) {
    char ck[1400];
    struct stat sb;
    const int checkpoints = dt_sweep_own_file(r, "checkpoint", sl->dir, 0, ck, sizeof ck);
    const int resumable = checkpoints && lstat(ck, &sb) == 0;
    sl->in_place = folder == DT_SWEEP_FOLDER_OURS && (was == DT_SWEEP_STOPPED || resumable);
    sl->before = sl->in_place && was != DT_SWEEP_PENDING ? sl->seconds : 0;
    if (resumable && !sl->in_place) {
        int line = r->line;
        for (int i = 0; i < r->nflags; i++)
            if (!strcmp(r->flags[i].key, "checkpoint") && r->flags[i].line) line = r->flags[i].line;
        fprintf(stderr, "dtrain: error: %s:%d: run '%s': its checkpoint %s exists but no folder %s of the run that wrote it: "
                "resumed, its log would lack the epochs before; remove the checkpoint to run it from the start\n", s->path,
                line, r->name, ck, sl->dir);
        return 1;
    }
    if (dry && sl->in_place)
        fprintf(stderr, "sweep: %s: %s, resumes in its folder %s from %s%s\n", r->name,
                was == DT_SWEEP_STOPPED ? "stopped" : was == DT_SWEEP_FAILED ? "failed (--retry-failed)" : "cut short", sl->dir,
                resumable ? "its checkpoint " : "its first step (no checkpoint to resume from)", resumable ? ck : "");
    else if (dry && folder == DT_SWEEP_FOLDER_OURS)
        fprintf(stderr, "sweep: %s: its folder %s, %s, would be replaced\n", r->name, sl->dir,
                was == DT_SWEEP_FAILED ? "of a run that failed (--retry-failed)" : "left by a run cut short (no status.json)");
    return 0;
}

/* A run kept (done or failed) whose command changed since (the file was edited): run again
 * with --rerun-changed (sl->changed: its folder moved aside when it starts), else kept and
 * said, naming the flags that changed. 1 with one line printed when it cannot run again. */
static int changed(const dt_sweep *s, dt_sweep_slot *sl, const dt_sweep_run *r, int rerun, int dry, int first, dt_sweep_tally *t) {
    char diff[600];
    sl->changed = 0;
    if (!dt_sweep_command_changed(r, sl, diff, sizeof diff)) return 0;
    const char *was = sl->state == DT_SWEEP_DONE ? "done" : "failed";
    if (!rerun) {
        if (first)
            fprintf(stderr, "sweep: warning: %s: kept as %s, but its command.txt differs from the file's command now (%s); "
                    "dtrain sweep --rerun-changed runs it again, its folder moved aside to %s/.old/\n", r->name, was, diff, s->out);
        return 0;
    }
    if (!dt_sweep_can_rerun(s, r, sl)) return 1;
    sl->state = DT_SWEEP_PENDING;
    sl->changed = 1;
    t->changed++;
    if (first)
        fprintf(stderr, "sweep: %s: %s before, but its command changed (%s): %s again, its old folder moved to %s/.old/%s.K\n",
                r->name, was, diff, dry ? "would run" : "runs", s->out, r->name);
    return 0;
}

/* Each run's state from its folder (done, failed, or to run) and the tally; 1 with one line
 * printed when a run to start has at its path what no sweep made (a sweep never removes it),
 * or a checkpoint no folder of its holds, or OUT/sweep.json is another program's, or a run whose
 * command changed cannot run again. The first survey says which kept runs' commands changed. */
static int survey(const dt_sweep *s, dt_sweep_slot *sl, int retry, int rerun, int dry, int first, dt_sweep_tally *t) {
    memset(t, 0, sizeof *t);
    if (!dt_sweep_json_ours(s)) {
        fprintf(stderr, "dtrain: error: %s: out '%s' holds a sweep.json that no dtrain sweep wrote: it is not replaced; "
                "set out to another folder\n", s->path, s->out);
        return 1;
    }
    for (int i = 0; i < s->nruns; i++) {
        snprintf(sl[i].dir, sizeof sl[i].dir, "%s/%s", s->out, s->runs[i].name);
        sl[i].changed = 0;
        /* a run that ended is kept whoever made its folder (sweeps before the mark made none);
         * only one to start again needs the mark: its folder is removed first */
        const int folder = dt_sweep_folder_state(sl[i].dir);
        dt_sweep_read_status(&sl[i]);
        sl[i].in_place = 0;
        const int was = sl[i].state;
        /* a changed run runs anew in a new folder (its old one moved aside), --retry-failed or not */
        if ((was == DT_SWEEP_DONE || was == DT_SWEEP_FAILED) && changed(s, &sl[i], &s->runs[i], rerun, dry, first, t)) return 1;
        if (!sl[i].changed && ((was == DT_SWEEP_FAILED && retry) || was == DT_SWEEP_STOPPED)) sl[i].state = DT_SWEEP_PENDING;
        if (sl[i].state == DT_SWEEP_PENDING && !sl[i].changed) {
            if (folder == DT_SWEEP_FOLDER_FOREIGN) {
                fprintf(stderr, "dtrain: error: %s:%d: run '%s': %s exists and is not a folder a dtrain sweep made (no %s in "
                        "it): it is never removed; move it away, or set out to another folder\n", s->path, s->runs[i].line,
                        s->runs[i].name, sl[i].dir, DT_SWEEP_MARK);
                return 1;
            }
            if (place(s, &s->runs[i], &sl[i], folder, was, dry)) return 1;
        }
        t->in_place += sl[i].state == DT_SWEEP_PENDING && sl[i].in_place;
        t->done += sl[i].state == DT_SWEEP_DONE;
        t->failed += sl[i].state == DT_SWEEP_FAILED;
        t->pending += sl[i].state == DT_SWEEP_PENDING;
    }
    return 0;
}

typedef struct {
    int dry, retry, rerun, slurm;
    const char *sbatch;
    float budget;           /* core-minutes; 0: none */
} sweep_opts;

static const dt_flag sweep_flags[] = {
    {"dry-run", DT_AT_SWITCH(sweep_opts, dry), .help = "list the runs (name: command), what they will cost, and start nothing"},
    {"retry-failed", DT_AT_SWITCH(sweep_opts, retry), .help = "run again the runs that failed before (else they are kept as failed)"},
    {"rerun-changed", DT_AT_SWITCH(sweep_opts, rerun),
     .help = "run again the runs kept (done or failed) whose command changed since (the file was edited); each old "
             "folder is moved, whole, to OUT/.old/NAME.K (else they are kept, with a warning naming the flags that changed)"},
    {"budget", DT_AT_FLOAT(sweep_opts, budget), .min = 0, .max = 1e12, .min_open = 1, .metavar = "CORE_MINUTES", .zero = "none",
     .help = "refuse to start (exit 2) when the estimated cost of the runs to do is over this many core-minutes"},
    {"slurm", DT_AT_SWITCH(sweep_opts, slurm),
     .help = "each run one Slurm job (sbatch --wait, --ntasks the run's ranks; its output the run's console.txt); a "
             "cancelled job's run runs again on the next start"},
    {"sbatch", DT_AT_TEXT(sweep_opts, sbatch), .metavar = "OPTIONS",
     .help = "--slurm: more sbatch options for every job, e.g. \"--partition=gpu --time=1:00:00\""},
};

/* dtrain sweep --help's text after the flags' name */
static const char sweep_usage[] =
    "FILE [--dry-run] [--retry-failed] [--rerun-changed] [--budget CORE_MINUTES]\n"
    "       [--slurm [--sbatch OPTIONS]]\n\nRuns every run of an experiment file (docs/sweep.md), "
    "each in its own folder, as many at once as the cores allow.\n"
    "The file: [sweep] name, seeds = 1 2 3 (each run once per seed), out, parallel,\n"
    "simulate = true (every run dtrain sim -n N: sim's flags become keys);\n"
    "[base] flags of every run; [axes] KEY = v1, v2 (every combination); [variant NAME]\n"
    "its own flags, and 'axis KEY = ...' of its own; {seed} in a value is the run's seed.\n"
    "Runs go to OUT/NAME-KEY=V-seedS/.\n"
    "Resuming: run it again and only what is missing runs: finished runs are kept, runs\n"
    "cut short start again, failed runs are kept as failed unless --retry-failed; runs\n"
    "stopped with a checkpoint (status 5; checkpoint = true: each run its own) resume in\n"
    "their folders, their logs going on. A kept run whose command changed since (the file\n"
    "was edited) is kept with a warning naming the flags that changed; --rerun-changed runs\n"
    "it again, its old folder moved whole to OUT/.old/NAME.K (never removed).\n"
    "Cost: before starting (and with --dry-run) the sweep prints an estimate of the runs to\n"
    "do in core-minutes (steps x ranks x a step's seconds, timed here on a few steps of each\n"
    "model, and rank 0's evaluations; a simulated run computes all its ranks on one core)\n"
    "and in wall clock on the cores it may use; data loading and communication are left out.\n"
    "--budget CORE_MINUTES refuses (exit 2, nothing started) a sweep estimated over it.\n"
    "Exit status: 0 every run done, 1 some failed or stopped, 2 bad input, 130/143 interrupted.";

/* The flags and the file of dtrain sweep's command line: -1 to go on, else the exit status
 * (0: --help printed; 2: an error, said) */
static int parse(int argc, char **argv, sweep_opts *o, const char **file) {
    int help = 0;
    const dt_flag_list list = {.flags = sweep_flags, .n = (int)(sizeof sweep_flags / sizeof *sweep_flags), .base = o};
    char **flags = calloc((size_t)argc + 1, sizeof *flags);
    if (!flags) return 2;
    int nf = 0, extra = 0;
    for (int i = 2; i < argc; i++) {
        /* a flag's value goes with it (--budget 30): it is not the file */
        const dt_flag *f = dt_flags_lookup(&list, 1, argv[i], NULL);
        if (f && f->kind != DT_FLAG_SWITCH && !strchr(argv[i], '=') && i + 1 < argc) { flags[nf++] = argv[i++]; flags[nf++] = argv[i]; }
        else if (!strncmp(argv[i], "-", 1)) flags[nf++] = argv[i];
        else if (!*file) *file = argv[i];
        else extra = 1;
    }
    char **pv = calloc((size_t)nf + 3, sizeof *pv);
    if (!pv) { free(flags); return 2; }
    pv[0] = argv[0];
    pv[1] = argv[1];
    memcpy(pv + 2, flags, (size_t)nf * sizeof *flags);
    dt_status st = dt_flags_parse_argv("sweep", nf + 2, pv, 2, &list, 1, &help);
    free(pv);
    free(flags);
    if (st == DT_OK && help) {
        dt_flags_help("sweep", sweep_usage, &list, 1);
        return 0;
    }
    if (st == DT_OK && o->sbatch && !o->slurm) st = dt_fail(DT_ERR_ARG, "dtrain sweep: --sbatch needs --slurm");
    if (st == DT_OK && (!*file || extra)) st = dt_fail(DT_ERR_ARG, "dtrain sweep: expected one experiment file (dtrain sweep FILE)");
    if (st != DT_OK) { fprintf(stderr, "dtrain: error: %s\n", dt_last_error()); return 2; }
    const ssize_t len = readlink("/proc/self/exe", dt_sweep_self, sizeof dt_sweep_self - 1);
    if (len <= 0) { fprintf(stderr, "dtrain: error: sweep: cannot find my own executable\n"); return 2; }
    dt_sweep_self[len] = 0;
    return -1;
}

/* --dry-run: every run's command on stdout, the cost and the tally on stderr; nothing made */
static void dry_run(const dt_sweep *s, const dt_sweep_slot *sl, const dt_sweep_tally *t, const dt_sweep_cost *cost, int slurm,
                    const char *changed_n) {
    for (int i = 0; i < s->nruns; i++) {
        char **av = dt_sweep_command(&s->runs[i], sl[i].dir, 0);
        printf("%s: ", s->runs[i].name);
        dt_sweep_quoted(stdout, av);
        dt_sweep_free_command(av);
    }
    if (t->pending) dt_sweep_estimate_say(cost, dt_sweep_cores(s, slurm), slurm);
    fprintf(stderr, "sweep: %d runs (%d done, %d failed before, %d to run%s); --dry-run: nothing started\n", s->nruns, t->done,
            t->failed, t->pending, changed_n);
}

/* The sweep's last lines once its runs ended (not interrupted): the failed ones, the tally,
 * and what the next start does; the exit status (1: some failed, stopped or cancelled) */
static int ended_all(const dt_sweep *s, dt_sweep_slot *sl, const dt_sweep_tally *t, const char *file, int retry, const char *secs) {
    char why[600];
    for (int i = 0; i < s->nruns; i++)
        if (sl[i].state == DT_SWEEP_FAILED)
            fprintf(stderr, "sweep: failed: %s (exit %d): %s\n", s->runs[i].name, sl[i].exit, dt_sweep_why(&sl[i], why, sizeof why));
    fprintf(stderr, "sweep: %s: %d/%d done, %d failed, in %s%s\n", s->name, t->done, s->nruns, t->failed, secs,
            t->failed && !retry ? " (dtrain sweep --retry-failed runs the failed ones again)" : "");
    if (t->stopped)
        fprintf(stderr, "sweep: %d run%s stopped with a checkpoint resume%s in %s folder%s on the next start (dtrain sweep %s)\n",
                t->stopped, t->stopped > 1 ? "s" : "", t->stopped > 1 ? "" : "s", t->stopped > 1 ? "their" : "its",
                t->stopped > 1 ? "s" : "", file);
    if (t->cancelled)
        fprintf(stderr, "sweep: %d run%s whose job was cancelled run%s again on the next start (dtrain sweep %s --slurm)\n",
                t->cancelled, t->cancelled > 1 ? "s" : "", t->cancelled > 1 ? "" : "s", file);
    return t->failed || t->cancelled || t->stopped ? 1 : 0;
}

int dt_cmd_sweep(int argc, char **argv) {
    sweep_opts o = {0};
    const char *file = NULL;
    const int parsed = parse(argc, argv, &o, &file);
    if (parsed >= 0) return parsed;
    const int dry = o.dry, retry = o.retry, rerun = o.rerun, slurm = o.slurm;
    dt_sweep s;
    if (dt_sweep_read(file, &s) != DT_OK) { fprintf(stderr, "dtrain: error: %s\n", dt_last_error()); return 2; }
    int rc = 2, lock = -1;
    dt_sweep_slot *sl = calloc((size_t)s.nruns, sizeof *sl);
    dt_sweep_tally t;
    /* --slurm without sbatch or a controller would fail every run the same way, one by one */
    if (sl && slurm && dt_sweep_slurm_ready() != 0) { fprintf(stderr, "dtrain: error: %s\n", dt_last_error()); goto out; }
    if (!sl || dt_sweep_check_all(&s) || survey(&s, sl, retry, rerun, dry, 1, &t)) goto out;
    /* the cost, before anything is made: over --budget, nothing is */
    dt_sweep_cost cost = {0};
    if (t.pending) dt_sweep_estimate(&s, sl, dt_sweep_cores(&s, slurm), slurm, &cost);
    if (o.budget > 0 && cost.core_s / 60 > o.budget) {
        fprintf(stderr, "dtrain: error: %s: the runs to do are estimated at %.3g core-minutes, over --budget %g: nothing started "
                "(%d of %d runs to do; the estimate counts their training steps and evaluations: dtrain sweep %s --dry-run shows it)\n",
                file, cost.core_s / 60, o.budget, t.pending, s.nruns, file);
        goto out;
    }
    char changed_n[64] = "";
    if (t.changed) snprintf(changed_n, sizeof changed_n, ", %d of them changed since (--rerun-changed)", t.changed);
    if (dry) {
        dry_run(&s, sl, &t, &cost, slurm, changed_n);
        rc = 0;
        goto out;
    }
    /* the folders are surveyed again under the lock: another sweep may have ended since */
    if (dt_sweep_mkdir_p(s.out) != 0) {
        fprintf(stderr, "dtrain: error: %s: out '%s': cannot make the folder: %s\n", file, s.out, strerror(errno));
        goto out;
    }
    if ((lock = dt_sweep_lock(&s)) < 0) { fprintf(stderr, "dtrain: error: %s\n", dt_last_error()); goto out; }
    if (survey(&s, sl, retry, rerun, 0, 0, &t)) goto out;
    if (dt_sweep_write_json(&s) != 0) {
        fprintf(stderr, "dtrain: error: %s: out '%s': cannot write sweep.json in it: %s\n", file, s.out, dt_last_error());
        goto out;
    }
    if (t.changed) snprintf(changed_n, sizeof changed_n, ", %d of them changed since (--rerun-changed)", t.changed);
    else changed_n[0] = 0;
    char resumed[64] = "";
    if (t.in_place) snprintf(resumed, sizeof resumed, " (%d resumed in %s folder%s)", t.in_place, t.in_place > 1 ? "their" : "its",
                             t.in_place > 1 ? "s" : "");
    fprintf(stderr, "sweep: %s: %d runs, %d done and %d failed before, %d to run%s%s, into %s\n", s.name, s.nruns, t.done,
            t.failed, t.pending, resumed, changed_n, s.out);
    if (t.pending) dt_sweep_estimate_say(&cost, dt_sweep_cores(&s, slurm), slurm);
    const double t0 = dt_now();
    const int sig = dt_sweep_run_all(&s, sl, &t, slurm, o.sbatch);
    char secs[32];
    dt_sweep_fmt_secs(dt_now() - t0, secs, sizeof secs);
    if (sig) {
        fprintf(stderr, "sweep: interrupted (%s) after %s: the runs it stopped run again on the next start (those stopped with "
                "a checkpoint resume in their folders); %d/%d done\n", strsignal(sig), secs, t.done, s.nruns);
        rc = 128 + sig;
        goto out;
    }
    rc = ended_all(&s, sl, &t, file, retry, secs);
out:
    if (lock >= 0) close(lock);
    free(sl);
    dt_sweep_free(&s);
    return rc;
}
