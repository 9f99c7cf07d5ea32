#!/usr/bin/env bash
# Distributed schemes checked against each other (shared/spec/algorithms.md), the counters
# against each other, and errors under MPI printed once. Uses `dtrain run` (mpiexec).
. "$(dirname "$0")/lib.sh"
same() { # LABEL A B TOL
    local out; out=$("$DTRAIN" diff "$2" "$3" --tol "$4" 2>&1); check "$1" $? "$out"
}
run() { "$DTRAIN" run "$@" --quiet; }

C=(--model cnn1 --data mnist --epochs 1 --max-steps 20 --batch 16 --seed 3)

# allreduce and a synchronous parameter server doing gradient averaging: the same model
run -n 4 --algo allreduce "${C[@]}" --out "$T/ar.w" --log "$T/ar.jsonl"
run -n 4 --algo ps --ps-mode grad "${C[@]}" --out "$T/psg.w" --log "$T/psg.jsonl"
same "allreduce == ps --ps-mode grad (4 ranks, 20 steps)" "$T/ar.w" "$T/psg.w" 1e-6

# allreduce with N ranks x batch B == one process at batch N*B on the same examples
M=(--model mlp --data mnist --epochs 1 --max-steps 20 --seed 3 --split stripe)
run -n 2 --algo allreduce "${M[@]}" --batch 8 --out "$T/ar2.w"
"$DTRAIN" train --algo local "${M[@]}" --batch 16 --out "$T/local16.w" --quiet
same "allreduce 2x8 == local batch 16 (same examples)" "$T/ar2.w" "$T/local16.w" 1e-6
"$DTRAIN" train --algo local "${M[@]}" --batch 16 --seed 9 --out "$T/local16b.w" --quiet
"$DTRAIN" diff "$T/ar2.w" "$T/local16b.w" --tol 1e-6 >/dev/null; [ $? -eq 1 ]
check "... and differs from another seed's run (the comparison can fail)" $? "diff --tol 1e-6 exits 1"

# federated averaging every step == parameter server weight averaging
run -n 2 --algo fedavg --local-steps 1 --aggregate average "${C[@]}" --out "$T/fa1.w"
run -n 2 --algo ps --ps-mode weight "${C[@]}" --out "$T/psw.w"
same "fedavg --local-steps 1 == ps --ps-mode weight" "$T/fa1.w" "$T/psw.w" 1e-6

# fedavg sends once per K steps; loss/samples weighting changes the model
run -n 3 --algo fedavg --local-steps 5 "${C[@]}" --out "$T/fa5.w" --log "$T/fa5.jsonl"
pct=$(summary_field "$T/fa5.jsonl" msgs_pct)
awk -v p="$pct" 'BEGIN { exit !(p > 19.99 && p < 20.01) }'; check "fedavg K=5 sends 20% of the messages" $? "msgs_pct=$pct"
run -n 3 --algo fedavg --local-steps 5 --aggregate loss "${C[@]}" --out "$T/fal.w"
"$DTRAIN" diff "$T/fa5.w" "$T/fal.w" --tol 0 >/dev/null; [ $? -eq 1 ]; check "fedavg loss weighting differs from plain" $? ""

# counters: what ranks report sending equals what they report receiving
for f in ar psg fa5; do
    s=$(summary_field "$T/$f.jsonl" msgs_sent)
    r=$(grep '"type":"summary"' "$T/$f.jsonl" | grep -o '"msgs_recv":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)
    [ "$s" = "$r" ]; check "$f: messages sent ($s) == messages received ($r)" $? ""
done
grep -q '"type":"epoch"' "$T/ar.jsonl"; check "log has epoch lines" $? ""

# errors with several ranks: one line, exit 2
"$DTRAIN" run -n 3 --algo allreduce "${C[@]}" --data-dir "$T/nothing" --no-save >"$T/o" 2>"$T/e"
rc=$?; [ $rc -eq 2 ] && [ "$(wc -l <"$T/e")" -eq 1 ] && grep -q "nothing/train-images" "$T/e"
check "missing data with 3 ranks: one error line, exit 2" $? "rc=$rc: $(cat "$T/e")"
"$DTRAIN" run -n 2 --algo local "${C[@]}" --no-save >"$T/o" 2>"$T/e"
rc=$?; [ $rc -eq 2 ] && [ "$(wc -l <"$T/e")" -eq 1 ] && grep -q "trains on one process" "$T/e"
check "--algo local with 2 ranks: one error line" $? "rc=$rc: $(cat "$T/e")"
"$DTRAIN" run -n 2 --algo allreduce --lr -1 >"$T/o" 2>"$T/e"
rc=$?; [ $rc -eq 2 ] && [ "$(wc -l <"$T/e")" -eq 1 ]; check "bad flag under run: one line" $? "$(cat "$T/e")"
"$DTRAIN" run -n 2 --algo gossip "${C[@]}" --no-save >"$T/o" 2>"$T/e"
rc=$?; [ $rc -eq 2 ] && [ "$(wc -l <"$T/e")" -eq 1 ] && grep -q "unknown algorithm" "$T/e"
check "unknown --algo with 2 ranks: one line" $? "$(cat "$T/e")"
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --out "$T/o.w" >"$T/o" 2>"$T/e"
[ "$(grep -c '^epoch' "$T/o")" -eq 1 ]; check "only rank 0 prints (one epoch line with 2 ranks)" $? "$(grep -c '^epoch' "$T/o") epoch lines"

finish
