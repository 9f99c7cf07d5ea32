#!/usr/bin/env bash
# --compress for the one-sided schemes (shared/spec/algorithms.md "Compression"): dpsgd and
# eventgrad --sync send each tensor as the encoded change against the copy its neighbours hold.
# --compress none changes nothing bit for bit; fp16, int8 and topk:0.25 train dpsgd on 4 ranks
# with the same messages and their factor of the bytes, every put read exactly once;
# eventgrad --sync --threshold const:0 == dpsgd under compression too; adaptive eventgrad
# --sync --compress int8 trains with fewer messages; asynchronous eventgrad refuses it (one
# line, exit 2). Uses `dtrain run` (mpiexec).
. "$(dirname "$0")/lib.sh"
run() { "$DTRAIN" run -n 4 "$@" --quiet; }
acc() { summary_field "$1" test_acc; }
bytes() { per_rank_sum "$1" bytes_sent; }
msgs() { per_rank_sum "$1" msgs_sent; }
# LABEL VALUE LO HI: LO <= VALUE <= HI
within() { awk -v v="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v >= lo && v <= hi) }'; check "$1" $? "$2 (expected $3..$4)"; }
identical() { # LABEL A B
    local out; out=$("$DTRAIN" diff "$2" "$3" --tol 0 2>&1); check "$1" $? "$out"
}

C=(--model cnn1 --data mnist --train-limit 6000 --test-limit 1000 --epochs 1 --batch 16 --lr 0.05 --momentum 0.5 --seed 5)
S=(--model cnn1 --data mnist --epochs 1 --max-steps 20 --batch 16 --seed 5) # short runs: equalities

# --compress none is dpsgd as it was, bit for bit
run --algo dpsgd "${S[@]}" --out "$T/plain.w" --log "$T/plain.jsonl"
run --algo dpsgd "${S[@]}" --compress none --out "$T/none.w" --log "$T/none.jsonl"
identical "dpsgd --compress none == no flag (model)" "$T/plain.w" "$T/none.w"
[ "$(bytes "$T/plain.jsonl")" = "$(bytes "$T/none.jsonl")" ] && [ "$(msgs "$T/plain.jsonl")" = "$(msgs "$T/none.jsonl")" ]
check "dpsgd --compress none: same messages and bytes" $? "$(msgs "$T/none.jsonl") messages, $(bytes "$T/none.jsonl") bytes"

# dpsgd: every codec trains, same messages, bytes by its factor (int8: n + 4 ceil(n/256); topk:
# 8 bytes per entry for a quarter of them, tiny tensors round up), every put read once
run --algo dpsgd "${C[@]}" --out "$T/dp_none.w" --log "$T/dp_none.jsonl"
a0=$(acc "$T/dp_none.jsonl"); b0=$(bytes "$T/dp_none.jsonl"); m0=$(msgs "$T/dp_none.jsonl")
within "dpsgd uncompressed accuracy" "$a0" 0.8 1
for spec in fp16:0.499:0.501 int8:0.253:0.256 topk:0.25:0.499:0.503; do
    c=${spec%:*:*}
    lo=${spec#"$c":}; hi=${lo#*:}; lo=${lo%:*}
    tag=${c/:/}
    run --algo dpsgd "${C[@]}" --compress "$c" --out "$T/dp_$tag.w" --log "$T/dp_$tag.jsonl"
    f="$T/dp_$tag.jsonl"
    within "dpsgd --compress $c: test accuracy (uncompressed $a0)" "$(acc "$f")" 0.8 1
    within "dpsgd --compress $c: bytes sent / uncompressed" "$(echo "scale=4; $(bytes "$f") / $b0" | bc)" "$lo" "$hi"
    [ "$(msgs "$f")" = "$m0" ]; check "dpsgd --compress $c: messages == uncompressed" $? "$(msgs "$f") vs $m0"
    sent=$(msgs "$f"); fresh=$(per_rank_sum "$f" fresh_recv); over=$(per_rank_sum "$f" overwritten)
    [ "$sent" -eq $((fresh + over)) ] && [ "$over" -eq 0 ] && [ "$(bytes "$f")" = "$(per_rank_sum "$f" bytes_recv)" ]
    check "dpsgd --compress $c: puts ($sent) == fresh ($fresh) + overwritten ($over), none overwritten, bytes sent == received" $? ""
done

# eventgrad --sync --threshold const:0 is dpsgd, compressed too
run --algo eventgrad --sync --threshold const:0 "${C[@]}" --compress fp16 --out "$T/eg0_fp16.w" --log "$T/eg0_fp16.jsonl"
identical "eventgrad --sync const:0 --compress fp16 == dpsgd --compress fp16 (model, bit for bit)" "$T/dp_fp16.w" "$T/eg0_fp16.w"
[ "$(msgs "$T/eg0_fp16.jsonl")" = "$(msgs "$T/dp_fp16.jsonl")" ] && [ "$(bytes "$T/eg0_fp16.jsonl")" = "$(bytes "$T/dp_fp16.jsonl")" ]
check "... and the same messages and bytes" $? "$(msgs "$T/eg0_fp16.jsonl") / $(bytes "$T/eg0_fp16.jsonl")"

# adaptive eventgrad --sync --compress int8: trains, fewer messages
f="$T/egad_int8.jsonl"
run --algo eventgrad --sync --threshold adaptive --warmup-steps 10 "${C[@]}" --compress int8 --no-save --log "$f"
within "eventgrad --sync adaptive --compress int8: test accuracy" "$(acc "$f")" 0.7 1
within "eventgrad --sync adaptive --compress int8: messages %" "$(summary_field "$f" msgs_pct)" 1 90
sent=$(msgs "$f"); fresh=$(per_rank_sum "$f" fresh_recv); over=$(per_rank_sum "$f" overwritten)
[ "$sent" -eq "$fresh" ] && [ "$over" -eq 0 ]; check "eventgrad --sync --compress int8: every put read once" $? "sent $sent, fresh $fresh, overwritten $over"

# asynchronous eventgrad: a change could be overwritten before it is read
"$DTRAIN" run -n 2 --algo eventgrad "${S[@]}" --compress fp16 --no-save >"$T/o" 2>"$T/e"
rc=$?; [ $rc -eq 2 ] && [ "$(wc -l <"$T/e")" -eq 1 ] && grep -q -- "--compress fp16: eventgrad needs --sync (a one-sided slot keeps only the newest write" "$T/e"
check "eventgrad --compress fp16 without --sync: one error line, exit 2" $? "rc=$rc: $(cat "$T/e")"

finish
