#!/usr/bin/env bash
# scripts/tuned choose and table on logs written here by hand (figures known in advance): per
# scheme the grid cell with the fewest steps to the validation target is chosen (ties: the
# shorter time), never a cell that did not reach it, diverged or did not finish; the final
# table gives each scheme's mean ± std time to the target over its seeds and the ratio of
# tuned DDP's mean to it.
. "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY=/usr/bin/python3
export DTRAIN TUNE=$T/tune OUT=$T/results

# the grid: NAME-mM-lr=L-seed1/log.jsonl, with steps_to_target (None: not reached) and time
"$PY" - "$TUNE" "$OUT" <<'PYEOF'
import json, os, sys
tune, out = sys.argv[1:3]
def log(path, summary, end="summary"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lines = [{"type": "config", "algo": "x", "seed": 1}, {"type": "epoch", "epoch": 1, "test_acc": 0.9}]
    if end == "summary":
        lines.append(dict({"type": "summary", "ranks": 4}, **summary))
    elif end == "diverged":
        lines.append({"type": "diverged", "epoch": 1})
    with open(path, "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in lines)
grid = {  # scheme: {(m, lr): (steps, seconds) | "diverged" | "running"}
    "allreduce": {("0", "0.05"): (900, 9.0), ("0", "0.1"): (600, 6.5), ("0.9", "0.01"): (None, None),
                  ("0.9", "0.02"): "diverged"},
    "ddp": {("0", "0.1"): (500, 7.0), ("0.9", "0.01"): (500, 6.0), ("0.9", "0.02"): "running"},
    "dpsgd": {("0", "0.1"): (None, None)},
}
for s, cells in grid.items():
    for (m, lr), v in cells.items():
        p = f"{tune}/{s}-m{m}-lr={lr}-seed1/log.jsonl"
        if v == "diverged" or v == "running":
            log(p, {}, end=v)
        else:
            log(p, {"steps_to_target": v[0], "time_to_target_s": v[1]})
# the final runs: allreduce 10, 12, 14 s; ddp 30, 40, 50 s (seeds 1-3); dpsgd never
os.makedirs(out)
for s, times in {"allreduce": [10, 12, 14], "ddp": [30, 40, 50], "dpsgd": [None, None, None]}.items():
    for seed, t in enumerate(times, 1):
        log(f"{out}/tuned-100mbit-{s}-seed{seed}.jsonl",
            {"time_to_target_s": t, "test_acc": 0.981, "mb_to_target": None if t is None else 4.0 * t, "ranks": 4})
PYEOF

out=$("$ROOT/scripts/tuned" choose 2>&1)
check "tuned choose runs" $? "$(echo "$out" | tail -3)"
chosen=$(tail -n +2 "$TUNE/chosen.tsv" | tr '\t' ' ' | tr '\n' ';')
[ "$chosen" = "allreduce 0.1 0 600;ddp 0.01 0.9 500;" ]
check "... allreduce: the fewest steps (lr 0.1, m 0); ddp: of two cells at 500 steps the shorter time; dpsgd (never reached): none" $? "$chosen"
echo "$out" | grep -q '^| allreduce | .*diverged.*| lr 0.1, m 0 |$'
check "... the grid table marks the diverged cell and the choice" $? "$(echo "$out" | grep '^| allreduce')"
echo "$out" | grep -q '^| dpsgd | .*| none |$'
check "... and a scheme with no cell reaching the target chose none" $? "$(echo "$out" | grep '^| dpsgd')"

out=$("$ROOT/scripts/tuned" table 2>&1)
check "tuned table runs" $? "$(echo "$out" | tail -3)"
echo "$out" | grep -q '^| allreduce | lr 0.1, m 0 | 3 | 12.0 ± 2.0 | 98.10 ± 0.00 | 12.00 ± 2.00 | 3.33 | - |$'
check "... allreduce: 12.0 ± 2.0 s, MB per rank 12.00 ± 2.00, tuned DDP's mean 40 s / 12 s = 3.33" $? "$(echo "$out" | grep '^| allreduce')"
echo "$out" | grep -q '^| ddp | lr 0.01, m 0.9 | 3 | 40.0 ± 10.0 | .* | 1.00 | - |$'
check "... ddp against itself: 1.00" $? "$(echo "$out" | grep '^| ddp')"
echo "$out" | grep -q '^| dpsgd | ? | 3 | not reached |'
check "... a scheme that never reached it: not reached" $? "$(echo "$out" | grep '^| dpsgd')"
finish
