#!/usr/bin/env bash
# Distributed runs resume bit for bit: for every deterministic scheme, 1 epoch with
# --checkpoint and then --resume to 2 epochs ends with the same weights and the same message
# counts as 2 epochs straight. The schemes' own state (error-feedback residuals, compressed
# copies, fedavg's round and outer optimizer and its pseudo-gradient's error feedback, eventgrad's thresholds and neighbour values) travels in the
# ranks' parts of the checkpoint set. A set is committed by rank 0's manifest once every part
# is saved: a save that never committed leaves the previous set in use, and a set mixed from
# two epochs is refused in one line, never a hang. Also: a checkpoint refuses another --algo,
# a DiLoCo set plain fedavg (and the reverse), downpour refuses --checkpoint.
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

# DiLoCo's outer optimizer at lr 1 without momentum is plain fedavg, bit for bit; a real
# outer step is not
run -n 2 --algo fedavg --local-steps 7 "${C[@]}" --epochs 1 --out "$T/fedavg.w"
run -n 2 --algo fedavg --local-steps 7 --outer-lr 1 --outer-momentum 0 "${C[@]}" --epochs 1 --out "$T/fedavg_outer1.w"
identical "fedavg --outer-lr 1 --outer-momentum 0 == fedavg" "$T/fedavg.w" "$T/fedavg_outer1.w"
run -n 2 --algo fedavg --local-steps 7 --outer-lr 0.7 --outer-momentum 0.9 "${C[@]}" --epochs 1 --out "$T/fedavg_diloco.w"
differ "fedavg --outer-lr 0.7 --outer-momentum 0.9 moves the model otherwise" "$T/fedavg.w" "$T/fedavg_diloco.w" 0
resume_case ps-grad-int8      3 --algo ps --ps-mode grad --compress int8
resume_case ps-weight-topk    3 --algo ps --ps-mode weight --compress topk:0.25
resume_case fedavg-k7-loss    2 --algo fedavg --local-steps 7 --aggregate loss
resume_case fedavg-k7-fp16    3 --algo fedavg --local-steps 7 --compress fp16
resume_case fedavg-diloco     2 --algo fedavg --local-steps 7 --outer-lr 0.7 --outer-momentum 0.9 --outer-nesterov
resume_case allreduce-fp16    3 --algo allreduce --compress fp16
resume_case allreduce-int8-rs  3 --algo allreduce --compress int8 --encoded-sum reduce-scatter
resume_case fedavg-diloco-int8 3 --algo fedavg --local-steps 7 --outer-lr 0.7 --outer-momentum 0.9 --outer-nesterov --compress int8
resume_case allreduce-powersgd 2 --algo allreduce --compress powersgd:2 --powersgd-start 5
resume_case dpsgd             3 --algo dpsgd
resume_case eventgrad-sync    3 --algo eventgrad --sync --threshold adaptive --warmup-steps 5
resume_case eventgrad-int8    3 --algo eventgrad --sync --threshold const:0.01 --warmup-steps 5 --compress int8
resume_case choco-topk        3 --algo choco --compress topk:0.1
resume_case choco-trigger     3 --algo choco --trigger 0.05 --gossip-every 2
resume_case eventgrad-consensus 3 --algo eventgrad --sync --mix consensus --threshold adaptive --warmup-steps 5
resume_case eventgrad-sum      3 --algo eventgrad --sync --mix sum --threshold adaptive --warmup-steps 5

# the comparison can fail: a checkpoint resumed one epoch later than it was taken differs
d="$T/eventgrad-sync"
run -n 3 --algo eventgrad --sync --threshold adaptive --warmup-steps 5 "${C[@]}" --epochs 3 --resume "$d/ck" --out "$d/later.w"
differ "... and a run with an extra epoch differs (the comparison can fail)" "$d/straight.w" "$d/later.w" 0

# a checkpoint belongs to its scheme, codec and number of ranks
expect_error "resume under another --algo: one error line" "saved by a run with --algo eventgrad --compress none on 3 ranks" -- \
    "$DTRAIN" run -n 3 --algo dpsgd "${C[@]}" --epochs 2 --resume "$T/eventgrad-sync/ck" --no-save
expect_error "resume under another --mix (consensus keeps its own copy): one error line" "saved with another --topology, --history or --mix" -- \
    "$DTRAIN" run -n 3 --algo eventgrad --sync --mix consensus --threshold adaptive --warmup-steps 5 "${C[@]}" --epochs 2 \
    --resume "$T/eventgrad-sync/ck" --no-save
expect_error "resume under another --mix (sum keeps its base): one error line" "saved with another --topology, --history or --mix" -- \
    "$DTRAIN" run -n 3 --algo eventgrad --sync --mix sum --threshold adaptive --warmup-steps 5 "${C[@]}" --epochs 2 \
    --resume "$T/eventgrad-consensus/ck" --no-save
expect_error "resume under another --history: one error line" "saved with another --topology, --history or --mix" -- \
    "$DTRAIN" run -n 3 --algo eventgrad --sync --threshold adaptive --warmup-steps 5 --history 3 "${C[@]}" --epochs 2 \
    --resume "$T/eventgrad-sync/ck" --no-save
