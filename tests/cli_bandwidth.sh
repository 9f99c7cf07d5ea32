#!/usr/bin/env bash
# The physical limit and the bandwidth what-if (scripts/bandwidth, docs/reports.md): on logs
# made here by hand, the 90%-utilisation rate interpolated in log rate and the closed form
# computed by hand; in simulation, a sum of the parameters after the backward pass (allreduce
# --bucket-kb 0) and fedavg's sum every 4 steps compute 90% of the time at the link rate the
# closed form gives (SimGrid's flow model and the formula agree on one switch), and the closed
# form can fail (at a third of that rate they do not); bad input is one line.
. "$(dirname "$0")/lib.sh"
require_mnist
BW="$(cd "$(dirname "$0")/.." && pwd)/scripts/bandwidth"
PY=/usr/bin/python3

# 1. logs by hand: allreduce after the backward pass on 16 hosts at 0.1, 1 and 10 Gbit/s, 5 us,
# utilisation 50, 80, 95% -> 90% between 1 and 10 Gbit/s on 100/u - 1 = k/W + m through them
# (0.25 = k/1e9 + m, 1/19 = k/1e10 + m: k = 2.193e8, m = 0.0307; 1/9 = k/W + m) at 2.73 Gbit/s;
# the closed form with cnn1's 38,390 parameters (153,560 bytes), 6.7 ms a step (0.67 s of
# computing in 100 steps): 2 x 8 x 153560 x 15/16 / (0.94 x (6.7 ms / 9 - 2 x 4 x 2 x 5 us)) =
# 3.69 Gbit/s (ratio 0.74)
"$PY" - "$T/hand" <<'EOF'
import json, os, sys
out = sys.argv[1]
for rate, util in ((1e8, 50.0), (1e9, 80.0), (1e10, 95.0)):
    d = f"{out}/ar-{rate:g}"
    os.makedirs(d)
    cfg = {"type": "config", "algo": "allreduce", "model": "cnn1", "ranks": 16, "training_ranks": 16, "seed": 1,
           "simulated": f"cluster at {rate:g}", "scheme": {"compress": "none", "bucket-kb": 0},
           "sim": {"platform": "cluster", "hosts": 16, "link_bps": rate, "latency_s": 5e-6, "compute": "modelled",
                   "speed_flops": 29e9}}
    summ = {"type": "summary", "algo": "allreduce", "steps": 100, "params": 38390, "compute_bound_s": 0.67,
            "compute_util_pct": util, "train_s": 0.67 * 100 / util, "time_to_target_s": 0.67 * 100 / util,
            "compute_to_target_s": 0.67, "test_acc": 0.97}
    with open(f"{d}/log.jsonl", "w") as f:
        f.write(json.dumps(cfg) + "\n" + json.dumps(summ) + "\n")
EOF
out=$("$BW" --out "$T/bw.svg" --md "$T/bw.md" "$T/hand" 2>&1)
check "bandwidth: tables and figure from logs" $? "$out"
row=$(grep '^| allreduce |' "$T/bw.md" | tail -1)
echo "$row" | grep -q '^| allreduce | 1 | 6.700 | 2.73 Gbit/s | 3.69 Gbit/s | 0.74 |$'
check "bandwidth: 90% at 2.73 Gbit/s (on the utilisation's curve), closed form 3.69 Gbit/s" $? "$row"
grep -q '^| allreduce | 50.0 | 80.0 | 95.0 |$' "$T/bw.md"
check "bandwidth: utilisation by rate" $? "$(grep -c . "$T/bw.md") lines"
grep -q 'id="closed-0"' "$T/bw.svg" && grep -q 'id="bound-0"' "$T/bw.svg"
check "bandwidth: the figure draws the closed form and the compute-only bound" $? "$(wc -c <"$T/bw.svg") bytes"
mkdir "$T/real"
printf '%s\n' '{"type":"config","algo":"allreduce","ranks":2}' '{"type":"summary","steps":1}' >"$T/real/log.jsonl"
expect_error "bandwidth: logs of no simulation" "no finished dtrain sim runs with a link rate" -- \
    "$BW" "$T/real"
expect_error "bandwidth: a figure of an unknown kind" "--out" -- "$BW" --out "$T/x.gif" "$T/hand"

require_sim

# 2. the simulation against the closed form, 4 hosts, 5 us, cnn1 at 30 Gflop/s (6.47 ms a
# step): first the step's computing from a run's compute-only bound, then each scheme at the
# rate the closed form says gives 90%, and at a third of it
R=(--model cnn1 --data mnist --test-limit 500 --max-steps 96 --seed 1 --quiet --no-save --compute modelled
   --speed 30Gf --latency 5us -n 4)
"$DTRAIN" sim --algo allreduce --bucket-kb 0 "${R[@]}" --link 10Gbps --log "$T/c.jsonl" >/dev/null 2>&1
c=$(log_query "$T/c.jsonl" 'one("summary")["compute_bound_s"] / one("summary")["steps"]')
within "a step's computing is cnn1's FLOPs at 30 Gflop/s" "$c" 0.00646 0.00648
for s in "allreduce --bucket-kb 0:1" "fedavg --local-steps 4:4"; do
    algo=${s%:*} h=${s##*:}
    # W90 = 2 x 8S x (R-1)/R / (0.94 (Hc/9 - 2 log2 R x 2a)), S = 153,560 bytes
    w=$("$PY" -c "print(2*8*153560*3/4/(0.94*($h*$c/9-2*2*2*5e-6)))")
    for f in 1 3; do
        rate=$("$PY" -c "print(f'{$w/$f:.0f}bps')")
        # shellcheck disable=SC2086
        "$DTRAIN" sim --algo $algo "${R[@]}" --link "$rate" --log "$T/u-$h-$f.jsonl" >/dev/null 2>&1
        u=$(summary_field "$T/u-$h-$f.jsonl" compute_util_pct)
        if [ "$f" = 1 ]; then within "$algo at the closed form's 90% rate ($rate): utilisation" "$u" 87 93
        else compare "$algo at a third of it ($rate): utilisation well below 90%" "$u" '<' 80; fi
    done
done
finish
