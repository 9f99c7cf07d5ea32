#!/usr/bin/env bash
# Distributed runs resume bit for bit: for every deterministic scheme, 1 epoch with
# --checkpoint and then --resume to 2 epochs ends with the same weights and the same message
# counts as 2 epochs straight. The schemes' own state (error-feedback residuals, compressed
# copies, fedavg's round, eventgrad's thresholds and neighbour values) travels in the
# per-rank checkpoint files. Also: a checkpoint refuses another --algo, downpour refuses
# --checkpoint.
. "$(dirname "$0")/lib.sh"

# 480 examples per rank at batch 16: 30 steps per epoch (fedavg's K=7 ends mid-round)
C=(--model cnn1 --data mnist --train-limit 960 --test-limit 300 --batch 16 --lr 0.05 --momentum 0.5 --seed 4)

resume_case() { # LABEL N ALGO-FLAGS...
    local label=$1 n=$2; shift 2
    local d="$T/$label"
    mkdir -p "$d"
    run -n "$n" "$@" "${C[@]}" --epochs 2 --out "$d/straight.w" --log "$d/straight.jsonl"
    run -n "$n" "$@" "${C[@]}" --epochs 1 --checkpoint "$d/ck" --no-save
    run -n "$n" "$@" "${C[@]}" --epochs 2 --resume "$d/ck" --out "$d/resumed.w" --log "$d/resumed.jsonl"
    identical "$label: resumed == straight, bit for bit" "$d/straight.w" "$d/resumed.w"
    local a b
    a=$(summary_field "$d/straight.jsonl" msgs_sent)
    b=$(summary_field "$d/resumed.jsonl" msgs_sent)
    compare "$label: the resumed run counts the messages of the whole run" "$a" == "$b" "straight $a, resumed $b"
}

resume_case allreduce-topk    2 --algo allreduce --compress topk:0.1
resume_case ps-grad-int8      3 --algo ps --ps-mode grad --compress int8
resume_case ps-weight-topk    3 --algo ps --ps-mode weight --compress topk:0.25
resume_case fedavg-k7-loss    2 --algo fedavg --local-steps 7 --aggregate loss
resume_case fedavg-k7-fp16    3 --algo fedavg --local-steps 7 --compress fp16
resume_case dpsgd             3 --algo dpsgd
resume_case eventgrad-sync    3 --algo eventgrad --sync --threshold adaptive --warmup-steps 5
resume_case eventgrad-int8    3 --algo eventgrad --sync --threshold const:0.01 --warmup-steps 5 --compress int8

# the comparison can fail: a checkpoint resumed one epoch later than it was taken differs
d="$T/eventgrad-sync"
run -n 3 --algo eventgrad --sync --threshold adaptive --warmup-steps 5 "${C[@]}" --epochs 3 --resume "$d/ck" --out "$d/later.w"
differ "... and a run with an extra epoch differs (the comparison can fail)" "$d/straight.w" "$d/later.w" 0

# a checkpoint belongs to its scheme, codec and number of ranks
expect_error "resume under another --algo: one error line" "saved by a run with --algo eventgrad --compress none on 3 ranks" -- \
    "$DTRAIN" run -n 3 --algo dpsgd "${C[@]}" --epochs 2 --resume "$T/eventgrad-sync/ck" --no-save
expect_error "resume under another --history: one error line" "saved with another --topology or --history" -- \
    "$DTRAIN" run -n 3 --algo eventgrad --sync --threshold adaptive --warmup-steps 5 --history 3 "${C[@]}" --epochs 2 \
    --resume "$T/eventgrad-sync/ck" --no-save
expect_error "resume without the checkpoint's --compress: one error line" "this run has --algo allreduce --compress none" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 2 --resume "$T/allreduce-topk/ck" --no-save
expect_error "downpour --checkpoint: one error line, no file" "downpour cannot checkpoint" -- \
    "$DTRAIN" run -n 3 --algo downpour "${C[@]}" --epochs 1 --checkpoint "$T/downpour.ck" --no-save

finish
