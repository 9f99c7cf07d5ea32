#!/usr/bin/env bash
# Every bad input gets one line on stderr naming the file or flag and what was expected,
# exit status 2, no crash, and no output file.
. "$(dirname "$0")/lib.sh"

# --- small IDX data sets written here: 4 images of 28x28 ---------------------------------
byte() { printf "\\$(printf %03o "$1")"; }
be32() { byte $(($1 >> 24 & 255)); byte $(($1 >> 16 & 255)); byte $(($1 >> 8 & 255)); byte $(($1 & 255)); }
images() { # DIR COUNT_IN_HEADER COUNT_WRITTEN [MAGIC]
    { be32 ${4:-2051}; be32 $2; be32 28; be32 28; head -c $(($3 * 784)) /dev/urandom; } >"$1/train-images-idx3-ubyte"
    cp "$1/train-images-idx3-ubyte" "$1/t10k-images-idx3-ubyte"
}
labels() { # DIR COUNT LABEL_BYTES...
    local d=$1 n=$2; shift 2
    { be32 2049; be32 $n; for b in "$@"; do byte "$b"; done; } >"$d/train-labels-idx1-ubyte"
    cp "$d/train-labels-idx1-ubyte" "$d/t10k-labels-idx1-ubyte"
}
mk() { mkdir -p "$T/$1"; echo "$T/$1"; }
train() { "$DTRAIN" train --model cnn1 --data mnist --epochs 1 --batch 2 --out "$T/out.weights" "$@"; }

d=$(mk good); images "$d" 4 4; labels "$d" 4 1 2 3 4
d=$(mk magic); images "$d" 4 4 1234; labels "$d" 4 1 2 3 4
d=$(mk trunc-img); images "$d" 4 3; labels "$d" 4 1 2 3 4
d=$(mk trunc-lab); images "$d" 4 4; labels "$d" 4 1 2
d=$(mk mismatch); images "$d" 4 4; labels "$d" 3 1 2 3
d=$(mk range); images "$d" 4 4; labels "$d" 4 1 2 13 4
d=$(mk cifar); head -c $((3073 * 2 + 5)) /dev/zero >"$d/test_batch.bin"
for i in 1 2 3 4 5; do head -c 3073 /dev/zero >"$d/data_batch_$i.bin"; done
cp "$d/test_batch.bin" "$d/data_batch_3.bin"

# sanity: the good set trains, so the failures below are about the one thing broken in each
"$DTRAIN" train --model cnn1 --data mnist --data-dir "$T/good" --epochs 1 --batch 2 --out "$T/good.weights" --quiet
if [ $? -ne 0 ] || [ ! -s "$T/good.weights" ]; then echo "FAIL the good data set does not train"; fails=$((fails + 1)); fi

