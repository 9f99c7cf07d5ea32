#!/usr/bin/env bash
# Real training on MNIST: a short run reaches >= 90% test accuracy, its saved weights
# evaluate to the same accuracy, a resumed run repeats an uninterrupted one bit for bit,
# gzipped Fashion-MNIST trains too, and so does --precision bf16. Needs scripts/get-data to have run.
. "$(dirname "$0")/lib.sh"
DATA=${DTRAIN_DATA:-data}
require_mnist

# 1. cnn1 on 6,000 MNIST training images for one epoch
"$DTRAIN" train --model cnn1 --data mnist --epochs 1 --train-limit 6000 --batch 16 --lr 0.03 \
    --momentum 0.5 --seed 2 --out "$T/short.weights" --log "$T/short.jsonl" >"$T/short.out" 2>&1
check "short training runs" $? "$(tail -1 "$T/short.out")"
acc=$(acc "$T/short.jsonl")
compare "cnn1, 6000 images, 1 epoch: test accuracy >= 0.90" "$acc" '>=' 0.90 "test_acc=$acc"
e=$(epoch_fields "$T/short.jsonl" epoch); [ "$e" = "[1]" ]; check "log has the epoch line" $? "epochs logged: $e"

# 2. the saved weights evaluate to the reported accuracy
evaluates_to "eval reproduces the training run's accuracy" "$acc" --model cnn1 --weights "$T/short.weights" --data mnist

# 3. resume: 1 epoch + resume to 2 == 2 epochs straight, bit for bit
common=(--model cnn1 --data mnist --train-limit 1500 --batch 32 --lr 0.05 --momentum 0.9 --seed 4 --quiet)
"$DTRAIN" train "${common[@]}" --epochs 2 --out "$T/straight.weights"
"$DTRAIN" train "${common[@]}" --epochs 1 --checkpoint "$T/ckpt" --out "$T/first.weights"
"$DTRAIN" train "${common[@]}" --epochs 2 --resume "$T/ckpt" --out "$T/resumed.weights"
cmp -s "$T/straight.weights" "$T/resumed.weights"; check "resumed run equals uninterrupted run" $? "cmp straight resumed"
cmp -s "$T/straight.weights" "$T/first.weights"; [ $? -ne 0 ]; check "one epoch differs from two" $? "cmp straight first"

# 4. gzipped IDX (Fashion-MNIST from Debian) trains
if [ -s "$DATA/fashion-mnist/train-images-idx3-ubyte.gz" ]; then
    "$DTRAIN" train --model mlp --data fashion-mnist --epochs 1 --train-limit 5000 --test-limit 2000 \
        --batch 32 --lr 0.05 --no-save --log "$T/f.jsonl" --quiet
    facc=$(acc "$T/f.jsonl")
    compare "fashion-mnist (gz) mlp learns" "$facc" '>=' 0.65 "test_acc=$facc"
else
    check "fashion-mnist present" 1 "$DATA/fashion-mnist missing: run scripts/get-data"
fi

# 6. divergence: --lr 1e6 stops at the end of the epoch it happened in, with one line, exit
# status 3, a log that is JSON throughout, no weights, and the last finite checkpoint kept
cp "$T/ckpt" "$T/ckpt.finite"
"$DTRAIN" train "${common[@]}" --epochs 3 --lr 1e6 --resume "$T/ckpt" --checkpoint "$T/ckpt" \
    --out "$T/nan.weights" --log "$T/nan.jsonl" >"$T/nan.out" 2>"$T/nan.err"
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$T/nan.err")" -eq 1 ] && grep -q "training diverged in epoch 2: non-finite values from step" "$T/nan.err"
check "--lr 1e6: one line, exit status 3" $? "rc=$rc: $(cat "$T/nan.err")"
[ ! -e "$T/nan.weights" ]; check "... no weights written" $? ""
cmp -s "$T/ckpt" "$T/ckpt.finite"; check "... the last finite checkpoint kept" $? "cmp ckpt (epoch 1)"
compare "... the log says where (JSON throughout)" "$(log_query "$T/nan.jsonl" 'one("diverged")[a[0]]' epoch)" == 2
compare "... and logs no epoch of it" "$(line_count "$T/nan.jsonl" epoch)" == 0
# under MPI every rank agrees and one line is printed
"$DTRAIN" run -n 2 --algo allreduce --model mlp --data mnist --train-limit 2000 --epochs 2 --lr 1e6 --quiet \
    --out "$T/nan2.weights" >"$T/nan2.out" 2>"$T/nan2.err"
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$T/nan2.err")" -eq 1 ] && grep -q "training diverged in epoch 1" "$T/nan2.err" && [ ! -e "$T/nan2.weights" ]
check "allreduce on 2 ranks, --lr 1e6: one line, exit status 3, no weights" $? "rc=$rc: $(cat "$T/nan2.err")"
# --compress int8 sends a non-finite value as 0: the parameters stay finite, and the line names
# the first tensor whose gradient was not (before, it named no tensor)
"$DTRAIN" run -n 2 --algo allreduce --compress int8 --model mlp --data mnist --train-limit 2000 --epochs 1 --lr 1e6 --quiet \
    --no-save --log "$T/nan4.jsonl" >"$T/nan4.out" 2>"$T/nan4.err"
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$T/nan4.err")" -eq 1 ] &&
    grep -q "training diverged in epoch 1: non-finite values from step [0-9]* on rank [01], first in the gradient of fc[12]\.\(weight\|bias\), the parameters still finite" "$T/nan4.err"
