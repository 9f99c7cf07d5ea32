#!/usr/bin/env bash
# python/ installs with pip offline: `pip install --no-index ./python` into a fresh virtual
# environment (Debian's python3 -m venv --system-site-packages, which sees python3-pandas)
# builds the wheel with the in-tree backend (python/build_backend: nothing to download, build
# isolation and all) and the installed dtrain, not the checkout's, reads a log written here;
# `pip install -e` points at the checkout instead. The checkout is left as it was (no build/,
# no *.egg-info).
. "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY=/usr/bin/python3
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_INPUT=1
unset PYTHONPATH

printf '%s\n' '{"type":"config","algo":"allreduce","lr":0.1,"seed":7}' \
    '{"type":"eval","step":10,"test_acc":0.5,"train_s":1.5,"mb_sent":4.0,"msgs_sent":8}' \
    '{"type":"eval","step":20,"test_acc":0.8,"train_s":3.25,"mb_sent":8.0,"msgs_sent":16}' \
    '{"type":"summary","test_acc":0.8}' >"$T/run.jsonl"
before=$(git -C "$ROOT" status --porcelain --ignored -- python 2>&1)

"$PY" -m venv --system-site-packages "$T/v" >"$T/venv.log" 2>&1
check "python3 -m venv --system-site-packages (python3-venv)" $? "$(tail -1 "$T/venv.log")"
"$T/v/bin/pip" install --no-index "$ROOT/python" >"$T/pip.log" 2>&1
check "pip install --no-index ./python: offline, with build isolation" $? "$(grep -E 'Successfully|ERROR|error' "$T/pip.log" | tail -2)"
# from another folder, so the checkout cannot be what is imported
out=$(cd "$T" && "$T/v/bin/python" - "$T" <<'PYEOF' 2>&1
import sys
import dtrain
T = sys.argv[1]
assert dtrain.__file__.startswith(T + "/v/"), f"imported {dtrain.__file__}, not the venv's"
r = dtrain.read_runs(T + "/run.jsonl")
assert list(r["run"]) == ["run"] and r.loc[0, "seed"] == 7 and r.loc[0, "status"] == "done", r
t = dtrain.time_to_target(T + "/run.jsonl", acc=0.75)
assert (t["time_s"], t["steps"], t["mb"], t["msgs"]) == (3.25, 20, 8.0, 16), t
print(f"{dtrain.__file__}: read_runs, time_to_target 3.25 s, 20 steps, 8 MB, 16 msgs")
PYEOF
)
check "... the installed package imports and reads a log" $? "$out"
"$T/v/bin/pip" uninstall -y dtrain >/dev/null 2>&1 && "$T/v/bin/pip" install --no-index -e "$ROOT/python" >"$T/pip-e.log" 2>&1
check "pip install -e ./python" $? "$(grep -E 'Successfully|ERROR|error' "$T/pip-e.log" | tail -2)"
out=$(cd "$T" && "$T/v/bin/python" -c 'import dtrain; print(dtrain.__file__)' 2>&1)
[ "$out" = "$ROOT/python/dtrain/__init__.py" ]
check "... imports the checkout's files" $? "$out"
after=$(git -C "$ROOT" status --porcelain --ignored -- python 2>&1)
[ "$before" = "$after" ]
check "the checkout's python/ is left as it was" $? "${after:-clean}"

finish
