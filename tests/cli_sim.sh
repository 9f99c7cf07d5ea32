#!/usr/bin/env bash
# dtrain sim (docs/simulation.md): every scheme runs one short epoch on 8 simulated hosts; a
# lock-step scheme trains the same model in simulation as under MPICH (compressed sums too); modelled compute gives
# the same log twice; a 2-host allreduce at 100 Mbit/s spends per step what the link's
# arithmetic gives; a straggler and the WAN cost what they should; bad flags are one line.
. "$(dirname "$0")/lib.sh"
require_mnist

# CI installs SimGrid (scripts/install-deps): a build without dtrain-sim fails here, not skips
d=$(dirname "$DTRAIN")
if ! [ -x "$d/sim/dtrain-sim" ] && ! [ -x "$d/dtrain-sim" ]; then
    check "dtrain-sim is built (needs SimGrid: apt-get install libsimgrid-dev)" 1 "no dtrain-sim beside $DTRAIN"
    finish
    exit
fi

B=(--model cnn1 --data mnist --train-limit 4000 --test-limit 1000 --epochs 1 --quiet)
S=("${B[@]}" --seed 3)
M=(--compute modelled --speed 30Gf)

# 1. every scheme, one epoch of 4000 examples on 8 simulated hosts (modelled compute)
for algo in allreduce ps fedavg dpsgd eventgrad choco downpour; do
    extra=()
    [ "$algo" = downpour ] && extra=(--servers 1)
    timeout 300 "$DTRAIN" sim -n 8 --algo "$algo" "${S[@]}" "${M[@]}" "${extra[@]}" --out "$T/$algo.w" \
        --log "$T/$algo.jsonl" >"$T/$algo.out" 2>&1
    rc=$?; check "$algo on 8 simulated hosts runs" $rc "rc=$rc $(grep -m1 -i 'error' "$T/$algo.out")"
    a=$(acc "$T/$algo.jsonl")
    compare "$algo: test accuracy above chance" "$a" '>' 0.12 "test_acc=$a"
    sim=$(log_query "$T/$algo.jsonl" 'one("config").get("simulated", "")')
    [[ "$sim" == "cluster: 8 hosts, 1 Gbit/s links (50 us); compute modelled at 30 Gflop/s" ]]
    check "$algo: the config line says simulated, and on what" $? "simulated=$sim"
done
balanced "allreduce, simulated" "$T/allreduce.jsonl"
balanced "ps, simulated" "$T/ps.jsonl"

# 2. lock-step schemes: the same model as the same run of 4 ranks under MPICH (to rounding:
# the sums may be taken in another order); another seed is far from it
for algo in allreduce dpsgd fedavg; do
    "$DTRAIN" run -n 4 --algo "$algo" "${S[@]}" --out "$T/real-$algo.w" >/dev/null 2>&1
    "$DTRAIN" sim -n 4 --algo "$algo" "${S[@]}" --out "$T/sim-$algo.w" >/dev/null 2>&1
    same "$algo: simulated model == MPICH's (tol 1e-5)" "$T/real-$algo.w" "$T/sim-$algo.w" 1e-5
