#!/usr/bin/env bash
# --out FILE.safetensors, both ways: dtrain's file read by PyTorch (tests/st_torch.py: a few
# lines of Python, the models of bench/pytorch_train.py, load_state_dict(strict=True)) gives
# dtrain eval's accuracy on the same MNIST test images; a file PyTorch writes is read by dtrain
# eval with no --model/--data and gives PyTorch's accuracy; batch norm's running statistics and
# num_batches_tracked go both ways; a malformed file is one line, exit 2, and so is one naming a
# spec file's path without its text (never opened). Skipped (exit 0, with the reason) where
# /usr/bin/python3 has no torch (Debian's python3-torch).
. "$(dirname "$0")/lib.sh"
DATA=${DTRAIN_DATA:-data}
PY=/usr/bin/python3
ST="$PY $(cd "$(dirname "$0")" && pwd)/st_torch.py"
if ! why=$("$PY" -c 'import torch' 2>&1); then
    echo "SKIP cli_safetensors: $PY cannot import torch: $(echo "$why" | tail -1)"
    echo "0 passed, 0 failed"
    exit 0
fi
require_mnist
N=1000
# eval_acc FILE [FLAGS]: dtrain eval's accuracy in percent ("57.90")
eval_acc() { local f=$1; shift; "$DTRAIN" eval --weights "$f" --test-limit $N "$@" 2>&1 | sed -n 's/^test accuracy \([0-9.]*\)%.*/\1/p'; }
# agree LABEL A B: A and B (percentages) within 0.01 points
agree() { holds "$(awk -v a="$2" -v b="$3" 'BEGIN { d = a - b; print (d < 0 ? -d : d) }')" '<=' 0.01
          check "$1" $? "dtrain $2%, PyTorch $3%"; }

# 1. dtrain writes cnn1 as safetensors; PyTorch's cnn1 loads it strictly and agrees
"$DTRAIN" train --model cnn1 --data mnist --train-limit 3000 --test-limit $N --epochs 1 --seed 3 \
    --out "$T/m.safetensors" --quiet >"$T/out" 2>&1
