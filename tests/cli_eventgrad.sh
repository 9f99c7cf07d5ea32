#!/usr/bin/env bash
# Decentralized schemes: eventgrad --sync --threshold const:0 reproduces dpsgd bit for bit
# (same messages, same model); without --sync it sends the same number of messages; the
# adaptive threshold sends fewer; every put is either read or counted as overwritten; and
# tensors arrive during the run from every neighbour that sent (no starvation).
. "$(dirname "$0")/lib.sh"
C=(--model cnn1 --data mnist --train-limit 4000 --test-limit 1000 --epochs 2 --batch 16 --seed 5)

run -n 4 --algo dpsgd "${C[@]}" --out "$T/dp.w" --log "$T/dp.jsonl"
run -n 4 --algo eventgrad --sync --threshold const:0 "${C[@]}" --out "$T/eg0.w" --log "$T/eg0.jsonl"
identical "eventgrad --sync const:0 == dpsgd (model, bit for bit)" "$T/dp.w" "$T/eg0.w"
a=$(summary_field "$T/dp.jsonl" msgs_sent); b=$(summary_field "$T/eg0.jsonl" msgs_sent)
compare "... and the same messages" "$a" == "$b" "dpsgd $a, eventgrad $b"
p=$(summary_field "$T/dp.jsonl" msgs_pct); compare "dpsgd sends every tensor every step" "$p" == 100 "msgs_pct=$p"

# --mix fresh mixes a tensor only when something new of it arrived: lock-step with const:0
# everything arrives every step, so it is still dpsgd bit for bit; with an adaptive threshold
# (tensors left unsent) it is another model
run -n 4 --algo eventgrad --sync --mix fresh --threshold const:0 "${C[@]}" --out "$T/egf0.w"
identical "eventgrad --sync --mix fresh const:0 == dpsgd (bit for bit)" "$T/dp.w" "$T/egf0.w"
run -n 4 --algo eventgrad --sync --mix every --threshold adaptive "${C[@]}" --out "$T/egse.w"
run -n 4 --algo eventgrad --sync --mix fresh --threshold adaptive "${C[@]}" --out "$T/egsf.w"
differ "... --mix fresh with an adaptive threshold differs from --mix every" "$T/egse.w" "$T/egsf.w" 1e-6

# --mix consensus (the default without --sync): x += gamma W sum_j (xhat_j - xhat_self) for
# the tensors of which something new arrived. Lock-step with const:0 and gamma 1 that is
# dpsgd's mixing written as a difference (x + W sum_j (xhat_j - x)): equal to rounding after
# 10 steps (over whole epochs training amplifies rounding differences), and gamma 0.5 is another
# model; with an adaptive threshold it differs from --mix fresh
S10=(--epochs 1 --max-steps 10)
run -n 4 --algo dpsgd "${C[@]}" "${S10[@]}" --out "$T/dp10.w"
run -n 4 --algo eventgrad --sync --mix consensus --gamma 1 --threshold const:0 "${C[@]}" "${S10[@]}" --out "$T/egc1.w"
same "eventgrad --sync --mix consensus --gamma 1 const:0 == dpsgd (to rounding, 10 steps)" "$T/dp10.w" "$T/egc1.w" 1e-6
run -n 4 --algo eventgrad --sync --mix consensus --gamma 0.5 --threshold const:0 "${C[@]}" "${S10[@]}" --out "$T/egc05.w"
differ "... --gamma 0.5 is another model" "$T/dp10.w" "$T/egc05.w" 1e-4
run -n 4 --algo eventgrad --sync --mix consensus --threshold adaptive "${C[@]}" --out "$T/egsc.w"
differ "... with an adaptive threshold it differs from --mix fresh" "$T/egsf.w" "$T/egsc.w" 1e-6