done
# compressed sums: int8 by the reduce-scatter (comm/encoded_sum.h) and DiLoCo's int8
# pseudo-gradient are the same bytes in the same order: the same model; fp16 summed in 16 bits
# (the simulation's schedule of MPICH's, sim_coll.h) rounds its additions in another order
for c in "allreduce --compress int8" "fedavg --local-steps 5 --outer-lr 0.7 --outer-momentum 0.9 --compress int8" \
    "allreduce --compress fp16"; do
    tag=${c// /_}
    "$DTRAIN" run -n 4 --algo $c "${S[@]}" --out "$T/real-$tag.w" >/dev/null 2>&1
    "$DTRAIN" sim -n 4 --algo $c "${S[@]}" --out "$T/sim-$tag.w" >/dev/null 2>&1
    tol=1e-5
    [ "${c%fp16}" != "$c" ] && tol=1e-3
    same "$c: simulated model == MPICH's (tol $tol)" "$T/real-$tag.w" "$T/sim-$tag.w" $tol
done
"$DTRAIN" sim -n 4 --algo allreduce "${B[@]}" --seed 4 --out "$T/sim-seed4.w" >/dev/null 2>&1
differ "another seed gives another model" "$T/sim-allreduce.w" "$T/sim-seed4.w" 1e-3

# 3. modelled compute: the same log twice, to the digit (the config's start time aside)
for i in 1 2; do
    "$DTRAIN" sim -n 4 --algo eventgrad "${S[@]}" "${M[@]}" --link 100Mbps --out "$T/m$i.w" --log "$T/m$i.jsonl" >/dev/null 2>&1
    grep -v '"type":"config"' "$T/m$i.jsonl" >"$T/m$i.rest"
done
cmp -s "$T/m1.rest" "$T/m2.rest"; check "modelled: two runs, the same epochs and summary" $? "$(wc -l <"$T/m1.rest") lines"
identical "modelled: two runs, the same weights" "$T/m1.w" "$T/m2.w"
t=$(summary_field "$T/m1.jsonl" train_s)
compare "modelled: simulated time > 0" "$t" '>' 0 "train_s=$t"

# 4. a 2-host allreduce at 100 Mbit/s: 153.6 kB each way a step (cnn1's 38,390 floats) over
# 12.5 MB/s = 12.3 ms, within 20% (compute made nearly free)
"$DTRAIN" sim -n 2 --link 100Mbps --algo allreduce --bucket-kb 0 "${S[@]}" --max-steps 40 --compute modelled \
    --speed 1000Tf --out "$T/two.w" --log "$T/two.jsonl" >/dev/null 2>&1
per=$(log_query "$T/two.jsonl" 'one("summary")["per_rank"][0]["comm_s"] / one("summary")["per_rank"][0]["steps"] * 1000')
within "2 hosts at 100 Mbit/s: allreduce ms per step (12.3 +- 20%)" "$per" 9.84 14.76

# 5. a straggler: rank 1 at a quarter of the speed makes every lock-step step wait for it
"$DTRAIN" sim -n 2 --link 10Gbps --algo allreduce "${S[@]}" --max-steps 20 --compute modelled --speed 30Gf \
    --out "$T/even.w" --log "$T/even.jsonl" >/dev/null 2>&1
"$DTRAIN" sim -n 2 --link 10Gbps --algo allreduce "${S[@]}" --max-steps 20 --compute modelled --speed 30Gf \
    --straggler 1:4 --out "$T/slow.w" --log "$T/slow.jsonl" >/dev/null 2>&1
r=$(ratio "$(summary_field "$T/slow.jsonl" train_s)" "$(summary_field "$T/even.jsonl" train_s)")
within "--straggler 1:4: a lock-step run 2.5-4.5x longer" "$r" 2.5 4.5
identical "--straggler changes the time, not the model" "$T/even.w" "$T/slow.w"

# 6. the WAN (sites 50 ms apart) is slower than one campus switch for the same run
"$DTRAIN" sim -n 4 --platform wan --algo allreduce "${S[@]}" --max-steps 10 "${M[@]}" --log "$T/wan.jsonl" --out "$T/wan.w" >/dev/null 2>&1
rc=$?; check "--platform wan runs" $rc "rc=$rc"
"$DTRAIN" sim -n 4 --platform campus-1g --algo allreduce "${S[@]}" --max-steps 10 "${M[@]}" --log "$T/lan.jsonl" --out "$T/lan.w" >/dev/null 2>&1
r=$(ratio "$(summary_field "$T/wan.jsonl" train_s)" "$(summary_field "$T/lan.jsonl" train_s)")
compare "wan: 10 steps slower than on campus-1g" "$r" '>' 3 "ratio $r"

# 7. a sweep of simulated runs: simulate = true makes each run dtrain sim -n N
cat >"$T/sim.ini" <<EOF
[sweep]
simulate = true
out = $T/sweep
[base]
algo = fedavg
model = cnn1
train-limit = 2000
test-limit = 500
epochs = 1
compute = modelled
speed = 30Gf
[axes]
n = 2, 4
EOF
timeout 300 "$DTRAIN" sweep "$T/sim.ini" >"$T/sweep.out" 2>&1
rc=$?; check "a sweep of simulated runs ends" $rc "rc=$rc: $(tail -1 "$T/sweep.out")"
for n in 2 4; do
    d=$(ls -d "$T"/sweep/*n=$n* 2>/dev/null | head -1)
    sim=$(log_query "$d/log.jsonl" 'one("config").get("simulated", "")')
    r=$(log_query "$d/log.jsonl" 'one("config")["ranks"]')
    [[ "$sim" == "cluster: $n hosts"* ]] && [ "$r" = "$n" ]
    check "sweep run n=$n: simulated on $n hosts" $? "simulated=$sim ranks=$r"
done
grep -q '^[^ ]*dtrain sim -n 4 ' "$T"/sweep/*n=4*/command.txt
check "the sweep's command is dtrain sim" $? "$(cat "$T"/sweep/*n=4*/command.txt 2>/dev/null | head -c 200)"
printf '[sweep]\nsimulate = maybe\n[base]\nalgo = fedavg\nn = 2\n' >"$T/bad.ini"
expect_error "simulate = maybe" "key 'simulate': expected true or false" -- "$DTRAIN" sweep "$T/bad.ini"
rm -rf "$T/sweep"

# 8. bad flags: one line naming the flag, exit 2, nothing written
expect_error "--link without a unit" "--link 100: expected a rate" -- "$DTRAIN" sim -n 2 --algo allreduce --link 100 --out "$T/x.w"
expect_error "--latency with a bad unit" "--latency 5parsecs" -- "$DTRAIN" sim -n 2 --algo allreduce --latency 5parsecs --out "$T/x.w"
expect_error "--platform unknown" "--platform nosuch: expected one of cluster" -- "$DTRAIN" sim -n 2 --algo allreduce --platform nosuch --out "$T/x.w"
expect_error "--platform file without --hostfile" "needs --hostfile" -- "$DTRAIN" sim -n 2 --algo allreduce --platform "$T/two.jsonl" --out "$T/x.w"
expect_error "--straggler beyond the ranks" "--straggler 9:2: there are ranks 0 to 3" -- "$DTRAIN" sim -n 4 --algo allreduce --straggler 9:2 --out "$T/x.w"
expect_error "--straggler malformed" "--straggler 1x4: expected RANK:FACTOR" -- "$DTRAIN" sim -n 4 --algo allreduce --straggler 1x4 --out "$T/x.w"
expect_error "--speed with measured compute" "--speed: only with --compute modelled" -- "$DTRAIN" sim -n 2 --algo allreduce --speed 10Gf --out "$T/x.w"
expect_error "--latency on a named platform" "--latency: only with --platform cluster" -- "$DTRAIN" sim -n 2 --algo allreduce --platform campus-1g --latency 1ms --out "$T/x.w"
expect_error "-n 4 of local" "--algo local trains on one process" -- "$DTRAIN" sim -n 4 --algo local --out "$T/x.w"
echo '<platform>junk' >"$T/bad.xml"; printf 'host0\nhost1\n' >"$T/hosts"; printf 'nohost\nnohost\n' >"$T/nohosts"
expect_error "a platform file SimGrid cannot read" "SimGrid stopped (platform $T/bad.xml): Parse error" -- "$DTRAIN" sim -n 2 --algo fedavg --platform "$T/bad.xml" --hostfile "$T/hosts" --no-save --quiet
cat >"$T/two.xml" <<'EOF'
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="c" prefix="host" suffix="" radical="0-1" speed="1Gf" bw="125MBps" lat="50us"/>
</platform>
EOF
expect_error "a hostfile naming hosts the platform lacks" "Host not found: 'nohost'" -- "$DTRAIN" sim -n 2 --algo fedavg --platform "$T/two.xml" --hostfile "$T/nohosts" --no-save --quiet
"$DTRAIN" sim -n 2 --algo fedavg --platform "$T/two.xml" --hostfile "$T/hosts" --train-limit 1000 --test-limit 500 --epochs 1 --quiet --no-save --log "$T/pf.jsonl" >/dev/null 2>&1
sim=$(log_query "$T/pf.jsonl" 'one("config").get("simulated", "")')
[[ "$sim" == "platform file $T/two.xml, 2 hosts; compute measured on this CPU" ]]
check "a platform file of one's own runs, named in the log" $? "simulated=$sim"
mkfifo "$T/fifo"
expect_error "a FIFO as the platform" "--platform $T/fifo: is a FIFO" -- timeout 20 "$DTRAIN" sim -n 2 --algo fedavg --platform "$T/fifo" --hostfile "$T/hosts" --no-save
rm -f "$T/fifo"
expect_error "--compute unknown" "--compute guessed" -- "$DTRAIN" sim -n 2 --algo allreduce --compute guessed --out "$T/x.w"

finish
