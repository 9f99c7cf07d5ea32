"""The one reader of dtrain's JSON-lines logs (--log FILE): scripts/report, scripts/plot,
scripts/table, scripts/experiments, bench/ and the dtrain package's DataFrames
(dtrain.read_runs, dtrain.read_log) all read logs through it. Scripts that are not Python
modules reach it as scripts/dtrainlog.py, a shim over this module.

    from dtrain import log
    for run in log.read_runs(log.find_logs(["results/sweep", "a.jsonl"])):
        print(run.label, run.get("scheme.threshold"), run.status, run.summary_value("test_acc"))

(log.read_runs gives Run objects; dtrain.read_runs gives a pandas DataFrame of them.)

A log is a `config` line, `epoch`, `eval`, `step` lines, maybe `diverged`, and a `summary`
last. A resumed or restarted run appends a new `config` line and goes on, so a Run holds the
LAST config line's settings, one epoch line per epoch number (the last one written wins, as a
redone epoch replaces the lost one), one step line per step and one eval line per step (the same
rule), and the summary and `diverged` line written after that last config (a summary before it
belongs to an attempt that was continued, so the run is not done yet). Lines of other types
(transport, ...) are ignored. A line that is not a JSON object (or not UTF-8, nested deeper
than any log line, a string that is not Unicode, a number too long to read) is an error naming
file:line; only a last line without its newline may be cut (a run being written, or killed
mid-line): it is left out. A log without a config line (an empty one: a run killed before it
started) has no settings: configured() tells such logs apart, and scripts/report leaves them out.

Run from the shell (for bash scripts that need one figure), as scripts/dtrainlog.py:
    scripts/dtrainlog.py done LOG           exit 0 if LOG has a summary (1 if not, 2 on error)
    scripts/dtrainlog.py summary LOG KEY    the summary's KEY (null when absent)
    scripts/dtrainlog.py epoch LOG KEY [N]  KEY of epoch N (default: the first epoch)
"""
import glob
import json
import math
import os
import re
import stat
import sys

# what `from dtrain.log import *` (scripts/dtrainlog.py) gives
__all__ = ["RUN_KEYS", "SEED_KEY", "DERIVED", "IMAGES_SET", "MAX_DEPTH", "MAX_FIGURE", "LogError", "Run", "get_dotted",
           "flatten", "freeze", "number", "label_of", "read_run", "parse_line", "find_logs", "read_runs", "configured",
           "group_key", "group_runs", "varying_keys", "name_keys", "name_of", "show", "main"]

# Settings that name a run's files, its time or its attempt, not what it computes: two runs
# that differ only in these (and the seed) are repeats of one configuration.
# (sim.replay: the log a replay took its figures from, each seed's own; docs/simulation.md)
RUN_KEYS = ("started_utc", "command", "out", "log", "checkpoint", "run_dir", "commit", "resume", "restarts", "sim.replay")
SEED_KEY = "seed"
# Settings that follow from others (the steps of an epoch from the batch, the ranks and the
# data): they split groups like any setting, but tables and legends leave them out.
DERIVED = ("steps_per_epoch",)
# What --images N sets in the config line (and so follows from it, the batch and the ranks)
IMAGES_SET = ("epochs", "max_steps")


# A dtrain log line nests three deep (a summary's per-rank list of objects); a line nested deeper
# than this is not one, and Python's JSON parser and the readers below recurse once per level
MAX_DEPTH = 32
# Figures beyond this are no measurement dtrain writes, and their squares (a std) would overflow:
# number() treats them like a non-finite one
MAX_FIGURE = 1e150
# \ud800-\udfff escapes: only these can make a string that is not Unicode (a lone surrogate,
# which cannot be printed or written as UTF-8)
SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
# a JSON string (its escapes, \" too, inside it) or a bracket: depth_over's tokens
BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{}\]]')


class LogError(Exception):
    """A one-line reason, naming the file (and the line) it is about."""


