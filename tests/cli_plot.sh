#!/usr/bin/env bash
# scripts/plot: the logs of real runs become one line chart (matplotlib), a line per run with
# the points where the logs put them, in the format of --out's extension (SVG, PDF, PNG, each
# read back); repeats become a mean line with a ± std band; 20 lines never share colour, marker
# and dash; a log without the axis's figures (downpour's null MB) is left out with a warning;
# bad input gets one line, exit 2 and no file.
. "$(dirname "$0")/lib.sh"
PLOT="$(cd "$(dirname "$0")/.." && pwd)/scripts/plot"
PY=/usr/bin/python3 # Debian's, with python3-matplotlib (scripts/install-deps)
C=(--model mlp --data mnist --train-limit 2000 --test-limit 500 --batch 32 --epochs 3 --seed 2 --no-save --quiet)

"$DTRAIN" train "${C[@]}" --lr 0.1 --log "$T/fast.jsonl"
"$DTRAIN" train "${C[@]}" --lr 0.001 --log "$T/slow.jsonl"
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --lr 0.1 --log "$T/ar.jsonl"
RUNS=("$T/fast.jsonl" "$T/slow.jsonl" "$T/ar.jsonl")

# by time, each run's points are where its log puts them: an epoch at its line's train_s
# (evaluations not counted), an evaluation between steps at its own, and the run's end at the
# summary's train_s with the final model's accuracy (issue 47: every run seemed to end at ~2 s
# when the epoch lines counted the ranks' wait for rank 0's evaluations)
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --lr 0.1 --eval-every-steps 20 --log "$T/evals.jsonl"
"$PY" - "$PLOT" "$T/evals.jsonl" <<'EOF' >"$T/verdict" 2>&1
import importlib.machinery, importlib.util, json, sys
spec = importlib.util.spec_from_loader("plot", importlib.machinery.SourceFileLoader("plot", sys.argv[1]))
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)
import dtrain.log
run = dtrain.log.read_runs(dtrain.log.find_logs([sys.argv[2]]))[0]
lines = [json.loads(l) for l in open(sys.argv[2])]
epochs = [l for l in lines if l["type"] == "epoch"]
evals = [l for l in lines if l["type"] == "eval"]
summary = lines[-1]
pts = plot.points(run, "seconds", "test_acc", True)
want = sorted([e["train_s"] for e in epochs] + [e["train_s"] for e in evals] + [summary["train_s"]])
got = [p[1] for p in pts]
assert len(evals) >= 3 and got == want, (got, want)
assert pts[-1][1] == summary["train_s"] and abs(pts[-1][2] - 100 * summary["test_acc"]) < 1e-9, pts[-1]
assert summary["train_s"] < summary["wall_s"], summary
print(f"{len(pts)} points, the last at the summary's {summary['train_s']} s (wall {summary['wall_s']} s)")
EOF
check "--x seconds: epochs, evaluations and the run's end at their training seconds" $? "$(tail -3 "$T/verdict")"

