#!/usr/bin/env bash
# The remedies for drift on data split by class (docs/algorithms.md, "Drift"): gradient
# tracking (dpsgd, eventgrad: --tracking), quasi-global momentum (dpsgd, eventgrad, choco:
# --momentum-kind qgm), an outer step over gossip (--outer-every), SCAFFOLD (fedavg --scaffold). Each neutral setting is the plain scheme bit
# for bit, each real one changes the model; eventgrad --sync const:0 stays dpsgd with them; a
# run of each resumes bit for bit; the exact average leaves every rank the same model; what
# cannot go together is refused in one line. (The formulas on one rank: tests/test_schemes.c.)
. "$(dirname "$0")/lib.sh"
require_mnist

# 4,000 examples split by class: 50 steps an epoch at batch 16 (the smallest shard's), so
# --outer-every 25 ends each epoch on an exact average, 20 averages mid-epoch
C=(--model cnn1 --data mnist --split class --train-limit 4000 --test-limit 500 --batch 16 --lr 0.05 --seed 3)

# neutral: without momentum QGM's buffer is never read
run -n 4 --algo dpsgd "${C[@]}" --epochs 1 --momentum 0 --out "$T/dp0.w"
run -n 4 --algo dpsgd "${C[@]}" --epochs 1 --momentum 0 --momentum-kind qgm --out "$T/dpq0.w"
identical "dpsgd --momentum-kind qgm --momentum 0 == dpsgd --momentum 0" "$T/dp0.w" "$T/dpq0.w"
run -n 4 --algo choco "${C[@]}" --epochs 1 --momentum 0 --out "$T/ch0.w"
run -n 4 --algo choco "${C[@]}" --epochs 1 --momentum 0 --momentum-kind qgm --out "$T/chq0.w"
identical "choco --momentum-kind qgm --momentum 0 == choco --momentum 0" "$T/ch0.w" "$T/chq0.w"
# with momentum it is another method
run -n 4 --algo dpsgd "${C[@]}" --epochs 1 --momentum 0.9 --momentum-kind local --out "$T/dpl.w"
run -n 4 --algo dpsgd "${C[@]}" --epochs 1 --momentum 0.9 --momentum-kind qgm --out "$T/dpq.w" --log "$T/dpq.jsonl"
differ "dpsgd qgm at momentum 0.9 moves the model otherwise than local momentum" "$T/dpl.w" "$T/dpq.w" 0
# the default, auto: qgm for dpsgd with sgd, local for eventgrad (and for dpsgd with adamw)
run -n 4 --algo dpsgd "${C[@]}" --epochs 1 --momentum 0.9 --out "$T/dpa.w"
identical "dpsgd's default --momentum-kind (auto) is qgm" "$T/dpq.w" "$T/dpa.w"
run -n 4 --algo eventgrad --sync --threshold const:0 "${C[@]}" --epochs 1 --momentum 0.9 --out "$T/ega.w"
identical "eventgrad's is local (--sync const:0 == dpsgd --momentum-kind local)" "$T/dpl.w" "$T/ega.w"
run -n 2 --algo dpsgd "${C[@]}" --epochs 1 --max-steps 3 --optim adamw --no-save --log "$T/adamw.jsonl"
compare "dpsgd with adamw: auto takes local momentum (AdamW's moments), no error" "$(summary_field "$T/adamw.jsonl" steps)" == 3
# schemes against each other: eventgrad --sync const:0 is dpsgd with the remedies too
R=(--momentum 0.9 --momentum-kind qgm --outer-every 20 --outer-lr 0.7 --outer-momentum 0.5)
run -n 4 --algo dpsgd "${C[@]}" --epochs 1 "${R[@]}" --out "$T/dpr.w"
run -n 4 --algo eventgrad --sync --threshold const:0 "${C[@]}" --epochs 1 "${R[@]}" --out "$T/egr.w"
identical "eventgrad --sync const:0 == dpsgd, both with qgm and an outer step" "$T/dpr.w" "$T/egr.w"
differ "... and the outer step moves the model" "$T/dpq.w" "$T/dpr.w" 0

