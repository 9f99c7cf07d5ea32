#!/usr/bin/env bash
# Across hosts: 2 network-namespace hosts (scripts/netcluster) joined by shaped links, one rank
# each, MPICH over TCP only. The schemes give the same results there as on one host (allreduce
# == ps --ps-mode grad and eventgrad --sync const:0 == dpsgd, bit for bit), the asynchronous
# ones finish with every put read or counted as overwritten, every run ends (MPI_Finalize
# across hosts, src/comm/world.c), and the bytes that crossed each host's link match dtrain's
# own count within the protocols' overhead. Skipped (with the reason, exit 0) where
# namespaces cannot be made: not root, no iproute2, a container without network namespaces.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NC=$ROOT/scripts/netcluster
# a cluster of its own (namespaces dth*, its own state), so a user's cluster is left alone
export DTRAIN_NETCLUSTER_PREFIX=dth DTRAIN_NETCLUSTER_DIR=$T/netcluster
if ! why=$("$NC" check 2>&1); then
    echo "SKIP cli_hosts: namespace hosts cannot be made here: $why"
    echo "0 passed, 0 failed"
    exit 0
fi
require_mnist
trap '"$NC" down >/dev/null 2>&1; rm -rf "$T" "$DTRAIN_RUN_DIR"' EXIT
# 200mbit: slow enough to be a real limit, fast enough for a short test
if ! out=$("$NC" up 2 --rate 200mbit 2>&1); then
    check "2 namespace hosts come up" 1 "$out"
    finish
fi
export DTRAIN_MPIEXEC="$NC mpiexec"
C=(--model cnn1 --data mnist --train-limit 2000 --test-limit 500 --epochs 1 --batch 32 --seed 3 --eval-every 0)

# hrun NAME ARGS...: one run across the 2 hosts with NAME.w, NAME.jsonl, and the bytes each host
# sent during it in NAME.tx ("host tx_bytes" lines); a run must end by itself (timeout 120 s)
hrun() {
    local name=$1 rc
    shift
    "$NC" bytes >"$T/$name.b0"
    timeout -k 5 120 "$DTRAIN" run -n 2 "$@" "${C[@]}" --out "$T/$name.w" --log "$T/$name.jsonl" --quiet \
        >"$T/$name.out" 2>&1
    rc=$?
    "$NC" bytes >"$T/$name.b1"
    join "$T/$name.b0" "$T/$name.b1" | awk '{ print $1, $4 - $2 }' >"$T/$name.tx"
    check "$name ends by itself with status 0" "$rc" "exit status $rc$([ "$rc" -eq 124 ] && echo " (hung: killed after 120 s)"): $(tail -c 300 "$T/$name.out")"
}

# (a), (b): the same models as on one host, bit for bit
hrun ar --algo allreduce
hrun psg --algo ps --ps-mode grad
identical "allreduce == ps --ps-mode grad across hosts (bit for bit)" "$T/ar.w" "$T/psg.w"
hrun dp --algo dpsgd
hrun eg0 --algo eventgrad --sync --threshold const:0
identical "eventgrad --sync const:0 == dpsgd across hosts (bit for bit)" "$T/dp.w" "$T/eg0.w"
differ "... and the models differ between the two families (the checks can fail)" "$T/ar.w" "$T/dp.w" 1e-6

