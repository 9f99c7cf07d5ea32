#!/usr/bin/env bash
# The README's "Compare schemes on your cluster", its three commands as written there (read
# from the README, so that what it says is what runs): the template copied, made smaller the way
# its user would edit it (4 hosts, fewer examples, one epoch, two seeds), swept, reported and
# plotted: the report has a row per scheme with the time, steps and MB to the target labelled
# simulated, the figure is written, and the runs read back as a DataFrame with the dtrain
# package as scripts/install-deps installs it (python3 -c 'import dtrain' from any folder).
. "$(dirname "$0")/lib.sh"
require_mnist
require_sim
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY=/usr/bin/python3
# the commands: the first sh block after the heading
awk '/^## Compare schemes on your cluster/ { on = 1 } on && /^```sh/ { inblock = 1; next } inblock && /^```/ { exit }
     inblock { print }' "$ROOT/README.md" >"$T/commands"
n=$(wc -l <"$T/commands")
[ "$n" -eq 3 ] && grep -q '^cp experiments/compare.ini my-cluster.ini$' "$T/commands"
check "README: the section's three commands" $? "$n lines: $(tr '\n' '|' <"$T/commands")"
DTRAIN=$(cd "$(dirname "$DTRAIN")" && pwd)/$(basename "$DTRAIN")  # the commands run in $T
cd "$T" || exit 1
# as the README's, from a checkout: ./build/dtrain, scripts/, experiments/ of this one
sed -e "s|^cp experiments/|cp $ROOT/experiments/|" -e "s|\./build/dtrain|$DTRAIN|g" -e "s|scripts/|$ROOT/scripts/|g" \
    "$T/commands" >"$T/commands.sh"
sed -n 1p "$T/commands.sh" | bash
# the user's edit: a smaller cluster and run (the template's figures are docs/results.md's)
$PY - my-cluster.ini <<'PY'
import re, sys
t = open(sys.argv[1]).read()
for k, v in {"n": "4", "epochs": "1", "val": "500", "eval-every-steps": "5", "seeds": "1 2"}.items():
    t, n = re.subn(rf"(?m)^{k} = .*$", f"{k} = {v}", t)
    assert n == 1, k
t = t.replace("[base]\n", "[base]\ntrain-limit = 4596\ntest-limit = 1000\n")
open(sys.argv[1], "w").write(t)
PY
sed -n 2p "$T/commands.sh" | bash >"$T/sweep.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "compare: 6/6 done, 0 failed" "$T/sweep.out"
check "dtrain sweep my-cluster.ini: 6 simulated runs" $? "exit $rc: $(tail -2 "$T/sweep.out" | tr '\n' '|')"
sed -n 3p "$T/commands.sh" | bash >"$T/report.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ -s compare.svg ] && grep -q '^| allreduce |' "$T/report.out" && grep -q '^| fedavg |' "$T/report.out" &&
    grep -q '^| eventgrad |' "$T/report.out" && grep -q 'to acc 0.95 s (simulated)' "$T/report.out" &&
    grep -q 'steps to acc 0.95' "$T/report.out" && grep -q 'MB to acc 0.95' "$T/report.out" &&
    grep -q 'Simulated runs (dtrain sim)' "$T/report.out"
check "report --target acc=0.95 and plot: a row per scheme, the target's figures, simulated, the figure" $? \
    "exit $rc: $(grep '^|' "$T/report.out" | head -3 | tr '\n' '|')"
# as the README's set-up leaves it: `import dtrain` with Debian's python3, no PYTHONPATH
# (scripts/install-deps puts a dtrain.pth naming a checkout's python/ on its path)
out=$(env -u PYTHONPATH $PY -c 'import dtrain; r = dtrain.read_runs("runs/compare"); print(len(r), sorted(set(r["algo"])), sorted(set(r["status"])))' 2>&1)
[ "$out" = "6 ['allreduce', 'eventgrad', 'fedavg'] ['done']" ]
check "the runs as a DataFrame (import dtrain as installed; else: scripts/install-deps)" $? "$out"
finish