expect_error "missing data dir"   "$T/none/train-images-idx3-ubyte" -- train --data-dir "$T/none"
expect_error "wrong IDX magic"    "bad IDX magic"                   -- train --data-dir "$T/magic"
expect_error "truncated images"   "truncated"                       -- train --data-dir "$T/trunc-img"
expect_error "truncated labels"   "train-labels-idx1-ubyte: truncated" -- train --data-dir "$T/trunc-lab"
expect_error "count mismatch"     "does not match label count"      -- train --data-dir "$T/mismatch"
expect_error "label out of range" "label 13 at index 2 out of range" -- train --data-dir "$T/range"
expect_error "CIFAR size"         "is not a positive multiple of 3073" -- "$DTRAIN" train --model resnet18-cifar --data cifar10 --data-dir "$T/cifar" --out "$T/out.weights"
expect_error "unknown model"      "unknown model 'lenet9'"          -- train --data-dir "$T/good" --model lenet9
printf 'input c=1 h=28 w=28\nconv out=4 k=3\nrelu extra\n' >"$T/bad.spec"
expect_error "malformed spec"     "$T/bad.spec:3: expected key=value, got 'extra'" -- train --data-dir "$T/good" --model "$T/bad.spec"
expect_error "missing spec file"  "$T/nope.spec: cannot open"       -- train --data-dir "$T/good" --model "$T/nope.spec"
expect_error "lr 0"               "--lr 0: expected a number > 0"   -- train --data-dir "$T/good" --lr 0
expect_error "lr negative"        "--lr -0.1: expected a number > 0" -- train --data-dir "$T/good" --lr -0.1
expect_error "lr not a number"    "--lr abc"                        -- train --data-dir "$T/good" --lr abc
expect_error "batch 0"            "--batch 0: expected an integer >= 1" -- train --data-dir "$T/good" --batch 0
expect_error "epochs 0"           "--epochs 0: expected an integer >= 1" -- train --data-dir "$T/good" --epochs 0
expect_error "unknown flag"       "unknown flag '--learning-rate'"  -- train --data-dir "$T/good" --learning-rate 0.1
expect_error "flag without value" "--seed needs a value"            -- train --data-dir "$T/good" --seed
expect_error "bad schedule"       "--schedule 'warm'"               -- train --data-dir "$T/good" --schedule warm
expect_error "unknown dataset"    "unknown dataset 'imagenet'"      -- train --data-dir "$T/good" --data imagenet
expect_error "model/data mismatch" "takes 3x32x32 inputs"           -- train --data-dir "$T/good" --model alexnet-cifar
expect_error "unwritable output"  "$T/no/such/dir/w.weights: cannot create" -- "$DTRAIN" train --model cnn1 --data mnist --data-dir "$T/good" --epochs 1 --batch 2 --out "$T/no/such/dir/w.weights"
expect_error "eval: no weights"   "--weights FILE is required"      -- "$DTRAIN" eval --model cnn1 --data-dir "$T/good"
expect_error "eval: wrong model"  "eval: --model mlp: $T/good.weights holds weights of cnn1"     -- "$DTRAIN" eval --model mlp --weights "$T/good.weights" --data-dir "$T/good"
head -c 100 "$T/good.weights" >"$T/cut.weights"
expect_error "eval: truncated weights" "cut.weights: truncated"     -- "$DTRAIN" eval --model cnn1 --weights "$T/cut.weights" --data-dir "$T/good"
expect_error "resume: weights not checkpoint" "not a checkpoint"    -- train --data-dir "$T/good" --resume "$T/good.weights"
expect_error "unknown command"    "unknown command 'fit'"           -- "$DTRAIN" fit
# outputs are checked before training, not after it (a directory, a folder that is not there)
mkdir -p "$T/adir"
expect_error "--log is a directory" "--log $T/adir: is a directory" -- train --data-dir "$T/good" --log "$T/adir"
expect_error "--checkpoint is a directory" "--checkpoint $T/adir: is a directory" -- train --data-dir "$T/good" --checkpoint "$T/adir"
expect_error "--out is a directory" "--out $T/adir: is a directory" -- "$DTRAIN" train --model cnn1 --data mnist --data-dir "$T/good" --out "$T/adir"
expect_error "--log in no folder" "--log $T/none/l.jsonl: cannot create a file in $T/none" -- train --data-dir "$T/good" --log "$T/none/l.jsonl"
# a scheme's flags are checked against its own declarations by `run`, before any rank starts
# (the data folder does not exist: the flag is what is reported)
for bad in "eventgrad --history 0|--history 0: expected an integer >= 1" "eventgrad --threshold fast|--threshold fast: expected adaptive" \
           "eventgrad --horizon 0|--horizon 0: expected a number > 0" "ps --ps-mode avg|--ps-mode avg: expected grad or weight" \
           "dpsgd --topology star|--topology star: expected ring" "downpour --servers 0|--servers 0: expected an integer >= 1" \
           "eventgrad --compress int8|eventgrad needs --sync" "local --compress fp16|not supported by --algo local"; do
    args=${bad%%|*} want=${bad#*|}
    # shellcheck disable=SC2086
    expect_error "run --algo $args" "$want" -- "$DTRAIN" run -n 2 --data-dir "$T/none" --algo $args
done

finish
