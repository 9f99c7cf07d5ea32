#!/usr/bin/env bash
# Every bad input gets one line on stderr naming the file or flag and what was expected,
# exit status 2, no crash, and no output file; text quoted from a file is escaped (\xNN).
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
expect_error "unknown flag"       "unknown flag '--learning-rate' (see dtrain train --help)" -- train --data-dir "$T/good" --learning-rate 0.1
expect_error "misspelt flag: the nearest" "dtrain train: unknown flag '--epoch' (did you mean --epochs?)" -- train --data-dir "$T/good" --epoch 2
expect_error "misspelt run flag" "dtrain run: unknown flag '--max-restart' (did you mean --max-restarts?)" -- "$DTRAIN" run -n 2 --algo allreduce --max-restart 1
expect_error "misspelt --algo"    "--algo alreduce: unknown scheme (did you mean allreduce?)" -- train --data-dir "$T/good" --algo alreduce
expect_error "another scheme's flag" "--local-steps: a flag of fedavg, not of --algo allreduce" -- train --data-dir "$T/good" --algo allreduce --local-steps 5
expect_error "a shared flag, not of this scheme" "--topology: a flag of dpsgd, eventgrad, choco, not of --algo ps" -- train --data-dir "$T/good" --algo ps --topology ring
expect_error "a scheme's flag, no --algo" "--servers: a flag of downpour, not of --algo local" -- train --data-dir "$T/good" --servers 1
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
expect_error "unknown command"    "unknown command 'fit' (expected train, run," -- "$DTRAIN" fit
expect_error "misspelt command"   "unknown command 'trian' (did you mean train?)" -- "$DTRAIN" trian
# strings from files are escaped in every message (one line, no control byte reaches the
# terminal); a model named inside a weights file is a built-in name or the file's spec text,
# never a path opened; non-finite weights and a record written twice are refused, naming them
edit() { /usr/bin/python3 "$(dirname "$0")/tfile_edit.py" "$@"; }
# no_controls LABEL COMMAND...: a check that COMMAND's stderr holds no control byte but its newline
no_controls() {
    local label=$1
    shift
    "$@" 2>&1 >/dev/null | LC_ALL=C grep -q $'[\001-\011\013-\037\177]'
    [ $? -eq 1 ]; check "$label" $? "$("$@" 2>&1 >/dev/null | head -c 200 | cat -v)"
}
printf 'input c=1 h=28 w=28\nSECRET-LINE\n' >"$T/secret"
edit "$T/good.weights" "$T/path.weights" text meta:model "$T/secret" drop meta:spec
expect_error "eval: weights naming a path as their model, no spec text" "path.weights: names its model '$T/secret' without" -- \
    "$DTRAIN" eval --weights "$T/path.weights" --data-dir "$T/good"
"$DTRAIN" eval --weights "$T/path.weights" --data-dir "$T/good" 2>&1 | grep -q SECRET
[ $? -eq 1 ]; check "... that path is never opened (no line of it in the message)" $? "$("$DTRAIN" eval --weights "$T/path.weights" 2>&1)"
edit "$T/good.weights" "$T/esc.weights" text meta:model $'\033]0;pwned\007' drop meta:spec
expect_error "eval: an escape sequence in meta:model, shown escaped" "esc.weights: names its model '\x1b]0;pwned\x07'" -- \
    "$DTRAIN" eval --weights "$T/esc.weights" --data-dir "$T/good"
no_controls "... no control byte on stderr" "$DTRAIN" eval --weights "$T/esc.weights" --data-dir "$T/good"
edit "$T/good.weights" "$T/esc.weights" text meta:model $'cnn1\033[2J'
expect_error "eval --model: the file's model name shown escaped" "holds weights of cnn1\x1b[2J" -- \
    "$DTRAIN" eval --model mlp --weights "$T/esc.weights" --data-dir "$T/good"
printf 'input c=1 h=28 w=28\n\033[31mred\302\233\377\n' >"$T/esc.spec"
expect_error "an escape sequence in a spec file's layer, a C1 control, a byte not UTF-8" \
    "esc.spec:2: unknown layer '\x1b[31mred\xc2\x9b\xff'" -- train --data-dir "$T/good" --model "$T/esc.spec"
no_controls "... no control byte on stderr" train --data-dir "$T/good" --model "$T/esc.spec"
for v in nan inf -inf; do
    edit "$T/good.weights" "$T/bad.weights" value conv1.weight $v
    expect_error "eval: weights holding $v" "bad.weights: tensor 'conv1.weight' holds a non-finite value" -- \
        "$DTRAIN" eval --weights "$T/bad.weights" --data-dir "$T/good"
done
edit "$T/good.weights" "$T/bad.weights" dup conv1.bias
expect_error "eval: a record written twice" "bad.weights: record 'conv1.bias' appears twice" -- \
    "$DTRAIN" eval --weights "$T/bad.weights" --data-dir "$T/good"
