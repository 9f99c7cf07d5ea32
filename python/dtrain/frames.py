"""dtrain's logs as pandas DataFrames: a row per run (read_runs), a row per evaluation of one
run (read_log). pandas is imported here, when called: dtrain.log and the scripts need none."""
import json
import os
import warnings

from . import log
from .evals import FIGURES, evaluations, one_run

# summary keys that are no single figure: per_rank is a list (dtrain.log.read_run(path).summary
# has it)
NOT_FIGURES = ("type", "per_rank")


def status_of(run):
    """done (a summary), diverged, failed or stopped (as dtrain sweep recorded it in the run
    folder's status.json), else running: no summary and nothing says the run ended (a run
    still going, or one killed with nothing left to say so)."""
    if run.diverged is not None:
        return "diverged"
    if run.summary is not None:
        return "done"
    if os.path.basename(run.path) == "log.jsonl":
        try:
            with open(os.path.join(os.path.dirname(run.path), "status.json")) as f:
                said = json.load(f).get("status")
        except (OSError, ValueError, AttributeError):  # none (not a sweep's run, or running), or unreadable
            said = None
        if said in ("failed", "stopped"):
            return said
        if said == "done":  # ended well by its exit status, yet no summary: its log was cut
            return "failed"
    return "running"


def row_of(run):
    """A run's row: its name, status and log, the last config line flattened (scheme.threshold),
    and the summary's figures that the config does not already give (algo, lr, ... are settings)."""
    row = {"run": run.label, "status": status_of(run), "path": run.path}
    row.update(run.flat_config())
    summary = log.flatten(run.summary) if run.summary else {}
    row.update((k, v) for k, v in summary.items()
               if k not in row and not any(k == n or k.startswith(n + ".") for n in NOT_FIGURES))
    return row


def read_runs(paths):
    """A DataFrame, a row per run of PATHS (a log file, a run folder, a sweep folder, a folder of
    logs, or a list of them): run (its name), status (done, diverged, failed, stopped, running),
    path (its log), the config's settings by dotted key (lr, scheme.threshold, seed, ...;
    simulated: the platform, for a run of dtrain sim) and the summary's figures (test_acc,
    mb_sent, train_s, time_to_target_s, ...; NaN for a run without a summary).

    A log without a config line (an empty one: a run killed before it started) has no settings:
    it is left out with a warning. A file that is not a dtrain log: dtrain.LogError, naming it."""
    import pandas as pd
    paths = [paths] if isinstance(paths, (str, bytes, os.PathLike)) else list(paths)
    runs, left = log.configured(log.read_runs([os.fsdecode(p) for p in paths]))
    for why in left:
        warnings.warn(f"dtrain.read_runs: left out {why}", stacklevel=2)
    rows = [row_of(r) for r in runs]
    return pd.DataFrame(rows, columns=None if rows else ["run", "status", "path"])


def read_log(path):
    """A DataFrame of one run's evaluations (PATH: a log file or a run folder), in the order
    dtrain made them: kind ("eval": an eval line of --eval-every-steps; "epoch": an epoch's end),
    step, epoch, train_s (training seconds so far), test_acc, test_loss, val_acc, val_loss,
    mb_sent and msgs_sent (all ranks, so far), compute_s, eval_s, then the lines' other fields
    (an epoch line's loss, train_acc, lr, seconds, ...). NaN where a line has no such figure.
    An epoch line's step and train_s are worked out (dtrain.evaluations says how).
    df.attrs holds the run's name ("run") and log ("path")."""
    import pandas as pd
    run = one_run(path)
    evs = evaluations(run)
    cols = ["kind"] + list(FIGURES)
    for ev in evs:
        cols.extend(k for k in ev if k not in cols)
    df = pd.DataFrame(evs, columns=cols)
    df[list(FIGURES)] = df[list(FIGURES)].astype(float)  # None: NaN, whatever the other rows hold
    df.attrs.update(run=run.label, path=run.path)
    return df
