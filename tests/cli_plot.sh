#!/usr/bin/env bash
# scripts/plot: the logs of real runs become one SVG line chart, a line per run, with the
# points where the logs put them; bad input gets one line, exit 2 and no file.
. "$(dirname "$0")/lib.sh"
PLOT="$(cd "$(dirname "$0")/.." && pwd)/scripts/plot"
C=(--model mlp --data mnist --train-limit 2000 --test-limit 500 --batch 32 --epochs 3 --seed 2 --no-save --quiet)

"$DTRAIN" train "${C[@]}" --lr 0.1 --log "$T/fast.jsonl"
"$DTRAIN" train "${C[@]}" --lr 0.001 --log "$T/slow.jsonl"
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --lr 0.1 --log "$T/ar.jsonl"

out=$("$PLOT" --out "$T/acc.svg" --title "test & check" "$T/fast.jsonl" "$T/slow.jsonl" "$T/ar.jsonl" 2>&1)
check "plot writes the chart" $? "$out"
# the SVG's content, read back by an XML parser: a line per run, legend, points in order
# (after the SVG: the test accuracies by epoch of the fast and the slow run, as JSON lists)
python3 - "$T/acc.svg" "$(epoch_fields "$T/fast.jsonl" test_acc)" "$(epoch_fields "$T/slow.jsonl" test_acc)" >"$T/verdict" 2>&1 <<'EOF'
import json, sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
runs = root.findall("s:g", ns)
assert len(runs) == 3, f"{len(runs)} runs drawn, expected 3"
names = [g.find("s:title", ns).text for g in runs]
assert names == ["fast", "slow", "ar"], f"runs named {names}"
legend = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "legend"]
assert legend == names, f"legend {legend}"
title = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")][0]
assert title == "test & check", f"title {title!r}"
pts = [[tuple(map(float, p.split(","))) for p in g.find("s:polyline", ns).get("points").split()] for g in runs]
assert all(len(p) == 3 for p in pts), f"points per run {[len(p) for p in pts]}"
assert all(a[0] < b[0] for p in pts for a, b in zip(p, p[1:])), "x does not increase with the epoch"
# a higher accuracy is drawn higher (smaller y); compare the two single-process runs epoch by epoch
acc = [json.loads(a) for a in sys.argv[2:]]
for e in range(3):
    if acc[0][e] != acc[1][e]:
        assert (acc[0][e] > acc[1][e]) == (pts[0][e][1] < pts[1][e][1]), f"epoch {e + 1}: y order wrong"
assert acc[0][2] > acc[1][2], "lr 0.1 should beat lr 0.001 after 3 epochs (the check above would be empty)"
print("3 runs, 3 points each, legend and title, x by epoch, y by accuracy")
EOF
check "the chart has what the logs say" $? "$(cat "$T/verdict")"
out=$("$PLOT" --x mb --logx --y loss --out "$T/mb.svg" "$T/ar.jsonl" 2>&1)
check "--x mb --logx --y loss" $? "$out"
# --x msgs: messages so far, all ranks; allreduce sends the same number every epoch, so the
# three points are evenly spaced along x
out=$("$PLOT" --x msgs --out "$T/msgs.svg" "$T/ar.jsonl" 2>&1) &&
python3 - "$(epoch_fields "$T/ar.jsonl" msgs_sent)" "$T/msgs.svg" >"$T/verdict" 2>&1 <<'EOF'
import json, sys, xml.etree.ElementTree as ET
m = json.loads(sys.argv[1])
assert len(m) == 3 and m[0] > 0 and m[2] == 3 * m[0], f"msgs_sent by epoch {m}"
line = ET.parse(sys.argv[2]).getroot().find(".//{http://www.w3.org/2000/svg}polyline")
xs = [float(p.split(",")[0]) for p in line.get("points").split()]
assert abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 0.2, f"x positions {xs}"
print(f"msgs_sent by epoch {m}, x positions {xs}")
EOF
check "--x msgs: messages so far, evenly spaced for allreduce" $? "$out; $(cat "$T/verdict")"

# bad input: one line on stderr, exit 2, no output file
plot_bad() { "$PLOT" --out "$T/bad.svg" "$@"; }
echo '{"type":"summary","test_acc":0.5}' >"$T/nosteps.jsonl"
printf '{"type":"epoch","epoch":1}\n' >"$T/partial.jsonl"
echo "hello" >"$T/notes.txt"
expect_error "missing log" "$T/none.jsonl: cannot read" -- plot_bad "$T/none.jsonl"
expect_error "not a JSON log" "$T/notes.txt:1: not a JSON line" -- plot_bad "$T/notes.txt"
expect_error "no epoch lines" "nosteps.jsonl: no epoch lines with 'test_acc'" -- plot_bad "$T/nosteps.jsonl"
expect_error "epoch line lacks y" "partial.jsonl:1: epoch line without 'test_acc' or 'epoch'" -- plot_bad "$T/partial.jsonl"
expect_error "unknown --x" "argument --x: invalid choice: 'time'" -- plot_bad --x time "$T/fast.jsonl"
expect_error "--logx with zero" "--logx: every x must be > 0" -- plot_bad --x mb --logx "$T/fast.jsonl"
expect_error "unwritable output" "p.svg: cannot write" -- "$PLOT" --out "$T/no/such/dir/p.svg" "$T/fast.jsonl"

finish