# svg_lines SVG: the lines of a chart scripts/plot drew, as JSON: per line (g id="line-N", in
# order) its points in SVG coordinates (y grows downwards), its stroke colour and dashes and
# its marker's shape; the legend's texts (id="legend-N"), the title, the x tick labels and
# whether line N has a band (id="band-N") and the band's outline
svg_lines() {
    "$PY" - "$1" <<'EOF'
import json, re, sys, xml.etree.ElementTree as ET
S, X = "{http://www.w3.org/2000/svg}", "{http://www.w3.org/1999/xlink}"
root = ET.parse(sys.argv[1]).getroot()
groups = {g.get("id"): g for g in root.iter(S + "g") if g.get("id")}
shapes = {p.get("id"): p.get("d") for p in root.iter(S + "path") if p.get("id")}
lines = []
for i in range(1000):
    g = groups.get(f"line-{i}")
    if g is None:
        break
    path = g.find(S + "path")
    nums = [float(v) for v in re.findall(r"-?[0-9.]+", path.get("d"))]
    style = dict(kv.split(":", 1) for kv in path.get("style").replace(" ", "").split(";") if ":" in kv)
    use = next(g.iter(S + "use"), None)
    band, bpts = groups.get(f"band-{i}"), []
    if band is not None:  # its outline: a path, or a path defined once and placed by a <use>
        u = next(band.iter(S + "use"), None)
        d = shapes.get(u.get(X + "href")[1:]) if u is not None else next(band.iter(S + "path")).get("d")
        dx, dy = (float(u.get("x", 0)), float(u.get("y", 0))) if u is not None else (0.0, 0.0)
        b = [float(v) for v in re.findall(r"-?[0-9.]+", d)]
        bpts = [(x + dx, y + dy) for x, y in zip(b[0::2], b[1::2])]
    lines.append({"pts": list(zip(nums[0::2], nums[1::2])), "colour": style.get("stroke"),
                  "dash": style.get("stroke-dasharray", "solid"),
                  "marker": shapes.get((use.get(X + "href") or "#")[1:]) if use is not None else None,
                  "band": band is not None, "band_pts": bpts})
text = lambda gid: "".join(groups[gid].itertext()).strip() if gid in groups else None
legend = [text(f"legend-{i}") for i in range(len(lines) + 5) if f"legend-{i}" in groups]
xticks = [t for k, g in groups.items() if k.startswith("xtick_") for t in g.itertext() if t.strip()]
print(json.dumps({"lines": lines, "legend": legend, "title": text("title"), "xticks": xticks}))
EOF
}

out=$("$PLOT" --out "$T/acc.svg" --title "test & check" "${RUNS[@]}" 2>&1)
check "plot writes the chart" $? "$out"
# a line per run, named by the settings that differ (algo, ranks, lr), points in order; after
# the chart: the test accuracies by epoch of the fast and the slow run, as JSON lists
"$PY" - "$(svg_lines "$T/acc.svg")" "$(epoch_fields "$T/fast.jsonl" test_acc)" "$(epoch_fields "$T/slow.jsonl" test_acc)" \
    >"$T/verdict" 2>&1 <<'EOF'
import json, sys
svg = json.loads(sys.argv[1])
pts = [ln["pts"] for ln in svg["lines"]]
assert len(pts) == 3, f"{len(pts)} lines drawn, expected 3"
want = ["local, ranks=1, lr=0.1", "local, ranks=1, lr=0.001", "allreduce, ranks=2, lr=0.1"]
assert svg["legend"] == want, f"legend {svg['legend']}"
assert svg["title"] == "test & check", f"title {svg['title']!r}"
assert all(len(p) == 3 for p in pts), f"points per line {[len(p) for p in pts]}"
assert all(a[0] < b[0] for p in pts for a, b in zip(p, p[1:])), "x does not increase with the epoch"
# a higher accuracy is drawn higher (smaller y); compare the two single-process runs epoch by epoch
acc = [json.loads(a) for a in sys.argv[2:]]
for e in range(3):
    if acc[0][e] != acc[1][e]:
        assert (acc[0][e] > acc[1][e]) == (pts[0][e][1] < pts[1][e][1]), f"epoch {e + 1}: y order wrong"
assert acc[0][2] > acc[1][2], "lr 0.1 should beat lr 0.001 after 3 epochs (the check above would be empty)"
# whole epochs on the x axis: no tick at 1.5
assert svg["xticks"] and all(t.isdigit() for t in svg["xticks"]), f"x ticks {svg['xticks']}"
assert not any(ln["band"] for ln in svg["lines"]), "a band, but no run has repeats"
print(f"3 lines of 3 points, legend {want}, title, x ticks {svg['xticks']}")
EOF
check "the chart has what the logs say" $? "$(cat "$T/verdict")"
out=$("$PLOT" --out "$T/named.svg" --label A --label "B b" --label C "${RUNS[@]}" 2>&1) &&
    "$PY" -c 'import json, sys; l = json.loads(sys.argv[1])["legend"]; assert l == ["A", "B b", "C"], l' "$(svg_lines "$T/named.svg")"
check "--label names the lines" $? "$out"