# (c) asynchronous schemes finish; every put read fresh or counted as overwritten (one-sided),
# every message taken (downpour)
hrun ega --algo eventgrad --threshold adaptive --warmup-steps 10
hrun dw --algo downpour
# choco's packed transport: one two-sided message per neighbour and step, read exactly once
hrun ch --algo choco --compress topk:0.1
sent=$(msgs "$T/ch.jsonl"); fresh=$(per_rank_sum "$T/ch.jsonl" fresh_recv)
holds "$sent" '>' 0 && holds "$sent" == "$fresh"
check "choco (packed): every tensor sent ($sent) read once ($fresh)" $? ""
for f in dp eg0 ega; do
    sent=$(msgs "$T/$f.jsonl"); fresh=$(per_rank_sum "$T/$f.jsonl" fresh_recv)
    over=$(per_rank_sum "$T/$f.jsonl" overwritten)
    holds "$sent" '>' 0 && holds "$sent" == "$((fresh + over))"
    check "$f: puts ($sent) == fresh ($fresh) + overwritten ($over)" $? ""
    # asked for, less those coalesced (overlapped sends; 2 ranks: each has one neighbour)
    tsent=$(log_query "$T/$f.jsonl" 'sum(r["sent"] - r.get("coalesced", 0) for t in of("transport") for r in t["ranks"])')
    compare "$f: the transport lines count the same puts" "$tsent" == "$sent" "transport $tsent, summary $sent"
done
balanced "downpour" "$T/dw.jsonl"

# (d) the bytes on the links against dtrain's counts, per host (one rank each). Every counted
# byte crosses the link: tx >= bytes_sent (fails if the ranks used shared memory or a counter
# overcounts). Above it: TCP/IP headers, 66 bytes (Ethernet 14, IP 20, TCP 32 with timestamps)
# per segment of at most 1448 payload bytes, 4.6%, and the ACKs for what the other host sends,
# one 66-byte ACK per 2 segments, 2.3%: 10% of the counted bytes covers both with room. MPI's
# and UCX's own headers (tens of bytes per message; for one-sided puts the 16-byte checked
# header and UCX's put request per put) stay below 2%. Not counted by dtrain at all: MPI
# start-up and the process manager (address exchange, launch, output forwarding: tens of kB),
# the starting broadcast and the evaluation of the averaged model (a reduction of the model,
# at most 2 model copies per host), and control tokens. So:
#     bytes_sent <= tx <= 1.12 x (bytes_sent + algo) + 2 x model bytes + 512 kB
# (the model is 38,390 floats, 153,560 bytes). algo: what the MPI collective algorithm sends
# beyond the scheme's payload, which is what dtrain counts (docs/accounting.md). It is 0 but
# for ps's root: MPICH reduces a large vector by a reduce-scatter and a gather (Rabenseifner),
# in which the root also sends (N-1)/N of the vector, half the model here, every step; and for
# choco the starting parameters, once to the neighbour (set-up, not counted: one model).
model=153560
for f in ar psg dp eg0 ega dw ch; do
    for r in 0 1; do
        tx=$(awk -v h=$r '$1 == h { print $2 }' "$T/$f.tx")
        b=$(rank_field "$T/$f.jsonl" $r bytes_sent)
        algo=0
        if [ "$f" = psg ] && [ $r = 0 ]; then algo=$(($(rank_field "$T/$f.jsonl" 0 steps) * model / 2)); fi
        if [ "$f" = ch ]; then algo=$model; fi
        hi=$(awk -v b="$b" -v a="$algo" -v m=$model 'BEGIN { printf "%d", 1.12 * (b + a) + 2 * m + 524288 }')
        holds "$b" '>' 0 && holds "$tx" '>=' "$b" && holds "$tx" '<=' "$hi"
        check "$f: host $r sent $tx bytes on its link, dtrain counted $b (bound $b..$hi)" $? \
            "overhead $(awk -v t="$tx" -v b="$b" 'BEGIN { if (b > 0) printf "%+.1f%%", 100 * (t - b) / b }')"
    done
done

