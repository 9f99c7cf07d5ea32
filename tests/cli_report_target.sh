#!/usr/bin/env bash
# Targets after the fact on real runs: two runs of one seed, one plain and one with
# --target-acc 0.75 (which stops at the first evaluation that reaches it). scripts/report
# --target acc=0.75 on the plain run finds what dtrain itself found in the other: the same step,
# MB and messages (its summary's steps_to_target, mb_to_target, msgs_to_target), and the training
# seconds of the plain run's own evaluation at that step; on the --target-acc run, its summary's
# time_to_target_s. The note says how often the runs evaluated (the figures' resolution).
# scripts/plot --target puts a star on the line at that evaluation's point and says where in the
# legend; a target never reached says so and draws no star. On a simulated cluster (dtrain sim)
# the same, and the report's times and the plot's time axis say simulated, on what platform.
. "$(dirname "$0")/lib.sh"
require_mnist
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REPORT=$ROOT/scripts/report
PLOT=$ROOT/scripts/plot
PY=/usr/bin/python3
# 93 steps an epoch (6000 / (32 x 2)); an evaluation every 5 steps, so 0.75 (reached after ~30
# steps) is found at an eval line, long before the epoch's end
C=(-n 2 --algo allreduce --model mlp --data mnist --train-limit 6000 --test-limit 1000 --batch 32 --lr 0.05 --epochs 1
   --eval-every-steps 5 --seed 4 --no-save)
