#!/usr/bin/env bash
# dtrain sim --replay LOG (docs/simulation.md, "Replays"): a lock-step scheme computes the same
# numbers at any link rate, so its run on another network is the log's figures at the times a
# simulation that calculates nothing gives. Checked here: the premise (the same run at 100 Mbit/s
# and 1 Gbit/s evaluates to the same figures), and the replay of the 100 Mbit/s log at 1 Gbit/s
# against the whole 1 Gbit/s simulation, line by line and field by field (times, messages,
# bytes, every rank's figures) for allreduce, PowerSGD, fedavg and ps; then what a replay
# refuses in one line, and dtrain sweep's {seed}.
. "$(dirname "$0")/lib.sh"
require_mnist
require_sim
C=(--model cnn1 --data mnist --train-limit 3000 --test-limit 300 --val 200 --seed 1 --quiet --no-save --compute modelled
   --speed 29Gf -n 4 --max-steps 48 --eval-every-steps 16)

# LOG LOG: the lines that differ, and how (the configuration's where-keys, a replay's replay_of,
# and a language model's bits per byte, made from the printed loss, aside)
differences() {
    /usr/bin/python3 - "$1" "$2" <<'EOP'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
if len(a) != len(b):
    print(f"{len(a)} lines against {len(b)}")
where = {"started_utc", "command", "commit", "hosts", "simulated", "sim", "log"}
for x, y in zip(a, b):
    for k in sorted(set(x) | set(y)):
        if k in where or k == "replay_of" or k.endswith("_bpb"):
            continue
        if x.get(k) != y.get(k):
            print(f"{x['type']} {x.get('step', x.get('epoch', ''))}: {k} {str(x.get(k))[:60]} against {str(y.get(k))[:60]}")
EOP
}
# LOG: every evaluation's figures (the premise: they do not depend on the link)
figures() {
    log_query "$1" '[(e.get("step"), e["test_acc"], e["test_loss"], e["val_loss"]) for e in of("eval") + of("epoch")]'
}

for scheme in "allreduce" "allreduce --compress powersgd:2" "fedavg --local-steps 8" "ps"; do
    n=$(echo "$scheme" | tr -c 'a-z0-9\n' _)
    # shellcheck disable=SC2086 # the scheme's words are flags
    "$DTRAIN" sim "${C[@]}" --algo $scheme --link 100Mbps --log "$T/$n-100m.jsonl" >/dev/null 2>&1 &&
        "$DTRAIN" sim "${C[@]}" --algo $scheme --link 1Gbps --log "$T/$n-1g.jsonl" >/dev/null 2>&1
    check "$scheme: whole simulations at 100 Mbit/s and 1 Gbit/s" $? "$(summary_field "$T/$n-1g.jsonl" wall_s) s at 1 Gbit/s"
    a=$(figures "$T/$n-100m.jsonl") b=$(figures "$T/$n-1g.jsonl")
    [ -n "$a" ] && [ "$a" = "$b" ]
    check "$scheme: the same figures at either rate (what a replay rests on)" $? "${a:0:120}"
    # shellcheck disable=SC2086
    "$DTRAIN" sim "${C[@]}" --algo $scheme --link 1Gbps --replay "$T/$n-100m.jsonl" --log "$T/$n-replay.jsonl" >"$T/out" 2>&1
    check "$scheme: the replay of the 100 Mbit/s log at 1 Gbit/s runs" $? "$(tail -1 "$T/out")"
    d=$(differences "$T/$n-1g.jsonl" "$T/$n-replay.jsonl")
    [ -z "$d" ] && [ "$(line_count "$T/$n-replay.jsonl" eval)" -eq 3 ]
    check "$scheme: the replay is the whole simulation, field by field" $? "${d:-every line, every field (wall $(summary_field "$T/$n-replay.jsonl" wall_s) s)}"
    # and it is 1 Gbit/s's, not the log's own times
    compare "$scheme: its times are the new link's, not the log's" "$(summary_field "$T/$n-replay.jsonl" comm_s)" \
        '<' "$(summary_field "$T/$n-100m.jsonl" comm_s)"
done
grep -q '"replay_of":"'"$T"'/ps-100m.jsonl"' "$T/ps_-replay.jsonl" 2>/dev/null ||
    grep -q '"replay_of":"[^"]*ps-100m.jsonl"' "$T"/ps*-replay.jsonl
