#!/usr/bin/env bash
# Time to accuracy: --eval-every-steps evaluates between epochs without changing the training,
# --target-acc stops at the first evaluation that reaches it, and the summary says how long
# the training took to get there (evaluation not counted), in how many steps, messages, bytes.
. "$(dirname "$0")/lib.sh"
require_mnist
C=(--model mlp --data mnist --train-limit 6000 --test-limit 1000 --batch 32 --lr 0.05 --seed 3 --quiet)

# 1. one process: stops at the first evaluation at or above the target
"$DTRAIN" train "${C[@]}" --epochs 3 --eval-every-steps 20 --target-acc 0.85 --no-save --log "$T/t.jsonl"
check "--target-acc 0.85 runs" $? ""
accs=$(log_query "$T/t.jsonl" '[e["test_acc"] for e in of("eval")]')
compare "... the last evaluation reaches the target, no earlier one did" \
    "$(log_query "$T/t.jsonl" 'int(of("eval")[-1]["test_acc"] >= 0.85 and all(e["test_acc"] < 0.85 for e in of("eval")[:-1]))')" == 1 "evals $accs"
steps=$(summary_field "$T/t.jsonl" steps)
compare "... and training stopped there" "$(summary_field "$T/t.jsonl" steps_to_target)" == "$steps" "steps_to_target == steps ($steps)"
compare "... before the 3 epochs' $((3 * 187)) steps" "$steps" '<' $((3 * 187))
compare "... evaluated every 20 steps" "$(log_query "$T/t.jsonl" 'int(all(e["step"] % 20 == 0 for e in of("eval")))')" == 1
tt=$(summary_field "$T/t.jsonl" time_to_target_s) ev=$(summary_field "$T/t.jsonl" eval_s) tr=$(summary_field "$T/t.jsonl" train_s)
compare "... time to target > 0 and <= the training time" "$(awk -v a="$tt" -v b="$tr" 'BEGIN { print (a > 0 && a <= b + 0.001) }')" == 1 "time_to_target_s $tt, train_s $tr"
compare "... evaluation time measured apart" "$ev" '>' 0 "eval_s $ev"

# 2. evaluating between steps changes nothing in the training (one process, and allreduce)
"$DTRAIN" train "${C[@]}" --epochs 1 --out "$T/plain.w"
"$DTRAIN" train "${C[@]}" --epochs 1 --eval-every-steps 7 --out "$T/evald.w"
identical "--eval-every-steps 7: the same weights as without" "$T/plain.w" "$T/evald.w"
run -n 2 --algo allreduce "${C[@]}" --epochs 1 --out "$T/ar.w"
run -n 2 --algo allreduce "${C[@]}" --epochs 1 --eval-every-steps 10 --out "$T/ar-evald.w" --log "$T/ar.jsonl"
identical "allreduce with --eval-every-steps 10: the same weights as without" "$T/ar.w" "$T/ar-evald.w"
compare "... with an evaluation line every 10 steps" "$(line_count "$T/ar.jsonl" eval)" == $((93 / 10))

# 3. across ranks: every rank stops at the same evaluation; the traffic to it is recorded
run -n 2 --algo fedavg --local-steps 5 "${C[@]}" --epochs 3 --eval-every-steps 10 --target-acc 0.85 --no-save --log "$T/f.jsonl"
check "fedavg on 2 ranks with --target-acc runs" $? ""
compare "... reaches it" "$(log_query "$T/f.jsonl" 'int(one("summary")["time_to_target_s"] is not None)')" == 1
compare "... every rank stopped at the same step" "$(log_query "$T/f.jsonl" 'len(set(r["steps"] for r in one("summary")["per_rank"]))')" == 1
m=$(summary_field "$T/f.jsonl" msgs_to_target)
compare "... messages to the target recorded" "$m" '>' 0 "msgs_to_target $m"

# 3b. reached at an epoch's own evaluation (89.9% after epoch 2 of 6): that epoch is the last one,
#     logged and checkpointed; no empty epoch follows it (one process, and allreduce)
"$DTRAIN" train "${C[@]}" --epochs 6 --target-acc 0.89 --no-save --log "$T/e.jsonl" --checkpoint "$T/e.ck"
check "reached at an epoch's evaluation: runs" $? ""
compare "... two epochs logged" "$(line_count "$T/e.jsonl" epoch)" == 2 "epochs $(epoch_fields "$T/e.jsonl" test_acc)"
compare "... each of them trained" "$(log_query "$T/e.jsonl" 'int(all(e["images_per_s"] > 0 and e["train_acc"] > 0 for e in of("epoch")))')" == 1 \
    "images/s $(epoch_fields "$T/e.jsonl" images_per_s)"
expect_error "... and the checkpoint holds those 2 epochs" "already finished 2 epochs" -- \
    "$DTRAIN" train "${C[@]}" --epochs 2 --resume "$T/e.ck" --no-save
