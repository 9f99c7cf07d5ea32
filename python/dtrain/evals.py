"""A run's evaluations in the order dtrain made them, and the first one that reaches a target:
the training time, steps, MB and messages to any accuracy or loss, found after the run in its
log. One run answers for every target; dtrain's own --target-acc answers for one, and stops
the run there.

Evaluations are the eval lines (--eval-every-steps N: every N steps) and the epoch lines (the
end of every --eval-every epochs, and of the last), so a time to a target is as fine as they
are: the first evaluation at or beyond it, not the step where the model got there.
"""
import math
import os
import struct

from .log import LogError, Run, find_logs, number, read_run

# An evaluation's figures, as numbers (None where its line has none): where the run stood (step,
# epoch, training seconds, MB and messages sent by all ranks, the slowest rank's computing) and
# what the model scored. An eval line has them all; so does an epoch line from dtrain 0.9 on
# (the step and train_s of an older one are worked out: below).
FIGURES = ("step", "epoch", "train_s", "test_acc", "test_loss", "val_acc", "val_loss", "mb_sent", "msgs_sent",
           "compute_s", "eval_s")

# --target KIND=X: the evaluation's figure it is about, and whether more is better
KINDS = {"acc": ("test_acc", True), "test_acc": ("test_acc", True), "val_acc": ("val_acc", True),
         "loss": ("test_loss", False), "test_loss": ("test_loss", False), "val_loss": ("val_loss", False)}
TARGET_FORMS = "acc=X, val_acc=X, loss=X or val_loss=X"


def evaluations(run):
    """[dict] one per evaluation of RUN (a dtrain.log.Run), in the order dtrain made them: kind
    ("eval" or "epoch"), FIGURES as numbers or None, then the line's other fields as written.

    An epoch line has its step and training time (rank 0's clock, where --target-acc stops);
    an older dtrain's did not: its step is then epoch x steps_per_epoch (the config's; at most
    the summary's steps and --max-steps, for an epoch cut short), its train_s the sum of the
    epoch lines' seconds so far (the slowest rank's each, which can differ from rank 0's clock
    by milliseconds). An eval line's own train_s is exact. At one step, the eval line came
    first (dtrain evaluates between steps before the epoch's end)."""
    spe = number(run.config.get("steps_per_epoch"))
    caps = [c for c in (run.summary_value("steps"), number(run.config.get("max_steps"))) if c]
    out, elapsed = [], 0.0
    for e in run.epoch_lines():
        ev = dict(kind="epoch", **{f: number(e.get(f)) for f in FIGURES})
        ep = ev["epoch"]
        if ev["step"] is None:
            ev["step"] = min([ep * spe] + caps) if ep is not None and spe else None
        elapsed += number(e.get("seconds")) or 0.0
        if ev["train_s"] is None:
            ev["train_s"] = elapsed
        ev.update((k, v) for k, v in e.items() if k not in FIGURES and k != "type")
        out.append(ev)
    for e in run.eval_lines():
        ev = dict(kind="eval", **{f: number(e.get(f)) for f in FIGURES})
        ev.update((k, v) for k, v in e.items() if k not in FIGURES and k != "type")
        out.append(ev)
    late = math.inf
    if all(ev["step"] is not None for ev in out):
        key = lambda ev: (ev["step"], ev["kind"] == "epoch")
    else:  # a log without steps_per_epoch (an older dtrain, a hand-written one): by epoch
        key = lambda ev: (late if ev["epoch"] is None else ev["epoch"], ev["kind"] == "epoch",
                          late if ev["step"] is None else ev["step"])
    return sorted(out, key=key)


def f32(x):
    """X as dtrain keeps a target, a 32-bit float (beyond its range: an infinity)."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


class Target:
    """A figure to reach: NAME ("acc=0.75"), FIELDS (the evaluation's figures tried in turn: the
    first that is a number counts), VALUE, and HIGHER (reached at or above VALUE; else at or
    below)."""

    def __init__(self, name, fields, value, higher):
        self.name, self.fields, self.value, self.higher = name, tuple(fields), float(value), higher

    def figure(self, ev):
        return next((v for v in (number(ev.get(f)) for f in self.fields) if v is not None), None)

    def reached(self, ev):
        """Whether evaluation EV is at or beyond the target. Compared as 32-bit floats, as dtrain
        compares --target-acc (src/trainer/target.c), so that both find the same evaluation: a
        logged 0.6 reaches acc=0.6 though the float 0.6 is 0.60000002."""
        fig = self.figure(ev)
        if fig is None:
            return False
        return f32(fig) >= f32(self.value) if self.higher else f32(fig) <= f32(self.value)

    @property
    def label(self):
        """"acc 0.75": the target in a column's name."""
        return self.name.replace("=", " ", 1)

    @property
    def key(self):
        """"acc0.75": the target in a metric's name (time_to_acc0.75_s)."""
        return self.name.replace("=", "", 1)

    def __repr__(self):
        return f"Target({self.name!r})"