mkdir -p "$T/sweep/plain" "$T/sweep/target"
run "${C[@]}" --log "$T/sweep/plain/log.jsonl"
check "a plain run" $? ""
run "${C[@]}" --target-acc 0.75 --log "$T/sweep/target/log.jsonl"
check "the same run with --target-acc 0.75" $? ""
P=$T/sweep/plain/log.jsonl TG=$T/sweep/target/log.jsonl
steps=$(summary_field "$TG" steps_to_target) mb=$(summary_field "$TG" mb_to_target) msgs=$(summary_field "$TG" msgs_to_target)
tt=$(summary_field "$TG" time_to_target_s)
compare "... it stopped at the target, before the epoch's end" "$steps" '<' 93 "steps_to_target $steps"
# the plain run's evaluation at that step (by its step, not its accuracy): its seconds are the answer
at=$(log_query "$P" '[e["train_s"] for e in of("eval") if e["step"] == int(a[0])]' "$steps")
[[ "$at" =~ ^\[[0-9.]+\]$ ]]
check "the plain run has an eval line at step $steps" $? "train_s $at"
at=${at//[\[\]]/}

out=$("$REPORT" --target acc=0.75 --csv "$T/plain.csv" "$T/sweep/plain" 2>&1)
check "report --target acc=0.75 on the plain run" $? "$(echo "$out" | head -2 | tail -1)"
echo "$out" | grep -q "as fine as their evaluations every 5 steps and at every epoch's end"
check "... the note gives the resolution: every 5 steps and every epoch's end" $? "$(echo "$out" | sed -n 2p)"
"$PY" - "$T/plain.csv" "$steps" "$mb" "$msgs" "$at" >"$T/verdict" 2>&1 <<'EOF'
import csv, sys
row, = csv.DictReader(open(sys.argv[1]))
want = {"steps_to_acc0.75_mean": sys.argv[2], "mb_to_acc0.75_mean": sys.argv[3], "msgs_to_acc0.75_mean": sys.argv[4],
        "time_to_acc0.75_s_mean": sys.argv[5]}
got = {k: row[k] for k in want}
assert all(float(got[k]) == float(v) for k, v in want.items()), f"report {got}, expected {want}"
print(f"steps {got['steps_to_acc0.75_mean']}, MB {got['mb_to_acc0.75_mean']}, msgs {got['msgs_to_acc0.75_mean']} "
      f"(the --target-acc run's summary), {got['time_to_acc0.75_s_mean']} s (the plain run's eval line)")
EOF
check "... steps, MB and messages as --target-acc's; its time the plain run's evaluation's" $? "$(cat "$T/verdict")"
out=$("$REPORT" --target acc=0.75 --csv "$T/target.csv" "$T/sweep/target" 2>&1) &&
    "$PY" - "$T/target.csv" "$tt" "$steps" >"$T/verdict" 2>&1 <<'EOF'
import csv, sys
row, = csv.DictReader(open(sys.argv[1]))
t, want = float(row["time_to_acc0.75_s_mean"]), float(sys.argv[2])
# the time to the target is the evaluation's train_s, the one its eval line gives
assert t == want and float(row["steps_to_acc0.75_mean"]) == float(sys.argv[3]), (row, sys.argv[2:])
print(f"{t} s, time_to_target_s {want}")
EOF
check "... and on the --target-acc run, its own time_to_target_s" $? "$(cat "$T/verdict")"
# a target above every evaluation: "–" and (0 of 1), not a figure
out=$("$REPORT" --target acc=0.999 --metrics test_acc,time_to_acc0.999_s,mb_to_acc0.999 "$T/sweep/plain" 2>&1)
echo "$out" | grep -q '^| .* | – | – |$'
check "report --target acc=0.999 (never reached): –" $? "$(echo "$out" | tail -1)"

# plot --target on the plain run by MB sent: the star is at the line's own point of that
# evaluation (its x among the points the line has: the eval lines and the epoch line, by MB)
svg_points() {
    "$PY" - "$1" <<'EOF'
import json, re, sys, xml.etree.ElementTree as ET
S, X = "{http://www.w3.org/2000/svg}", "{http://www.w3.org/1999/xlink}"
groups = {g.get("id"): g for g in ET.parse(sys.argv[1]).getroot().iter(S + "g") if g.get("id")}
nums = [float(v) for v in re.findall(r"-?[0-9.]+", groups["line-0"].find(S + "path").get("d"))]
star = groups.get("target-0")
use = next(star.iter(S + "use")) if star is not None else None
legend = ["".join(g.itertext()).strip() for k, g in groups.items() if k.startswith("legend-")]
print(json.dumps({"line": list(zip(nums[0::2], nums[1::2])), "star": [float(use.get("x")), float(use.get("y"))] if use is not None else None,
                  "legend": legend, "level": any(k.startswith("target-level") for k in groups)}))
EOF
}
out=$("$PLOT" --x mb --evals --target acc=0.75 --out "$T/t.svg" "$P" 2>&1) &&
"$PY" - "$(svg_points "$T/t.svg")" "$(log_query "$P" 'sorted([e["mb_sent"] for e in of("eval")] + [e["mb_sent"] for e in of("epoch")])')" "$mb" \
    >"$T/verdict" 2>&1 <<'EOF'
import json, sys
svg, xs, mb = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
i = xs.index(mb)  # the evaluation's point among the line's, by MB
px, py = svg["line"][i]
assert svg["star"] and abs(svg["star"][0] - px) < 0.01 and abs(svg["star"][1] - py) < 0.01, \
    f"star at {svg['star']}, the evaluation's point ({mb} MB) at {(px, py)}"
assert svg["legend"] == [f"plain; acc 0.75 at {mb:.3g} MB"], svg["legend"]
assert svg["level"], "no level line at 75% (--y test_acc is the target's figure)"
print(f"star on point {i} ({mb} MB), legend {svg['legend']}")
EOF
check "plot --target acc=0.75: a star on the line at that evaluation, where in the legend" $? "$out; $(cat "$T/verdict")"
out=$("$PLOT" --x seconds --y loss --target acc=0.999 --out "$T/n.svg" "$P" 2>&1) &&
"$PY" - "$(svg_points "$T/n.svg")" >"$T/verdict" 2>&1 <<'EOF'
import json, sys
svg = json.loads(sys.argv[1])
assert svg["star"] is None and svg["legend"] == ["plain; acc 0.999 not reached"] and not svg["level"], svg
print(f"no star, legend {svg['legend']}, no level line on a loss axis")
EOF
check "plot --target never reached: said, no star" $? "$out; $(cat "$T/verdict")"

# bad input: one line, exit 2, no file
expect_error "report --target without a kind" "--target 'fast': expected acc=X, val_acc=X, loss=X or val_loss=X" -- \
    "$REPORT" --target fast "$T/sweep"
expect_error "report --target acc=75 (a percentage)" "--target 'acc=75': an accuracy is a fraction in (0, 1]" -- \
    "$REPORT" --target acc=75 "$T/sweep"
expect_error "report --target with --runs" "--target: columns of the table of configurations, not of --area" -- \
    "$REPORT" --runs --target acc=0.5 "$T/sweep"
expect_error "plot --target loss=-1" "--target 'loss=-1': a loss target is a number > 0" -- \
    "$PLOT" --target loss=-1 --out "$T/bad.svg" "$P"
expect_error "plot --target with --x images" "--target: evaluations have no images-seen figure" -- \
    "$PLOT" --x images --y loss --target acc=0.5 --out "$T/bad.svg" "$P"

# the same on a simulated cluster (dtrain sim, computing modelled: the times are simulated, and
# the same in every run of these flags). The config line says "simulated" (the platform): the
# report labels its times simulated and names the platform, the plot its time axis
require_sim
S=(-n 4 --platform campus-100m --algo allreduce --model mlp --data mnist --train-limit 2048 --test-limit 500 --batch 32
   --lr 0.05 --epochs 2 --eval-every-steps 4 --compute modelled --speed 29Gf --seed 1 --no-save --quiet)
mkdir -p "$T/sim/plain" "$T/sim/target"
"$DTRAIN" sim "${S[@]}" --log "$T/sim/plain/log.jsonl" && "$DTRAIN" sim "${S[@]}" --target-acc 0.75 --log "$T/sim/target/log.jsonl"
check "dtrain sim, plain and with --target-acc 0.75" $? ""
SP=$T/sim/plain/log.jsonl ST=$T/sim/target/log.jsonl
platform=$(log_query "$SP" 'one("config")["simulated"]')
out=$("$REPORT" --target acc=0.75 --csv "$T/sim.csv" "$T/sim" 2>&1) &&
"$PY" - "$T/sim.csv" "$out" "$platform" "$(log_query "$ST" 'one("summary")')" \
    "$(log_query "$SP" '{e["step"]: e["train_s"] for e in of("eval")}')" >"$T/verdict" 2>&1 <<'EOF'
import csv, json, sys
rows = {r["target_acc"]: r for r in csv.DictReader(open(sys.argv[1]))}
md, platform, summ, plain_t = sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5])
p = rows["0"]  # the plain run's row (its --target-acc: 0)
steps = summ["steps_to_target"]
assert float(p["steps_to_acc0.75_mean"]) == steps and float(p["mb_to_acc0.75_mean"]) == summ["mb_to_target"] and \
    float(p["msgs_to_acc0.75_mean"]) == summ["msgs_to_target"], (p, summ)