run -n 2 --algo allreduce "${C[@]}" --epochs 6 --target-acc 0.85 --no-save --log "$T/ae.jsonl"
n=$(line_count "$T/ae.jsonl" epoch)
compare "allreduce, reached at an epoch's evaluation: the last epoch logged reached it" \
    "$(log_query "$T/ae.jsonl" 'int(max(of("epoch"), key=lambda e: e["epoch"])["test_acc"] >= 0.85 and all(e["test_acc"] < 0.85 for e in of("epoch")[:-1]))')" == 1 \
    "test acc $(epoch_fields "$T/ae.jsonl" test_acc)"
compare "... and each epoch trained" "$(log_query "$T/ae.jsonl" 'int(all(e["images_per_s"] > 0 for e in of("epoch")))')" == 1 "$n epochs"

# 4. a target not reached: the run ends as usual and says so (null, not a number)
"$DTRAIN" train "${C[@]}" --epochs 1 --target-acc 0.999 --no-save --log "$T/u.jsonl"
check "an unreachable target still ends normally" $? ""
compare "... time_to_target_s is null" "$(log_query "$T/u.jsonl" 'int(one("summary")["time_to_target_s"] is None)')" == 1

# 4b. --target-on val: the held-out set's accuracy decides (a search never looks at the test set)
"$DTRAIN" train "${C[@]}" --epochs 3 --val 1000 --eval-every-steps 20 --target-acc 0.85 --target-on val --no-save --log "$T/v.jsonl"
check "--target-on val runs" $? ""
compare "... the last evaluation's val_acc reaches the target, no earlier one's did" \
    "$(log_query "$T/v.jsonl" 'int(of("eval")[-1]["val_acc"] >= 0.85 and all(e["val_acc"] < 0.85 for e in of("eval")[:-1]))')" == 1 \
    "val $(log_query "$T/v.jsonl" '[e["val_acc"] for e in of("eval")]')"
compare "... stopped at that evaluation" "$(summary_field "$T/v.jsonl" steps_to_target)" == "$(log_query "$T/v.jsonl" 'of("eval")[-1]["step"]')"
compare "... and the log says which accuracy" "$(log_query "$T/v.jsonl" 'int(of("config")[0]["target_on"] == one("summary")["target_on"] == "val")')" == 1
# the same run stopped by the test set's accuracy stops elsewhere (here the two differ by ~3 points)
"$DTRAIN" train "${C[@]}" --epochs 3 --val 1000 --eval-every-steps 20 --target-acc 0.85 --no-save --log "$T/vt.jsonl"
compare "... where --target-on test stops at another step" "$(summary_field "$T/vt.jsonl" steps_to_target)" '!=' "$(summary_field "$T/v.jsonl" steps_to_target)"

# 5. bad values
expect_error "--target-on val without --val" "--target-on val: needs --val N" -- "$DTRAIN" train "${C[@]}" --target-acc 0.9 --target-on val
expect_error "--target-on val without --target-acc" "--target-on val: needs --val N" -- "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --val 100 --target-on val
expect_error "--target-on other" "--target-on other: expected test or val" -- "$DTRAIN" train "${C[@]}" --target-on other
expect_error "--target-acc 0" "--target-acc 0: expected a number > 0" -- "$DTRAIN" train "${C[@]}" --target-acc 0
expect_error "--target-acc 1.5" "--target-acc 1.5" -- "$DTRAIN" train "${C[@]}" --target-acc 1.5
expect_error "downpour --servers 2 --target-acc" "--target-acc: not with --algo downpour --servers 2" -- "$DTRAIN" run -n 4 --algo downpour --servers 2 "${C[@]}" --target-acc 0.9

# A tie: an evaluation whose accuracy is the target exactly reaches it. --target-acc is kept as
# a float, and 0.4 as a float is 0.40000001: compared with the accuracy's double (2/5 = 0.4
# exactly) the tie was missed and the run went on. 5 test images: every accuracy k/5 below 1
# is such a tie; the target is the first evaluation's accuracy that rounds up as a float.
"$DTRAIN" train "${C[@]}" --test-limit 5 --eval-every-steps 5 --max-steps 40 --no-save --log "$T/tie0.jsonl" >/dev/null 2>&1
tie=$(log_query "$T/tie0.jsonl" 'next((str(e["test_acc"]) + " " + str(e["step"]) for e in of("eval") if 0 < e["test_acc"] < 1 and __import__("struct").unpack("f", __import__("struct").pack("f", e["test_acc"]))[0] > e["test_acc"] and all(x["test_acc"] < e["test_acc"] for x in of("eval") if x["step"] < e["step"])), "")')
if [ -n "$tie" ]; then
    set -- $tie
    "$DTRAIN" train "${C[@]}" --test-limit 5 --eval-every-steps 5 --max-steps 40 --target-acc "$1" --no-save --log "$T/tie.jsonl" >/dev/null 2>&1
    got=$(log_query "$T/tie.jsonl" 'one("summary")["steps_to_target"]')
    compare "an evaluation at exactly --target-acc $1 reaches it (step $2)" "$got" == "$2"
else
    check "a tie to test: an evaluation at k/5 that rounds up as a float" 1 "evaluations $(log_query "$T/tie0.jsonl" '[e["test_acc"] for e in of("eval")]')"
fi

finish
