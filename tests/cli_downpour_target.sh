#!/usr/bin/env bash
# downpour with --target-acc and --eval-every-steps (one server, docs/downpour.md "Time to
# accuracy"): the server evaluates its model every N steps of the workers' mean position, the
# first evaluation reaching the target stops the workers at their next step, the model stays
# the one that reached it, and the summary says when (time, steps, messages, bytes); a target
# not reached runs every epoch; a dropped worker changes none of it; several servers refuse.
. "$(dirname "$0")/lib.sh"
require_mnist

C=(--algo downpour --model cnn1 --data mnist --train-limit 6000 --test-limit 2000 --batch 32 --lr 0.05
   --momentum 0.5 --seed 5)
# every evaluation of a log (the eval lines, then the epoch lines) as [step or epoch, test_acc]
evals() { log_query "$1" '[[r.get("step", r.get("epoch")), r["test_acc"]] for r in of("eval") + of("epoch")]'; }
# kept_at_target LABEL LOG WEIGHTS A: checks that the final model (the summary's accuracy, and
# the saved weights' test loss) is the one whose evaluation reached A: later pushes discarded
kept_at_target() {
    local q='[r[a[0]] for r in of("eval") + of("epoch") if r["test_acc"] >= float(a[1])][0]' loss eloss
    compare "$1the final model's accuracy is the reaching evaluation's" "$(acc "$2")" == "$(log_query "$2" "$q" test_acc "$4")"
    loss=$(log_query "$2" "$q" test_loss "$4")
    eloss=$("$DTRAIN" eval --model cnn1 --weights "$3" --data mnist --test-limit 2000 2>&1 | sed -n 's/.*, loss \([0-9.]*\)$/\1/p')
    holds "$eloss" '==' "$eloss" && awk -v a="$loss" -v b="$eloss" 'BEGIN { d = a - b; exit !(d < 0.00006 && d > -0.00006) }'
    check "$1and so is its test loss (the saved weights evaluated)" $? "reached: loss $loss, saved weights: loss ${eloss:-?}"
}

# 1. a reachable target: 2 workers, 4 epochs of 93 steps, evaluated every 10 steps
timeout 120 "$DTRAIN" run -n 3 "${C[@]}" --epochs 4 --eval-every-steps 10 --target-acc 0.85 --log "$T/t.jsonl" --out "$T/t.w" \
    >"$T/t.out" 2>"$T/t.err"
rc=$?; check "--target-acc 0.85 runs (status 0, within 120 s)" $rc "rc=$rc $(head -c 300 "$T/t.err")"
line=$(grep '^reached .*(--target-acc 0.85) after .* s of training, .* steps, .* messages, .* MB' "$T/t.out")
check "... says when it reached it" $? "$line"
ok=$(log_query "$T/t.jsonl" 'int(of("summary")[0]["time_to_target_s"] is not None)')
compare "... the summary has the time to the target" "$ok" == 1 "time_to_target_s $(summary_field "$T/t.jsonl" time_to_target_s)"
n=$(log_query "$T/t.jsonl" 'sum(1 for r in of("eval") + of("epoch") if r["test_acc"] >= 0.85)')
compare "... exactly one evaluation reached it" "$n" == 1 "evaluations $(evals "$T/t.jsonl")"
awk '/^reached / { r = NR } /^(step|epoch) / { e = NR } END { exit !(r && e == r - 1) }' "$T/t.out"
check "... the last one: the reached line follows it, nothing is evaluated after" $? "$(grep -B1 '^reached' "$T/t.out" | head -1)"
steps=$(summary_field "$T/t.jsonl" steps) tgt=$(summary_field "$T/t.jsonl" steps_to_target)
compare "... stopped before the last epoch" "$steps" '<' $((3 * 93)) "steps $steps"
compare "... epochs logged fewer than 4" "$(line_count "$T/t.jsonl" epoch)" '<' 4
pushes=$(summary_field "$T/t.jsonl" pushes)
compare "... steps to the target = the pushes applied / 2 workers" "$tgt" == "$(( pushes / 2 ))" "steps_to_target $tgt, pushes $pushes"
mean=$(log_query "$T/t.jsonl" 'sum(r["steps"] for r in one("summary")["per_rank"] if r["rank"] > 0) / 2')
within "... the workers stopped at their next step (their mean steps)" "$mean" "$tgt" "$((tgt + 2))"
tt=$(summary_field "$T/t.jsonl" time_to_target_s) tr=$(summary_field "$T/t.jsonl" train_s) ev=$(summary_field "$T/t.jsonl" eval_s)
compare "... time to target > 0 and <= the training time" "$(awk -v a="$tt" -v b="$tr" 'BEGIN { print (a > 0 && a <= b + 0.001) }')" == 1 "time_to_target_s $tt, train_s $tr"
compare "... the server's evaluations timed apart" "$ev" '>' 0 "eval_s $ev"
m=$(summary_field "$T/t.jsonl" msgs_to_target) ms=$(summary_field "$T/t.jsonl" msgs_sent)
within "... messages to the target: at least 3 per step to it, at most the run's" "$m" "$((3 * 2 * tgt))" "$ms"
mb=$(summary_field "$T/t.jsonl" mb_to_target) mbs=$(summary_field "$T/t.jsonl" mb_sent)
within "... MB to the target, at most the run's" "$mb" 0.01 "$mbs"
kept_at_target "... " "$T/t.jsonl" "$T/t.w" 0.85
balanced "target reached" "$T/t.jsonl"

