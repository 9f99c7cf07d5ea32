#!/usr/bin/env bash
# dtrain sim --cluster FILE (docs/simulation.md, "Cluster files"): a cluster in dtrain's terms
# (groups of hosts, ranks a host, speeds and classes, links, regions joined by a WAN link,
# stragglers as speed over simulated time, host failures), written to SimGrid's XML by dtrain.
# A region 100 Mbit/s away makes fedavg's averages cost what the WAN's arithmetic says; a host
# at half speed all along doubles the compute-only bound exactly; a failed host's rank is named
# in one line (status 4) and with a checkpoint and --max-restarts 1 the run completes in
# simulation; bad files are one line naming file:line.
. "$(dirname "$0")/lib.sh"
require_mnist
require_sim
C=(--model cnn1 --data mnist --train-limit 4000 --test-limit 300 --seed 1 --quiet --no-save --compute modelled)

# two groups of 2 hosts at 29 Gflop/s (zen3-core), 10 Gbit/s inside; in one region, then in two
# joined by 100 Mbit/s and 20 ms
group() { # NAME REGION
    printf '[group %s]\nhosts = 2\nspeed = zen3-core\nlink = 10Gbps\nlatency = 5us\nregion = %s\n\n' "$1" "$2"
}
{ group east east; group west east; } >"$T/one.ini"
{ group east east; group west west; printf '[wan east west]\nlink = 100Mbps\nlatency = 20ms\n'; } >"$T/two.ini"
for f in one two; do
    "$DTRAIN" sim --cluster "$T/$f.ini" --algo fedavg --local-steps 8 --max-steps 40 "${C[@]}" \
        --log "$T/$f.jsonl" >"$T/$f.out" 2>&1
    check "fedavg on the cluster file $f.ini" $? "$(tail -1 "$T/$f.out")"
done
grep -q '"cluster_file":"'"$T"'/two.ini"' "$T/two.jsonl"
check "the log's sim names the cluster file" $? "$(grep -o '"sim":{[^}]*}' "$T/two.jsonl")"
a=$(per_rank_sum "$T/one.jsonl" comm_s 0 1) b=$(per_rank_sum "$T/two.jsonl" comm_s 0 1)
# 5 averages (40 steps / 8) of cnn1's 153.6 kB across the WAN: each at least 2 x 20 ms of
# latency and the bytes at 100 Mbit/s; one region: well under a millisecond each
extra=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", (b - a) / 5 }')
within "the WAN's cost per average (s)" "$extra" 0.05 0.2

# a straggler at half speed all along: its compute, and so the bound, exactly twice the others'
{ group east east; printf '[straggler east-1]\nspeed = 0:0.5\n'; } >"$T/slow.ini"
"$DTRAIN" sim --cluster "$T/slow.ini" --algo allreduce --max-steps 30 "${C[@]}" --log "$T/slow.jsonl" >/dev/null 2>&1
fast=$(per_rank_sum "$T/slow.jsonl" compute_s 0 1) slow=$(per_rank_sum "$T/slow.jsonl" compute_s 1 2)
bound=$(summary_field "$T/slow.jsonl" compute_bound_s)
r=$(awk -v f="$fast" -v s="$slow" 'BEGIN { if (f > 0) printf "%.3f", s / f }')
within "east-1 at 0.5 of its speed: its compute over east-0's" "$r" 1.99 2.01
# 30 steps x 64 x 3 x 1,011,430 FLOPs at 14.5 Gflop/s
within "the compute-only bound is the straggler's" "$bound" 0.401 0.403

# ranks-per-host: 2 hosts of 2 ranks are 4 ranks; -n must agree
printf '[group node]\nhosts = 2\nranks-per-host = 2\nspeed = 29Gf\n' >"$T/nodes.ini"
"$DTRAIN" sim --cluster "$T/nodes.ini" --algo allreduce --max-steps 5 "${C[@]}" --log "$T/nodes.jsonl" >/dev/null 2>&1
holds "$(log_query "$T/nodes.jsonl" 'of("config")[0]["ranks"]')" '==' 4
check "2 hosts of 2 ranks: 4 ranks" $? ""
expect_error "-n against the file" "-n 3: --cluster $T/nodes.ini has 4 ranks" -- \
    "$DTRAIN" sim -n 3 --cluster "$T/nodes.ini" --algo allreduce "${C[@]}"