check "allreduce --compress int8, --lr 1e6: one line naming the tensor" $? "rc=$rc: $(cat "$T/nan4.err")"
t=$(log_query "$T/nan4.jsonl" '[one("diverged")[k] for k in ("tensor", "in")]')
echo "$t" | grep -q '^\["fc[12]\.\(weight\|bias\)","gradient"\]$'; check "... and the log's diverged line" $? "$t"
# downpour's epochs are not checked (its servers apply pushes asynchronously): its final model is
"$DTRAIN" run -n 2 --algo downpour --model mlp --data mnist --train-limit 2000 --epochs 1 --lr 1e6 --quiet \
    --out "$T/nan3.weights" --log "$T/nan3.jsonl" >"$T/nan3.out" 2>"$T/nan3.err"
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$T/nan3.err")" -eq 1 ] && grep -q "training diverged: the final model" "$T/nan3.err" && [ ! -e "$T/nan3.weights" ]
check "downpour on 2 ranks, --lr 1e6: one line, exit status 3, no weights" $? "rc=$rc: $(cat "$T/nan3.err")"
compare "... a diverged line in the log" "$(line_count "$T/nan3.jsonl" diverged)" == 1

# 7. --precision bf16 (activations in bf16, fp32 master weights): learns as fp32 does, resumes
# bit for bit from its fp32 checkpoint, goes through `run` to every rank, and is refused when misspelt
"$DTRAIN" train --model cnn1 --data mnist --epochs 1 --train-limit 6000 --batch 16 --lr 0.03 \
    --momentum 0.5 --seed 2 --precision bf16 --no-save --log "$T/bf16.jsonl" --quiet
bacc=$(acc "$T/bf16.jsonl")
within "bf16: the short run's accuracy within 0.02 of fp32's ($acc)" "$bacc" "$(awk "BEGIN{print $acc - 0.02}")" \
    "$(awk "BEGIN{print $acc + 0.02}")"
p=$(log_query "$T/bf16.jsonl" 'one("config")["precision"]'); [ "$p" = bf16 ]; check "... its configuration line says bf16" $? "$p"
p=$(log_query "$T/short.jsonl" 'one("config")["precision"]'); [ "$p" = fp32 ]; check "... fp32's says fp32" $? "$p"
"$DTRAIN" train "${common[@]}" --precision bf16 --epochs 2 --out "$T/bstraight.weights"
"$DTRAIN" train "${common[@]}" --precision bf16 --epochs 1 --checkpoint "$T/bckpt" --no-save
"$DTRAIN" train "${common[@]}" --precision bf16 --epochs 2 --resume "$T/bckpt" --out "$T/bresumed.weights"
cmp -s "$T/bstraight.weights" "$T/bresumed.weights"; check "bf16: resumed run equals uninterrupted run" $? "cmp"
cmp -s "$T/bstraight.weights" "$T/straight.weights"; [ $? -ne 0 ]; check "... and differs from fp32's" $? "cmp"
for p in fp32 bf16; do
    run -n 2 --algo allreduce --model mlp --data mnist --train-limit 2000 --epochs 1 --precision $p --no-save \
        --log "$T/run-$p.jsonl"
done
a32=$(acc "$T/run-fp32.jsonl")
within "bf16 through dtrain run (2 ranks): accuracy within 0.02 of fp32's ($a32)" "$(acc "$T/run-bf16.jsonl")" \
    "$(awk "BEGIN{print $a32 - 0.02}")" "$(awk "BEGIN{print $a32 + 0.02}")"
p=$(log_query "$T/run-bf16.jsonl" 'one("config")["precision"]'); [ "$p" = bf16 ]; check "... its configuration line says bf16" $? "$p"
expect_error "--precision fp16: refused in one line" "--precision" -- "$DTRAIN" train --model cnn1 --precision fp16
"$DTRAIN" bench --model cnn1 --batch 8 --warmup 1 --steps 2 --precision bf16 | grep -q "precision=bf16 "
check "dtrain bench --precision bf16" $? "$("$DTRAIN" bench --model cnn1 --batch 8 --warmup 1 --steps 2 --precision bf16)"
"$DTRAIN" info --model cnn1 | grep -q "^  conv, linear: multiplies bf16-rounded weights and inputs"
check "dtrain info says what bf16 does with each layer" $? "$("$DTRAIN" info --model cnn1 | tail -4)"

# 5. model info
"$DTRAIN" info --model resnet18-cifar | grep -q "parameters: 11173962 "
check "resnet18-cifar has 11,173,962 parameters" $? "$("$DTRAIN" info --model resnet18-cifar | grep parameters)"

finish