class Run:
    def __init__(self, path, label):
        self.path = path
        self.label = label
        self.config = {}     # the last config line, without "type"
        self.configs = 0     # how many config lines (1 + resumes and restarts)
        self.epochs = {}     # epoch number -> the last epoch line of that number
        self.evals = {}      # step -> the last eval line of that step (no step: line number)
        self.steps = {}      # step -> the last step line of that step
        self.summary = None  # the summary written after the last config line, or None
        self.diverged = None  # the diverged line written after the last config line, or None
        self.lines = 0       # the lines read (blank ones and a cut last line not counted)

    # ---- the lines, in order
    def epoch_lines(self):
        return [self.epochs[k] for k in sorted(self.epochs)]

    def eval_lines(self):
        return [self.evals[k] for k in sorted(self.evals)]

    def step_lines(self):
        return [self.steps[k] for k in sorted(self.steps)]

    # ---- settings and figures
    def get(self, key, default=None):
        """A config value by dotted key ("lr", "scheme.threshold"); default when absent."""
        return get_dotted(self.config, key, default)

    def flat_config(self):
        """The config as {dotted key: value} (lists as tuples, so values can be compared)."""
        return flatten(self.config)

    def summary_value(self, key):
        """The summary's KEY as a float (None: no summary, no such key, or null)."""
        return number(self.summary.get(key)) if self.summary else None

    @property
    def workers(self):
        """The training ranks (a downpour server trains nothing); ranks for an older log."""
        v = self.config.get("training_ranks")
        return v if v is not None else self.config.get("ranks")

    @property
    def status(self):
        """"done", "diverged", or "no summary" (failed, killed or still running)."""
        if self.diverged is not None:
            return "diverged"
        return "done" if self.summary is not None else "no summary"

    @property
    def ok(self):
        return self.status == "done"


def get_dotted(obj, key, default=None):
    for part in key.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return default
        obj = obj[part]
    return obj


def flatten(obj, prefix=""):
    out = {}
    for k, v in obj.items():
        if prefix == "" and k == "type":
            continue
        key = prefix + k
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = freeze(v)
    return out


def freeze(v):
    if isinstance(v, list):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    return v