# the format follows the extension: PDF (one page) and PNG (read back: size, not blank)
out=$("$PLOT" --out "$T/acc.pdf" "${RUNS[@]}" 2>&1) && out+=$("$PLOT" --out "$T/acc.png" "${RUNS[@]}" 2>&1)
check "plot writes PDF and PNG" $? "$out"
"$PY" - "$T/acc.pdf" "$T/acc.png" >"$T/verdict" 2>&1 <<'EOF'
import re, sys
import matplotlib.image
pdf = open(sys.argv[1], "rb").read()
assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF"), "not a PDF file"
pages = len(re.findall(rb"/Type\s*/Page\b(?!s)", pdf))  # page objects (not the /Pages tree)
assert pages == 1, f"{pages} pages"
assert open(sys.argv[2], "rb").read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG file"
img = matplotlib.image.imread(sys.argv[2])
h, w = img.shape[:2]
assert w >= 600 and h >= 400, f"{w}x{h} pixels"
colours = {tuple(px) for px in img[::7, ::7, :3].reshape(-1, 3).tolist()}
assert len(colours) > 10, f"{len(colours)} colours: blank"
print(f"PDF of {len(pdf)} bytes, 1 page; PNG {w}x{h}, {len(colours)} colours")
EOF
check "PDF and PNG read back" $? "$(cat "$T/verdict")"

out=$("$PLOT" --x mb --logx --y loss --out "$T/mb.svg" "$T/ar.jsonl" 2>&1) &&
    "$PY" - "$(svg_lines "$T/mb.svg")" >"$T/verdict" 2>&1 <<'EOF'
import json, math, sys
t = json.loads(sys.argv[1])["xticks"]
v = [float(x) for x in t]
assert v and all(round(x / 10 ** math.floor(math.log10(x)), 6) in (1, 2, 5) for x in v), f"x ticks {t}"
print(f"1-2-5 ticks on the log axis: {t}")
EOF
check "--x mb --logx --y loss" $? "$out; $(cat "$T/verdict")"
# --x msgs: messages so far, all ranks; allreduce sends the same number every epoch, so the
# three points are evenly spaced along x
out=$("$PLOT" --x msgs --out "$T/msgs.svg" "$T/ar.jsonl" 2>&1) &&
"$PY" - "$(epoch_fields "$T/ar.jsonl" msgs_sent)" "$(svg_lines "$T/msgs.svg")" >"$T/verdict" 2>&1 <<'EOF'
import json, sys
m = json.loads(sys.argv[1])
assert len(m) == 3 and m[0] > 0 and m[2] == 3 * m[0], f"msgs_sent by epoch {m}"
xs = [x for x, _ in json.loads(sys.argv[2])["lines"][0]["pts"]]
assert abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 0.2, f"x positions {xs}"
print(f"msgs_sent by epoch {m}, x positions {xs}")
EOF
check "--x msgs: messages so far, evenly spaced for allreduce" $? "$out; $(cat "$T/verdict")"

# a log with null traffic figures (the fast run's, as a downpour run's epoch lines had them
# before its server reported its traffic): --x mb leaves it out with one warning and draws
# the others
"$PY" - "$T/fast.jsonl" "$T/nullmb.jsonl" <<'EOF'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r["type"] == "epoch":
            r.update(mb_sent=None, msgs_sent=None, msgs_pct=None)
        out.write(json.dumps(r) + "\n")