# --mix sum (asynchronous SGD without a server): a rank sends the running sum of its own updates
# and adds its neighbours' in full. Lock-step with const:0 on a complete graph every rank then
# holds the starting weights plus every rank's updates of every step: allreduce at 4 x lr, to
# rounding (10 steps); allreduce at the same lr is another model
run -n 4 --algo allreduce --lr 0.2 "${C[@]}" "${S10[@]}" --out "$T/ar10x4.w"
run -n 4 --algo allreduce --lr 0.05 "${C[@]}" "${S10[@]}" --out "$T/ar10.w"
run -n 4 --algo eventgrad --sync --mix sum --topology complete --threshold const:0 --lr 0.05 "${C[@]}" "${S10[@]}" \
    --out "$T/egs0.w"
same "eventgrad --sync --mix sum const:0 == allreduce at 4 x lr (to rounding, 10 steps)" "$T/ar10x4.w" "$T/egs0.w" 1e-6
differ "... and not allreduce at the same lr" "$T/ar10.w" "$T/egs0.w" 1e-4
# asynchronous, adaptive: the ranks' models differ by the updates on their way during the run,
# and after the last round of every tensor and the drain every rank holds every update
run -n 4 --algo eventgrad --mix sum --topology complete --threshold adaptive --lr 0.05 "${C[@]}" --out "$T/egsa.w" \
    --log "$T/egsa.jsonl"
acc=$(acc "$T/egsa.jsonl"); compare "asynchronous --mix sum learns" "$acc" '>' 0.8 "test_acc=$acc"
p=$(summary_field "$T/egsa.jsonl" msgs_pct)
holds "$p" '>' 0 && holds "$p" '<' 90; check "... sending fewer messages than every tensor every step" $? "msgs_pct=$p"
sb=$(summary_field "$T/egsa.jsonl" spread_before_avg); sf=$(summary_field "$T/egsa.jsonl" spread_after_finish)
compare "... the models differed before the last round" "$sb" '>' 1e-4 "spread $sb"
compare "... and are the same after it (every update everywhere)" "$sf" '<' 1e-5 "spread after finish $sf, before $sb"
expect_error "--mix sum on a ring of 4: one line" "--mix sum: every rank must hear every other" -- \
    "$DTRAIN" run -n 4 --algo eventgrad --mix sum "${C[@]}" --no-save

run -n 4 --algo eventgrad --threshold const:0 --max-lag 0 "${C[@]}" --out "$T/egw.w" --log "$T/egw.jsonl"
c=$(summary_field "$T/egw.jsonl" msgs_sent); compare "eventgrad const:0 without --sync, sends waiting for the link (--max-lag 0): dpsgd's messages" "$c" == "$a" "$c vs $a"

# overlapped puts (the default without --sync): every send dpsgd makes is asked for; those a
# newer value replaced while the previous round was on its way are coalesced, not sent
run -n 4 --algo eventgrad --threshold const:0 "${C[@]}" --out "$T/ega.w" --log "$T/ega.jsonl"
asked=$(log_query "$T/ega.jsonl" 'sum(r["sent"] for t in of("transport") for r in t["ranks"])')
coalesced=$(log_query "$T/ega.jsonl" 'sum(r["coalesced"] for t in of("transport") for r in t["ranks"])')
c=$(summary_field "$T/ega.jsonl" msgs_sent)
compare "eventgrad const:0 overlapped: dpsgd's sends asked for" "$asked" == "$a" "$asked vs $a"
compare "... sent: asked - 2 x coalesced (ring: a tensor goes to 2 neighbours)" "$c" == "$((asked - 2 * coalesced))" "sent $c, coalesced $coalesced"
e=$(summary_field "$T/ega.jsonl" exposed_comm_pct); w=$(summary_field "$T/egw.jsonl" exposed_comm_pct)
# (how much less the overlapped puts expose is a matter of timing, 4 ranks sharing 2 cores:
# under Open MPI it came out 59.9% against 58.5% once; speed belongs in bench/, not here)
within "... exposed communication reported (overlapped puts)" "$e" 0 100
within "... and for the waiting puts" "$w" 0 100

