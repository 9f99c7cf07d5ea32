#!/usr/bin/env bash
# --compress (docs/algorithms.md "Compression") on 2 ranks: none changes nothing bit for
# bit; every codec trains allreduce and cuts the bytes by its factor, the ranks' models staying
# identical (fp16 and bf16 on 4 ranks too, summed in 16 bits: half the bytes at any N; int8
# and top-k by a reduce-scatter that re-encodes, or allgathered: --encoded-sum);
# DiLoCo's pseudo-gradient compressed;
# PowerSGD's low-rank factors (allreduce only); ps and fedavg (parameter payloads against copies) train and cut their bytes;
# fedavg K=1 == ps weight under compression too; local, asynchronous eventgrad and bad values: one line,
# exit 2. Uses `dtrain run` (mpiexec).
. "$(dirname "$0")/lib.sh"

C=(--model cnn1 --data mnist --epochs 2 --train-limit 6000 --test-limit 2000 --batch 32 --lr 0.05 --momentum 0.5 --seed 3)
S=(--model cnn1 --data mnist --train-limit 4000 --epochs 1 --max-steps 30 --batch 16 --seed 5 --test-limit 200) # short runs: equalities

# --compress none is the scheme as it was, bit for bit
for a in "allreduce" "ps --ps-mode grad" "ps --ps-mode weight" "fedavg --local-steps 3"; do
    tag=${a// /_}
    run -n 2 --algo $a "${S[@]}" --out "$T/plain_$tag.w"
    run -n 2 --algo $a "${S[@]}" --compress none --out "$T/none_$tag.w"
    identical "--algo $a: --compress none == no flag" "$T/plain_$tag.w" "$T/none_$tag.w"
done

# allreduce: every codec trains; bytes sent against the uncompressed run (2 ranks: a ring
# allgather of B bytes per rank vs an allreduce of 2(N-1)/N x 4n = 4n bytes per rank)
run -n 2 --algo allreduce "${C[@]}" --out "$T/ar_none.w" --log "$T/ar_none.jsonl"
b0=$(bytes "$T/ar_none.jsonl")
a0=$(acc "$T/ar_none.jsonl")
within "allreduce uncompressed accuracy" "$a0" 0.85 1
for spec in fp16:0.499:0.501 bf16:0.499:0.501 int8:0.25:0.27 topk:0.1:0.199:0.201; do
    c=${spec%:*:*}
    lo=${spec#"$c":}; hi=${lo#*:}; lo=${lo%:*}
    tag=${c/:/}
    run -n 2 --algo allreduce "${C[@]}" --compress "$c" --out "$T/ar_$tag.w" --log "$T/ar_$tag.jsonl" --checkpoint "$T/ck_$tag"
    a=$(acc "$T/ar_$tag.jsonl")
    within "allreduce --compress $c: test accuracy (uncompressed $a0)" "$a" 0.85 1
    within "allreduce --compress $c: bytes sent / uncompressed" "$(ratio "$(bytes "$T/ar_$tag.jsonl")" "$b0")" "$lo" "$hi"
    identical "allreduce --compress $c: the two ranks' models are identical" "$T/ck_$tag.e2.rank0" "$T/ck_$tag.e2.rank1"
    f="$T/ar_$tag.jsonl"
    s=$(msgs "$f") r=$(per_rank_sum "$f" msgs_recv) bs=$(bytes "$f") br=$(per_rank_sum "$f" bytes_recv)
    holds "$s" == "$r" && holds "$bs" == "$br"
    check "allreduce --compress $c: messages and bytes sent == received" $? "$s sent, $r received; $bs bytes sent, $br received"
done

# 4 ranks: fp16 and bf16 are summed by MPI in 16 bits (comm/half_reduce.h), half the fp32
# allreduce's bytes at any N, where allgathered payloads would be (N-1)/(2(N-1)/N) = 1.5x
# theirs; the ranks' models stay identical (every rank gets the same 16-bit sums)
run -n 4 --algo allreduce "${S[@]}" --log "$T/ar4_none.jsonl" --no-save
for c in fp16 bf16; do
    run -n 4 --algo allreduce "${S[@]}" --compress $c --log "$T/ar4_$c.jsonl" --checkpoint "$T/ck4_$c" --no-save
    within "4 ranks: allreduce --compress $c: bytes sent / fp32 allreduce's" \
        "$(ratio "$(bytes "$T/ar4_$c.jsonl")" "$(bytes "$T/ar4_none.jsonl")")" 0.499 0.501
    for r in 1 2 3; do
        identical "4 ranks: allreduce --compress $c: rank $r's model is rank 0's" "$T/ck4_$c.e1.rank0" "$T/ck4_$c.e1.rank$r"
    done
done

# int8 and top-k on 4 ranks (comm/encoded_sum.h): --encoded-sum reduce-scatter sends about
# 2(N-1)/N of a payload per rank, the allgather N-1 of them, so at 4 ranks half the allgather's
# bytes (int8: about 1/4 of the fp32 allreduce's, which sends 2(N-1)/N of 4n bytes); the ranks'
# models stay identical; auto is the reduce-scatter from 3 ranks on and the allgather on 2
for e in allgather reduce-scatter auto; do
    run -n 4 --algo allreduce "${S[@]}" --compress int8 --encoded-sum $e --log "$T/ar4_int8_$e.jsonl" --checkpoint "$T/ck4_int8_$e" --out "$T/ar4_int8_$e.w"
    for r in 1 2 3; do
        identical "4 ranks: allreduce --compress int8 --encoded-sum $e: rank $r's model is rank 0's" "$T/ck4_int8_$e.e1.rank0" "$T/ck4_int8_$e.e1.rank$r"
    done
    balanced "4 ranks: allreduce --compress int8 --encoded-sum $e" "$T/ar4_int8_$e.jsonl"
done
b0=$(bytes "$T/ar4_none.jsonl")
within "4 ranks: int8 allgathered: bytes / fp32 allreduce's" "$(ratio "$(bytes "$T/ar4_int8_allgather.jsonl")" "$b0")" 0.5 0.52
within "4 ranks: int8 by reduce-scatter: bytes / fp32 allreduce's" "$(ratio "$(bytes "$T/ar4_int8_reduce-scatter.jsonl")" "$b0")" 0.25 0.26
identical "4 ranks: --encoded-sum auto == reduce-scatter" "$T/ar4_int8_auto.w" "$T/ar4_int8_reduce-scatter.w"
differ "4 ranks: ... and the reduce-scatter (a second encoding) is not the allgather" "$T/ar4_int8_auto.w" "$T/ar4_int8_allgather.w" 0
run -n 2 --algo allreduce "${S[@]}" --compress int8 --out "$T/ar2_int8_auto.w"
run -n 2 --algo allreduce "${S[@]}" --compress int8 --encoded-sum allgather --out "$T/ar2_int8_ag.w"
identical "2 ranks: --encoded-sum auto == allgather" "$T/ar2_int8_auto.w" "$T/ar2_int8_ag.w"
run -n 4 --algo allreduce "${C[@]}" --compress int8 --log "$T/ar4_int8_learn.jsonl" --no-save
within "4 ranks: allreduce --compress int8 by reduce-scatter: test accuracy" "$(acc "$T/ar4_int8_learn.jsonl")" 0.85 1
run -n 4 --algo allreduce "${S[@]}" --compress topk:0.1 --log "$T/ar4_topk.jsonl" --checkpoint "$T/ck4_topk" --no-save
identical "4 ranks: allreduce --compress topk:0.1 by reduce-scatter: rank 3's model is rank 0's" "$T/ck4_topk.e1.rank0" "$T/ck4_topk.e1.rank3"
within "4 ranks: topk:0.1 by reduce-scatter: bytes / fp32 allreduce's" "$(ratio "$(bytes "$T/ar4_topk.jsonl")" "$b0")" 0.199 0.201

# DiLoCo with --compress (fedavg with an outer optimizer): the pseudo-gradient is summed
# encoded, fp16 by MPI in 16 bits and int8 by the reduce-scatter, with no rank in the middle:
# half and about a quarter of the uncompressed DiLoCo's bytes (the fp32 values of the round's
# weights and batch-norm state beside them), the ranks' models identical, and it learns
D=(--algo fedavg --local-steps 5 --outer-lr 0.7 --outer-momentum 0.9 --outer-nesterov)
run -n 4 "${D[@]}" "${S[@]}" --log "$T/dl4_none.jsonl" --no-save
for spec in fp16:0.5:0.51 int8:0.25:0.27; do
    c=${spec%%:*} lo=${spec#*:}; hi=${lo#*:}; lo=${lo%:*}
    run -n 4 "${D[@]}" "${S[@]}" --compress $c --log "$T/dl4_$c.jsonl" --checkpoint "$T/ck_dl4_$c" --no-save
    within "4 ranks: DiLoCo --compress $c: bytes / uncompressed DiLoCo's" "$(ratio "$(bytes "$T/dl4_$c.jsonl")" "$(bytes "$T/dl4_none.jsonl")")" "$lo" "$hi"
    for r in 1 2 3; do
        identical "4 ranks: DiLoCo --compress $c: rank $r's model is rank 0's" "$T/ck_dl4_$c.e1.rank0" "$T/ck_dl4_$c.e1.rank$r"
    done
    balanced "4 ranks: DiLoCo --compress $c" "$T/dl4_$c.jsonl"
done
run -n 2 "${D[@]}" "${C[@]}" --compress int8 --log "$T/dl2_int8.jsonl" --no-save
within "DiLoCo --compress int8: test accuracy" "$(acc "$T/dl2_int8.jsonl")" 0.85 1

# PowerSGD (schemes/powersgd.h): a rank at least every matrix's smaller side compresses no
# tensor, so it is the plain allreduce, bit for bit on 2 ranks; rank 2 is not, and learns cnn1
# past 90% in an epoch with at most 15% of the plain allreduce's bytes
run -n 2 --algo allreduce "${S[@]}" --out "$T/ar_plain.w"
run -n 2 --algo allreduce "${S[@]}" --compress powersgd:100 --out "$T/ar_psgd100.w"
identical "allreduce --compress powersgd:100 (no matrix compressed) == allreduce" "$T/ar_plain.w" "$T/ar_psgd100.w"
run -n 2 --algo allreduce "${S[@]}" --compress powersgd:2 --out "$T/ar_psgd2.w"
differ "allreduce --compress powersgd:2 is not the plain allreduce" "$T/ar_plain.w" "$T/ar_psgd2.w" 0
E=(--model cnn1 --data mnist --epochs 1 --train-limit $(scaled 60000) --batch 64 --lr 0.05 --momentum 0.9 --seed 1 --no-save)
run -n 2 --algo allreduce "${E[@]}" --log "$T/ar_epoch.jsonl"
run -n 2 --algo allreduce "${E[@]}" --compress powersgd:2 --log "$T/ar_epoch_psgd2.jsonl"
within "allreduce --compress powersgd:2: test accuracy after an epoch" "$(acc "$T/ar_epoch_psgd2.jsonl")" 0.90 1
within "allreduce --compress powersgd:2: bytes sent / the plain allreduce's" \
    "$(ratio "$(bytes "$T/ar_epoch_psgd2.jsonl")" "$(bytes "$T/ar_epoch.jsonl")")" 0 0.15
balanced "allreduce --compress powersgd:2" "$T/ar_epoch_psgd2.jsonl"
expect_error "powersgd with another scheme" "--compress powersgd:2: low-rank factors are summed by --algo allreduce only, not --algo ps" -- \
    "$DTRAIN" train --algo ps --compress powersgd:2 --epochs 1 --no-save

# ps (grad: error feedback up, weights down against the copy; weight: copies both ways) and fedavg
for a in "ps --ps-mode grad" "ps --ps-mode weight" "fedavg --local-steps 4"; do
    tag=${a// /_}
    run -n 2 --algo $a "${C[@]}" --log "$T/${tag}_none.jsonl" --no-save
    for c in fp16 int8; do
        run -n 2 --algo $a "${C[@]}" --compress $c --log "$T/${tag}_$c.jsonl" --no-save
        within "$a --compress $c: test accuracy" "$(acc "$T/${tag}_$c.jsonl")" 0.85 1
        r=$(ratio "$(bytes "$T/${tag}_$c.jsonl")" "$(bytes "$T/${tag}_none.jsonl")")
        if [ $c = fp16 ]; then within "$a --compress fp16: bytes / uncompressed" "$r" 0.49 0.51
        else within "$a --compress int8: bytes / uncompressed" "$r" 0.25 0.27; fi
        balanced "$a --compress $c" "$T/${tag}_$c.jsonl"
    done
done
run -n 2 --algo ps --ps-mode grad "${S[@]}" --compress int8 --checkpoint "$T/ck_psg" --no-save # no momentum buffer (only rank 0's is used)
identical "ps --ps-mode grad --compress int8: the two ranks' models are identical" "$T/ck_psg.e1.rank0" "$T/ck_psg.e1.rank1"
pct=$(summary_field "$T/fedavg_--local-steps_4_fp16.jsonl" msgs_pct)
within "fedavg K=4 --compress fp16 sends 1/4 of its every-step messages" "$pct" 24 27
run -n 2 --algo ps --ps-mode weight "${S[@]}" --compress topk:0.2 --out "$T/psw_topk.w"
run -n 2 --algo fedavg --local-steps 1 "${S[@]}" --compress topk:0.2 --out "$T/fa1_topk.w"
identical "fedavg --local-steps 1 == ps --ps-mode weight, both --compress topk:0.2" "$T/fa1_topk.w" "$T/psw_topk.w"

# errors: one line, exit 2
expect_error "--algo eventgrad (async) --compress fp16: one error line, exit 2" "--compress fp16: eventgrad needs --sync" -- \
    "$DTRAIN" run -n 2 --algo eventgrad "${S[@]}" --compress fp16 --no-save
expect_error "--algo local --compress int8: one error line, exit 2" \
    "not supported by --algo local (supported: allreduce, ps, fedavg, dpsgd, eventgrad with --sync, choco, downpour)" -- \
    "$DTRAIN" train --algo local "${S[@]}" --compress int8 --no-save
for bad in topk:0 topk:1.5 topk fp8; do
    expect_error "--compress $bad: one error line, exit 2" "--compress $bad:" -- \
        "$DTRAIN" run -n 2 --algo allreduce "${S[@]}" --compress $bad --no-save
done

finish
