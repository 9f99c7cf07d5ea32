#!/usr/bin/env bash
# bench/ddp_mnist.py, the PyTorch DDP anchor of scripts/experiments links: on one process (gloo,
# world size 1, no namespaces) it trains cnn1 for a few steps and writes a log in dtrain's
# format that scripts/table and scripts/plot read as they read dtrain's; --target-acc stops it
# at the first evaluation reaching it; bad input is one line, exit 2, no file left. Skipped
# (with the reason, exit 0) where /usr/bin/python3 has no torch (Debian's python3-torch).
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
if ! why=$("$PY" -c 'import torch.distributed as d; assert d.is_gloo_available(), "no gloo"' 2>&1); then
    echo "SKIP cli_ddp: $PY cannot use torch with gloo: $(echo "$why" | tail -1)"
    echo "0 passed, 0 failed"
    exit 0
fi
require_mnist
# text LABEL A B: a check that A and B are the same text
text() { [ "$2" = "$3" ]; check "$1" $? "'$2' (expected '$3')"; }
port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ddp() { env -u PMI_RANK -u PMI_SIZE -u RANK -u WORLD_SIZE "$PY" "$ROOT/bench/ddp_mnist.py" --master-addr 127.0.0.1 \
    --master-port "$(port)" --train-limit 640 --test-limit 200 --quiet "$@"; }

# 2 epochs of 10 steps, evaluated every 4 steps: eval lines at 4 and 8 (14, 18), an epoch line each
ddp --epochs 2 --eval-every-steps 4 --log "$T/ddp.jsonl" >"$T/out" 2>&1
check "plain DDP runs" $? "$(tail -2 "$T/out")"
compare "one config line" "$(line_count "$T/ddp.jsonl" config)" == 1
compare "eval lines between epochs" "$(line_count "$T/ddp.jsonl" eval)" == 4
text "epoch lines" "$(epoch_fields "$T/ddp.jsonl" epoch)" "[1,2]"
compare "steps" "$(summary_field "$T/ddp.jsonl" steps)" == 20
text "scheme" "$(summary_field "$T/ddp.jsonl" algo)" ddp
compare "one rank sends nothing" "$(bytes "$T/ddp.jsonl")" == 0
compare "comm s is the exposed communication" "$(rank_field "$T/ddp.jsonl" 0 comm_s)" == \
    "$(rank_field "$T/ddp.jsonl" 0 exposed_comm_s)"
left=$(find "$T" -name 'ddp.jsonl.tmp.*')
check "no temporary log left" "$([ -z "$left" ]; echo $?)" "${left:-none}"

# a target met at the first evaluation: the summary says when, the partial epoch is logged
ddp --hook powersgd --epochs 2 --eval-every-steps 2 --target-acc 0.01 --log "$T/target.jsonl" >"$T/out" 2>&1
check "PowerSGD DDP stops at the target" $? "$(tail -2 "$T/out")"
compare "steps to the target" "$(summary_field "$T/target.jsonl" steps_to_target)" == 2
compare "steps run" "$(summary_field "$T/target.jsonl" steps)" == 2
holds "$(summary_field "$T/target.jsonl" time_to_target_s)" '>' 0
check "time to the target" $? "$(summary_field "$T/target.jsonl" time_to_target_s)"
compare "the stopped epoch's line" "$(line_count "$T/target.jsonl" epoch)" == 1

# --val N holds out the last N training examples, as dtrain's; --target-on val stops by them
ddp --epochs 2 --val 140 --eval-every-steps 2 --target-acc 0.3 --target-on val --log "$T/val.jsonl" >"$T/out" 2>&1
check "DDP with --val and --target-on val runs" $? "$(tail -2 "$T/out")"
compare "... 500 examples left to train on: 7 steps an epoch" "$(log_query "$T/val.jsonl" 'of("config")[0]["steps_per_epoch"]')" == 7
compare "... the last evaluation's val_acc reaches the target, no earlier one's did" \
    "$(log_query "$T/val.jsonl" 'int(of("eval")[-1]["val_acc"] >= 0.3 and all(e["val_acc"] < 0.3 for e in of("eval")[:-1]))')" == 1 \
    "val $(log_query "$T/val.jsonl" '[e["val_acc"] for e in of("eval")]')"
compare "... stopped there" "$(summary_field "$T/val.jsonl" steps_to_target)" == "$(log_query "$T/val.jsonl" 'of("eval")[-1]["step"]')"
expect_error "--target-on val without --val" "--target-on val: needs --val N" -- ddp --target-acc 0.5 --target-on val --log "$T/bad.jsonl"
expect_error "--val too large" "--val 640: must be smaller than the training set" -- ddp --val 640 --log "$T/bad.jsonl"

# read by scripts/table and scripts/plot, beside a dtrain log
"$DTRAIN" train --model cnn1 --data mnist --train-limit 640 --test-limit 200 --epochs 2 --eval-every-steps 4 \
    --no-save --quiet --log "$T/dtrain.jsonl"
table=$("$ROOT/scripts/table" "$T/ddp.jsonl" "$T/target.jsonl" "$T/dtrain.jsonl" 2>&1)
check "scripts/table reads the DDP logs" $? "$(echo "$table" | sed -n 3p)"
echo "$table" | awk -F' *[|] *' '$2 == "target" && $3 == "ddp" && $11 ~ /^[0-9.]+$/ { ok = 1 } END { exit !ok }'
check "table: the DDP run's time to the target" $? "$(echo "$table" | grep '^| target')"
out=$("$ROOT/scripts/plot" --x seconds --out "$T/s.svg" "$T/ddp.jsonl" "$T/target.jsonl" "$T/dtrain.jsonl" 2>&1)
check "scripts/plot --x seconds reads them" $? "$out"
# (by time, a finished run also ends at its summary's training seconds: a point each)
text "plot: a point per epoch line, and each run's end" "$out" "plot: 3 runs, 8 points -> $T/s.svg"
out=$("$ROOT/scripts/plot" --x seconds --evals --out "$T/e.svg" "$T/ddp.jsonl" "$T/dtrain.jsonl" 2>&1)
text "plot --evals: and one per evaluation" "$out" "plot: 2 runs, 14 points -> $T/e.svg"

expect_error "unknown hook" "argument --hook: invalid choice: 'topk'" -- ddp --hook topk --log "$T/bad.jsonl"
expect_error "target above 1" "expected an accuracy in (0, 1]" -- ddp --target-acc 1.5 --log "$T/bad.jsonl"
expect_error "no data folder" "$T/nodata: no such folder" -- ddp --data-dir "$T/nodata" --log "$T/bad.jsonl"
mkdir "$T/empty"
expect_error "no IDX files" "train-images-idx3-ubyte: not found" -- ddp --data-dir "$T/empty" --log "$T/bad.jsonl"
expect_error "log folder missing" "folder '$T/no' does not exist" -- ddp --log "$T/no/x.jsonl"
rmdir "$T/empty"
finish