def parse_target(text):
    """Target of "acc=0.75" (test accuracy at or above 0.75), "val_acc=0.9", "loss=2.1" (test
    loss at or below 2.1) or "val_loss=2.1" (test_acc= and test_loss= too); ValueError with a
    one-line reason."""
    kind, eq, value = str(text).partition("=")
    kind = kind.strip()
    if not eq or kind not in KINDS:
        raise ValueError(f"'{text}': expected {TARGET_FORMS}")
    try:
        v = float(value)
    except ValueError:
        raise ValueError(f"'{text}': '{value}' is not a number (expected {TARGET_FORMS})") from None
    field, higher = KINDS[kind]
    if higher and not 0 < v <= 1:
        raise ValueError(f"'{text}': an accuracy is a fraction in (0, 1] ({kind}=0.75 for 75%)")
    if not higher and not (0 < v < math.inf):
        raise ValueError(f"'{text}': a loss target is a number > 0")
    return Target(f"{kind}={v:g}", (field,), v, higher)


def first_reaching(evals, target):
    """The first of EVALS (a Run, or evaluations() of one) at or beyond TARGET, or None."""
    if isinstance(evals, Run):
        evals = evaluations(evals)
    return next((ev for ev in evals if target.reached(ev)), None)


def one_run(path):
    """The Run of PATH: a log file or a run folder (its log.jsonl); LogError otherwise."""
    path = os.fspath(path)
    logs = find_logs([path])
    if len(logs) != 1:
        raise LogError(f"{path}: {len(logs)} logs (expected one run: a log file or a run folder)")
    return read_run(logs[0])


def one_target(target, given):
    """The Target of TARGET ("acc=0.75" or a Target) or of the one keyword of GIVEN set."""
    set_ = {k: v for k, v in given.items() if v is not None}
    if (target is not None) + len(set_) != 1:
        raise ValueError(f"time_to_target: one target, as target='acc=0.75' or one of acc=, val_acc=, loss=, "
                         f"val_loss= (got {len(set_) + (target is not None)})")
    if isinstance(target, Target):
        return target
    if target is None:
        (k, v), = set_.items()
        target = f"{k}={v!r}"
    return parse_target(target)


NOT_REACHED = {"time_s": math.nan, "steps": math.nan, "mb": math.nan, "msgs": math.nan, "compute_s": math.nan,
               "epoch": math.nan, "kind": None}


def at(ev):
    """Where a run stood at evaluation EV (None: never reached): NaN for a figure it lacks."""
    if ev is None:
        return dict(reached=False, **NOT_REACHED)
    nan = lambda v: math.nan if v is None else v
    return {"reached": True, "time_s": nan(ev["train_s"]), "steps": nan(ev["step"]), "mb": nan(ev["mb_sent"]),
            "msgs": nan(ev["msgs_sent"]), "compute_s": nan(ev["compute_s"]), "epoch": nan(ev["epoch"]),
            "kind": ev["kind"]}


def time_to_target(log, target=None, *, acc=None, val_acc=None, loss=None, val_loss=None):
    """Where a run stood at its first evaluation at or beyond a target, found in its log:

        dtrain.time_to_target("runs/x/a-seed1", acc=0.75)     # test accuracy >= 0.75
        dtrain.time_to_target("a.jsonl", "val_loss=2.1")      # validation loss <= 2.1

    LOG: a log file or run folder, a dtrain.log.Run, a DataFrame of dtrain.read_log, or a
    DataFrame of dtrain.read_runs. The target: one of acc=, val_acc= (fractions), loss=,
    val_loss=, or TARGET as text.

    Gives {"reached", "time_s" (training seconds, evaluations not counted), "steps" (per rank),
    "mb" and "msgs" (sent by all ranks so far), "compute_s" (the slowest rank's computing: the
    time's compute-only bound), "epoch", "kind" ("eval" or "epoch": which line)}, the figures
    NaN and kind None when no evaluation reached it. For a read_runs frame, a DataFrame on its
    index, a row per run, its columns named as scripts/report --target names them, so that
    runs.join(...) adds them beside the summary's own (steps, time_to_target_s): for acc=0.75
    reached_acc0.75, time_to_acc0.75_s, steps_to_acc0.75, mb_to_acc0.75, msgs_to_acc0.75,
    compute_to_acc0.75_s, epoch_acc0.75, kind_acc0.75."""
    t = one_target(target, {"acc": acc, "val_acc": val_acc, "loss": loss, "val_loss": val_loss})
    if isinstance(log, Run):
        return at(first_reaching(log, t))
    if hasattr(log, "to_dict") and hasattr(log, "columns"):  # a pandas DataFrame
        if "kind" in log.columns and "train_s" in log.columns:
            return at(first_reaching(log.to_dict("records"), t))
        if "path" in log.columns:
            import pandas as pd
            k = t.key
            names = {"reached": f"reached_{k}", "time_s": f"time_to_{k}_s", "steps": f"steps_to_{k}",
                     "mb": f"mb_to_{k}", "msgs": f"msgs_to_{k}", "compute_s": f"compute_to_{k}_s",
                     "epoch": f"epoch_{k}", "kind": f"kind_{k}"}
            return pd.DataFrame([time_to_target(p, t) for p in log["path"]], index=log.index).rename(columns=names)
        raise ValueError("time_to_target: expected a DataFrame of dtrain.read_log (a row per evaluation) or of "
                         "dtrain.read_runs (a row per run)")
    return at(first_reaching(one_run(log), t))
