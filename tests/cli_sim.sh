#!/usr/bin/env bash
# dtrain sim (docs/simulation.md): every scheme runs one short epoch on 8 simulated hosts; a
# lock-step scheme trains the same model in simulation as under MPICH (compressed sums too); modelled compute gives
# the same log twice; a 2-host allreduce at 100 Mbit/s spends per step what the link's
# arithmetic gives; a straggler and the WAN cost what they should; bad flags are one line.
. "$(dirname "$0")/lib.sh"
require_mnist

require_sim

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

# 3. modelled compute is a function of the run's flags: allreduce and eventgrad, 4 hosts at
# 100 Mbit/s, 100 steps, run twice, the second time with every core of this machine busy: the
# same epochs and summary (accuracy, messages, bytes, simulated seconds) and the same weights.
# (Before: SMPI's clock read the host's before MPI_Init, a clock reading cost 10 ns, and the
# default --speed was timed here.)
D=(--model cnn1 --data mnist --test-limit 1000 --max-steps 100 --seed 1 --quiet "${M[@]}" --link 100Mbps)
for algo in allreduce eventgrad; do
    "$DTRAIN" sim -n 4 --algo $algo "${D[@]}" --out "$T/$algo-idle.w" --log "$T/$algo-idle.jsonl" >/dev/null 2>&1
    hogs=()
    for _ in $(seq "$(nproc)"); do ( while :; do :; done ) & hogs+=($!); done
    "$DTRAIN" sim -n 4 --algo $algo "${D[@]}" --out "$T/$algo-busy.w" --log "$T/$algo-busy.jsonl" >/dev/null 2>&1
    kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null
    for w in idle busy; do grep -v '"type":"config"' "$T/$algo-$w.jsonl" >"$T/$algo-$w.rest"; done
    n=$(grep -c '"type":"summary"' "$T/$algo-idle.rest")
    cmp -s "$T/$algo-idle.rest" "$T/$algo-busy.rest" && [ "$n" = 1 ]
    check "modelled $algo: idle and with every core busy, the same epochs and summary" $? \
        "$(wc -l <"$T/$algo-idle.rest") lines, $n summary; train_s $(summary_field "$T/$algo-idle.jsonl" train_s) and $(summary_field "$T/$algo-busy.jsonl" train_s)"
    identical "modelled $algo: idle and busy, the same weights" "$T/$algo-idle.w" "$T/$algo-busy.w"
    t=$(summary_field "$T/$algo-idle.jsonl" train_s)
    compare "modelled $algo: simulated time > 0" "$t" '>' 0 "train_s=$t"
done
# the physical limit, exact with modelled compute: the compute-only bound is the steps times a
# step's FLOPs (64 examples x 3 x cnn1's 1,011,430 forward FLOPs) at 30 Gflop/s, below the
# training time; the utilisation is the bound over it; the evaluations' computing so far grows
for algo in allreduce eventgrad; do
    out=$(/usr/bin/python3 - "$T/$algo-idle.jsonl" <<'EOF2'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
s = [l for l in lines if l["type"] == "summary"][0]
want = s["steps"] * 64 * 3 * 1011430 / 30e9
assert abs(s["compute_bound_s"] - want) < 2e-3, (s["compute_bound_s"], want)
assert 0 < s["compute_bound_s"] < s["train_s"], (s["compute_bound_s"], s["train_s"])
util = 100 * s["compute_bound_s"] / s["train_s"]
assert abs(s["compute_util_pct"] - util) < 1.0, (s["compute_util_pct"], util)
ev = [l["compute_s"] for l in lines if l["type"] == "epoch"]
assert ev and ev == sorted(ev) and ev[-1] <= s["compute_bound_s"] + 1e-3, ev
print(f"bound {s['compute_bound_s']} s (steps x FLOPs / speed: {want:.4f}) of {s['train_s']} s, util {s['compute_util_pct']}%")
EOF2
)
    check "modelled $algo: the compute-only bound is the steps' FLOPs at --speed" $? "$out"
