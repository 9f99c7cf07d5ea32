#!/usr/bin/env bash
# Distributed schemes checked against each other (docs/algorithms.md), the counters
# against each other, and errors under MPI printed once. Uses `dtrain run` (mpiexec).
. "$(dirname "$0")/lib.sh"

C=(--model cnn1 --data mnist --train-limit 4000 --epochs 1 --max-steps 20 --batch 16 --seed 3 --test-limit 200)

# allreduce and a synchronous parameter server doing gradient averaging: the same model
run -n 4 --algo allreduce "${C[@]}" --out "$T/ar.w" --log "$T/ar.jsonl"
run -n 4 --algo ps --ps-mode grad "${C[@]}" --out "$T/psg.w" --log "$T/psg.jsonl"
same "allreduce == ps --ps-mode grad (4 ranks, 20 steps)" "$T/ar.w" "$T/psg.w" 1e-6

# ranks that share cores poll and yield while they wait (docs/cluster.md), on their own when
# a host has more ranks than cores, or as DTRAIN_WAIT says: the same weights either way, bit
# for bit (ps: MPI_Send, MPI_Recv and waits; allreduce: waits), and the log says which
cores=$(nproc)
auto=spin; [ 4 -gt "$cores" ] && auto=yield
said=$(log_query "$T/psg.jsonl" 'of("config")[0]["waits"]')
[ "$said" = "$auto" ]
check "... its log: \"waits\": \"$auto\" (4 ranks, $cores cores)" $? "$said"
for how in spin yield; do
    DTRAIN_WAIT=$how run -n 4 --algo ps --ps-mode grad "${C[@]}" --out "$T/psg_$how.w" --log "$T/psg_$how.jsonl"
    identical "ps --ps-mode grad, DTRAIN_WAIT=$how == chosen by the cores" "$T/psg.w" "$T/psg_$how.w"
    said=$(log_query "$T/psg_$how.jsonl" 'of("config")[0]["waits"]')
    [ "$said" = "$how" ]
    check "... its log says \"waits\": \"$how\"" $? "$said"
    DTRAIN_WAIT=$how run -n 4 --algo allreduce "${C[@]}" --out "$T/ar_$how.w"
    identical "allreduce, DTRAIN_WAIT=$how == chosen by the cores" "$T/ar.w" "$T/ar_$how.w"
done

# allreduce in buckets during backward (the default) == one allreduce after it: bit for bit on
# 2 ranks (a sum of two is the same in any order), within rounding on 4; same bytes, and the
# buckets show as more messages (2(N-1) per bucket: cnn1 has 87 kB of gradients)
run -n 2 --algo allreduce --bucket-kb 0 "${C[@]}" --out "$T/ar2b0.w" --log "$T/ar2b0.jsonl"
run -n 2 --algo allreduce --bucket-kb 8 "${C[@]}" --out "$T/ar2b8.w" --log "$T/ar2b8.jsonl"
identical "allreduce --bucket-kb 8 == --bucket-kb 0 (2 ranks, bit for bit)" "$T/ar2b0.w" "$T/ar2b8.w"
compare "... the same bytes" "$(bytes "$T/ar2b8.jsonl")" == "$(bytes "$T/ar2b0.jsonl")"
compare "... in more messages (buckets)" "$(msgs "$T/ar2b8.jsonl")" '>' "$(msgs "$T/ar2b0.jsonl")"
compare "... still 100% of allreduce's messages" "$(summary_field "$T/ar2b8.jsonl" msgs_pct)" == 100
run -n 4 --algo allreduce --bucket-kb 0 "${C[@]}" --out "$T/ar4b0.w"
same "allreduce, buckets (default) == --bucket-kb 0 (4 ranks)" "$T/ar.w" "$T/ar4b0.w" 1e-6

# allreduce with N ranks x batch B == one process at batch N*B on the same examples
M=(--model mlp --data mnist --train-limit 4000 --epochs 1 --max-steps 20 --seed 3 --split stripe --test-limit 200)
run -n 2 --algo allreduce "${M[@]}" --batch 8 --out "$T/ar2.w"
"$DTRAIN" train --algo local "${M[@]}" --batch 16 --out "$T/local16.w" --quiet
same "allreduce 2x8 == local batch 16 (same examples)" "$T/ar2.w" "$T/local16.w" 1e-6
"$DTRAIN" train --algo local "${M[@]}" --batch 16 --seed 9 --out "$T/local16b.w" --quiet
differ "... and differs from another seed's run (the comparison can fail)" "$T/ar2.w" "$T/local16b.w" 1e-6

# federated averaging every step == parameter server weight averaging
run -n 2 --algo fedavg --local-steps 1 --aggregate average "${C[@]}" --out "$T/fa1.w"
run -n 2 --algo ps --ps-mode weight "${C[@]}" --out "$T/psw.w"
same "fedavg --local-steps 1 == ps --ps-mode weight" "$T/fa1.w" "$T/psw.w" 1e-6

# fedavg sends once per K steps; loss/samples weighting changes the model
run -n 3 --algo fedavg --local-steps 5 "${C[@]}" --out "$T/fa5.w" --log "$T/fa5.jsonl"
pct=$(summary_field "$T/fa5.jsonl" msgs_pct)
holds "$pct" '>' 19.99 && holds "$pct" '<' 20.01; check "fedavg K=5 sends 20% of the messages" $? "msgs_pct=$pct"
run -n 3 --algo fedavg --local-steps 5 --aggregate loss "${C[@]}" --out "$T/fal.w"
differ "fedavg loss weighting differs from plain" "$T/fa5.w" "$T/fal.w" 0

# counters: what ranks report sending equals what they report receiving
for f in ar psg fa5; do balanced "$f" "$T/$f.jsonl"; done
n=$(line_count "$T/ar.jsonl" epoch); compare "log has epoch lines" "$n" '>=' 1 "$n"

# errors with several ranks: one line, exit 2
expect_error "missing data with 3 ranks: one error line, exit 2" "nothing/train-images" -- \
    "$DTRAIN" run -n 3 --algo allreduce "${C[@]}" --data-dir "$T/nothing" --no-save
expect_error "--algo local with 2 ranks: one error line" "trains on one process" -- \
    "$DTRAIN" run -n 2 --algo local "${C[@]}" --no-save
expect_error "bad flag under run: one line" "--lr -1: expected a number > 0" -- "$DTRAIN" run -n 2 --algo allreduce --lr -1
expect_error "unknown --algo with 2 ranks: one line" "unknown scheme" -- "$DTRAIN" run -n 2 --algo gossip "${C[@]}" --no-save
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --out "$T/o.w" >"$T/o" 2>"$T/e"
[ "$(grep -c '^epoch' "$T/o")" -eq 1 ]; check "only rank 0 prints (one epoch line with 2 ranks)" $? "$(grep -c '^epoch' "$T/o") epoch lines"

finish