# 2. a target not reached: every epoch runs, the run says so, the summary has nulls
timeout 120 "$DTRAIN" run -n 3 "${C[@]}" --epochs 1 --target-acc 0.999 --no-save --log "$T/u.jsonl" >"$T/u.out" 2>&1
rc=$?; check "--target-acc 0.999 (not reached) ends normally" $rc "rc=$rc"
grep -q '^--target-acc 0.999 not reached: final test accuracy' "$T/u.out"; check "... and says so" $? "$(grep 'not reached' "$T/u.out")"
compare "... time_to_target_s is null" "$(log_query "$T/u.jsonl" 'int(one("summary")["time_to_target_s"] is None)')" == 1
compare "... every step trained" "$(summary_field "$T/u.jsonl" pushes)" == 186

# 3. --eval-every-steps 31 over 2 epochs of 93 steps: at 31, 62, 124, 155; 93 and 186 are the
#    epochs' own evaluations (as the synchronous schemes skip them)
timeout 120 "$DTRAIN" run -n 3 "${C[@]}" --epochs 2 --eval-every-steps 31 --no-save --log "$T/s.jsonl" >"$T/s.out" 2>&1
rc=$?; check "--eval-every-steps 31 runs" $rc "rc=$rc"
st=$(log_query "$T/s.jsonl" '[e["step"] for e in of("eval")]')
[ "$st" = "[31,62,124,155]" ]; check "... evaluates at steps 31, 62, 124, 155" $? "steps $st"
ep=$(log_query "$T/s.jsonl" 'int(all(abs(e["epoch"] - e["step"] / 93) < 1e-3 for e in of("eval")))')
compare "... the eval lines' epoch is step / 93" "$ep" == 1
ms=$(log_query "$T/s.jsonl" 'int(all(a["msgs_sent"] < b["msgs_sent"] and a["train_s"] < b["train_s"] for a, b in zip(of("eval"), of("eval")[1:])))')
compare "... with the traffic and training time so far, growing" "$ms" == 1 "msgs $(log_query "$T/s.jsonl" '[e["msgs_sent"] for e in of("eval")]')"
n=$(grep -c '^step  *[0-9]* (epoch [0-9.]*)  test ' "$T/s.out"); compare "... and a console line each" "$n" == 4
compare "... the epochs still reported" "$(line_count "$T/s.jsonl" epoch)" == 2

# 4. fewer messages (pull every 4 steps, push every 2, 3 workers): steps still every 10; the
#    workers learn of the target up to 3 steps late, and what they push meanwhile is discarded
timeout 120 "$DTRAIN" run -n 4 "${C[@]}" --epochs 4 --fetch-every 4 --push-every 2 --compress int8 --eval-every-steps 10 \
    --target-acc 0.6 --out "$T/f.w" --log "$T/f.jsonl" >"$T/f.out" 2>&1
rc=$?; check "--fetch-every 4 --push-every 2 --compress int8 with the target runs" $rc "rc=$rc"
compare "... evaluated every 10 steps" "$(log_query "$T/f.jsonl" 'int(len(of("eval")) > 0 and all(e["step"] % 10 == 0 for e in of("eval")))')" == 1 \
    "steps $(log_query "$T/f.jsonl" '[e["step"] for e in of("eval")]')"
compare "... reaches it" "$(log_query "$T/f.jsonl" 'int(one("summary")["steps_to_target"] is not None)')" == 1 "evaluations $(evals "$T/f.jsonl")"
kept_at_target "... " "$T/f.jsonl" "$T/f.w" 0.6
balanced "fetch/push every, compressed, target" "$T/f.jsonl"

# 5. a worker dropped on the way (stalls 4 s at its step 3, --worker-timeout 1.5): the others reach the
#    target. Step 3, not halfway: on a loaded machine the others could reach it before the last
#    worker's halfway step, and nothing would be dropped.
start=$(date +%s.%N)
timeout 60 "$DTRAIN" run -n 4 "${C[@]}" --epochs 4 --eval-every-steps 10 --target-acc 0.85 --worker-timeout 1.5 \
    --stall-seconds 4 --stall-at-step 3 --no-save --log "$T/d.jsonl" >"$T/d.out" 2>"$T/d.err"
rc=$?; secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
check "a dropped worker and the target: the run completes within 60 s" $rc "rc=$rc in ${secs} s"
d=$(summary_field "$T/d.jsonl" dropped); [ "$d" = "[3]" ]; check "... the stalled worker was dropped" $? "dropped=$d"
compare "... the others reach it" "$(log_query "$T/d.jsonl" 'int(one("summary")["time_to_target_s"] is not None)')" == 1 \
    "evaluations $(evals "$T/d.jsonl")"
balanced "dropped worker, target" "$T/d.jsonl"

# 6. several servers: refused, one line
expect_error "--servers 2 --target-acc" "--target-acc: not with --algo downpour --servers 2 (the model is sliced" -- \
    "$DTRAIN" run -n 4 --servers 2 "${C[@]}" --epochs 1 --target-acc 0.9 --no-save
expect_error "--servers 2 --eval-every-steps" "--eval-every-steps: not with --algo downpour --servers 2" -- \
    "$DTRAIN" run -n 4 --servers 2 "${C[@]}" --epochs 1 --eval-every-steps 10 --no-save

finish
