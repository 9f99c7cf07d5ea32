#!/usr/bin/env bash
# downpour (asynchronous parameter server, shared/spec/algorithms.md): one and two servers
# train cnn1 on MNIST well above chance with stale pushes, the saved model is the servers'
# model, --fetch-every/--push-every thin out the messages, a stalled worker is dropped and
# named while the others finish, and messages sent equal messages received. Uses `dtrain run`.
. "$(dirname "$0")/lib.sh"
DATA=${DTRAIN_DATA:-data}
summary_list() { grep '"type":"summary"' "$1" | grep -o "\"$2\":\[[^]]*\]" | head -1 | cut -d: -f2; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
# messages sent == messages received, summed over ranks (every message is taken)
balanced() {
    local s r
    s=$(summary_field "$2" msgs_sent)
    r=$(grep '"type":"summary"' "$2" | grep -o '"msgs_recv":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)
    [ -n "$s" ] && [ "$s" = "$r" ]; check "$1: messages sent ($s) == messages received ($r)" $? ""
}

if [ ! -s "$DATA/mnist/train-images-idx3-ubyte" ] && [ ! -s "$DATA/mnist/train-images-idx3-ubyte.gz" ]; then
    echo "FAIL MNIST not found in $DATA/mnist: run scripts/get-data"; echo "0 passed, 1 failed"; exit 1
fi

C=(--algo downpour --model cnn1 --data mnist --train-limit 6000 --test-limit 2000 --batch 32 --lr 0.05
   --momentum 0.5 --epochs 2 --seed 5)

# 1. one server, two workers: pushes interleave (stale), accuracy well above chance
timeout 120 "$DTRAIN" run -n 3 --servers 1 "${C[@]}" --out "$T/s1.w" --log "$T/s1.jsonl" >"$T/s1.out" 2>&1
rc=$?; check "-n 3 --servers 1 runs" $rc "rc=$rc: $(grep '^downpour:' "$T/s1.out" | head -1)"
stale=$(summary_field "$T/s1.jsonl" staleness_mean)
awk -v s="${stale:-0}" 'BEGIN { exit !(s > 0) }'; check "2 workers: staleness_mean > 0" $? "staleness_mean=$stale max=$(summary_field "$T/s1.jsonl" staleness_max)"
acc=$(summary_field "$T/s1.jsonl" test_acc)
ge "${acc:-0}" 0.80; check "1 server: test accuracy >= 0.80" $? "test_acc=$acc"
[ "$(grep -c '"type":"epoch"' "$T/s1.jsonl")" -eq 2 ]; check "rank 0 reports every epoch (one server)" $? "$(grep -c '"type":"epoch"' "$T/s1.jsonl") epoch lines"
[ "$(summary_list "$T/s1.jsonl" pushes_per_worker)" = "[186,186]" ]
check "one push per step per worker" $? "pushes_per_worker=$(summary_list "$T/s1.jsonl" pushes_per_worker)"
out=$("$DTRAIN" eval --model cnn1 --weights "$T/s1.w" --data mnist --test-limit 2000 2>&1)
eacc=$(echo "$out" | sed -n 's/test accuracy \([0-9.]*\)%.*/\1/p')
awk -v a="${acc:-0}" -v e="${eacc:-0}" 'BEGIN { d = a * 100 - e; exit !(d < 0.006 && d > -0.006) }'
check "the saved weights are the evaluated (servers') model" $? "summary ${acc}, eval ${eacc}%"
balanced "1 server" "$T/s1.jsonl"

# 2. two servers, each owning half of the parameters
timeout 120 "$DTRAIN" run -n 4 --servers 2 "${C[@]}" --no-save --log "$T/s2.jsonl" >"$T/s2.out" 2>&1
rc=$?; check "-n 4 --servers 2 runs" $rc "rc=$rc: $(grep '^downpour:' "$T/s2.out" | head -1)"
acc2=$(summary_field "$T/s2.jsonl" test_acc)
ge "${acc2:-0}" 0.80; check "2 servers: test accuracy >= 0.80" $? "test_acc=$acc2"
[ "$(summary_field "$T/s2.jsonl" servers)" = 2 ]; check "summary says 2 servers" $? ""
balanced "2 servers" "$T/s2.jsonl"

# 3. fewer messages: pull every 4 steps, push every 3 (2 workers x 186 steps)
timeout 120 "$DTRAIN" run -n 3 "${C[@]}" --fetch-every 4 --push-every 3 --no-save --quiet --log "$T/fp.jsonl"
rc=$?
pw=$(summary_list "$T/fp.jsonl" pushes_per_worker); pct=$(summary_field "$T/fp.jsonl" msgs_pct)
[ $rc -eq 0 ] && [ "$pw" = "[62,62]" ] && awk -v p="${pct:-100}" 'BEGIN { exit !(p > 25 && p < 32) }'
check "--fetch-every 4 --push-every 3: 62 pushes per worker, ~28% of the messages" $? "rc=$rc pushes_per_worker=$pw msgs_pct=$pct"
acc3=$(summary_field "$T/fp.jsonl" test_acc)
ge "${acc3:-0}" 0.70; check "... still learns (>= 0.70)" $? "test_acc=$acc3"
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
[ "$(summary_list "$T/st.jsonl" dropped)" = "[3]" ]; check "the summary lists it" $? "dropped=$(summary_list "$T/st.jsonl" dropped)"
rank_steps() { grep '"type":"summary"' "$1" | grep -o "{\"rank\":$2,[^}]*}" | grep -o '"steps":[0-9]*' | cut -d: -f2; }
s1=$(rank_steps "$T/st.jsonl" 1); s3=$(rank_steps "$T/st.jsonl" 3)
[ -n "$s1" ] && [ -n "$s3" ] && [ "$s3" -lt "$s1" ]
check "the dropped worker stops training there (its steps < a live worker's)" $? "rank 3: ${s3:-?} steps, rank 1: ${s1:-?}"
acc4=$(summary_field "$T/st.jsonl" test_acc)
ge "${acc4:-0}" 0.70; check "accuracy still reported (>= 0.70)" $? "test_acc=$acc4"
balanced "stalled worker" "$T/st.jsonl"

finish