# a host failure: named, status 4; with a checkpoint and --max-restarts 1 the run completes
{ group east east; printf '[failure east-1]\nat = 0.4s\n'; } >"$T/fail.ini"
F=(--cluster "$T/fail.ini" --algo allreduce --epochs 3 --model cnn1 --data mnist --train-limit 3000 --test-limit 300
   --seed 1 --no-save --compute modelled)
"$DTRAIN" sim "${F[@]}" --quiet >"$T/lost.out" 2>"$T/lost.err"
rc=$?
[ "$rc" = 4 ] && [ "$(wc -l <"$T/lost.err")" = 1 ] && grep -q 'rank 1 lost: its host east-1 failed at simulated time 0.4 s' "$T/lost.err"
check "a failed host: its rank named in one line, status 4" $? "exit $rc: $(cat "$T/lost.err")"
"$DTRAIN" sim "${F[@]}" --checkpoint "$T/ck" --max-restarts 1 --log "$T/restart.jsonl" >"$T/restart.out" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -q 'restart 1 of 1: from checkpoint' "$T/restart.out" &&
    [ "$(log_query "$T/restart.jsonl" 'one("summary")["restarts"]')" = 1 ] &&
    [ "$(log_query "$T/restart.jsonl" 'len(of("config"))')" = 2 ]
check "with --checkpoint and --max-restarts 1: restarted from the checkpoint and finished" $? \
    "exit $rc: $(grep -E 'lost|restart' "$T/restart.out" | head -3)"
holds "$(log_query "$T/restart.jsonl" 'one("summary")["steps"]')" '==' \
    "$(log_query "$T/restart.jsonl" 'of("config")[-1]["steps_per_epoch"] * 3')"
check "the restarted run trains every step of its 3 epochs" $? ""

# the example file (every key) runs
EX="$(cd "$(dirname "$0")/.." && pwd)/examples/cluster-two-sites.ini"
"$DTRAIN" sim --cluster "$EX" --algo fedavg --local-steps 4 --max-steps 4 "${C[@]}" >"$T/ex.out" 2>&1
check "examples/cluster-two-sites.ini runs (20 hosts, 32 ranks)" $? "$(tail -1 "$T/ex.out")"

# bad files and flags: one line naming the file and line, or the flag
printf '[group a]\nhosts = 2\nspeed = fast\n' >"$T/b1.ini"
expect_error "a bad speed" "b1.ini:3: speed: expected" -- "$DTRAIN" sim --cluster "$T/b1.ini" --algo allreduce "${C[@]}"
printf '[group a]\nhosts = 2\nspeed = 29Gf\nlnk = 1Gbps\n' >"$T/b2.ini"
expect_error "an unknown key" "b2.ini:4: unknown key 'lnk'" -- "$DTRAIN" sim --cluster "$T/b2.ini" --algo allreduce "${C[@]}"
{ group a x; group b y; } >"$T/b3.ini"
expect_error "two regions, no WAN" "b3.ini:8: [group b] is in region y, group a in x, and no [wan y x]" -- \
    "$DTRAIN" sim --cluster "$T/b3.ini" --algo allreduce "${C[@]}"
{ group a x; printf '[straggler a-5]\nspeed = 0:0.5\n'; } >"$T/b4.ini"
expect_error "a straggler on no host" "b4.ini:8: [straggler a-5]: no such host" -- \
    "$DTRAIN" sim --cluster "$T/b4.ini" --algo allreduce "${C[@]}"
{ group a x; printf '[straggler a-1]\nspeed = 10s:0.5, 5s:1\n'; } >"$T/b5.ini"
expect_error "a profile out of order" "b5.ini:9: speed: times in increasing order" -- \
    "$DTRAIN" sim --cluster "$T/b5.ini" --algo allreduce "${C[@]}"
expect_error "--cluster with --link" "the file describes the cluster: not with --link" -- \
    "$DTRAIN" sim --cluster "$T/one.ini" --link 1Gbps --algo allreduce "${C[@]}"
expect_error "--cluster with measured compute" "with --compute modelled" -- \
    "$DTRAIN" sim --cluster "$T/one.ini" --algo allreduce --model cnn1
expect_error "--max-restarts without --cluster" "--max-restarts: in simulation, after a host failure" -- \
    "$DTRAIN" sim -n 2 --max-restarts 1 --algo allreduce "${C[@]}" --speed 29Gf
expect_error "--cluster of a missing file" "--cluster $T/none.ini" -- \
    "$DTRAIN" sim --cluster "$T/none.ini" --algo allreduce "${C[@]}"
finish
