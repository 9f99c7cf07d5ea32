#!/usr/bin/env bash
# downpour (asynchronous parameter server, docs/algorithms.md): one and two servers
# train cnn1 on MNIST well above chance with stale pushes, the saved model is the servers'
# model, --fetch-every/--push-every thin out the messages, a stalled worker is dropped and
# named while the others finish, and messages sent equal messages received. Uses `dtrain run`.
. "$(dirname "$0")/lib.sh"
require_mnist

C=(--algo downpour --model cnn1 --data mnist --train-limit 6000 --test-limit 2000 --batch 32 --lr 0.05
   --momentum 0.5 --epochs 2 --seed 5)

# 1. one server, two workers: pushes interleave (stale), accuracy well above chance
timeout 120 "$DTRAIN" run -n 3 --servers 1 "${C[@]}" --out "$T/s1.w" --log "$T/s1.jsonl" >"$T/s1.out" 2>&1
rc=$?; check "-n 3 --servers 1 runs" $rc "rc=$rc: $(grep '^downpour:' "$T/s1.out" | head -1)"
stale=$(summary_field "$T/s1.jsonl" staleness_mean)
compare "2 workers: staleness_mean > 0" "$stale" '>' 0 "staleness_mean=$stale max=$(summary_field "$T/s1.jsonl" staleness_max)"
acc=$(acc "$T/s1.jsonl")
compare "1 server: test accuracy >= 0.80" "$acc" '>=' 0.80 "test_acc=$acc"
n=$(line_count "$T/s1.jsonl" epoch); compare "rank 0 reports every epoch (one server)" "$n" == 2 "$n epoch lines"
pw=$(summary_field "$T/s1.jsonl" pushes_per_worker)
[ "$pw" = "[186,186]" ]; check "one push per step per worker" $? "pushes_per_worker=$pw"
evaluates_to "the saved weights are the evaluated (servers') model" "$acc" --model cnn1 --weights "$T/s1.w" --data mnist --test-limit 2000
balanced "1 server" "$T/s1.jsonl"
# the server's epoch lines carry the run's traffic so far (all of it passes through the one
# server): growing, the last one the summary's payload (the final model's averaging is not
# payload), as the evaluations between epochs have it
mb=$(epoch_fields "$T/s1.jsonl" mb_sent); total=$(summary_field "$T/s1.jsonl" mb_sent)
ok=$(log_query "$T/s1.jsonl" '(lambda e, s: int(None not in e and e == sorted(e) and 0 < e[0] < e[-1] and abs(e[-1] - s) <= 0.01 * s))([x["mb_sent"] for x in sorted(of("epoch"), key=lambda x: x["epoch"])], one("summary")["mb_sent"])')
compare "1 server: epoch lines with MB sent, growing, the last = the summary's" "$ok" == 1 "epochs $mb, summary $total"

# 2. two servers, each owning half of the parameters
timeout 120 "$DTRAIN" run -n 4 --servers 2 "${C[@]}" --no-save --log "$T/s2.jsonl" >"$T/s2.out" 2>&1
rc=$?; check "-n 4 --servers 2 runs" $rc "rc=$rc: $(grep '^downpour:' "$T/s2.out" | head -1)"
acc2=$(acc "$T/s2.jsonl")
compare "2 servers: test accuracy >= 0.80" "$acc2" '>=' 0.80 "test_acc=$acc2"
compare "summary says 2 servers" "$(summary_field "$T/s2.jsonl" servers)" == 2 ""
balanced "2 servers" "$T/s2.jsonl"

# 3. fewer messages: pull every 4 steps, push every 3 (2 workers x 186 steps)
timeout 120 "$DTRAIN" run -n 3 "${C[@]}" --fetch-every 4 --push-every 3 --no-save --quiet --log "$T/fp.jsonl"
rc=$?
pw=$(summary_field "$T/fp.jsonl" pushes_per_worker); pct=$(summary_field "$T/fp.jsonl" msgs_pct)
[ $rc -eq 0 ] && [ "$pw" = "[62,62]" ] && holds "$pct" '>' 25 && holds "$pct" '<' 32
check "--fetch-every 4 --push-every 3: 62 pushes per worker, ~28% of the messages" $? "rc=$rc pushes_per_worker=$pw msgs_pct=$pct"
acc3=$(acc "$T/fp.jsonl")
compare "... still learns (>= 0.70)" "$acc3" '>=' 0.70 "test_acc=$acc3"
balanced "fetch/push every" "$T/fp.jsonl"

# 4. a worker that stalls longer than --worker-timeout is dropped; the others finish
start=$(date +%s.%N)
timeout 60 "$DTRAIN" run -n 4 --servers 1 "${C[@]}" --worker-timeout 1.5 --stall-seconds 4 --no-save \
    --log "$T/st.jsonl" >"$T/st.out" 2>"$T/st.err"
rc=$?; secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
check "stalled worker: the run completes within 60 s" $rc "rc=$rc in ${secs} s"
grep -q '^downpour: .*dropped workers: rank 3 (silent' "$T/st.out"
check "the output names the dropped rank" $? "$(grep '^downpour: .*pushes' "$T/st.out")"
grep -q 'worker rank 3 silent for .* dropped' "$T/st.err"; check "the drop is warned about when it happens" $? "$(head -1 "$T/st.err")"
d=$(summary_field "$T/st.jsonl" dropped); [ "$d" = "[3]" ]; check "the summary lists it" $? "dropped=$d"
s1=$(rank_field "$T/st.jsonl" 1 steps); s3=$(rank_field "$T/st.jsonl" 3 steps)
holds "$s3" '<' "$s1"
check "the dropped worker stops training there (its steps < a live worker's)" $? "rank 3: ${s3:-?} steps, rank 1: ${s1:-?}"
acc4=$(acc "$T/st.jsonl")
compare "accuracy still reported (>= 0.70)" "$acc4" '>=' 0.70 "test_acc=$acc4"
balanced "stalled worker" "$T/st.jsonl"

finish