# (bounded staleness of one step: on 2 cores the 4 ranks take turns, and a neighbour's round
# may wait for its turn to land; --max-lag 1 keeps what is mixed in recent)
run -n 4 --algo eventgrad --threshold adaptive --warmup-steps 10 --max-lag 1 "${C[@]}" --out "$T/egad.w" --log "$T/egad.jsonl"
p=$(summary_field "$T/egad.jsonl" msgs_pct); acc=$(acc "$T/egad.jsonl")
holds "$p" '>' 0 && holds "$p" '<' 90; check "adaptive threshold sends fewer messages" $? "msgs_pct=$p"
compare "adaptive eventgrad still learns" "$acc" '>' 0.5 "test_acc=$acc"

# every put is read fresh or counted as overwritten (after the final read)
for f in dp egw ega egad egsa; do
    sent=$(msgs "$T/$f.jsonl"); fresh=$(per_rank_sum "$T/$f.jsonl" fresh_recv)
    over=$(per_rank_sum "$T/$f.jsonl" overwritten)
    compare "$f: puts ($sent) == fresh ($fresh) + overwritten ($over)" "$sent" == "$((fresh + over))" ""
done
# lock-step mode never overwrites or catches a write in progress
over=$(per_rank_sum "$T/dp.jsonl" overwritten); torn=$(per_rank_sum "$T/dp.jsonl" torn_retries)
holds "$over" == 0 && holds "$torn" == 0; check "dpsgd: nothing overwritten or torn" $? "overwritten $over, torn $torn"

# no starvation: every epoch, every (rank, neighbour) pair got fresh tensors when the neighbour sent
for f in ega egad; do
    n=$(line_count "$T/$f.jsonl" transport)
    s=$(log_query "$T/$f.jsonl" 'sum(t["starved_pairs"] for t in of("transport"))')
    holds "$n" == 2 && holds "$s" == 0; check "$f: transport log per epoch, no starved pairs" $? "$n epochs, starved $s"
    # (rank, neighbour) pairs of an epoch with no fresh tensor
    zero=$(log_query "$T/$f.jsonl" 'sum(v == 0 for t in of("transport") for r in t["ranks"] for v in r["fresh_from"].values())')
    compare "$f: fresh tensors from every neighbour in every epoch" "$zero" == 0 "$zero empty"
done

# the topologies run
for topo in torus exponential complete; do
    run -n 4 --algo dpsgd --topology $topo "${C[@]}" --epochs 1 --max-steps 20 --no-save --log "$T/t_$topo.jsonl"
    check "dpsgd --topology $topo runs" $? "msgs $(summary_field "$T/t_$topo.jsonl" msgs_sent)"
done
# asynchronous, overlapped, adaptive: consensus (the default) against fresh mixing, the same
# run otherwise; the ranks' mean model is what is evaluated
run -n 4 --algo eventgrad --threshold adaptive --max-lag 1 "${C[@]}" --epochs 3 --out "$T/egac.w" --log "$T/egac.jsonl"
run -n 4 --algo eventgrad --threshold adaptive --max-lag 1 --mix fresh "${C[@]}" --epochs 3 --out "$T/egaf.w" --log "$T/egaf.jsonl"
ac=$(acc "$T/egac.jsonl"); af=$(acc "$T/egaf.jsonl")
compare "asynchronous consensus learns (3 short epochs)" "$ac" '>' 0.8 "consensus $ac, fresh $af"
expect_error "bad --gamma: one line" "--gamma 0: expected" -- \
    "$DTRAIN" run -n 2 --algo eventgrad --gamma 0 "${C[@]}" --no-save
expect_error "bad --mix: one line" "--mix bogus: expected auto, every, fresh, consensus or sum" -- \
    "$DTRAIN" run -n 2 --algo eventgrad --mix bogus "${C[@]}" --no-save
expect_error "bad --threshold: one line" "--threshold bogus: expected adaptive or const:C" -- \
    "$DTRAIN" run -n 2 --algo eventgrad --threshold bogus "${C[@]}" --no-save

finish