def number(v):
    """v as a finite float, or None (null, text, a boolean, not finite, beyond MAX_FIGURE)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        v = float(v)
    except OverflowError:  # an integer beyond any float
        return None
    return v if math.isfinite(v) and abs(v) <= MAX_FIGURE else None


def label_of(path):
    """A run's name: a run folder's name for DIR/log.jsonl, else the file name without .jsonl."""
    base = os.path.basename(path)
    if base == "log.jsonl":
        return os.path.basename(os.path.dirname(os.path.abspath(path))) or base
    return base[:-6] if base.endswith(".jsonl") else base


def read_run(path, label=None):
    """Reads one log into a Run; LogError (one line) if it cannot be read or is not a log."""
    run = Run(path, label if label is not None else label_of(path))
    try:
        # O_NONBLOCK: a FIFO in a log's place must not hang the open; it is refused below
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise LogError(f"{path}: cannot read: {e.strerror}")
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LogError(f"{path}: not a regular file (expected a dtrain --log file)")
        n = 0
        try:
            while True:
                n += 1
                raw = f.readline()
                if not raw:
                    break
                rec = parse_line(path, n, raw)
                if rec is not None:
                    add_line(run, rec, n)
        except OSError as e:
            raise LogError(f"{path}: cannot read: {e.strerror}")
        except MemoryError:  # a line of gigabytes
            raise LogError(f"{path}:{n}: out of memory reading this line (expected a dtrain --log file)") from None
    return run


def parse_line(path, n, raw):
    """Line N of PATH (bytes) as a dict; None for a blank line or a last line cut mid-write
    (no newline); LogError naming PATH:N for anything else that is not a log line."""
    cut = not raw.endswith(b"\n")  # only the last line can lack its newline
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if cut:
            return None  # cut inside a character
        raise LogError(f"{path}:{n}: not UTF-8 text (expected a dtrain --log file)") from None
    if not text.strip():
        return None
    if text.count("[") + text.count("{") > MAX_DEPTH and depth_over(text):
        raise LogError(f"{path}:{n}: nested deeper than {MAX_DEPTH} levels (expected a dtrain --log file)")
    try:
        rec = json.loads(text)
    except json.JSONDecodeError:
        if cut:
            return None
        raise LogError(f"{path}:{n}: not a JSON line (expected a dtrain --log file)") from None
    except ValueError:  # valid JSON Python will not read: an integer of more than 4300 digits
        raise LogError(f"{path}:{n}: a number too long to read (expected a dtrain --log file)") from None
    if not isinstance(rec, dict):
        raise LogError(f"{path}:{n}: not a JSON object (expected a dtrain --log file)")
    if SURROGATE.search(text) and not unicode_ok(rec):
        raise LogError(f"{path}:{n}: a string with a lone \\ud800-\\udfff escape, not Unicode "
                       "(expected a dtrain --log file)")
    return rec


def depth_over(text):
    """Whether TEXT's brackets (outside strings) nest deeper than MAX_DEPTH: checked before the
    parser, which would recurse that deep (a RecursionError), without recursing."""
    depth = 0
    for m in BRACKETS.finditer(text):
        c = m.group()[0]
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif c in "]}":
            depth -= 1
    return False


def unicode_ok(rec):
    """Whether every string (key or value) in REC is valid Unicode (no lone surrogate)."""
    todo = [rec]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def add_line(run, rec, n):
    """Files record REC (line N) in RUN by its type."""
    t = rec.get("type")
    if t == "config":
        run.config = {k: v for k, v in rec.items() if k != "type"}
        run.configs += 1
        run.summary = run.diverged = None
    elif t == "epoch":
        run.epochs[key_of(rec, "epoch", n)] = rec
    elif t == "eval":
        run.evals[key_of(rec, "step", n)] = rec
    elif t == "step":
        run.steps[key_of(rec, "step", n)] = rec
    elif t == "summary":
        run.summary = rec
    elif t == "diverged":
        run.diverged = rec
    run.lines += 1


def key_of(rec, field, n):
    """The number that orders a line (its epoch or step); its line number if it has none."""
    v = number(rec.get(field))
    return v if v is not None else 1e18 + n  # after the numbered ones, in file order


def find_logs(paths):
    """The log files named by PATHS: a file is itself; a run folder gives its log.jsonl; a sweep
    folder gives its */log.jsonl (sorted); a folder of logs (results/) gives its *.jsonl."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            if os.path.isfile(os.path.join(p, "log.jsonl")):
                out.append(os.path.join(p, "log.jsonl"))
                continue
            found = sorted(glob.glob(os.path.join(glob.escape(p), "*", "log.jsonl")))
            found = found or sorted(glob.glob(os.path.join(glob.escape(p), "*.jsonl")))
            if not found:
                raise LogError(f"{p}: a folder without log.jsonl, */log.jsonl or *.jsonl (expected a run or sweep folder)")
            out.extend(found)
        else:
            out.append(p)  # read_run names it if it is missing
    return out


def read_runs(paths):
    """Runs for find_logs(PATHS), in order; labels made unique (a/log.jsonl, b/log.jsonl)."""
    runs = [read_run(p) for p in find_logs(paths)]
    seen = {}
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
    for r in runs:
        if seen[r.label] > 1:
            r.label = os.path.relpath(r.path)
    return runs


def configured(runs):
    """(the RUNS with a config line, a reason per log without one). A log without a config line
    is no run: an empty one is a run killed before it started (or a file made by hand), and with
    no settings it belongs to no configuration; counted, it would be a row of its own."""
    keep, left = [], []
    for r in runs:
        if r.configs:
            keep.append(r)
        elif r.lines == 0:
            left.append(f"{r.path}: empty, no config line (a run killed before it started?)")
        else:
            left.append(f"{r.path}: no config line, so no settings to group it by (expected a dtrain --log file)")
    return keep, left