# (e) --wire links serialise at their rate (scripts/netcluster: offloads off, a burst of two
# frames), with jumbo frames by --mtu; a bad --mtu is one line and leaves the cluster up
out=$("$NC" up 2 --rate 100mbit --wire 2>&1)
check "up --wire" $? "$out"
tso=$("$NC" exec 0 ethtool -k eth0 | awk '$1 == "tcp-segmentation-offload:" { print $2 }')
burst=$("$NC" exec 0 tc qdisc show dev eth0 | grep -o 'burst [0-9]*b' | head -1)
[ "$tso" = off ] && [ "$burst" = "burst 3000b" ]
check "a wire link: segmentation offload off, a burst of two 1500-byte frames" $? "tso $tso, $burst"
# dtrain sim calibrate on the two hosts (what scripts/sim-validate and a user on their own
# cluster run): the file it writes has a 64 kB message after a pause taking its size over the
# rate (5.2 ms at 100 Mbit/s; with tc's default 64 kB bucket it crossed in 0.4 ms: a lower
# bound, which load only makes safer), the largest messages at 85-100% of the rate, and
# dtrain sim takes the file
timeout -k 5 300 "$DTRAIN" sim calibrate --out "$T/cal.ini" --reps 5 --steps 10 --longest 0.1 >"$T/cal.out" 2>&1
check "dtrain sim calibrate on 2 hosts" $? "$(tail -2 "$T/cal.out")"
one=$(awk -F' = ' '$1 == "65536" { split($2, v, " "); print v[1] }' "$T/cal.ini" 2>/dev/null)
holds "${one:-0}" '>=' 0.0045
check "a 64 kB message crosses the 100 Mbit/s wire in >= 4.5 ms (took ${one:-?} s)" $? ""
# MPICH's TCP gives 96-97% of the link to 1-2 MB messages; Open MPI's TCP transport 72% in CI's
# Open MPI pass: what is measured is the MPI's, which is what the simulation must then model
rate=$(awk -F' = ' '$1 == "rate" { print $2 }' "$T/cal.ini" 2>/dev/null)
within "the largest messages' rate (bit/s)" "${rate:-0}" 60e6 100e6
grep -q '^hosts = .* and ' "$T/cal.ini"
check "the calibration names the two ranks' hosts" $? "$(grep '^hosts' "$T/cal.ini")"
# the simulation takes the file (dtrain-sim is built with SimGrid beside the MPICH build;
# the Open MPI pass of CI, scripts/test-openmpi, builds none: there these checks are the MPICH
# pass's)
if [ -x "$(dirname "$DTRAIN")/sim/dtrain-sim" ] || [ -x "$(dirname "$DTRAIN")/dtrain-sim" ]; then
    "$DTRAIN" sim -n 2 --calibration "$T/cal.ini" --algo allreduce "${C[@]}" --compute modelled --quiet --no-save \
        --log "$T/cal-sim.jsonl" >"$T/cal-sim.out" 2>&1
    link=$(log_query "$T/cal-sim.jsonl" 'of("config")[0]["sim"]["link_bps"]' 2>&1)
    speed=$(log_query "$T/cal-sim.jsonl" 'of("config")[0]["sim"]["speed_flops"]' 2>&1)
    holds "$link" '==' "$rate"
    check "dtrain sim --calibration: the hosts' links at the measured rate" $? "link $link, measured $rate"
    holds "$speed" '==' "$(awk -F' = ' '$1 == "speed" { print $2 }' "$T/cal.ini")"
    check "dtrain sim --calibration: the hosts' speed is the file's" $? "$speed"
fi
hrun wire --algo allreduce
out=$("$NC" up 2 --rate 1gbit --wire --mtu 9000 2>&1)
check "up --wire --mtu 9000" $? "$out"
mtus=$("$NC" exec 0 cat /sys/class/net/eth0/mtu)
burst=$("$NC" exec 0 tc qdisc show dev eth0 | grep -o 'burst [0-9]*b' | head -1)
[ "$mtus" = 9000 ] && [ "$burst" = "burst 18000b" ]
check "jumbo frames: mtu 9000, a burst of two frames" $? "mtu $mtus, $burst"
hrun jumbo --algo dpsgd
out=$("$NC" up 2 --rate 100mbit --wire --mtu 9x 2>&1)
rc=$?
[ "$rc" = 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && grep -q -- "--mtu" <<<"$out" && "$NC" hosts >/dev/null
check "--mtu 9x: one line naming --mtu, exit 2, the cluster left up" $? "exit $rc: $out"

finish
