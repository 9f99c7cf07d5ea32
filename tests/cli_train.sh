#!/usr/bin/env bash
# Real training on MNIST: a short run reaches >= 90% test accuracy, its saved weights
# evaluate to the same accuracy, a resumed run repeats an uninterrupted one bit for bit,
# and gzipped Fashion-MNIST trains too. Needs scripts/get-data to have run.
. "$(dirname "$0")/lib.sh"
DATA=${DTRAIN_DATA:-data}
json_field() { grep "\"type\":\"$2\"" "$1" | tail -1 | sed -n "s/.*\"$3\":\([-0-9.e]*\).*/\1/p"; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

if [ ! -s "$DATA/mnist/train-images-idx3-ubyte" ] && [ ! -s "$DATA/mnist/train-images-idx3-ubyte.gz" ]; then
    echo "FAIL MNIST not found in $DATA/mnist: run scripts/get-data"; echo "0 passed, 1 failed"; exit 1
fi

# 1. cnn1 on 6,000 MNIST training images for one epoch
"$DTRAIN" train --model cnn1 --data mnist --epochs 1 --train-limit 6000 --batch 16 --lr 0.03 \
    --momentum 0.5 --seed 2 --out "$T/short.weights" --log "$T/short.jsonl" >"$T/short.out" 2>&1
check "short training runs" $? "$(tail -1 "$T/short.out")"
acc=$(json_field "$T/short.jsonl" summary test_acc)
ge "${acc:-0}" 0.90; check "cnn1, 6000 images, 1 epoch: test accuracy >= 0.90" $? "test_acc=$acc"
grep -q '"type":"epoch","epoch":1,' "$T/short.jsonl"; check "log has the epoch line" $? "$(head -1 "$T/short.jsonl")"

# 2. the saved weights evaluate to the reported accuracy
out=$("$DTRAIN" eval --model cnn1 --weights "$T/short.weights" --data mnist 2>&1)
eacc=$(echo "$out" | sed -n 's/test accuracy \([0-9.]*\)%.*/\1/p')
awk -v a="$acc" -v e="${eacc:-0}" 'BEGIN { d = a * 100 - e; exit !(d < 0.006 && d > -0.006) }'
check "eval reproduces the training run's accuracy" $? "train ${acc}, eval ${eacc}%"

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
    facc=$(json_field "$T/f.jsonl" summary test_acc)
    ge "${facc:-0}" 0.65; check "fashion-mnist (gz) mlp learns" $? "test_acc=$facc"
else
    check "fashion-mnist present" 1 "$DATA/fashion-mnist missing: run scripts/get-data"
fi

# 5. model info
"$DTRAIN" info --model resnet18-cifar | grep -q "parameters: 11173962 "
check "resnet18-cifar has 11,173,962 parameters" $? "$("$DTRAIN" info --model resnet18-cifar | grep parameters)"

finish