# gradient tracking: on one rank y(k) = y(k-1) + g(k) - g(k-1) is g(k) up to rounding, so dpsgd
# alone is the plain step (10 steps: the rounding grows ~1.7x a step at class split); on four it is another method, sending twice the bytes, and
# eventgrad --sync const:0 is still dpsgd with it
run -n 1 --algo dpsgd "${C[@]}" --epochs 1 --max-steps 10 --momentum 0.9 --momentum-kind local --out "$T/dp1.w"
run -n 1 --algo dpsgd "${C[@]}" --epochs 1 --max-steps 10 --momentum 0.9 --momentum-kind local --tracking --out "$T/dpt1.w"
same "dpsgd --tracking on one rank == dpsgd, to rounding" "$T/dp1.w" "$T/dpt1.w" 1e-5
differ "... (the tracker's rounding shows: the check can fail)" "$T/dp1.w" "$T/dpt1.w" 0
run -n 4 --algo dpsgd "${C[@]}" --epochs 1 --momentum 0.9 --momentum-kind local --tracking --out "$T/dpt.w" --log "$T/dpt.jsonl"
differ "dpsgd --tracking on four ranks moves the model otherwise" "$T/dpl.w" "$T/dpt.w" 0
a=$(summary_field "$T/dpq.jsonl" mb_sent); b=$(summary_field "$T/dpt.jsonl" mb_sent)
compare "... sending y beside x: twice the bytes" "$b" '>' "$(awk -v a="$a" 'BEGIN { print 1.95 * a }')" "plain $a, tracking $b"
run -n 4 --algo eventgrad --sync --threshold const:0 "${C[@]}" --epochs 1 --momentum 0.9 --momentum-kind local --tracking \
    --out "$T/egt.w"
identical "eventgrad --sync const:0 --tracking == dpsgd --tracking" "$T/dpt.w" "$T/egt.w"
run -n 4 --algo eventgrad --sync "${C[@]}" --epochs 1 --momentum 0.9 --tracking --log "$T/egta.jsonl" --no-save
a=$(summary_field "$T/egta.jsonl" msgs_pct)
compare "eventgrad --sync --tracking: the trigger holds back x's and y's tensors alike" "$a" '<' 100 "msgs_pct=$a"

# the exact average: every H-th step leaves every rank the same model (the spread at the
# epoch's end, which is such a step, is 0); with the plain average as with an outer step
run -n 4 --algo dpsgd "${C[@]}" --epochs 1 --momentum 0.9 --outer-every 25 --log "$T/avg.jsonl" --no-save
compare "dpsgd --outer-every 25: the ranks hold one model after the average" "$(last_epoch_field "$T/avg.jsonl" spread)" == 0
compare "... and without it they do not" "$(last_epoch_field "$T/dpq.jsonl" spread)" '>' 1e-3
a=$(summary_field "$T/avg.jsonl" mb_sent); b=$(summary_field "$T/dpq.jsonl" mb_sent)
compare "... the average's allreduce is counted" "$a" '>' "$b" "with $a, without $b"
run -n 4 --algo eventgrad "${C[@]}" --epochs 1 --momentum 0.5 --outer-every 25 --outer-lr 0.7 --log "$T/egavg.jsonl" --no-save
compare "eventgrad (asynchronous) --outer-every 25 --outer-lr 0.7: one model after the outer step" \
    "$(last_epoch_field "$T/egavg.jsonl" spread)" == 0

# SCAFFOLD: one rank's correction is 0 (c = c_i); on two it changes the model
run -n 1 --algo fedavg --local-steps 7 "${C[@]}" --epochs 1 --momentum 0.9 --out "$T/fa1.w"
run -n 1 --algo fedavg --local-steps 7 "${C[@]}" --epochs 1 --momentum 0.9 --scaffold --out "$T/fs1.w"
identical "fedavg --scaffold on one rank == fedavg" "$T/fa1.w" "$T/fs1.w"
run -n 2 --algo fedavg --local-steps 7 "${C[@]}" --epochs 1 --momentum 0.9 --out "$T/fa2.w" --log "$T/fa2.jsonl"
run -n 2 --algo fedavg --local-steps 7 "${C[@]}" --epochs 1 --momentum 0.9 --scaffold --out "$T/fs2.w" --log "$T/fs2.jsonl"
differ "fedavg --scaffold on two ranks moves the model otherwise" "$T/fa2.w" "$T/fs2.w" 0
a=$(summary_field "$T/fa2.jsonl" mb_sent); b=$(summary_field "$T/fs2.jsonl" mb_sent)
compare "... sending the variates beside the models: about twice the bytes" "$b" '>' "$(awk -v a="$a" 'BEGIN { print 1.9 * a }')" "plain $a, scaffold $b"

