#!/usr/bin/env bash
# downpour --compress (docs/algorithms.md "Compression"): pushes are gradient payloads
# with error feedback per server slice, replies parameter payloads against the copy each worker
# holds. With one and two servers fp16 and int8 train cnn1 on MNIST, the bytes sent by the
# workers (and the servers) shrink by the codec's factor (headers aside), the messages do not
# change, staleness is still recorded, --fetch-every/--push-every with topk still learn, a
# stalled worker is still dropped, and --compress none is the scheme as it was, bit for bit
# (one worker: deterministic). Uses `dtrain run`.
. "$(dirname "$0")/lib.sh"
require_mnist
# bytes sent by the workers (ranks S and up) or the servers (ranks below S): LOG S
worker_bytes() { per_rank_sum "$1" bytes_sent "$2"; }
server_bytes() { per_rank_sum "$1" bytes_sent 0 "$2"; }

C=(--algo downpour --model cnn1 --data mnist --train-limit 6000 --test-limit 2000 --batch 32 --lr 0.05
   --momentum 0.5 --epochs 2 --seed 5)
S=(--algo downpour --model cnn1 --data mnist --train-limit 4000 --test-limit 200 --epochs 1 --max-steps 30 --batch 16 --seed 5)

# 1. --compress none == no flag, bit for bit (one worker: pushes and pulls strictly alternate)
timeout 60 "$DTRAIN" run -n 2 "${S[@]}" --quiet --out "$T/plain.w"
timeout 60 "$DTRAIN" run -n 2 "${S[@]}" --quiet --compress none --out "$T/none.w"
identical "--compress none == no flag (1 worker)" "$T/plain.w" "$T/none.w"

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
        acc=$(acc "$L")
        compare "--servers $srv --compress $c: test accuracy >= 0.80" "$acc" '>=' 0.80 "test_acc=$acc"
        within "--servers $srv --compress $c: workers' bytes sent / uncompressed" \
            "$(ratio "$(worker_bytes "$L" $srv)" "$w0")" "$lo" "$hi"
        within "--servers $srv --compress $c: servers' bytes sent / uncompressed" \
            "$(ratio "$(server_bytes "$L" $srv)" "$v0")" "$lo" "$hi"
        m=$(summary_field "$L" msgs_sent)
        compare "--servers $srv --compress $c: the same messages" "$m" == "$m0" "$m vs $m0"
        stale=$(summary_field "$L" staleness_mean)
        compare "--servers $srv --compress $c: staleness recorded" "$stale" '>' 0 "staleness_mean=$stale"
        balanced "--servers $srv --compress $c" "$L"
    done
done

# 3. topk with --fetch-every/--push-every (the worker's copy apart from its replica)
L="$T/topk.jsonl"
timeout 120 "$DTRAIN" run -n 4 --servers 2 "${C[@]}" --compress topk:0.1 --fetch-every 3 --push-every 2 --no-save --quiet --log "$L"
rc=$?; acc=$(acc "$L")
[ $rc -eq 0 ] && holds "$acc" '>=' 0.70; check "--servers 2 --compress topk:0.1 --fetch-every 3 --push-every 2 learns (>= 0.70)" $? "rc=$rc test_acc=$acc"
balanced "topk" "$L"

# 4. a stalled worker is still dropped cleanly under compression
timeout 60 "$DTRAIN" run -n 4 --servers 1 "${C[@]}" --compress int8 --worker-timeout 1.5 --stall-seconds 4 --no-save \
    --log "$T/st.jsonl" >"$T/st.out" 2>"$T/st.err"
rc=$?; check "--compress int8, stalled worker: the run completes" $rc "rc=$rc"
grep -q '^downpour: .*dropped workers: rank 3 (silent' "$T/st.out"
check "--compress int8: the stalled worker is dropped and named" $? "$(grep '^downpour: .*pushes' "$T/st.out")"
acc=$(acc "$T/st.jsonl")
compare "--compress int8, stalled worker: accuracy still reported (>= 0.70)" "$acc" '>=' 0.70 "test_acc=$acc"
balanced "--compress int8, stalled worker" "$T/st.jsonl"

finish
