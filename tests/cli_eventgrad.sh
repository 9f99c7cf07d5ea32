#!/usr/bin/env bash
# Decentralized schemes: eventgrad --sync --threshold const:0 reproduces dpsgd bit for bit
# (same messages, same model); without --sync it sends the same number of messages; the
# adaptive threshold sends fewer; every put is either read or counted as overwritten; and
# tensors arrive during the run from every neighbour that sent (no starvation).
. "$(dirname "$0")/lib.sh"
run() { "$DTRAIN" run "$@" --quiet; }
C=(--model cnn1 --data mnist --train-limit 4000 --test-limit 1000 --epochs 2 --batch 16 --seed 5)

run -n 4 --algo dpsgd "${C[@]}" --out "$T/dp.w" --log "$T/dp.jsonl"
run -n 4 --algo eventgrad --sync --threshold const:0 "${C[@]}" --out "$T/eg0.w" --log "$T/eg0.jsonl"
out=$("$DTRAIN" diff "$T/dp.w" "$T/eg0.w" --tol 0); check "eventgrad --sync const:0 == dpsgd (model, bit for bit)" $? "$out"
a=$(summary_field "$T/dp.jsonl" msgs_sent); b=$(summary_field "$T/eg0.jsonl" msgs_sent)
[ -n "$a" ] && [ "$a" = "$b" ]; check "... and the same messages" $? "dpsgd $a, eventgrad $b"
p=$(summary_field "$T/dp.jsonl" msgs_pct); [ "$p" = "100.0000" ]; check "dpsgd sends every tensor every step" $? "msgs_pct=$p"

run -n 4 --algo eventgrad --threshold const:0 "${C[@]}" --out "$T/ega.w" --log "$T/ega.jsonl"
c=$(summary_field "$T/ega.jsonl" msgs_sent); [ "$c" = "$a" ]; check "eventgrad const:0 without --sync: same number of messages" $? "$c vs $a"

run -n 4 --algo eventgrad --threshold adaptive --warmup-steps 10 "${C[@]}" --out "$T/egad.w" --log "$T/egad.jsonl"
p=$(summary_field "$T/egad.jsonl" msgs_pct); acc=$(summary_field "$T/egad.jsonl" test_acc)
awk -v p="$p" 'BEGIN { exit !(p > 0 && p < 90) }'; check "adaptive threshold sends fewer messages" $? "msgs_pct=$p"
awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }'; check "adaptive eventgrad still learns" $? "test_acc=$acc"

# every put is read fresh or counted as overwritten (after the final read)
for f in dp ega egad; do
    sent=$(per_rank_sum "$T/$f.jsonl" msgs_sent); fresh=$(per_rank_sum "$T/$f.jsonl" fresh_recv)
    over=$(per_rank_sum "$T/$f.jsonl" overwritten)
    [ "$sent" -eq $((fresh + over)) ]; check "$f: puts ($sent) == fresh ($fresh) + overwritten ($over)" $? ""
done
# lock-step mode never overwrites or catches a write in progress
over=$(per_rank_sum "$T/dp.jsonl" overwritten); torn=$(per_rank_sum "$T/dp.jsonl" torn_retries)
[ "$over" -eq 0 ] && [ "$torn" -eq 0 ]; check "dpsgd: nothing overwritten or torn" $? "overwritten $over, torn $torn"

# no starvation: every epoch, every (rank, neighbour) pair got fresh tensors when the neighbour sent
for f in ega egad; do
    n=$(grep -c '"type":"transport"' "$T/$f.jsonl"); s=$(grep '"type":"transport"' "$T/$f.jsonl" | grep -o '"starved_pairs":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)
    [ "$n" -eq 2 ] && [ "$s" -eq 0 ]; check "$f: transport log per epoch, no starved pairs" $? "$n epochs, starved $s"
    zero=$(grep '"type":"transport"' "$T/$f.jsonl" | grep -o '"fresh_from":{[^}]*}' | grep -c '":0[,}]')
    [ "$zero" -eq 0 ]; check "$f: fresh tensors from every neighbour in every epoch" $? "$zero empty"
done

# the topologies run
for topo in torus exponential complete; do
    run -n 4 --algo dpsgd --topology $topo "${C[@]}" --epochs 1 --max-steps 20 --no-save --log "$T/t.jsonl"
    check "dpsgd --topology $topo runs" $? "msgs $(summary_field "$T/t.jsonl" msgs_sent)"
done
"$DTRAIN" run -n 2 --algo eventgrad --threshold bogus "${C[@]}" --no-save >/dev/null 2>"$T/e"
[ $? -eq 2 ] && [ "$(wc -l <"$T/e")" -eq 1 ]; check "bad --threshold: one line" $? "$(cat "$T/e")"

finish