def group_key(run, ignore=()):
    """What two repeats of one configuration share: the flat config without the seed, the
    RUN_KEYS, IGNORE (a key also drops its sub-keys: "scheme" drops "scheme.threshold") and the
    null settings."""
    flat = run.flat_config()
    # with --images N the run's length is N images: the epochs and max_steps it logs follow
    # from N, the batch and the ranks (dtrain train --images), so they split no group
    follows = IMAGES_SET if (number(flat.get("images")) or 0) > 0 else ()
    drop = (SEED_KEY,) + RUN_KEYS + tuple(ignore) + follows
    # a setting null in one log and absent in another (an older dtrain's) is the same setting
    return tuple(sorted((k, v) for k, v in flat.items()
                        if v is not None and not any(k == d or k.startswith(d + ".") for d in drop)))


def group_runs(runs, ignore=()):
    """[(key dict, [runs])] in the order each configuration first appears."""
    groups = {}
    for r in runs:
        groups.setdefault(group_key(r, ignore), []).append(r)
    # the key's settings in the order of the first run's config line (the key itself is sorted)
    order = lambda rs: {k: v for k, v in rs[0].flat_config().items()}
    return [({k: v for k, v in order(rs).items() if k in dict(key)}, rs) for key, rs in groups.items()]


def varying_keys(configs):
    """The dotted keys whose value (or presence) is not the same in every one of CONFIGS
    (dicts of dotted key -> value), in a stable order: algo first, then as they appear."""
    keys = []
    for c in configs:
        keys.extend(k for k in c if k not in keys)
    missing = object()
    vary = [k for k in keys if len({repr(c.get(k, missing)) for c in configs}) > 1]
    return sorted(vary, key=lambda k: (k != "algo", keys.index(k)))


def name_keys(configs, skip=()):
    """The keys that tell CONFIGS apart in a line's or a row's name: those that vary, without
    DERIVED and SKIP, training_ranks only when ranks does not vary (it differs from ranks only
    by servers), and a scheme's own flag (scheme.*) only when it differs between configs of one
    algo (the algo's name says the rest)."""
    every = varying_keys(configs)
    algos = {c.get("algo") for c in configs}
    return [k for k in every if k not in DERIVED and k not in skip
            and not (k == "training_ranks" and "ranks" in every)
            and (not k.startswith("scheme.") or "algo" not in every
                 or any(len({repr(c.get(k)) for c in configs if c.get("algo") == al}) > 1 for al in algos))]


def name_of(config, keys):
    """"eventgrad, lr=0.1, threshold=adaptive": KEYS of CONFIG (the ones it has), algo bare."""
    return ", ".join(show(config.get(k)) if k == "algo" else f"{k.split('.')[-1]}={show(config.get(k))}"
                     for k in keys if k in config)


def show(v):
    """A config value as text: 0.1, adaptive, true, -, a,b."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, tuple):
        return ",".join(show(x) for x in v)
    return str(v)


def main(argv):
    usage = "usage: dtrainlog.py done LOG | summary LOG KEY | epoch LOG KEY [N]"
    if len(argv) < 2 or argv[0] not in ("done", "summary", "epoch"):
        print(usage, file=sys.stderr)
        return 2
    try:
        run = read_run(argv[1])
    except LogError as e:
        print(f"dtrainlog: error: {e}", file=sys.stderr)
        return 2
    if argv[0] == "done":
        return 0 if run.summary is not None else 1
    if len(argv) < 3:
        print(usage, file=sys.stderr)
        return 2
    if argv[0] == "summary":
        rec = run.summary
        if rec is None:
            print(f"dtrainlog: error: {argv[1]}: no summary line (failed or running)", file=sys.stderr)
            return 2
    else:
        eps = run.epoch_lines()
        want = argv[3] if len(argv) > 3 else None
        rec = next((e for e in eps if want is None or str(e.get("epoch")) == want), None)
        if rec is None:
            print(f"dtrainlog: error: {argv[1]}: no epoch line{' ' + want if want else ''}", file=sys.stderr)
            return 2
    v = rec.get(argv[2])
    print("null" if v is None else json.dumps(v) if not isinstance(v, str) else v)
    return 0
