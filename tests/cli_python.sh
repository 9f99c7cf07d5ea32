#!/usr/bin/env bash
# The dtrain Python package (python/dtrain, docs/reports.md) on logs written here by hand, the
# answers worked out in advance: dtrain.read_runs gives a row per run (the last config line's
# settings by dotted key, the summary's figures, the status: done, diverged, failed as the
# sweep's status.json says, running), groupby means and stds; dtrain.read_log gives a run's
# evaluations in the order dtrain made them (an eval line before the epoch line of its step, an
# epoch line's step and time worked out); dtrain.time_to_target finds the first evaluation at or
# beyond an accuracy or a loss (NaN when none), from a file, a read_log frame or a read_runs
# frame. `import dtrain` needs no pandas (scripts/report uses the same reader without it), and
# scripts/dtrainlog.py is the package's reader, not a copy. Bad input: one line naming it.
. "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY=/usr/bin/python3 # Debian's, with python3-pandas (scripts/install-deps)
export PYTHONPATH="$ROOT/python" PYTHONDONTWRITEBYTECODE=1

# a sweep folder. a1 (lr 0.1, seed 1; resumed: its first config line said lr 0.2): evaluations
#   eval  step  50: acc 0.70, loss 1.0, 1.0 s, 10 MB, 100 msgs
#   eval  step 100: acc 0.74, loss 0.8, 2.0 s, 20 MB, 200 msgs
#   epoch 1 (100 steps an epoch, so step 100; 2.5 s: its seconds): acc 0.76, loss 0.7, 20 MB, 200 msgs
#   eval  step 150: acc 0.80, loss 0.6, 3.0 s, 30 MB, 300 msgs
#   epoch 2 (step 180: the summary's steps; 2.5 + 1.5 = 4.0 s): acc 0.85, loss 0.5, 36 MB
# a2 (lr 0.1, seed 2): eval 50 acc 0.72 at 1.5 s; epoch 1 acc 0.78 at 3.0 s, 25 MB; done at 0.78
# b1 (lr 0.05, seed 1): eval 50 acc 0.80 at 1.2 s, 12 MB; done at 0.90
# b2 failed (status.json), b3 running (no summary, no status.json), b4 diverged; "dead": an
# empty log (left out with a warning)
"$PY" - "$T/sw" <<'EOF'
import json, os, sys
out = sys.argv[1]
def log(name, lr, seed, lines, end=None, status=None, first_lr=None):
    os.makedirs(f"{out}/{name}")
    cfg = {"type": "config", "algo": "eventgrad", "model": "mlp", "ranks": 2, "training_ranks": 2, "batch": 32,
           "lr": lr, "seed": seed, "steps_per_epoch": 100, "max_steps": 0, "eval_every_steps": 50,
           "scheme": {"threshold": "adaptive", "horizon": 1 if lr == 0.1 else 2},
           "started_utc": f"2026-11-30T10:0{seed}:00Z", "run_dir": f"{out}/{name}"}
    head = [dict(cfg, lr=first_lr), {"type": "epoch", "epoch": 1, "test_acc": 0.1, "seconds": 9.0}] if first_lr else []
    with open(f"{out}/{name}/log.jsonl", "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in head + [cfg] + lines + ([end] if end else []))
    if status:
        with open(f"{out}/{name}/status.json", "w") as f:
            json.dump({"status": status, "exit": 1, "error": "killed", "seconds": 3.0}, f)
ev = lambda step, acc, loss, s, mb, msgs=None: {"type": "eval", "step": step, "epoch": step / 100, "test_acc": acc,
    "test_loss": loss, "val_acc": None, "val_loss": None, "train_s": s, "mb_sent": mb, "msgs_sent": msgs, "compute_s": s / 2}
ep = lambda e, acc, loss, secs, mb, msgs=None: {"type": "epoch", "epoch": e, "loss": 0.9 / e, "test_acc": acc,
    "test_loss": loss, "seconds": secs, "mb_sent": mb, "msgs_sent": msgs, "lr": 0.1}
summ = lambda acc, steps, **kw: dict({"type": "summary", "algo": "eventgrad", "lr": 999, "test_acc": acc, "steps": steps,
    "wall_s": 5.0, "per_rank": [{"rank": 0}, {"rank": 1}]}, **kw)
log("a1", 0.1, 1, [ev(50, 0.70, 1.0, 1.0, 10, 100), ev(100, 0.74, 0.8, 2.0, 20, 200), ep(1, 0.76, 0.7, 2.5, 20, 200),
                   ev(150, 0.80, 0.6, 3.0, 30, 300), ep(2, 0.85, 0.5, 1.5, 36, 360)],
    summ(0.85, 180, mb_sent=36.0), first_lr=0.2)
log("a2", 0.1, 2, [ev(50, 0.72, 0.9, 1.5, 10), ep(1, 0.78, 0.6, 3.0, 25)], summ(0.78, 100, mb_sent=25.0))
log("b1", 0.05, 1, [ev(50, 0.80, 0.5, 1.2, 12)], summ(0.90, 100))
log("b2", 0.05, 2, [ev(50, 0.60, 1.1, 1.0, 10)], status="failed")
log("b3", 0.05, 3, [ev(50, 0.65, 1.1, 1.0, 10)])
log("b4", 0.05, 4, [], {"type": "diverged", "epoch": 1, "step": 3, "rank": 0})
os.makedirs(f"{out}/dead")
open(f"{out}/dead/log.jsonl", "w").close()
EOF

# import: no pandas for the reader; scripts/dtrainlog.py is the package's module
out=$(cd / && "$PY" - "$ROOT" 2>&1 <<'EOF'
import sys
import dtrain
assert "pandas" not in sys.modules, "import dtrain imported pandas"
sys.path.insert(0, sys.argv[1] + "/scripts")
import dtrainlog
assert dtrainlog.read_run is dtrain.log.read_run and dtrainlog.LogError is dtrain.LogError, "dtrainlog is a copy"
print(f"dtrain {dtrain.__version__} from {dtrain.__file__}, without pandas; dtrainlog is dtrain.log")
EOF
)
check "import dtrain (no pandas), scripts/dtrainlog.py is its reader" $? "$out"

out=$("$PY" - "$T/sw" 2>&1 <<'EOF'
import math, sys, warnings
import dtrain
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    runs = dtrain.read_runs(sys.argv[1])
assert len(w) == 1 and "dead/log.jsonl: empty" in str(w[0].message), [str(x.message) for x in w]
assert list(runs["run"]) == ["a1", "a2", "b1", "b2", "b3", "b4"], list(runs["run"])
r = runs.set_index("run")
st = r["status"].to_dict()
assert st == {"a1": "done", "a2": "done", "b1": "done", "b2": "failed", "b3": "running", "b4": "diverged"}, st
assert r.loc["a1", "lr"] == 0.1, f"a1's lr {r.loc['a1', 'lr']}: the last config line's (0.1), not the first's or the summary's"
assert r.loc["a1", "scheme.threshold"] == "adaptive" and r.loc["b1", "scheme.horizon"] == 2, r.loc["b1"]
assert r.loc["a2", "seed"] == 2 and r.loc["a1", "wall_s"] == 5.0 and math.isnan(r.loc["b2", "test_acc"]), r.loc["a2"]
assert r.loc["a1", "path"] == sys.argv[1] + "/a1/log.jsonl", r.loc["a1", "path"]
assert "per_rank" not in runs.columns and "type" not in runs.columns, list(runs.columns)
# by hand: lr 0.1: 0.85 and 0.78, mean 0.815, std sqrt(2 x 0.035^2) = 0.0494975; lr 0.05: 0.90 alone
g = runs[runs.status == "done"].groupby("lr")["test_acc"].agg(["mean", "std", "count"])
assert abs(g.loc[0.1, "mean"] - 0.815) < 1e-12 and abs(g.loc[0.1, "std"] - 0.035 * 2 ** 0.5) < 1e-12, g
assert g.loc[0.05, "mean"] == 0.9 and math.isnan(g.loc[0.05, "std"]) and g.loc[0.05, "count"] == 1, g
print(f"6 runs, statuses {sorted(set(st.values()))}, lr 0.1: {g.loc[0.1, 'mean']:.3f} ± {g.loc[0.1, 'std']:.4f}")
EOF
)
check "read_runs: a row per run, last config, statuses, groupby mean ± std" $? "$out"

out=$("$PY" - "$T/sw" 2>&1 <<'EOF'
import math, sys
import dtrain
ev = dtrain.read_log(sys.argv[1] + "/a1")  # a run folder
assert list(ev["kind"]) == ["eval", "eval", "epoch", "eval", "epoch"], list(ev["kind"])
assert list(ev["step"]) == [50, 100, 100, 150, 180], list(ev["step"])
assert list(ev["train_s"]) == [1.0, 2.0, 2.5, 3.0, 4.0], list(ev["train_s"])
assert list(ev["mb_sent"]) == [10, 20, 20, 30, 36] and list(ev["test_acc"]) == [0.70, 0.74, 0.76, 0.80, 0.85], ev
assert ev["val_acc"].isna().all() and ev["loss"].isna().sum() == 3 and ev.loc[4, "loss"] == 0.45, ev
assert ev.attrs["run"] == "a1", ev.attrs
print("a1: eval 50, eval 100, epoch 1 (step 100, 2.5 s), eval 150, epoch 2 (step 180, 4.0 s)")
EOF
)
check "read_log: the evaluations in dtrain's order, an epoch line's step and time" $? "$out"

out=$("$PY" - "$T/sw" 2>&1 <<'EOF'
import math, sys, warnings
import dtrain
warnings.simplefilter("ignore")
a1 = sys.argv[1] + "/a1/log.jsonl"
t = dtrain.time_to_target(a1, acc=0.75)  # epoch 1 (0.76), not eval 100 (0.74)
assert (t["reached"], t["time_s"], t["steps"], t["mb"], t["msgs"], t["kind"]) == (True, 2.5, 100, 20, 200, "epoch"), t
t = dtrain.time_to_target(a1, acc=0.74)  # eval 100 itself: before epoch 1 at the same step
assert (t["time_s"], t["steps"], t["kind"], t["compute_s"]) == (2.0, 100, "eval", 1.0), t
t = dtrain.time_to_target(a1, acc=0.70)  # at the target counts
assert (t["time_s"], t["steps"]) == (1.0, 50), t
t = dtrain.time_to_target(a1, "loss=0.6")  # a loss: at or below
assert (t["time_s"], t["steps"], t["mb"], t["msgs"]) == (3.0, 150, 30, 300), t
for miss in ({"acc": 0.9}, {"val_acc": 0.5}):  # above every evaluation; a figure the run has not (null)
    t = dtrain.time_to_target(a1, **miss)
    assert t["reached"] is False and t["kind"] is None and all(math.isnan(t[k]) for k in ("time_s", "steps", "mb", "msgs")), (miss, t)
# a read_log frame gives the same; a read_runs frame a row per run
ev = dtrain.read_log(a1)
same = lambda a, b: a.keys() == b.keys() and all(a[k] == b[k] or a[k] != a[k] and b[k] != b[k] for k in a)  # NaN alike
assert same(dtrain.time_to_target(ev, acc=0.75), dtrain.time_to_target(a1, acc=0.75))
runs = dtrain.read_runs(sys.argv[1])  # warns of the empty log (checked above)
runs = runs.join(dtrain.time_to_target(runs, acc=0.75))  # beside the summary's own steps
got = dict(zip(runs["run"], runs["time_to_acc0.75_s"]))
assert got["a1"] == 2.5 and got["a2"] == 3.0 and got["b1"] == 1.2, got
assert all(math.isnan(got[k]) for k in ("b2", "b3", "b4")), got
assert list(runs["steps_to_acc0.75"][:2]) == [100, 100] and list(runs["steps"][:2]) == [180, 100], runs
# as dtrain compares --target-acc: in 32-bit floats (0.599999995 is the float 0.6)
assert dtrain.parse_target("acc=0.6").reached({"test_acc": 0.599999995})
assert not dtrain.parse_target("acc=0.6").reached({"test_acc": 0.59999})
print("acc 0.75: epoch 1 at 2.5 s, 100 steps, 20 MB, 200 msgs; 0.74: eval 100 at 2.0 s; loss 0.6: 3.0 s; 0.9: NaN; "
      f"per run {got}")
EOF
)
check "time_to_target: the first evaluation at or beyond, NaN when never" $? "$out"

# bad input: one line naming what is wrong (an exception of the package, no traceback needed
# to see it)
out=$("$PY" - "$T" 2>&1 <<'EOF'
import sys
import dtrain
T = sys.argv[1]
def why(f):
    try:
        f()
    except (ValueError, dtrain.LogError) as e:
        return str(e)
    return "no error"
cases = [
    (lambda: dtrain.read_runs(T + "/none.jsonl"), T + "/none.jsonl: cannot read"),
    (lambda: dtrain.read_log(T + "/sw"), T + "/sw: 7 logs (expected one run"),
    (lambda: dtrain.time_to_target(T + "/sw/a1"), "one target"),
    (lambda: dtrain.time_to_target(T + "/sw/a1", acc=0.7, loss=1), "one target"),
    (lambda: dtrain.time_to_target(T + "/sw/a1", "speed=3"), "'speed=3': expected acc=X, val_acc=X, loss=X or val_loss=X"),
    (lambda: dtrain.time_to_target(T + "/sw/a1", acc=75), "an accuracy is a fraction in (0, 1]"),
    (lambda: dtrain.time_to_target(T + "/sw/a1", "loss=x"), "'x' is not a number"),
]
for f, want in cases:
    got = why(f)
    assert want in got and "\n" not in got, f"expected '{want}', got '{got}'"
print(f"{len(cases)} errors, one line each")
EOF
)
check "bad input: one line naming the file or the target" $? "$out"

finish
