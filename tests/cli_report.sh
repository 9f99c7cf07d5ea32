#!/usr/bin/env bash
# scripts/report on logs written here by hand (figures known in advance): repeats (seeds) of a
# configuration are one row with mean ± std (sample std), the varying settings as columns, the
# runs that did not finish counted; CSV read back; --select val_acc --tune lr chooses on the
# validation mean, not the test mean; --area: the loss-curve area by images seen (trapezoid),
# blank for a diverged run and one whose loss never fell below --loss-below; bad input gets one
# line, exit 2 and no file. scripts/table (report --runs) and scripts/dtrainlog.py's commands.
# scripts/sim-validate's table of errors on logs written here.
# Outputs are readable by their owner under any umask.
. "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REPORT=$ROOT/scripts/report
PY=/usr/bin/python3

# logs: NAME KIND lr seed test_acc val_acc [area steps]. Two configurations (eventgrad at lr 0.1
# and 0.05) x seeds 1-3, each run with its own folder, start time and command (not settings);
# seed 4 of lr 0.1 failed (no summary), seed 4 of lr 0.05 diverged. a1 was resumed: its first
# config line says lr 0.2, the last one (which counts) 0.1, and its epoch 1 was redone.
"$PY" - "$T/sweep" <<'EOF'
import json, os, sys
out = sys.argv[1]
def log(name, lr, seed, acc, val, end="summary", first_lr=None):
    os.makedirs(f"{out}/{name}")
    cfg = {"type": "config", "algo": "eventgrad", "model": "mlp", "ranks": 4, "training_ranks": 4, "batch": 64,
           "lr": lr, "momentum": 0.9, "seed": seed, "scheme": {"threshold": "adaptive", "horizon": 1},
           "started_utc": f"2026-11-25T09:0{seed}:00Z", "run_dir": f"{out}/{name}", "command": ["dtrain", "run", name],
           "commit": "abc" + name}
    lines = []
    if first_lr is not None:
        lines += [dict(cfg, lr=first_lr), {"type": "epoch", "epoch": 1, "test_acc": 0.1, "val_acc": 0.1}]
    lines += [cfg, {"type": "epoch", "epoch": 1, "test_acc": acc, "val_acc": val}]
    if end == "summary":
        lines.append({"type": "summary", "algo": "eventgrad", "ranks": 4, "test_acc": acc, "val_acc": val,
                      "mb_sent": 10.0 * seed, "msgs_pct": 50.0, "wall_s": 100.0 + seed, "exposed_comm_pct": 5.0,
                      "train_s": 80.0 + 4 * seed, "compute_bound_s": 40.0, "compute_util_pct": 50.0})
    elif end == "diverged":
        lines.append({"type": "diverged", "epoch": 1, "step": 3, "rank": 0})
    with open(f"{out}/{name}/log.jsonl", "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in lines)
for s, (acc, val) in enumerate([(0.970, 0.950), (0.975, 0.950), (0.980, 0.950)], 1):
    log(f"a{s}", 0.1, s, acc, val, first_lr=0.2 if s == 1 else None)
for s, (acc, val) in enumerate([(0.960, 0.960), (0.970, 0.960), (0.990, 0.970)], 1):
    log(f"b{s}", 0.05, s, acc, val)
log("a4", 0.1, 4, 0.5, 0.5, end=None)
log("b4", 0.05, 4, 0.5, 0.5, end="diverged")
EOF

out=$("$REPORT" --csv "$T/t.csv" --md "$T/t.md" "$T/sweep" 2>&1)
check "report writes Markdown and CSV" $? "$out"
# by hand: lr 0.1: 97.0, 97.5, 98.0 -> 97.50 ± 0.50; lr 0.05: 96, 97, 99 -> 97.33 ± 1.53
# (deviations -4/3, -1/3, 5/3: (16 + 1 + 25) / 9 / 2 = 7/3, sqrt 1.5275); val 95.00 ± 0.00 and
# 96.33 ± 0.58; wall 102 ± 1 for both; MB 20 ± 10. The columns alike in both rows (seeds, n,
# wall, MB, ...) are said once above the table, not repeated in each row
"$PY" - "$T/t.md" "$T/t.csv" >"$T/verdict" 2>&1 <<'EOF'
import csv, sys
md = open(sys.argv[1]).read().splitlines()
head = md[0]
assert "8 runs, 2 configurations" in head, head
assert "algo=eventgrad" in head and "threshold=adaptive" in head and "momentum=0.9" in head, head
for gone in ("seed=", "started_utc", "run_dir", "command", "commit"):
    assert gone not in head, f"{gone} listed as a setting: {head}"
rows = [[c.strip() for c in l.strip("|").split("|")] for l in md if l.startswith("|")]
h, body = rows[0], rows[2:]
assert h[:4] == ["lr", "not finished", "test acc %", "val acc %"], f"columns {h}"
r = {row[0]: dict(zip(h, row)) for row in body}
assert sorted(r) == ["0.05", "0.1"], f"rows {sorted(r)}"
a, b = r["0.1"], r["0.05"]
assert a["not finished"] == "1 no summary" and b["not finished"] == "1 diverged", (a, b)
assert a["test acc %"] == "97.50 ± 0.50" and b["test acc %"] == "97.33 ± 1.53", (a["test acc %"], b["test acc %"])
assert a["val acc %"] == "95.00 ± 0.00" and b["val acc %"] == "96.33 ± 0.58", (a["val acc %"], b["val acc %"])
alike = [l for l in md if l.startswith("Same in every row: ")]
assert len(alike) == 1 and all(f"{c};" in alike[0] or f"{c}." in alike[0] for c in
                               ("seeds 1,2,3,4", "n 3", "training s 88.0 ± 4.0", "MB sent 20.0 ± 10.0")), alike
assert not {"seeds", "n", "training s", "MB sent"} & set(h), f"columns alike in every row repeated: {h}"
# the training time by default, not the wall's (evaluations are not training)
assert "wall s" not in " ".join(md), "wall s shown by default beside the training seconds"
c = {row["lr"]: row for row in csv.DictReader(open(sys.argv[2]))}
ca = c["0.1"]
got = [float(ca[k]) for k in ("test_acc_mean", "test_acc_std", "test_acc_min", "test_acc_max", "test_acc_n")]
assert all(abs(x - y) < 1e-9 for x, y in zip(got, [97.5, 0.5, 97.0, 98.0, 3])), got
assert abs(float(c["0.05"]["test_acc_std"]) - (7 / 3) ** 0.5) < 1e-9, c["0.05"]["test_acc_std"]
assert ca["n"] == "3" and ca["not_finished"] == "1 no summary", ca
print(f"lr 0.1: {a['test acc %']}, lr 0.05: {b['test acc %']}, n 3 + 1 not finished each; CSV agrees")
EOF
check "seeds grouped: n, mean ± std, varying columns, CSV" $? "$(cat "$T/verdict")"

# one seed: the std is "–"; a file and a run folder name the same runs as the sweep folder (n,
# 1 in both rows, said once)
out=$("$REPORT" "$T/sweep/a2" "$T/sweep/b1/log.jsonl" --metrics test_acc 2>&1)
echo "$out" | grep -q '^| 0.1 | 2 | 97.50 ± – |$' && echo "$out" | grep -q '^| 0.05 | 1 | 96.00 ± – |$' &&
    echo "$out" | grep -qx 'Same in every row: n 1.'
check "one run: std –" $? "$(echo "$out" | tail -2 | tr '\n' ' ')"
# --all: every column, those alike in every row too (the table before they were said once)
out=$("$REPORT" --all "$T/sweep" 2>&1)
echo "$out" | grep -q '^| lr | seeds | n | not finished | test acc % | val acc % | MB sent | messages % | training s |' &&
    echo "$out" | grep -q '^| 0.1 | 1,2,3,4 | 3 | 1 no summary | 97.50 ± 0.50 | 95.00 ± 0.00 | 20.0 ± 10.0 | 50.0 ± 0.0 | 88.0 ± 4.0 |' &&
    ! echo "$out" | grep -q 'Same in every row'
check "--all: every column" $? "$(echo "$out" | grep '^| 0.1 ')"

# --select val_acc --tune lr: lr 0.05 has the better validation mean (96.33 > 95.00) though lr
# 0.1 has the better test mean (97.50 > 97.33): 0.05 is chosen, its test figure reported
out=$("$REPORT" --select val_acc --tune lr --csv "$T/sel.csv" "$T/sweep" 2>&1)
rows=$(echo "$out" | grep -c '^| [0-9]')
echo "$out" | grep -q '^| 0.05 (best of 0.05/0.1) | 1,2,3,4 | 3 | 1 diverged | 97.33 ± 1.53 | 96.33 ± 0.58 |' && [ "$rows" = 1 ] &&
    "$PY" -c 'import csv, sys; r = list(csv.DictReader(open(sys.argv[1]))); assert len(r) == 1 and r[0]["lr"] == "0.05" and r[0]["lr_tried"] == "0.05/0.1", r' "$T/sel.csv"
check "--select val_acc --tune lr: chosen on validation" $? "$(echo "$out" | tail -1)"
out=$("$REPORT" --select test_acc --tune lr "$T/sweep" 2>&1)
echo "$out" | grep -q '^| 0.1 (best of 0.05/0.1) |'
check "--select test_acc would choose the other lr (the check above can fail)" $? "$(echo "$out" | tail -1)"

# --area. allreduce, 2 workers; step lines (images, loss), area by hand (x = images / last images):
#   b32 lr 0.1: (0,2) (50,1) (100,1): 0.5 x 1.5 + 0.5 x 1 = 1.25, min 1
#   b32 lr 0.2: (0,3) (50,2) (100,1.5): 0.5 x 2.5 + 0.5 x 1.75 = 2.125, min 1.5 (not below 1.2: blank)
#   b64 lr 0.1: diverged (blank)
#   b64 lr 0.2: (0,1) (100,0.5) (200,0.5) (400,0.2): .25 x .75 + .25 x .5 + .5 x .35 = 0.4875: the winner
# and 4 workers, b32 lr 0.1: (0,1) (10,1): 1
"$PY" - "$T/area" <<'EOF'
import json, os, sys
def log(name, ranks, batch, lr, pts, diverged=False, acc=0.9):
    os.makedirs(f"{sys.argv[1]}/{name}")
    lines = [{"type": "config", "algo": "allreduce", "ranks": ranks, "training_ranks": ranks, "batch": batch, "lr": lr,
              "seed": 1, "steps_per_epoch": 6000 // batch // ranks,
              # --images: the same images for every run; the epochs and steps it sets follow from
              # the batch and the ranks, and must not split the batch x lr table
              "images": 12000, "max_steps": 12000 // (batch * ranks), "epochs": 2 if batch == 32 else 3}]
    lines += [{"type": "step", "step": 10 * i, "epoch": 1, "images": x, "loss": y, "seconds": i} for i, (x, y) in enumerate(pts)]
    lines.append({"type": "diverged", "epoch": 1} if diverged else {"type": "summary", "test_acc": acc})
    with open(f"{sys.argv[1]}/{name}/log.jsonl", "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in lines)
log("r1", 2, 32, 0.1, [(0, 2), (50, 1), (100, 1)], acc=0.91)
log("r2", 2, 32, 0.2, [(0, 3), (50, 2), (100, 1.5)])
log("r3", 2, 64, 0.1, [(0, 1), (50, 0.1)], diverged=True)
log("r4", 2, 64, 0.2, [(0, 1), (100, 0.5), (200, 0.5), (400, 0.2)], acc=0.955)
log("r5", 4, 32, 0.1, [(0, 1), (10, 1)])
EOF
out=$("$REPORT" --area --loss-below 1.2 --csv "$T/area.csv" --fig "$T/heat.png" "$T/area" 2>&1)
check "report --area writes its tables, CSV and heat map" $? "$(echo "$out" | head -1)"
echo "$out" >"$T/area.md"
"$PY" - "$T/area.md" "$T/area.csv" "$T/heat.png" >"$T/verdict" 2>&1 <<'EOF'
import csv, sys
import matplotlib.image
md = open(sys.argv[1]).read()
two = md.split("## 2 workers, allreduce")[1].split("##")[0]
rows = [[c.strip() for c in l.strip().strip("|").split("|")] for l in two.splitlines() if l.startswith("|")]
assert rows[0] == ["batch \\ lr", "0.1", "0.2"], rows[0]
assert rows[2] == ["32", "1.2500", ""] and rows[3] == ["64", "", "0.4875"], rows[2:]
assert "## 4 workers, allreduce" in md, "no table for 4 workers"
win = [l for l in md.split("## Winners")[1].splitlines() if l.startswith("| 2 ")]
assert win == ["| 2 | allreduce | 64 | 0.2 | 0.4875 | 95.50 |"], win
runs = {r["run"]: r for r in csv.DictReader(open(sys.argv[2]))}
assert runs["r1"]["area"] == "1.250000" and runs["r4"]["area"] == "0.487500", (runs["r1"]["area"], runs["r4"]["area"])
assert runs["r2"]["area"] == "" and "never below 1.2" in runs["r2"]["blank_because"], runs["r2"]
assert runs["r3"]["area"] == "" and runs["r3"]["blank_because"] == "diverged", runs["r3"]
img = matplotlib.image.imread(sys.argv[3])
assert img.shape[0] > 200 and img.shape[1] > 200 and img[:, :, :3].std() > 0.01, f"heat map {img.shape}"
print("b32: 1.2500 and blank (min 1.5), b64: blank (diverged) and 0.4875, winner b64 lr 0.2; heat map drawn")
EOF
check "area: hand-computed cells, blanks, winner" $? "$(cat "$T/verdict")"
out=$("$REPORT" --area --csv "$T/area2.csv" "$T/area" 2>&1) &&
    "$PY" -c 'import csv, sys; r = {x["run"]: x["area"] for x in csv.DictReader(open(sys.argv[1]))}; assert r["r2"] == "2.125000", r' "$T/area2.csv"
check "without --loss-below the flat run counts (2.125)" $? "$(echo "$out" | grep '^| 32')"

# --target-loss: a language model's runs (eval lines by step): the training seconds and MB at
# the first evaluation with a validation loss at or below it, MB per rank; a run that never
# reaches it counted as "(k of n)"
"$PY" - "$T/lm" <<'EOF'
import json, os, sys
out = sys.argv[1]
# seed -> [(step, val_loss, train_s, mb_sent)]
evals = {1: [(50, 2.5, 10.0, 100.0), (100, 1.9, 20.0, 200.0), (150, 1.7, 30.0, 300.0)],
         2: [(50, 2.4, 11.0, 100.0), (100, 1.8, 22.0, 200.0), (150, 1.6, 33.0, 300.0)],
         3: [(50, 2.6, 12.0, 100.0), (100, 2.1, 24.0, 200.0), (150, 1.9, 36.0, 300.0)]}
for seed, ev in evals.items():
    os.makedirs(f"{out}/s{seed}")
    lines = [{"type": "config", "algo": "allreduce", "model": "gpt-tiny", "ranks": 4, "lr": 4e-3, "seed": seed}]
    lines += [{"type": "eval", "step": s, "val_loss": v, "test_loss": v + 0.01, "train_s": t, "mb_sent": mb}
              for s, v, t, mb in ev]
    lines.append({"type": "summary", "algo": "allreduce", "ranks": 4, "test_acc": 0.5, "val_loss": ev[-1][1],
                  "mb_sent": ev[-1][3]})
    with open(f"{out}/s{seed}/log.jsonl", "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in lines)
EOF
out=$("$REPORT" "$T/lm" --target-loss 1.8 --metrics val_loss,mb_per_rank,time_to_loss_s,mb_to_loss 2>&1)
echo "$out" | grep -q '| 1,2,3 | 3 | 1.733 ± 0.153 | 75.0 ± 0.0 | 26.0 ± 5.7 (2 of 3) | 250.0 ± 70.7 (2 of 3) |$'
check "--target-loss 1.8: seconds 30 and 22, MB 300 and 200, one run short; MB per rank 300/4" $? "$out"
expect_error "time_to_loss_s without --target-loss" "--metrics time_to_loss_s: needs --target-loss X" -- \
    "$REPORT" "$T/lm" --metrics time_to_loss_s
out=$("$REPORT" "$T/lm" --target-loss 1.8 --select time_to_loss_s --tune lr 2>&1)
echo "$out" | grep -q '| 0.004 (best of 0.004) | 1,2,3 | 3 | .*| 26.0 ± 5.7 (2 of 3) |'
check "--select time_to_loss_s --tune lr: chosen by the time to the loss" $? "$out"

# --target KIND=X on the same runs (test loss = validation loss + 0.01). val_loss=1.805: seed 1
# at step 150 (1.7; 30 s, 300 MB), seed 2 at step 100 (1.8; 22 s, 200 MB), seed 3 never (1.9):
# 26.0 ± 5.7 s, 125 ± 35 steps, 250.0 ± 70.7 MB. loss=1.805 (the test loss): seed 2's 1.81 at
# step 100 is above it, so seed 2 at step 150 (1.61; 33 s): 31.5 ± 2.1 s, 150 ± 0 steps
out=$("$REPORT" "$T/lm" --target val_loss=1.805 --target loss=1.805 --metrics time_to_val_loss1.805_s,steps_to_val_loss1.805,mb_to_val_loss1.805,time_to_loss1.805_s,steps_to_loss1.805 2>&1)
echo "$out" | grep -q '| 1,2,3 | 3 | 26.0 ± 5.7 (2 of 3) | 125 ± 35 (2 of 3) | 250.0 ± 70.7 (2 of 3) | 31.5 ± 2.1 (2 of 3) | 150 ± 0 (2 of 3) |$' &&
    echo "$out" | grep -q '| to val_loss 1.805 s | steps to val_loss 1.805 | MB to val_loss 1.805 | to loss 1.805 s |' &&
    echo "$out" | grep -q 'validation loss at or below 1.805, found in the logs, so as fine as their evaluations as the logs have them'
check "--target val_loss= and loss=: the validation or the test loss, first at or below" $? "$out"
# --target-loss on runs without --val (their eval lines' val_loss is null): the test loss counts
# (seconds 10 and 11 at step 50, where the test loss is 2.0 and 1.9; the third never below 2.0)
"$PY" - "$T/noval" <<'EOF'
import json, os, sys
for seed, (loss, t) in enumerate([(2.0, 10.0), (1.9, 11.0), (2.5, 12.0)], 1):
    os.makedirs(f"{sys.argv[1]}/s{seed}")
    lines = [{"type": "config", "algo": "allreduce", "model": "gpt-tiny", "lr": 4e-3, "seed": seed, "eval_every_steps": 50,
              "eval_every": 1},
             {"type": "eval", "step": 50, "test_loss": loss, "val_loss": None, "train_s": t, "mb_sent": 100.0},
             {"type": "summary", "test_acc": 0.5}]
    with open(f"{sys.argv[1]}/s{seed}/log.jsonl", "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in lines)
EOF
out=$("$REPORT" "$T/noval" --target-loss 2.0 --metrics time_to_loss_s 2>&1)
echo "$out" | grep -q '| 1,2,3 | 3 | 10.5 ± 0.7 (2 of 3) |$' && echo "$out" | grep -q 'evaluations every 50 steps and at every epoch.s end'
check "--target-loss without --val: the test loss (val_loss null), the resolution said" $? "$out"
# the physical limit: the compute-only bound and utilisation as the summaries give them, and
# the training time over its bound (lr 0.1: 84/40, 88/40, 92/40 -> 2.20 ± 0.10)
out=$("$REPORT" --all "$T/sweep" 2>&1)
echo "$out" | grep -q '| compute bound s | compute util % | × bound |' &&
    echo "$out" | grep -q '^| 0.1 | 1,2,3,4 | 3 | 1 no summary | .* | 40.0 ± 0.0 | 50.0 ± 0.0 | 2.20 ± 0.10 |$'
check "report: compute bound, utilisation and the time over its bound" $? "$out"

# schemes side by side: each scheme's flags (the config's scheme.*) said once per scheme, not a
# column each with "-" in the other schemes' rows; a flag that varies within a scheme (eventgrad's
# horizon) stays a column, blank in the rows of schemes without it. Runs of dtrain sim (their
# config line's "simulated": the platform): their times labelled simulated, the platform said
"$PY" - "$T/mix" "$T/simr" <<'EOF'
import json, os, sys
def log(folder, name, algo, scheme, acc, sim=None, lr=0.1):
    os.makedirs(f"{folder}/{name}")
    cfg = {"type": "config", "algo": algo, "lr": lr, "seed": 1, "scheme": dict({"compress": "none"}, **scheme)}
    if sim:
        cfg["simulated"] = sim
    with open(f"{folder}/{name}/log.jsonl", "w") as f:
        for l in [cfg, {"type": "summary", "test_acc": acc, "wall_s": 10.0 * lr, "time_to_target_s": 5.0 * lr}]:
            f.write(json.dumps(l) + "\n")
mix, simr = sys.argv[1:]
log(mix, "eg1", "eventgrad", {"threshold": "adaptive", "horizon": 1}, 0.90)
log(mix, "eg2", "eventgrad", {"threshold": "adaptive", "horizon": 2}, 0.91)
log(mix, "ar", "allreduce", {"bucket-kb": 32}, 0.95)
log(mix, "fa", "fedavg", {"local-steps": 8}, 0.93)
for lr in (0.1, 0.2):
    log(simr, f"lr{lr}", "allreduce", {}, 0.9, sim="cluster: 4 hosts, 1 Gbit/s links (50 us)", lr=lr)
EOF
out=$("$REPORT" --metrics test_acc "$T/mix" 2>&1)
echo "$out" | grep -qx 'Scheme flags: allreduce: bucket-kb=32; eventgrad: threshold=adaptive; fedavg: local-steps=8.' &&
    echo "$out" | grep -qx '| algo | scheme.horizon | test acc % |' && echo "$out" | grep -qx '| allreduce |  | 95.00 ± – |' &&
    echo "$out" | grep -qx '| eventgrad | 2 | 91.00 ± – |'
check "schemes side by side: their flags said once, a blank for another scheme's flag" $? "$out"
out=$("$REPORT" --all --metrics test_acc "$T/mix" 2>&1)
echo "$out" | grep -q '^| algo | scheme.bucket-kb | scheme.threshold | scheme.horizon | scheme.local-steps | seeds | n |' &&
    echo "$out" | grep -qx '| fedavg |  |  |  | 8 | 1 | 1 | 93.00 ± – |'
check "... --all: a column per flag, blank where a scheme has none" $? "$(echo "$out" | tail -3)"
out=$("$REPORT" "$T/simr" 2>&1)
echo "$out" | grep -q '^| lr | to target s (simulated) | wall s (simulated) |$' &&
    echo "$out" | grep -qx 'Simulated runs (dtrain sim): their times are simulated seconds, on cluster: 4 hosts, 1 Gbit/s links (50 us).' &&
    ! echo "$out" | grep -q 'simulated=' && echo "$out" | grep -qx '| 0.2 | 1.00 ± – | 2.00 ± – |' &&
    echo "$out" | grep -qx '| 0.1 | 0.500 ± – | 1.00 ± – |'
check "simulated runs: their times labelled simulated, the platform said once" $? "$out"
cp -r "$T/mix/ar" "$T/simr/real"  # allreduce with its bucket-kb (the others' config has none: blank)
out=$("$REPORT" --metrics wall_s "$T/simr" 2>&1)
echo "$out" | grep -q "the rows with 'no' there are measured" && echo "$out" | grep -qx '| lr | simulated | scheme.bucket-kb | wall s |' &&
    echo "$out" | grep -qx '| 0.1 | no | 32 | 1.00 ± – |' && echo "$out" | grep -qx '| 0.1 | cluster: 4 hosts, 1 Gbit/s links (50 us) |  | 1.00 ± – |'
check "... beside a measured run: which rows are simulated" $? "$out"
# scripts/table: a row per log, today's columns; scripts/dtrainlog.py for shell scripts
out=$("$ROOT/scripts/table" "$T/sweep/a1/log.jsonl" "$T/sweep/a4/log.jsonl" "$T/sweep/b4/log.jsonl" 2>&1)
echo "$out" | grep -q '^| a1 | eventgrad | 4 | 97.00 | 50.0 | 10.0 | 84.0 | 5.0 | 50.0 | - | - |$' &&
    echo "$out" | grep -q '^| a4 | (no summary: failed or running) |' && echo "$out" | grep -q '^| b4 | (diverged) |'
check "scripts/table: a row per log" $? "$(echo "$out" | sed -n 3p)"
d=$("$ROOT/scripts/dtrainlog.py" summary "$T/sweep/a2/log.jsonl" wall_s)
"$ROOT/scripts/dtrainlog.py" done "$T/sweep/a2/log.jsonl" && ! "$ROOT/scripts/dtrainlog.py" done "$T/sweep/a4/log.jsonl" &&
    [ "$d" = 102.0 ] && [ "$("$ROOT/scripts/dtrainlog.py" epoch "$T/sweep/a1/log.jsonl" test_acc 1)" = 0.97 ]
check "dtrainlog.py done/summary/epoch (the last epoch 1 of a resumed log)" $? "wall_s $d"

# bad input: one line, exit 2, no file
printf '{"type":"config","lr":0.1}\n{"type":"epoch","epoch":1}\nnot json\n{"type":"summary"}\n' >"$T/bad.jsonl"
mkdir "$T/empty"
expect_error "a line that is not JSON" "$T/bad.jsonl:3: not a JSON line" -- "$REPORT" --csv "$T/o.csv" "$T/bad.jsonl"
expect_error "missing log" "$T/none.jsonl: cannot read" -- "$REPORT" --md "$T/o.md" "$T/none.jsonl"
expect_error "empty folder" "$T/empty: a folder without log.jsonl" -- "$REPORT" "$T/empty"
expect_error "--tune without --select" "--select and --tune go together" -- "$REPORT" --tune lr "$T/sweep"
expect_error "--tune unknown key" "--tune lrr: no run has a setting 'lrr'" -- "$REPORT" --select val_acc --tune lrr "$T/sweep"
expect_error "--fig not an image" "--fig $T/heat.txt: expected a file name ending in .pdf, .png or .svg" -- \
    "$REPORT" --area --fig "$T/heat.txt" "$T/area"
expect_error "unwritable CSV" "t.csv: cannot write" -- "$REPORT" --csv "$T/no/dir/t.csv" "$T/sweep"
# any JSON at all: one line naming the file and line, exit 2, no traceback. Nested 100,000 deep
# (Python's parser would recurse past its limit), a deep line after a good one, bytes that are
# not UTF-8, a lone surrogate escape (no text can hold it), a FIFO in a log's place (an open()
# would wait for a writer for ever)
mkdir "$T/any"
"$PY" -c 'print("[" * 100000 + "]" * 100000)' >"$T/any/deep.jsonl"
{ echo '{"type":"config","lr":0.1}'; "$PY" -c 'print("{\"a\":" * 5000 + "1" + "}" * 5000)'; } >"$T/any/deep2.jsonl"
printf '{"type":"config","lr":0.1}\n{"type":"summary","algo":"\xff"}\n' >"$T/any/latin.jsonl"
printf '{"type":"config","algo":"\\ud800x","lr":0.1}\n{"type":"summary","test_acc":0.5}\n' >"$T/any/surrogate.jsonl"
mkfifo "$T/any/fifo.jsonl"
expect_error "a line nested 100,000 deep" "deep.jsonl:1: nested deeper than 32 levels" -- "$REPORT" "$T/any/deep.jsonl"
expect_error "an object nested 5,000 deep, line 2" "deep2.jsonl:2: nested deeper than 32" -- "$REPORT" "$T/any/deep2.jsonl"
expect_error "bytes that are not UTF-8" "latin.jsonl:2: not UTF-8 text" -- "$REPORT" "$T/any/latin.jsonl"
expect_error "a lone surrogate escape" "surrogate.jsonl:1: a string with a lone" -- "$REPORT" "$T/any/surrogate.jsonl"
expect_error "a FIFO in place of a log (no hang)" "fifo.jsonl: not a regular file" -- timeout 20 "$REPORT" "$T/any/fifo.jsonl"
expect_error "dtrainlog.py done on the deep line" "deep.jsonl:1: nested deeper" -- "$ROOT/scripts/dtrainlog.py" done "$T/any/deep.jsonl"
# figures no run measures (an integer beyond any float, +-1e300 whose std overflows): left out
# like a null, the row still drawn
mkdir -p "$T/huge/h1" "$T/huge/h2"
"$PY" - "$T/huge" <<'EOF2'
import sys
for i, (acc, wall) in enumerate([("1" + "0" * 400, "1e300"), ("0.9", "-1e300")], 1):
    with open(f"{sys.argv[1]}/h{i}/log.jsonl", "w") as f:
        f.write('{"type":"config","algo":"allreduce","lr":0.1,"seed":%d}\n' % i)
        f.write('{"type":"summary","test_acc":%s,"wall_s":%s}\n' % (acc, wall))
EOF2
out=$("$REPORT" --metrics test_acc,wall_s "$T/huge" 2>&1)
echo "$out" | grep -qF '| 1,2 | 2 | 90.00 ± – (1 of 2) | – |'
check "figures beyond any measurement are left out, not a traceback" $? "$(echo "$out" | tail -1)"
# a log without a config line is no run: an empty one (a run killed before it started) or one
# of other lines only is left out with one warning naming it; the others are reported; only
# such logs: one line, exit 2
mkdir -p "$T/holes/dead" "$T/holes/cfgless"
cp -r "$T/sweep/a1" "$T/holes/a1"
: >"$T/holes/dead/log.jsonl"
echo '{"type":"summary","test_acc":0.5}' >"$T/holes/cfgless/log.jsonl"
"$REPORT" "$T/holes" >"$T/holes.out" 2>"$T/holes.err"; rc=$?
[ "$rc" = 0 ] && grep -q '^1 runs, 1 configurations' "$T/holes.out" && [ "$(wc -l <"$T/holes.err")" = 2 ] &&
    grep -q "warning: left out $T/holes/dead/log.jsonl: empty" "$T/holes.err" &&
    grep -q "warning: left out $T/holes/cfgless/log.jsonl: no config line" "$T/holes.err"
check "an empty or config-less log is no run: left out with a warning each" $? \
    "exit $rc, $(head -1 "$T/holes.out"); $(tr '\n' ' ' <"$T/holes.err")"
out=$("$ROOT/scripts/table" "$T/holes" 2>/dev/null)
[ "$(echo "$out" | grep -c '^| ')" = 2 ] && echo "$out" | grep -q '^| a1 |'  # the header and a1
check "... scripts/table too: a row for the run only" $? "$(echo "$out" | tail -1)"
expect_error "only an empty log" "no runs: $T/holes/dead/log.jsonl: empty" -- "$REPORT" "$T/holes/dead"
# --md into a pipe (as into /dev/null or a terminal): written through it, the pipe left a pipe
# (a rename over it would have replaced it with a file; as root, /dev/null too)
mkfifo "$T/pipe"
timeout 20 cat "$T/pipe" >"$T/piped.md" & # bounded: a pipe replaced by a file has no writer
reader=$!
"$REPORT" --md "$T/pipe" "$T/sweep" >"$T/pipe.out" 2>&1; rc=$?
wait "$reader"
[ "$rc" -eq 0 ] && [ -p "$T/pipe" ] && grep -q "8 runs, 2 configurations" "$T/piped.md"
check "--md into a named pipe: the table goes through, the pipe stays a pipe" $? "rc $rc; $(head -c 200 "$T/pipe.out")"

# --budgets: hand-made curves (epoch lines with cumulative MB): X reaches 90% at 10 MB and 95%
# at 100 MB, Y 80% at 5 MB and 97% at 300 MB; two seeds each. Within 50 MB: X (mean of 90 and
# 92 = 91.00 ± 1.41) beats Y (80, 82); within 8 MB only Y has an evaluation in both seeds (X's
# seed 2 starts at 9 MB: blank, not a mean of one); within 500 MB Y (97, 98) leads X (95, 95)
"$PY" - "$T/budget" <<'EOF2'
import json, os, sys
out = sys.argv[1]
def log(name, algo, seed, curve):
    os.makedirs(f"{out}/{name}")
    lines = [{"type": "config", "algo": algo, "model": "mlp", "ranks": 4, "lr": 0.1, "seed": seed}]
    lines += [{"type": "epoch", "epoch": i + 1, "mb_sent": mb, "test_acc": acc} for i, (mb, acc) in enumerate(curve)]
    lines.append({"type": "summary", "algo": algo, "test_acc": curve[-1][1], "mb_sent": curve[-1][0], "other_mb_sent": 2.0})
    with open(f"{out}/{name}/log.jsonl", "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in lines)
log("x1", "fedavg", 1, [(5, 0.50), (10, 0.90), (100, 0.95)])
log("x2", "fedavg", 2, [(9, 0.60), (12, 0.92), (100, 0.95)])
log("y1", "dpsgd", 1, [(5, 0.80), (300, 0.97)])
log("y2", "dpsgd", 2, [(6, 0.82), (300, 0.98)])
EOF2
out=$("$REPORT" --budgets 8,50,500 --csv "$T/b.csv" "$T/budget" 2>&1)
check "report --budgets runs" $? "$out"
"$PY" - "$T/b.csv" "$out" >"$T/verdict" 2>&1 <<'EOF2'
import csv, sys
rows = {r["configuration"]: r for r in csv.DictReader(open(sys.argv[1]))}
x, y = rows["fedavg"], rows["dpsgd"]
assert x["acc_le_8mb_mean"] == "" and abs(float(y["acc_le_8mb_mean"]) - 81.0) < 1e-9, (x, y)
assert abs(float(x["acc_le_50mb_mean"]) - 91.0) < 1e-9 and abs(float(x["acc_le_50mb_std"]) - 2 ** 0.5) < 1e-4, x
assert abs(float(y["acc_le_50mb_mean"]) - 81.0) < 1e-9, y
assert abs(float(y["acc_le_500mb_mean"]) - 97.5) < 1e-9 and abs(float(x["acc_le_500mb_mean"]) - 95.0) < 1e-9, (x, y)
md = sys.argv[2]
for want in ("- ≤ 8 MB: dpsgd", "- ≤ 50 MB: fedavg", "- ≤ 500 MB: dpsgd", "**91.00 ± 1.41**"):
    assert want in md, f"'{want}' not in {md}"
print("8 MB: dpsgd 81 (fedavg blank), 50 MB: fedavg 91.00 ± 1.41, 500 MB: dpsgd 97.5")
EOF2
check "--budgets: the last evaluation within each budget, blank unless every seed has one, winners" $? "$(cat "$T/verdict")"
expect_error "--budgets bad value" "--budgets 10,-1: expected MB values > 0" -- "$REPORT" --budgets 10,-1 "$T/budget"
expect_error "--budgets with --area" "--budgets: a table of its own" -- "$REPORT" --budgets 10 --area "$T/budget"

# outputs' modes: 0666 less the umask, the owner's read and write always kept: under umask 777
# a table and a figure are 0600, not 000 (before: 000, a file its owner could not open), under
# 022 0644; no temporary left either way
mkdir -p "$T/modes"
for mask in 022 077 777; do
    out=$(umask $mask && "$REPORT" --csv "$T/modes/t$mask.csv" --md "$T/modes/t$mask.md" "$T/sweep" 2>&1 &&
          "$REPORT" --area --loss-below 1.2 --fig "$T/modes/h$mask.png" "$T/area" 2>&1)
    check "umask $mask: report writes its table and figure" $? "$out"
    want=0600; [ $mask = 022 ] && want=0644
    modes=$(stat -c '%a' "$T/modes/t$mask.csv" "$T/modes/t$mask.md" "$T/modes/h$mask.png" | sort -u | tr '\n' ' ')
    [ "$modes" = "${want#0} " ]; check "... each of mode $want" $? "$modes"
done
left=$(ls -A "$T/modes" | grep tmp); [ -z "$left" ]; check "... no temporary left" $? "$left"

# scripts/sim-validate's table (docs/simulation.md, "Validation") on logs written here: the
# error of each simulation from the real run, per step and to the target, for both speeds;
# its settings checked before anything is made
SV=$ROOT/scripts/sim-validate
mkdir -p "$T/sv"
summary() { # FILE STEPS TRAIN_S TIME_TO_TARGET
    printf '{"type":"config"}\n{"type":"summary","steps":%s,"train_s":%s,"time_to_target_s":%s}\n' "$2" "$3" "$4" >"$1"
}
summary "$T/sv/real-100mbit-allreduce-s1.jsonl" 100 10.0 5.0
summary "$T/sv/real-100mbit-allreduce-s2.jsonl" 100 12.0 7.0
summary "$T/sv/sim-100mbit-allreduce-s1.jsonl" 100 11.0 5.5
summary "$T/sv/sim-100mbit-allreduce-s2.jsonl" 100 13.2 7.7
summary "$T/sv/simown-100mbit-allreduce-s1.jsonl" 100 9.0 4.0
summary "$T/sv/simown-100mbit-allreduce-s2.jsonl" 100 13.0 8.0
out=$(OUT=$T/sv RATES=100mbit SCHEMES="allreduce fedavg" SEEDS="1 2" "$SV" table 2>&1)
grep -qF '| 100mbit | allreduce | 110.00 ± 14.14 | 121.00 ± 15.56 | +10% | 6.00 ± 1.41 | 6.60 ± 1.56 | +10% |' <<<"$out"
check "sim-validate table: the simulation 10% behind, per step and to the target" $? "$out"
grep -qF '| 100mbit | allreduce | 110.00 ± 14.14 | 110.00 ± 28.28 | +0% | 6.00 ± 1.41 | 6.00 ± 2.83 | +0% |' <<<"$out"
check "... and at the runs' own speed, 0%" $? "$out"
[ "$(grep -c '| 100mbit | fedavg | missing |' <<<"$out")" = 2 ]; check "... a scheme not run is said missing, in both tables" $? "$out"
grep -qF 'largest |error|, per step and to 97%: 10%; 2 of 2 within 10%' <<<"$out"
check "... the largest error" $? "$out"
expect_error "sim-validate: MODEL resnet" "MODEL is cnn1 or gpt-small, not 'resnet'" -- env MODEL=resnet OUT="$T/sv2" "$SV" table
expect_error "sim-validate: HOSTS 1" "HOSTS is a number of hosts, 2 or more, not '1'" -- env HOSTS=1 OUT="$T/sv2" "$SV" table

finish