done
# ... and the comparison can fail: another --speed is another simulated time
"$DTRAIN" sim -n 4 --algo allreduce "${D[@]}" --speed 60Gf --log "$T/fast.jsonl" --out "$T/fast.w" >/dev/null 2>&1
compare "modelled: --speed 60Gf is faster than 30Gf" "$(summary_field "$T/fast.jsonl" train_s)" '<' \
    "$(summary_field "$T/allreduce-idle.jsonl" train_s)"
expect_error "--compute modelled without --speed" "--compute modelled: give each host's --speed FLOPS" -- \
    "$DTRAIN" sim -n 2 --algo allreduce --compute modelled --out "$T/x.w"

# 3b. waiting never hangs: asynchronous eventgrad over slow links (its finish waited for puts
# spinning at no simulated cost: hours of wall time), a stall made on purpose (a rank polling
# without the clock moving) and a wait past --timeout in simulated seconds end in one line
for p in campus-100m wan; do
    start=$(date +%s)
    timeout 120 "$DTRAIN" sim -n 4 --platform $p --algo eventgrad --model mlp --data mnist --train-limit 4000 \
        --test-limit 1000 --epochs 1 "${M[@]}" --no-save --quiet --log "$T/slow-$p.jsonl" >"$T/slow-$p.out" 2>&1
    rc=$? took=$(( $(date +%s) - start ))
    [ $rc = 0 ] && [ $took -lt 30 ] && [ -n "$(summary_field "$T/slow-$p.jsonl" test_acc)" ]
    check "eventgrad on $p ends, in under 30 s" $? "rc=$rc in ${took} s"
done
stall() { DTRAIN_TEST_SIM_STALL=$1 timeout 120 "$DTRAIN" sim -n 4 --algo allreduce --model mlp --data mnist --train-limit 4000 "${M[@]}" --no-save --quiet "${@:2}"; }
expect_status() { # LABEL STATUS SUBSTRING -- COMMAND: the status, one line on stderr holding SUBSTRING
    local label=$1 want=$2 text=$3 rc
    shift 4
    "$@" >"$T/.st_out" 2>"$T/.st_err"; rc=$?
    [ $rc = "$want" ] && [ "$(wc -l <"$T/.st_err")" = 1 ] && grep -qF -- "$text" "$T/.st_err"
    check "$label" $? "rc=$rc: $(head -c 300 "$T/.st_err")"
}
expect_status "a rank polling at no simulated cost: stalled, named" 4 \
    "rank 1 stalled: 1000000 polls of MPI_Test (a message no rank sends" -- stall 1
expect_status "a wait past --timeout 5 in simulated seconds: named" 4 \
    "rank 2 waited 5 simulated s in a message no rank sends" -- stall 2:idle --timeout 5
expect_status "a rank blocked on a message no rank sends: a deadlock, the ranks named" 4 \
    "rank 2 (messages), rank 3 (communication) wait for what no rank will send" -- stall 3:block
# SIGTERM and SIGINT (Ctrl-C: dtrain sim's process group) end a simulation: "interrupted", the
# signal's status, nothing left in /tmp (the platform's files are on no disk)
for sig in TERM INT; do
    before=$(ls -d /tmp/dtrain-sim.* 2>/dev/null | wc -l)
    # its own log: the simulation's process found by it (another simulation may run beside the tests)
    "$DTRAIN" sim -n 4 --algo eventgrad --model cnn1 --data mnist --epochs 5 "${M[@]}" --no-save --quiet \
        --log "$T/sig-$sig.jsonl" >"$T/sig.out" 2>"$T/sig.err" &
    pid=$!
    sleep 3
    kill -$sig $pid
    wait $pid; rc=$?
    after=$(ls -d /tmp/dtrain-sim.* 2>/dev/null | wc -l)
    want=$(( 128 + $(kill -l $sig) ))
    [ $rc = $want ] && [ "$(wc -l <"$T/sig.err")" = 1 ] && grep -q "interrupted" "$T/sig.err" && [ "$after" = "$before" ] &&
        ! pgrep -f "smpimain.*$T/sig-$sig.jsonl" >/dev/null
    check "SIG$sig ends a simulation: one line, status $want, nothing left" $? "rc=$rc, /tmp/dtrain-sim.* $before -> $after: $(cat "$T/sig.err")"