assert float(p["time_to_acc0.75_s_mean"]) == plain_t[str(steps)], (p["time_to_acc0.75_s_mean"], plain_t)
# the --target-acc run agrees on the target within each evaluation (its broadcast is not
# training's time): with modelled compute the two runs trained the same simulated seconds
assert float(p["time_to_acc0.75_s_mean"]) == summ["time_to_target_s"], (p, summ)
assert f"Simulated runs (dtrain sim): their times are simulated seconds, on {platform}." in md, md
assert "| to target s (simulated) |" in md and "to acc 0.75 s (simulated) " in md, md  # a column, or alike in both rows
print(f"step {steps}, {p['mb_to_acc0.75_mean']} MB, {p['time_to_acc0.75_s_mean']} simulated s "
      f"(--target-acc's: {summ['time_to_target_s']}); on {platform}")
EOF
check "sim: report --target as --target-acc; times labelled simulated, the platform named" $? "$(cat "$T/verdict")"
out=$("$PLOT" --x seconds --evals --target acc=0.75 --out "$T/sim.svg" "$SP" 2>&1) &&
"$PY" - "$T/sim.svg" "$platform" >"$T/verdict" 2>&1 <<'EOF'
import sys, xml.etree.ElementTree as ET
S = "{http://www.w3.org/2000/svg}"
g = next(g for g in ET.parse(sys.argv[1]).getroot().iter(S + "g") if g.get("id") == "xlabel-0")
label = " ".join(t.strip() for t in g.itertext() if t.strip())
assert label == "simulated training time (s) " + sys.argv[2], label
print(label)
EOF
check "sim: plot's time axis: simulated seconds, on the platform" $? "$out; $(cat "$T/verdict")"

finish