# a checkpoint forged without the record naming the run that saved it (train:run), or its
# counters (train:counters), checksum recomputed: refused naming the file and the record
# (before, resumed silently)
"$DTRAIN" train --model cnn1 --data mnist --data-dir "$T/good" --epochs 1 --batch 2 --no-save --checkpoint "$T/good.ck" --quiet
for r in train:run train:counters; do
    edit "$T/good.ck" "$T/forged.ck" drop "$r"
    expect_error "--resume: a checkpoint without $r" "$T/forged.ck: checkpoint has no record '$r'" -- \
        train --data-dir "$T/good" --epochs 2 --no-save --resume "$T/forged.ck"
done
rm -f "$T/secret" "$T/path.weights" "$T/esc.weights" "$T/esc.spec" "$T/bad.weights" "$T/good.ck" "$T/forged.ck"
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

# run refuses what its ranks would refuse before starting any: a launcher that starts nothing
# but leaves a marker shows whether it was called (expect_error also sees no file made)
printf '#!/bin/sh\ncase "$1" in --version) echo "HYDRA build details: fake"; exit 0;; esac\ntouch "%s"\n' "$T/launched" >"$T/fake-mpiexec"
chmod +x "$T/fake-mpiexec"
mkdir -p "$T/tmp" # the supervisor's folders of the launched runs
launch() { TMPDIR="$T/tmp" DTRAIN_MPIEXEC="$T/fake-mpiexec" "$DTRAIN" run "$@"; }
expect_error "run, bad --algo: not launched" "--algo gossip: unknown scheme" -- launch -n 2 --algo gossip --data-dir "$T/good" --no-save
expect_error "run, misspelt --algo: not launched" "(did you mean eventgrad?)" -- launch -n 2 --algo eventgrd --data-dir "$T/good" --no-save
expect_error "run -n 2 without --algo: not launched" "dtrain run: -n 2 needs --algo" -- launch -n 2 --data-dir "$T/good" --no-save
expect_error "run -n 2 --algo local: not launched" "dtrain run: --algo local trains on one process, but -n 2" -- launch -n 2 --algo local --data-dir "$T/good" --no-save
expect_error "run, another scheme's flag: not launched" "--history: a flag of eventgrad, not of --algo allreduce" -- launch -n 2 --algo allreduce --history 3 --data-dir "$T/good" --no-save
[ ! -e "$T/launched" ]; check "none of the refused runs called the launcher" $? "$T/launched exists"
# the launcher is called when the flags are good (so the marker above can fail)
launch -n 1 --algo allreduce --data-dir "$T/good" --no-save --start-timeout 1 >/dev/null 2>&1
[ -e "$T/launched" ]; check "a good run calls the (fake) launcher" $? "no marker"
rm -f "$T/launched"

# the setup warnings (lib.sh silences them for the other tests): one line each
warned() { (unset DTRAIN_NO_SETUP_WARNINGS; "$@"); }
cores=$(getconf _NPROCESSORS_ONLN)
over=$(warned launch -n $((cores + 1)) --algo allreduce --data-dir "$T/good" --no-save 2>&1 >/dev/null | grep -c "warning")
want="dtrain run: warning: $((cores + 1)) ranks on $cores cores: they will share them (slower than $cores ranks)"
n=$(warned launch -n $((cores + 1)) --algo allreduce --data-dir "$T/good" --no-save 2>&1 >/dev/null | grep -cxF "$want")
holds "$over" == 1 && holds "$n" == 1; check "-n cores+1: one warning line" $? "$over warning lines, $n exactly '$want'"
n=$(warned launch -n "$cores" --algo allreduce --data-dir "$T/good" --no-save 2>&1 >/dev/null | grep -c "warning")
holds "$n" == 0; check "-n cores: no warning" $? "$n warning lines"
n=$(warned launch -n $((cores + 1)) --hosts a,b --algo allreduce --data-dir "$T/good" --no-save 2>&1 >/dev/null | grep -c "warning")
holds "$n" == 0; check "-n cores+1 --hosts: no warning (the hosts' cores)" $? "$n warning lines"
rm -f "$T/launched"
warned "$DTRAIN" train --model cnn1 --data-dir "$T/good" --epochs 1 --batch 2 --no-save --quiet --algo allreduce 2>"$T/warn"
rc=$?; w="dtrain train: --algo allreduce on one process (not under mpiexec): use dtrain run -n N"
holds "$rc" == 0 && holds "$(wc -l <"$T/warn")" == 1 && grep -qxF "$w" "$T/warn"
check "train --algo allreduce alone: trains, one warning line" $? "rc=$rc: $(head -c 300 "$T/warn")"
warned "$DTRAIN" train --model cnn1 --data-dir "$T/good" --epochs 1 --batch 2 --no-save --quiet 2>"$T/warn"
holds "$(wc -c <"$T/warn")" == 0; check "train --algo local: no warning" $? "$(head -c 300 "$T/warn")"
rm -f "$T/warn"

# --version / version: "dtrain X.Y.Z (commit C)"
v=$("$DTRAIN" --version); rc=$?
echo "$v" | grep -qE '^dtrain [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{7,}(-dirty)?|unknown)\)$' && holds "$rc" == 0
check "dtrain --version" $? "rc=$rc: $v"
[ "$("$DTRAIN" version)" = "$v" ]; check "dtrain version says the same" $? "$("$DTRAIN" version)"

finish