# resumed == straight, bit for bit (fedavg's round of 7 ends mid-epoch)
resume_case() { # LABEL N FLAGS...
    local label=$1 n=$2; shift 2
    local d="$T/$label"
    mkdir -p "$d"
    run -n "$n" "$@" "${C[@]}" --epochs 2 --out "$d/straight.w"
    run -n "$n" "$@" "${C[@]}" --epochs 1 --checkpoint "$d/ck" --no-save
    run -n "$n" "$@" "${C[@]}" --epochs 2 --resume "$d/ck" --out "$d/resumed.w"
    identical "$label: resumed == straight, bit for bit" "$d/straight.w" "$d/resumed.w"
}
resume_case dpsgd-qgm-outer 4 --algo dpsgd "${R[@]}"
resume_case choco-qgm 4 --algo choco --momentum 0.9 --momentum-kind qgm --outer-every 40
resume_case eventgrad-sync-qgm-outer 4 --algo eventgrad --sync "${R[@]}"
resume_case dpsgd-tracking-int8 4 --algo dpsgd --momentum 0.9 --tracking --compress int8
resume_case eventgrad-sync-tracking 4 --algo eventgrad --sync --threshold const:0.01 --momentum 0.9 --tracking
resume_case fedavg-scaffold-diloco 2 --algo fedavg --local-steps 7 --momentum 0.9 --scaffold --outer-lr 0.7 --outer-momentum 0.5

# what cannot go together, and sets resumed with other remedies: one line each
expect_error "qgm with adamw: one line" "--momentum-kind qgm: quasi-global momentum replaces SGD's momentum buffer" -- \
    run -n 2 --algo dpsgd "${C[@]}" --epochs 1 --optim adamw --momentum-kind qgm --no-save
expect_error "--outer-every with --mix sum: one line" "--outer-every 10 with --mix sum" -- \
    run -n 2 --algo eventgrad --mix sum --topology complete "${C[@]}" --epochs 1 --outer-every 10 --no-save
expect_error "choco --tracking: one line" "--tracking: gradient tracking is dpsgd's and eventgrad's" -- \
    run -n 2 --algo choco --tracking "${C[@]}" --epochs 1 --no-save
expect_error "--tracking with --mix sum: one line" "--tracking with --mix sum" -- \
    run -n 2 --algo eventgrad --mix sum --topology complete --tracking "${C[@]}" --epochs 1 --no-save
expect_error "a tracking set resumed without: one line" "--tracking: $T/eventgrad-sync-tracking/ck" -- \
    run -n 4 --algo eventgrad --sync --threshold const:0.01 --momentum 0.9 "${C[@]}" --epochs 2 --resume "$T/eventgrad-sync-tracking/ck" --no-save
expect_error "--scaffold with --compress: one line" "--scaffold with --compress" -- \
    run -n 2 --algo fedavg --compress fp16 --scaffold "${C[@]}" --epochs 1 --no-save
expect_error "a qgm set resumed with local momentum: one line" "was saved with quasi-global momentum" -- \
    run -n 4 --algo dpsgd "${C[@]}" --epochs 2 --momentum 0.9 --momentum-kind local --resume "$T/dpsgd-qgm-outer/ck" --outer-every 20 \
    --outer-lr 0.7 --outer-momentum 0.5 --no-save
expect_error "a set with an outer step resumed without: one line" "--outer-every: $T/dpsgd-qgm-outer/ck" -- \
    run -n 4 --algo dpsgd "${C[@]}" --epochs 2 --momentum 0.9 --momentum-kind qgm --resume "$T/dpsgd-qgm-outer/ck" --no-save
expect_error "a SCAFFOLD set resumed without: one line" "--scaffold: " -- \
    run -n 2 --algo fedavg --local-steps 7 --momentum 0.9 --outer-lr 0.7 --outer-momentum 0.5 "${C[@]}" --epochs 2 \
    --resume "$T/fedavg-scaffold-diloco/ck" --no-save
finish
