"""dtrain's logs from Python. dtrain.log is the reader (Run objects, no pandas): scripts/report,
scripts/plot and the other scripts read logs through it."""
from .log import LogError, Run  # noqa: F401

__version__ = "0.9.0"  # dtrain's (CMakeLists.txt's project VERSION): the logs it reads are that dtrain's
