#!/usr/bin/python3
"""The log reader under its old name: the code is python/dtrain/log.py (the dtrain package);
this shim keeps `import dtrainlog` (scripts/runs-lib.sh, tuned, experiments: Python run from
bash with scripts/ on the path) and the shell commands of bench/ and the tests working:

    scripts/dtrainlog.py done LOG           exit 0 if LOG has a summary (1 if not, 2 on error)
    scripts/dtrainlog.py summary LOG KEY    the summary's KEY (null when absent)
    scripts/dtrainlog.py epoch LOG KEY [N]  KEY of epoch N (default: the first epoch)
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
# this checkout's package, before any installed one: the scripts and the reader move together
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from dtrain.log import *  # noqa: E402,F401,F403
from dtrain.log import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