EOF
"$PLOT" --x mb --out "$T/null.svg" "$T/ar.jsonl" "$T/nullmb.jsonl" "$T/slow.jsonl" >"$T/out" 2>"$T/err"
rc=$?
nl=$("$PY" -c 'import json, sys; print(len(json.loads(sys.argv[1])["lines"]))' "$(svg_lines "$T/null.svg" 2>/dev/null)" 2>/dev/null)
[ "$rc" -eq 0 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "warning: left out $T/nullmb.jsonl: .*null" "$T/err" && [ "$nl" = 2 ]
check "null MB: left out with one warning, the other two drawn" $? "exit $rc, $nl lines, stderr: $(cat "$T/err")"

# repeats: three seeds of one setting (the fast run's log with the seed and the accuracy by
# epoch set: 50 + 10 x epoch %, plus 0, 1 and 5 points) are one mean line with a ± std band; a
# fourth log of another lr holds the hand-computed mean (+2 points) and must coincide with it.
# The std of 0, 1, 5 (n - 1) is sqrt(7) = 2.6458 points; 10 points apart are epochs 1 and 2.
for s in 1 2 3 ref; do
    "$PY" - "$T/fast.jsonl" "$T/seed$s.jsonl" "$s" <<'EOF'
import json, sys
s = sys.argv[3]
add = {"1": 0, "2": 1, "3": 5, "ref": 2}[s]
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r["type"] == "config":
            r["seed"], r["lr"] = (1, 0.5) if s == "ref" else (int(s), 0.1)
        if r["type"] == "epoch":
            r["test_acc"] = (50 + 10 * r["epoch"] + add) / 100
        out.write(json.dumps(r) + "\n")
EOF
done
out=$("$PLOT" --out "$T/bands.svg" "$T/seed"{1,2,3,ref}.jsonl 2>&1) &&
"$PY" - "$(svg_lines "$T/bands.svg")" >"$T/verdict" 2>&1 <<'EOF'
import json, math, sys
svg = json.loads(sys.argv[1])
ls = svg["lines"]
assert len(ls) == 2 and ls[0]["band"] and not ls[1]["band"], f"{len(ls)} lines, bands {[l['band'] for l in ls]}"
assert svg["legend"] == ["lr=0.1 (n=3)", "lr=0.5"], f"legend {svg['legend']}"
mean, ref = ls[0]["pts"], ls[1]["pts"]
assert len(mean) == 3 and all(abs(a[0] - b[0]) < 0.01 and abs(a[1] - b[1]) < 0.01 for a, b in zip(mean, ref)), \
    f"mean line {mean}, hand-computed means {ref}"
px = (ref[0][1] - ref[1][1]) / 10  # SVG units per accuracy point
x0 = mean[0][0]
edge = [y for x, y in ls[0]["band_pts"] if abs(x - x0) < 0.01]
half = [(max(edge) - mean[0][1]) / px, (mean[0][1] - min(edge)) / px]
assert all(abs(h - math.sqrt(7)) < 0.02 for h in half), f"band at epoch 1: -{half[0]:.4f} +{half[1]:.4f} points"
print(f"mean line on the hand-computed means, band ± {half[0]:.3f} points (sqrt 7 = 2.646), legend {svg['legend']}")
EOF
check "three seeds: a mean line and a ± std band" $? "$out; $(cat "$T/verdict")"
out=$("$PLOT" --no-bands --out "$T/nob.svg" "$T/seed"{1,2,3}.jsonl 2>&1) &&
    "$PY" -c 'import json, sys; l = json.loads(sys.argv[1])["legend"]; assert l == ["seed=1", "seed=2", "seed=3"], l' \
        "$(svg_lines "$T/nob.svg")"
check "--no-bands: a line per seed" $? "$out"

# 20 lines (the fast run's log at 20 learning rates): no two share colour, marker and dash, and
# two of one colour differ in marker
for i in $(seq 1 20); do
    "$PY" -c 'import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r["type"] == "config":
            r["lr"] = int(sys.argv[3]) / 100
        out.write(json.dumps(r) + "\n")' "$T/fast.jsonl" "$T/lr$i.jsonl" "$i"
done
out=$("$PLOT" --out "$T/twenty.svg" "$T"/lr{1..20}.jsonl 2>&1) &&
"$PY" - "$(svg_lines "$T/twenty.svg")" >"$T/verdict" 2>&1 <<'EOF'
import json, sys
ls = json.loads(sys.argv[1])["lines"]
triples = [(l["colour"], l["dash"], l["marker"]) for l in ls]
assert len(ls) == 20 and all(l["marker"] for l in ls), f"{len(ls)} lines"
assert len(set(triples)) == 20, f"{len(set(triples))} distinct styles"
same = [(a, b) for i, a in enumerate(triples) for b in triples[i + 1:] if a[0] == b[0] and a[2] == b[2]]
assert not same, f"same colour and marker: {same[:2]}"
print(f"20 lines, {len({t[0] for t in triples})} colours, {len({t[2] for t in triples})} markers, "
      f"{len({t[1] for t in triples})} dashes, no triple twice")
EOF
check "20 lines: 20 styles" $? "$out; $(cat "$T/verdict")"

# runs of dtrain sim (their config line's "simulated": the platform): the time axis says
# simulated seconds and the platform; beside a measured run, how many of the runs; an axis that
# is no time (epochs) says nothing of it
"$PY" - "$T/fast.jsonl" "$T/sim1.jsonl" "$T/sim2.jsonl" <<'EOF'
import json, sys
for i, path in enumerate(sys.argv[2:], 1):
    with open(path, "w") as out:
        for line in open(sys.argv[1]):
            r = json.loads(line)
            if r["type"] == "config":
                r.update(simulated="cluster: 4 hosts, 100 Mbit/s links (50 us)", seed=i)
            out.write(json.dumps(r) + "\n")
EOF
xlabel() { "$PY" - "$1" <<'EOF'
import sys, xml.etree.ElementTree as ET
S = "{http://www.w3.org/2000/svg}"
g = next(g for g in ET.parse(sys.argv[1]).getroot().iter(S + "g") if g.get("id") == "xlabel-0")
print(" / ".join(t.strip() for t in g.itertext() if t.strip()))
EOF
}
out=$("$PLOT" --x seconds --out "$T/sim.svg" "$T/sim1.jsonl" "$T/sim2.jsonl" 2>&1) &&
    l1=$(xlabel "$T/sim.svg") && [ "$l1" = "simulated training time (s) / cluster: 4 hosts, 100 Mbit/s links (50 us)" ] &&
    "$PLOT" --x seconds --out "$T/mixed.svg" "$T/sim1.jsonl" "$T/fast.jsonl" >/dev/null 2>&1 &&
    l2=$(xlabel "$T/mixed.svg") && [ "$l2" = "training time (s): simulated for 1 of 2 runs" ] &&
    "$PLOT" --out "$T/simep.svg" "$T/sim1.jsonl" >/dev/null 2>&1 && l3=$(xlabel "$T/simep.svg") && [ "$l3" = epoch ]
check "simulated runs: the time axis says simulated seconds, and the platform" $? "$out; '${l1-}', '${l2-}', '${l3-}'"

# bad input: one line on stderr, exit 2, no output file
plot_bad() { "$PLOT" --out "$T/bad.svg" "$@"; }
echo '{"type":"summary","test_acc":0.5}' >"$T/nosteps.jsonl"
printf '{"type":"epoch","epoch":1}\n' >"$T/partial.jsonl"
echo "hello" >"$T/notes.txt"
# the physical limit: --x compute puts each epoch at the computing so far (below the training
# time); --bound draws each line's compute-only curve beside it
"$PLOT" --x seconds --bound --out "$T/bound.svg" "$T/ar.jsonl" >/dev/null 2>&1 &&
    grep -q 'id="bound-0"' "$T/bound.svg" && grep -q 'compute-only bound (dotted)' "$T/bound.svg"
check "--bound: the compute-only line beside the run's" $? "$(grep -c 'id="bound-' "$T/bound.svg" 2>/dev/null) bound lines"
out=$(log_query "$T/ar.jsonl" 'all(0 < e["compute_s"] <= one("summary")["train_s"] for e in of("epoch"))' 2>&1)
[ "$out" = true ] && "$PLOT" --x compute --out "$T/compute.svg" "$T/ar.jsonl" >/dev/null 2>&1
check "--x compute: the epoch lines' computing so far, below the training time" $? "$out"
expect_error "--bound with --x mb" "--bound: with --x seconds" -- plot_bad --bound --x mb "$T/ar.jsonl"
expect_error "missing log" "$T/none.jsonl: cannot read" -- plot_bad "$T/none.jsonl"
expect_error "not a JSON log" "$T/notes.txt:1: not a JSON line" -- plot_bad "$T/notes.txt"
expect_error "no epoch lines" "nosteps.jsonl: no epoch lines with 'test_acc'" -- plot_bad "$T/nosteps.jsonl"
expect_error "epoch line lacks y" "partial.jsonl: epoch line 1 without 'test_acc' or 'epoch'" -- plot_bad "$T/partial.jsonl"
expect_error "only a null-MB log" "nullmb.jsonl: 'mb_sent' null in every epoch line" -- plot_bad --x mb "$T/nullmb.jsonl"
expect_error "unknown --x" "argument --x: invalid choice: 'time'" -- plot_bad --x time "$T/fast.jsonl"
expect_error "--logx with zero" "--logx: every x must be > 0" -- plot_bad --x mb --logx "$T/fast.jsonl"
expect_error "--out fig.txt" "--out $T/fig.txt: expected a file name ending in .pdf, .png or .svg" -- \
    "$PLOT" --out "$T/fig.txt" "$T/fast.jsonl"
expect_error "--label count" "--label: 1 given for 3 lines" -- plot_bad --label A "${RUNS[@]}"
expect_error "unwritable output" "p.svg: cannot write" -- "$PLOT" --out "$T/no/such/dir/p.svg" "$T/fast.jsonl"
# under umask 777 the figure is 0600, not 000 (before: a file its owner could not open)
out=$(umask 777 && "$PLOT" --out "$T/masked.svg" "$T/fast.jsonl" 2>&1)
check "umask 777: the figure written" $? "$out"
m=$(stat -c %a "$T/masked.svg"); [ "$m" = 600 ]; check "... mode 0600, readable by its owner" $? "mode $m"
left=$(ls -A "$T" | grep '\.tmp\.'); [ -z "$left" ]; check "... no temporary left" $? "$left"
rm -f "$T/masked.svg"
# any JSON at all: one line naming the file and line, exit 2, no traceback (a line nested
# 100,000 deep, beside a good log; a FIFO in a log's place, which an open() would wait on)
"$PY" -c 'print("[" * 100000 + "]" * 100000)' >"$T/deep.jsonl"
mkfifo "$T/fifo.jsonl"
expect_error "a line nested 100,000 deep" "deep.jsonl:1: nested deeper than 32 levels" -- plot_bad "$T/fast.jsonl" "$T/deep.jsonl"
expect_error "a FIFO in place of a log (no hang)" "fifo.jsonl: not a regular file" -- timeout 20 "$PLOT" --out "$T/bad.svg" "$T/fifo.jsonl"
# figures no run measures (two seeds' epoch 2 at +-1e300: their std would overflow) are left out
# like a null, and an epoch numbered [3] (any JSON) still pairs the seeds' points by time: the
# mean line has the other two epochs
for s in 1 2; do
    "$PY" - "$T/fast.jsonl" "$T/huge$s.jsonl" "$s" <<'EOF'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r["type"] == "config":
            r["seed"] = int(sys.argv[3])
        if r["type"] == "epoch" and r["epoch"] == 2:
            r["test_acc"] = 1e300 if sys.argv[3] == "1" else -1e300
        if r["type"] == "epoch" and r["epoch"] == 3:
            r["epoch"] = [3]
        out.write(json.dumps(r) + "\n")
EOF
done
"$PLOT" --x seconds --out "$T/huge.svg" "$T/huge1.jsonl" "$T/huge2.jsonl" >"$T/out" 2>"$T/err"; rc=$?
n=$("$PY" -c 'import json, sys; print(len(json.loads(sys.argv[1])["lines"][0]["pts"]))' "$(svg_lines "$T/huge.svg" 2>/dev/null)" 2>/dev/null)
[ "$rc" = 0 ] && [ "$n" = 3 ]  # epochs 1 and 3, and the runs' end (their summaries)
check "figures beyond any measurement are left out, not a traceback" $? "exit $rc, $n points; $(head -c 300 "$T/err")"

finish
