#!/usr/bin/env bash
# --compress for the one-sided schemes (docs/algorithms.md "Compression"): dpsgd and
# eventgrad --sync send each tensor as the encoded change against the copy its neighbours hold.
# --compress none changes nothing bit for bit; fp16, int8 and topk:0.25 train dpsgd on 4 ranks
# with the same messages and their factor of the bytes, every put read exactly once;
# eventgrad --sync --threshold const:0 == dpsgd under compression too; adaptive eventgrad
# --sync --compress int8 trains with fewer messages; asynchronous eventgrad refuses it (one
# line, exit 2). Uses `dtrain run` (mpiexec).
. "$(dirname "$0")/lib.sh"

# (one kind of momentum for both schemes: dpsgd's --momentum-kind auto is qgm, eventgrad's local)
C=(--model cnn1 --data mnist --train-limit 6000 --test-limit 1000 --epochs 1 --batch 16 --lr 0.05 --momentum 0.5 --seed 5 --momentum-kind local)
S=(--model cnn1 --data mnist --train-limit 4000 --epochs 1 --max-steps 20 --batch 16 --seed 5 --test-limit 200) # short runs: equalities

# --compress none is dpsgd as it was, bit for bit
run -n 4 --algo dpsgd "${S[@]}" --out "$T/plain.w" --log "$T/plain.jsonl"
run -n 4 --algo dpsgd "${S[@]}" --compress none --out "$T/none.w" --log "$T/none.jsonl"
identical "dpsgd --compress none == no flag (model)" "$T/plain.w" "$T/none.w"
holds "$(bytes "$T/plain.jsonl")" == "$(bytes "$T/none.jsonl")" && holds "$(msgs "$T/plain.jsonl")" == "$(msgs "$T/none.jsonl")"
check "dpsgd --compress none: same messages and bytes" $? "$(msgs "$T/none.jsonl") messages, $(bytes "$T/none.jsonl") bytes"

# dpsgd: every codec trains, same messages, bytes by its factor (int8: n + 4 ceil(n/256); topk:
# 8 bytes per entry for a quarter of them, tiny tensors round up), every put read once
run -n 4 --algo dpsgd "${C[@]}" --out "$T/dp_none.w" --log "$T/dp_none.jsonl"
a0=$(acc "$T/dp_none.jsonl"); b0=$(bytes "$T/dp_none.jsonl"); m0=$(msgs "$T/dp_none.jsonl")
within "dpsgd uncompressed accuracy" "$a0" 0.8 1
for spec in fp16:0.499:0.501 int8:0.253:0.256 topk:0.25:0.499:0.503; do
    c=${spec%:*:*}
    lo=${spec#"$c":}; hi=${lo#*:}; lo=${lo%:*}
    tag=${c/:/}
    run -n 4 --algo dpsgd "${C[@]}" --compress "$c" --out "$T/dp_$tag.w" --log "$T/dp_$tag.jsonl"
    f="$T/dp_$tag.jsonl"
    within "dpsgd --compress $c: test accuracy (uncompressed $a0)" "$(acc "$f")" 0.8 1
    within "dpsgd --compress $c: bytes sent / uncompressed" "$(ratio "$(bytes "$f")" "$b0")" "$lo" "$hi"
    compare "dpsgd --compress $c: messages == uncompressed" "$(msgs "$f")" == "$m0" "$(msgs "$f") vs $m0"
    sent=$(msgs "$f"); fresh=$(per_rank_sum "$f" fresh_recv); over=$(per_rank_sum "$f" overwritten)
    holds "$sent" == "$((fresh + over))" && holds "$over" == 0 && holds "$(bytes "$f")" == "$(per_rank_sum "$f" bytes_recv)"
    check "dpsgd --compress $c: puts ($sent) == fresh ($fresh) + overwritten ($over), none overwritten, bytes sent == received" $? ""
done

# eventgrad --sync --threshold const:0 is dpsgd, compressed too
run -n 4 --algo eventgrad --sync --threshold const:0 "${C[@]}" --compress fp16 --out "$T/eg0_fp16.w" --log "$T/eg0_fp16.jsonl"
identical "eventgrad --sync const:0 --compress fp16 == dpsgd --compress fp16 (model, bit for bit)" "$T/dp_fp16.w" "$T/eg0_fp16.w"
holds "$(msgs "$T/eg0_fp16.jsonl")" == "$(msgs "$T/dp_fp16.jsonl")" && holds "$(bytes "$T/eg0_fp16.jsonl")" == "$(bytes "$T/dp_fp16.jsonl")"
check "... and the same messages and bytes" $? "$(msgs "$T/eg0_fp16.jsonl") / $(bytes "$T/eg0_fp16.jsonl")"

# adaptive eventgrad --sync --compress int8: trains, fewer messages
f="$T/egad_int8.jsonl"
run -n 4 --algo eventgrad --sync --threshold adaptive --warmup-steps 10 "${C[@]}" --compress int8 --no-save --log "$f"
within "eventgrad --sync adaptive --compress int8: test accuracy" "$(acc "$f")" 0.7 1
within "eventgrad --sync adaptive --compress int8: messages %" "$(summary_field "$f" msgs_pct)" 1 90
sent=$(msgs "$f"); fresh=$(per_rank_sum "$f" fresh_recv); over=$(per_rank_sum "$f" overwritten)
holds "$sent" == "$fresh" && holds "$over" == 0; check "eventgrad --sync --compress int8: every put read once" $? "sent $sent, fresh $fresh, overwritten $over"

# asynchronous eventgrad: a change could be overwritten before it is read
expect_error "eventgrad --compress fp16 without --sync: one error line, exit 2" \
    "--compress fp16: eventgrad needs --sync (a one-sided slot keeps only the newest write" -- \
    "$DTRAIN" run -n 2 --algo eventgrad "${S[@]}" --compress fp16 --no-save

finish