check "the summary names the log replayed" $? "$(grep -o '"replay_of":"[^"]*"' "$T"/ps*-replay.jsonl)"
grep -q '"replay":"[^"]*allreduce-100m.jsonl"' "$T/allreduce-replay.jsonl"
check "the config line's sim object names it" $? "$(grep -o '"replay":"[^"]*"' "$T/allreduce-replay.jsonl")"

L=$T/allreduce-100m.jsonl
# a scheme whose numbers depend on when messages arrive, or whose messages on its numbers
expect_error "eventgrad is not replayed" "--algo eventgrad computes what arrives when it arrives" -- \
    "$DTRAIN" sim "${C[@]}" --algo eventgrad --replay "$L" --log "$T/no.jsonl"
expect_error "a replay models its compute" "--replay $L: with --compute modelled" -- \
    "$DTRAIN" sim -n 4 --model cnn1 --data mnist --algo allreduce --replay "$L" --log "$T/no.jsonl"
expect_error "a missing log" "--replay $T/none.jsonl: expected the log of a finished dtrain run" -- \
    "$DTRAIN" sim "${C[@]}" --algo allreduce --replay "$T/none.jsonl" --log "$T/no.jsonl"
expect_error "the replayed log is not the run's own --log" "also this run's --log" -- \
    "$DTRAIN" sim "${C[@]}" --algo allreduce --replay "$L" --log "$L"
# what only rank 0 can see (it reads the log): the run ends with the line, and writes no log
bad() { # LABEL WANT LOG FLAGS...: the replay fails naming LOG, with WANT in its line, leaving no log
    local label=$1 want=$2 log=$3
    shift 3
    "$DTRAIN" sim "${C[@]}" --algo allreduce "$@" --replay "$log" --log "$T/bad.jsonl" >"$T/bad.out" 2>"$T/bad.err"
    local rc=$? line
    line=$(grep "dtrain sim --replay" "$T/bad.err" | head -1)
    [ "$rc" -ne 0 ] && [ -n "$line" ] && grep -qF -- "$want" <<<"$line"
    check "$label" $? "exit $rc: ${line:-$(head -c 300 "$T/bad.err")}"
    ! grep -qs '"type":"summary"' "$T/bad.jsonl"
    check "$label: no finished log" $? "$(if [ -f "$T/bad.jsonl" ]; then wc -l <"$T/bad.jsonl"; else echo no file; fi)"
    rm -f "$T/bad.jsonl"
}
bad "another learning rate" "that run's lr was 0.05, this run's is 0.01" "$L" --lr 0.01
bad "another seed" "that run's seed was 1, this run's is 2" "$L" --seed 2
sed 's/"mb_sent":\([0-9.]*\)/"mb_sent":9\1/' "$L" >"$T/traffic.jsonl"
bad "a run that sent other bytes (its messages depended on its numbers)" "by epoch 1 this run sent 480 messages" "$T/traffic.jsonl"
grep -v '"type":"summary"' "$L" >"$T/cut.jsonl"
bad "a run that did not finish" "its run did not finish" "$T/cut.jsonl"
{ cat "$L"; cat "$L"; } >"$T/two.jsonl"
bad "a log of two runs" "a second run in the log" "$T/two.jsonl"
printf 'not json\n' >"$T/junk.jsonl"
bad "not a dtrain log" "not a line of a dtrain log" "$T/junk.jsonl"

# scripts/scaling: time to a target against the host count (2 and 4 hosts), a panel per link
for n in 2 4; do
    "$DTRAIN" sim "${C[@]}" -n $n --algo allreduce --link 1Gbps --target-acc 0.3 --log "$T/scale-$n.jsonl" >/dev/null 2>&1
done
out=$(/usr/bin/python3 "$(dirname "$0")/../scripts/scaling" --out "$T/scale.svg" "$T/scale-2.jsonl" "$T/scale-4.jsonl" 2>&1)
[ $? -eq 0 ] && grep -q "<svg" "$T/scale.svg" && [ -n "$(summary_field "$T/scale-2.jsonl" time_to_target_s)" ]
check "scripts/scaling draws the runs of 2 and 4 hosts" $? "$out"
"$DTRAIN" train --model cnn1 --data mnist --train-limit 500 --test-limit 100 --max-steps 3 --quiet --no-save --log "$T/real.jsonl" >/dev/null 2>&1
out=$(/usr/bin/python3 "$(dirname "$0")/../scripts/scaling" --out "$T/no.svg" "$T/real.jsonl" 2>&1)
[ $? -ne 0 ] && [ ! -e "$T/no.svg" ] && grep -q "not a run of dtrain sim" <<<"$out"
check "scripts/scaling: a run not simulated is refused in one line" $? "$out"

# dtrain sweep: {seed} is each run's seed, refused in a run without one
printf '[sweep]\nname = r\nsimulate = true\nseeds = 1 2\n[base]\nmodel = cnn1\nalgo = allreduce\ncompute = modelled\nspeed = 29Gf\nn = 4\nreplay = %s/seed{seed}.jsonl\n' "$T" >"$T/r.ini"
touch "$T/seed1.jsonl" "$T/seed2.jsonl"
out=$("$DTRAIN" sweep "$T/r.ini" --dry-run 2>&1)
grep -q -- "--replay $T/seed1.jsonl --seed 1" <<<"$out" && grep -q -- "--replay $T/seed2.jsonl --seed 2" <<<"$out"
check "sweep: {seed} is each run's seed" $? "$(grep -o -- '--replay [^ ]*' <<<"$out" | tr '\n' ' ')"
sed -i '/^seeds/d' "$T/r.ini"
expect_error "sweep: {seed} without seeds" "$T/r.ini:10: key 'replay': {seed} in" -- "$DTRAIN" sweep "$T/r.ini" --dry-run
finish