done

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
# values SimGrid cannot simulate, refused before it starts (it took a rate of 1e-30 bit/s as
# free, a speed of 1e-300 flop/s as a deadlock with exit 0)
expect_error "--link below 1 kbit/s" "--link 1e-30bps: expected a rate from 1kbps" -- "$DTRAIN" sim -n 2 --algo allreduce --link 1e-30bps --out "$T/x.w"
expect_error "--latency below 1 ns" "--latency 1e-300s: expected a time of 0 or from 1ns" -- "$DTRAIN" sim -n 2 --algo allreduce --latency 1e-300s --out "$T/x.w"
expect_error "--speed below 1 Mflop/s" "--speed 1e-300f: expected cpu" -- "$DTRAIN" sim -n 2 --algo allreduce --compute modelled --speed 1e-300f --out "$T/x.w"
sed 's/bw="125MBps"/bw="0Bps"/' "$T/two.xml" >"$T/bw0.xml"
expect_error "a platform file with a bandwidth of 0" "--platform $T/bw0.xml: line 4: bw=\"0Bps\": expected a bandwidth above 0" -- \
    "$DTRAIN" sim -n 2 --algo fedavg --platform "$T/bw0.xml" --hostfile "$T/hosts" --no-save --quiet
sed 's/lat="50us"/lat="-5us"/' "$T/two.xml" >"$T/neg.xml"
expect_error "a platform file with a negative latency" "lat=\"-5us\": expected a latency of 0 or more" -- \
    "$DTRAIN" sim -n 2 --algo fedavg --platform "$T/neg.xml" --hostfile "$T/hosts" --no-save --quiet
sed 's/speed="1Gf"/speed="1Gf,0f"/' "$T/two.xml" >"$T/speed0.xml"
expect_error "a platform file with a power state of speed 0" "speed=\"1Gf,0f\": expected a speed above 0" -- \
    "$DTRAIN" sim -n 2 --algo fedavg --platform "$T/speed0.xml" --hostfile "$T/hosts" --no-save --quiet
# a hostfile shorter than -n stacked ranks on its first hosts (SimGrid wraps around), silently
printf 'host0\n\nhost1\n' >"$T/hosts2"
expect_error "a hostfile of 2 hosts for -n 4" "--hostfile $T/hosts2: 2 hosts for -n 4: expected a host per rank" -- \
    "$DTRAIN" sim -n 4 --algo fedavg --platform "$T/two.xml" --hostfile "$T/hosts2" --no-save --quiet
printf 'host0\r\nhost1\r\n' >"$T/crlf"
expect_error "a hostfile with carriage returns" "--hostfile $T/crlf: line 1 has a space, a tab, a carriage return" -- \
    "$DTRAIN" sim -n 2 --algo fedavg --platform "$T/two.xml" --hostfile "$T/crlf" --no-save --quiet
# -n beyond what the training set can shard: said at once, not after SimGrid started the ranks
start=$(date +%s)
expect_error "-n 5000 on 60,000 examples" "-n 5000: 60000 training examples leave each rank fewer than --batch 64" -- \
    "$DTRAIN" sim -n 5000 --algo allreduce --out "$T/x.w"
compare "... within 10 s" "$(( $(date +%s) - start ))" '<' 10
# every word of DTRAIN_SIM_CFG reaches SimGrid (80 of them once overflowed the launcher's list,
# and fewer were dropped past argc + 24): the last one here is bad, and SimGrid says so
cfg=$(for _ in $(seq 80); do printf -- '--cfg=smpi/test:0 '; done)
DTRAIN_SIM_CFG="$cfg --cfg=smpi/no-such-option:1" expect_error "the 81st word of DTRAIN_SIM_CFG reaches SimGrid" \
    "no-such-option" -- "$DTRAIN" sim -n 2 --algo fedavg --platform "$T/two.xml" --hostfile "$T/hosts" --no-save --quiet \
    --train-limit 1000 --test-limit 500 --epochs 1 --lr 0.05 --batch 64 --seed 2 --momentum 0 --split random --eval-every 1

finish