expect_error "resume without the checkpoint's --compress: one error line" "this run has --algo allreduce --compress none" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 2 --resume "$T/allreduce-topk/ck" --no-save
# DiLoCo's outer optimizer keeps a master and its momentum that the plain average has not: a
# set of one resumed as the other is refused naming the flags and both values (before, a
# DiLoCo set resumed as plain fedavg dropped them silently)
expect_error "a DiLoCo set resumed as plain fedavg: one error line" "--outer-lr, --outer-momentum: $T/fedavg-diloco/ck.e1.rank0 was saved by fedavg with --outer-lr 0.7 --outer-momentum 0.9 (an outer optimizer), this run has --outer-lr 1 --outer-momentum 0 (the plain average)" -- \
    "$DTRAIN" run -n 2 --algo fedavg --local-steps 7 "${C[@]}" --epochs 2 --resume "$T/fedavg-diloco/ck" --no-save
expect_error "a plain fedavg set resumed with an outer optimizer: one error line" "saved by fedavg with --outer-lr 1 --outer-momentum 0 (the plain average), this run has --outer-lr 0.7 --outer-momentum 0.9 (an outer optimizer)" -- \
    "$DTRAIN" run -n 2 --algo fedavg --local-steps 7 --aggregate loss --outer-lr 0.7 --outer-momentum 0.9 "${C[@]}" --epochs 2 \
    --resume "$T/fedavg-k7-loss/ck" --no-save
# checkpoint sets (3 ranks, allreduce: deterministic)
d="$T/sets"
mkdir -p "$d"
run -n 3 --algo allreduce "${C[@]}" --epochs 1 --checkpoint "$d/one" --no-save
run -n 3 --algo allreduce "${C[@]}" --epochs 2 --checkpoint "$d/two" --no-save
run -n 3 --algo allreduce "${C[@]}" --epochs 3 --out "$d/straight3.w"
files() { (cd "$d" && ls -d "$1"* | tr '\n' ' '); }
[ "$(files two)" = "two two.e2.rank0 two.e2.rank1 two.e2.rank2 " ]
check "a set: the manifest and the newest epoch's parts, the older set removed once it committed" $? "$(files two)"
grep -qx "epoch 2" "$d/two" && grep -qx "ranks 3" "$d/two" && [ "$(grep -c '^part ' "$d/two")" = 3 ]
check "... the manifest names the epoch, the ranks and three parts" $? "$(head -c 300 "$d/two")"
# a save killed half-way through epoch 3: two ranks' parts written, the third's a temporary
# file of a writer that is gone, no manifest for it; the resume uses the committed epoch 2
cp "$d/two.e2.rank0" "$d/two.e3.rank0"
cp "$d/one.e1.rank1" "$d/two.e3.rank1"
echo partial >"$d/two.e3.rank2.tmp.999999999"
run -n 3 --algo allreduce "${C[@]}" --epochs 3 --resume "$d/two" --checkpoint "$d/two" --out "$d/resumed3.w"
identical "a save that never committed: resumed from the committed set == straight" "$d/straight3.w" "$d/resumed3.w"
[ "$(files two)" = "two two.e3.rank0 two.e3.rank1 two.e3.rank2 " ]
check "... and its next save replaced the strays, removed the dead writer's file and epoch 2" $? "$(files two)"
# parts from two epochs under one manifest: one line, status 2, within 10 s
mkdir -p "$d/mixed"
cp "$d/two" "$d/two.e3.rank0" "$d/two.e3.rank2" "$d/mixed/"
cp "$d/one.e1.rank1" "$d/mixed/two.e3.rank1"
t0=$SECONDS
expect_error "a part replaced by another epoch's: one error line" "a set mixed from two epochs or runs" -- \
    "$DTRAIN" run -n 3 --algo allreduce "${C[@]}" --epochs 4 --resume "$d/mixed/two" --no-save
compare "... within 10 s" $((SECONDS - t0)) '<=' 10
# a manifest rewritten to name the other epoch's part, with that part's own checksum
crc=$(python3 -c 'import sys, zlib; print("%08x" % zlib.crc32(open(sys.argv[1], "rb").read()[:-4]))' "$d/one.e1.rank1")
cp "$d/one.e1.rank1" "$d/mixed/"
sed -i "s/^part 1 .*/part 1 one.e1.rank1 $crc/" "$d/mixed/two"
expect_error "a manifest naming another epoch's part: one error line" "a set mixed from two epochs" -- \
    "$DTRAIN" run -n 3 --algo allreduce "${C[@]}" --epochs 4 --resume "$d/mixed/two" --no-save
head -c 120 "$d/two" >"$d/mixed/cut"
expect_error "a cut manifest: one error line" "not a whole checkpoint manifest" -- \
    "$DTRAIN" run -n 3 --algo allreduce "${C[@]}" --epochs 4 --resume "$d/mixed/cut" --no-save
expect_error "a set resumed by one process: one error line" "on 3 ranks, this run has --algo local" -- \
    "$DTRAIN" train "${C[@]}" --epochs 4 --resume "$d/two" --no-save
expect_error "downpour --checkpoint: one error line, no file" "downpour cannot checkpoint" -- \
    "$DTRAIN" run -n 3 --algo downpour "${C[@]}" --epochs 1 --checkpoint "$T/downpour.ck" --no-save

finish
