#!/usr/bin/env bash
# downpour --compress (shared/spec/algorithms.md "Compression"): pushes are gradient payloads
# with error feedback per server slice, replies parameter payloads against the copy each worker
# holds. With one and two servers fp16 and int8 train cnn1 on MNIST, the bytes sent by the
# workers (and the servers) shrink by the codec's factor (headers aside), the messages do not
# change, staleness is still recorded, --fetch-every/--push-every with topk still learn, a
# stalled worker is still dropped, and --compress none is the scheme as it was, bit for bit
# (one worker: deterministic). Uses `dtrain run`.
. "$(dirname "$0")/lib.sh"
DATA=${DTRAIN_DATA:-data}
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
# LABEL VALUE LO HI: LO <= VALUE <= HI
within() { awk -v v="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v >= lo && v <= hi) }'; check "$1" $? "$2 (expected $3..$4)"; }
# bytes sent by ranks [S, N) (the workers) or [0, S) (the servers): LOG S
rank_bytes() { grep '"type":"summary"' "$1" | grep -o '"per_rank".*' | grep -o '"bytes_sent":[0-9]*' | cut -d: -f2; }
worker_bytes() { rank_bytes "$1" | tail -n +$(($2 + 1)) | paste -sd+ | bc; }
server_bytes() { rank_bytes "$1" | head -n "$2" | paste -sd+ | bc; }
balanced() {
    local s r
    s=$(summary_field "$2" msgs_sent)
    r=$(per_rank_sum "$2" msgs_recv)
    [ -n "$s" ] && [ "$s" = "$r" ]; check "$1: messages sent ($s) == messages received ($r)" $? ""
}

if [ ! -s "$DATA/mnist/train-images-idx3-ubyte" ] && [ ! -s "$DATA/mnist/train-images-idx3-ubyte.gz" ]; then
    echo "FAIL MNIST not found in $DATA/mnist: run scripts/get-data"; echo "0 passed, 1 failed"; exit 1
fi

C=(--algo downpour --model cnn1 --data mnist --train-limit 6000 --test-limit 2000 --batch 32 --lr 0.05
   --momentum 0.5 --epochs 2 --seed 5)
S=(--algo downpour --model cnn1 --data mnist --epochs 1 --max-steps 30 --batch 16 --seed 5)

# 1. --compress none == no flag, bit for bit (one worker: pushes and pulls strictly alternate)
timeout 60 "$DTRAIN" run -n 2 "${S[@]}" --quiet --out "$T/plain.w"
timeout 60 "$DTRAIN" run -n 2 "${S[@]}" --quiet --compress none --out "$T/none.w"
out=$("$DTRAIN" diff "$T/plain.w" "$T/none.w" --tol 0 2>&1); check "--compress none == no flag (1 worker)" $? "$out"

# 2. one and two servers (two workers), none / fp16 / int8
for srv in 1 2; do
    n=$((srv + 2))
    timeout 120 "$DTRAIN" run -n $n --servers $srv "${C[@]}" --no-save --quiet --log "$T/s${srv}_none.jsonl"
    rc=$?; check "--servers $srv uncompressed runs" $rc "rc=$rc"
    w0=$(worker_bytes "$T/s${srv}_none.jsonl" $srv) v0=$(server_bytes "$T/s${srv}_none.jsonl" $srv)
    m0=$(summary_field "$T/s${srv}_none.jsonl" msgs_sent)
    for c in fp16:0.49:0.51 int8:0.25:0.26; do
        lo=${c#*:}; hi=${lo#*:}; lo=${lo%:*}; c=${c%%:*}
        L="$T/s${srv}_$c.jsonl"
        timeout 120 "$DTRAIN" run -n $n --servers $srv "${C[@]}" --compress $c --no-save --quiet --log "$L"
        rc=$?; check "--servers $srv --compress $c runs" $rc "rc=$rc"
        acc=$(summary_field "$L" test_acc)
        ge "${acc:-0}" 0.80; check "--servers $srv --compress $c: test accuracy >= 0.80" $? "test_acc=$acc"
        within "--servers $srv --compress $c: workers' bytes sent / uncompressed" \
            "$(echo "scale=4; $(worker_bytes "$L" $srv) / ${w0:-1}" | bc)" "$lo" "$hi"
        within "--servers $srv --compress $c: servers' bytes sent / uncompressed" \
            "$(echo "scale=4; $(server_bytes "$L" $srv) / ${v0:-1}" | bc)" "$lo" "$hi"
        [ "$(summary_field "$L" msgs_sent)" = "$m0" ]
        check "--servers $srv --compress $c: the same messages" $? "$(summary_field "$L" msgs_sent) vs $m0"
        stale=$(summary_field "$L" staleness_mean)
        awk -v s="${stale:-0}" 'BEGIN { exit !(s > 0) }'; check "--servers $srv --compress $c: staleness recorded" $? "staleness_mean=$stale"
        balanced "--servers $srv --compress $c" "$L"
    done
done

# 3. topk with --fetch-every/--push-every (the worker's copy apart from its replica)
L="$T/topk.jsonl"
timeout 120 "$DTRAIN" run -n 4 --servers 2 "${C[@]}" --compress topk:0.1 --fetch-every 3 --push-every 2 --no-save --quiet --log "$L"
rc=$?; acc=$(summary_field "$L" test_acc)
[ $rc -eq 0 ] && ge "${acc:-0}" 0.70; check "--servers 2 --compress topk:0.1 --fetch-every 3 --push-every 2 learns (>= 0.70)" $? "rc=$rc test_acc=$acc"
balanced "topk" "$L"

# 4. a stalled worker is still dropped cleanly under compression
timeout 60 "$DTRAIN" run -n 4 --servers 1 "${C[@]}" --compress int8 --worker-timeout 1.5 --stall-seconds 4 --no-save \
    --log "$T/st.jsonl" >"$T/st.out" 2>"$T/st.err"
rc=$?; check "--compress int8, stalled worker: the run completes" $rc "rc=$rc"
grep -q '^downpour: .*dropped workers: rank 3 (silent' "$T/st.out"
check "--compress int8: the stalled worker is dropped and named" $? "$(grep '^downpour: .*pushes' "$T/st.out")"
acc=$(summary_field "$T/st.jsonl" test_acc)
ge "${acc:-0}" 0.70; check "--compress int8, stalled worker: accuracy still reported (>= 0.70)" $? "test_acc=$acc"
balanced "--compress int8, stalled worker" "$T/st.jsonl"

finish