check "train --out m.safetensors" $? "$(tail -1 "$T/out")"
head -c 8 "$T/m.safetensors" | od -An -tu8 | awk '{ exit !($1 % 8 == 0) }'
check "header length a multiple of 8 (space-padded)" $? "$(head -c 8 "$T/m.safetensors" | od -An -tu8)"
meta=$($PY -c 'import json, struct, sys; b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
m = json.loads(b[8:8 + n])["__metadata__"]; print(m["format"], m["model"], m["data"], m["algo"], "input c=1" in m["spec"])' "$T/m.safetensors")
[ "$meta" = "pt cnn1 mnist local True" ]; check "__metadata__ format, model, data, algo, spec" $? "$meta"
d=$(eval_acc "$T/m.safetensors")
holds "$d" '>' 11; check "dtrain eval --weights m.safetensors (no --model/--data) learned something" $? "${d:-nothing}%"
p=$($ST eval "$T/m.safetensors" cnn1 "$DATA/mnist" $N 2>&1)
agree "PyTorch's cnn1 (strict=True) gives dtrain eval's accuracy" "$d" "$p"
$ST keys "$T/m.safetensors" cnn1 >"$T/out" 2>&1; check "names and shapes are cnn1's state_dict's" $? "$(tail -1 "$T/out")"

# run -n 2 writes it the same way (rank 0)
"$DTRAIN" run -n 2 --algo allreduce --model cnn1 --data mnist --train-limit 1000 --test-limit $N --epochs 1 \
    --out "$T/run.safetensors" --quiet >"$T/out" 2>&1
check "run -n 2 --out run.safetensors" $? "$(tail -1 "$T/out")"
agree "... PyTorch reads it and agrees with dtrain eval" "$(eval_acc "$T/run.safetensors")" \
    "$($ST eval "$T/run.safetensors" cnn1 "$DATA/mnist" $N 2>&1)"

# 2. PyTorch writes another cnn1 (its own values, its own tensor order); dtrain eval reads it
$ST write "$T/py.safetensors" cnn1 11 mnist >"$T/out" 2>&1; check "PyTorch writes a state_dict" $? "$(tail -1 "$T/out")"
d2=$(eval_acc "$T/py.safetensors")
p2=$($ST eval "$T/py.safetensors" cnn1 "$DATA/mnist" $N 2>&1)
agree "dtrain eval of PyTorch's file gives PyTorch's accuracy" "$d2" "$p2"
compare "... and it is PyTorch's weights, not the trained ones" "$d2" '!=' "$d"

# 3. batch norm: running_mean, running_var and num_batches_tracked (I64), both ways
printf 'input c=1 h=28 w=28\nconv out=4 k=5 stride=2 name=conv1\nbatchnorm name=bn1\nrelu\nflatten\nlinear out=10 name=fc\n' >"$T/bn.spec"
"$DTRAIN" train --model "$T/bn.spec" --data mnist --train-limit 3000 --test-limit $N --epochs 1 --seed 3 \
    --out "$T/bn.safetensors" --quiet >"$T/out" 2>&1
check "train a batch-norm model --out bn.safetensors" $? "$(tail -1 "$T/out")"
$ST keys "$T/bn.safetensors" bn-tiny >"$T/out" 2>&1
check "its tensors are the torch model's state_dict, num_batches_tracked included" $? "$(tail -1 "$T/out")"
agree "PyTorch (strict=True, eval mode: running statistics) gives dtrain eval's accuracy" \
    "$(eval_acc "$T/bn.safetensors")" "$($ST eval "$T/bn.safetensors" bn-tiny "$DATA/mnist" $N 2>&1)"
$ST write "$T/pybn.safetensors" bn-tiny 5 mnist "$T/bn.spec" >"$T/out" 2>&1
agree "dtrain eval of PyTorch's batch-norm file (statistics away from 0/1) gives PyTorch's accuracy" \
    "$(eval_acc "$T/pybn.safetensors")" "$($ST eval "$T/pybn.safetensors" bn-tiny "$DATA/mnist" $N 2>&1)"
# resnet18-cifar: PyTorch's whole state_dict (122 tensors) is dtrain's model, names and shapes;
# no CIFAR-10 here, so eval gets as far as the data, after the weights loaded
$ST write "$T/r18.safetensors" resnet18-cifar 2 cifar10 >"$T/out" 2>&1
"$DTRAIN" eval --weights "$T/r18.safetensors" --data-dir "$T/no-cifar" >"$T/out" 2>&1
grep -q "no-cifar" "$T/out" && ! grep -q "r18.safetensors" "$T/out"
check "dtrain loads PyTorch's resnet18-cifar state_dict (stops at the missing data)" $? "$(tail -1 "$T/out")"

# 4. malformed files: one line naming the file, exit 2
printf 'DTRTNS01xxxxxxxx' >"$T/renamed.safetensors"
expect_error "a DTRTNS01 file named .safetensors" "renamed.safetensors: a dtrain DTRTNS01" -- \
    "$DTRAIN" eval --weights "$T/renamed.safetensors"
$PY -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<Q", 8) + b"{not js}")' "$T/bad.safetensors"
expect_error "a header that is not JSON" "bad.safetensors: the header is not valid JSON" -- \
    "$DTRAIN" eval --weights "$T/bad.safetensors"
head -c 1000 "$T/m.safetensors" >"$T/cut.safetensors"
expect_error "a file cut in its data" "cut.safetensors: tensor 'conv1.weight' ends at data offset 1000, past" -- \
    "$DTRAIN" eval --weights "$T/cut.safetensors"
head -c 500 "$T/m.safetensors" >"$T/cut.safetensors"
expect_error "a file cut in its header" "cut.safetensors: header length" -- "$DTRAIN" eval --weights "$T/cut.safetensors"
expect_error "cnn1's file evaluated as another model" "holds weights of cnn1" -- \
    "$DTRAIN" eval --weights "$T/m.safetensors" --model mlp
# a model named in the metadata is a built-in name or the file's spec text, never a path opened
$PY -c 'import json, struct, sys; b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); del h["__metadata__"]["spec"]; j = json.dumps(h).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])' "$T/pybn.safetensors" "$T/nospec.safetensors"
expect_error "a spec file's path in the metadata without its text" "nospec.safetensors: names its model '$T/bn.spec' without" -- \
    "$DTRAIN" eval --weights "$T/nospec.safetensors"
rm -f "$T/renamed.safetensors" "$T/bad.safetensors" "$T/cut.safetensors" "$T/nospec.safetensors"
finish
