"""dtrain's logs as pandas DataFrames, and targets found in them after the fact.

    import dtrain
    runs = dtrain.read_runs("runs/sweep")            # a row per run: settings, summary, status
    runs.groupby(["algo", "lr"])["test_acc"].agg(["mean", "std"])
    ev = dtrain.read_log("runs/sweep/a-seed1")       # a row per evaluation of one run
    dtrain.time_to_target("runs/sweep/a-seed1", acc=0.75)   # time, steps, MB, messages to 75%

The reader itself (Run objects, no pandas) is dtrain.log; scripts/report and scripts/plot use it.
pandas is imported by read_runs and read_log only, so the scripts need nothing but Python.
"""
from .log import LogError, Run  # noqa: F401
from .evals import Target, evaluations, first_reaching, parse_target, time_to_target  # noqa: F401
from .frames import read_log, read_runs  # noqa: F401

__version__ = "0.9.0"  # dtrain's (CMakeLists.txt's project VERSION): the logs it reads are that dtrain's
