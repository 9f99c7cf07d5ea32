#!/usr/bin/env bash
# The optimiser from the command line (docs/algorithms.md, "The optimiser"): --optim adamw with
# decoupled weight decay, --clip and --lr-warmup resumes bit for bit (local, allreduce, fedavg's
# DiLoCo mode: 1 epoch with --checkpoint, then --resume to 2, == 2 straight); fedavg's DiLoCo
# keeps each rank's inner AdamW moments across its averagings; every scheme trains with
# --optim adamw; a checkpoint resumed under another optimiser or beta, and the flags of one
# optimiser given to the other, are refused in one line naming the flag; the log's config line
# says what ran. The sgd path's own equality with earlier builds: cli_resume, cli_mpi and
# test_oracle, unchanged, and test_optim (sgd against PyTorch's, written out).
. "$(dirname "$0")/lib.sh"
require_mnist

# 480 examples per rank at batch 16 on 2 ranks: 30 steps per epoch (60 on one process)
C=(--model cnn1 --data mnist --train-limit 960 --test-limit 300 --batch 16 --seed 4)
# a warm-up across the checkpoint, decay on the weights only, clipping that bites (cnn1's
# gradient norm is about 1-3 early on); the schedule after the warm-up constant, so that a run
# of 1 epoch and one of 2 take the same steps in their first (cosine ends at the run's last)
A=(--optim adamw --lr 2e-3 --beta2 0.99 --weight-decay 0.1 --clip 0.5 --lr-warmup 5)

resume_case() { # LABEL N ALGO-FLAGS... (N 1: dtrain train)
    local label=$1 n=$2 d="$T/$1"; shift 2
    mkdir -p "$d"
    go() { if [ "$n" = 1 ]; then "$DTRAIN" train "$@" --quiet; else run -n "$n" "$@"; fi; }
    go "$@" "${C[@]}" "${A[@]}" --epochs 2 --out "$d/straight.w" --log "$d/straight.jsonl"
    go "$@" "${C[@]}" "${A[@]}" --epochs 1 --checkpoint "$d/ck" --no-save
    go "$@" "${C[@]}" "${A[@]}" --epochs 2 --resume "$d/ck" --out "$d/resumed.w"
    identical "$label --optim adamw: resumed == straight, bit for bit" "$d/straight.w" "$d/resumed.w"
}

resume_case local 1 --algo local
resume_case allreduce 2 --algo allreduce
resume_case fedavg-diloco 2 --algo fedavg --local-steps 7 --outer-lr 0.7 --outer-momentum 0.9 --outer-nesterov
# the comparison can fail: one epoch more differs
"$DTRAIN" train "${C[@]}" "${A[@]}" --epochs 3 --resume "$T/local/ck" --out "$T/local/later.w" --quiet
differ "... and a resumed run with an extra epoch differs (the comparison can fail)" "$T/local/straight.w" "$T/local/later.w" 0

# the log's config line: optimiser, betas, eps, clipping, schedule
cfg=$(log_query "$T/local/straight.jsonl" \
    '[one("config")[k] for k in ("optim", "beta1", "beta2", "eps", "clip", "weight_decay", "decay_on", "lr_warmup", "schedule", "schedule_counts")]')
[ "$cfg" = '["adamw",0.9,0.99,1e-08,0.5,0.1,"weights",5,"const","steps"]' ]
check "the config line says optim, betas, eps, clip, decay, warm-up and schedule" $? "$cfg"

# DiLoCo (Douillard et al. 2023): inner AdamW moments are each rank's own and kept across the
# averagings. With --local-steps 30 (one epoch) the round averages at the epoch's last step and
# the checkpoint comes right after it: each rank's part holds its 30 steps and its own moments
# (the models are averaged: identical), which a reset at the averaging would have zeroed.
d="$T/diloco-kept"
mkdir -p "$d"
run -n 2 --algo fedavg --local-steps 30 --outer-lr 0.7 --outer-momentum 0.9 --outer-nesterov "${C[@]}" "${A[@]}" \
    --epochs 1 --checkpoint "$d/ck" --no-save
steps_of() { # PART: the optimiser's step count in a checkpoint part ("train:optim")
    /usr/bin/python3 - "$1" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
(n,), o = struct.unpack_from("<I", b, 8), 12
for _ in range(n):
    (nl,) = struct.unpack_from("<H", b, o)
    name = b[o + 2:o + 2 + nl]
    nd = b[o + 2 + nl]
    dims = struct.unpack_from("<%dI" % nd, b, o + 3 + nl)
    o += 3 + nl + 4 * nd
    size = 4
    for k in dims:
        size *= k
    if name == b"train:optim":
        print(struct.unpack_from("<iiddq", b, o)[4])
    o += size
EOF
}
s0=$(steps_of "$d/ck.e1.rank0") s1=$(steps_of "$d/ck.e1.rank1")
[ "$s0" = 30 ] && [ "$s1" = 30 ]
check "DiLoCo: after the round's averaging each rank's AdamW has counted its 30 steps" $? "rank 0: $s0, rank 1: $s1"
out=$("$DTRAIN" diff "$d/ck.e1.rank0" "$d/ck.e1.rank1" 2>&1)
echo "$out" | grep -q "(in optim:exp_avg.*different"
check "... and keeps its own moments (the averaged models are the same, the moments are not)" $? "$out"

# every scheme trains with --optim adamw: 1 epoch of 960 examples (30 or 20 steps a rank) takes
# cnn1 from chance (0.1) to 0.46-0.67
S=(--model cnn1 --data mnist --train-limit 960 --test-limit 300 --batch 16 --seed 4 --epochs 1 --optim adamw --lr 1e-3 --clip 1)
scheme_case() { # LABEL N ALGO-FLAGS...
    local label=$1 n=$2; shift 2
    run -n "$n" "$@" "${S[@]}" --no-save --log "$T/$label.jsonl"
    within "$label --optim adamw trains: test accuracy" "$(summary_field "$T/$label.jsonl" test_acc)" 0.3 1
}
scheme_case allreduce 2 --algo allreduce
scheme_case ps-grad 2 --algo ps --ps-mode grad
scheme_case ps-weight 2 --algo ps --ps-mode weight
scheme_case fedavg 2 --algo fedavg --local-steps 5
scheme_case dpsgd 3 --algo dpsgd
scheme_case eventgrad 3 --algo eventgrad --sync
scheme_case choco 3 --algo choco
scheme_case downpour 3 --algo downpour
# the server (rank 0) of ps grad steps the mean gradient with its moments: allreduce's model
run -n 2 --algo allreduce "${S[@]}" --out "$T/ar.w"
run -n 2 --algo ps --ps-mode grad "${S[@]}" --out "$T/psg.w"
identical "ps --ps-mode grad == allreduce with --optim adamw --clip 1 (2 ranks: a sum of two in any order)" "$T/ar.w" "$T/psg.w"

# a checkpoint belongs to its optimiser: sgd's resumed as adamw, adamw's as sgd or with another beta
"$DTRAIN" train "${C[@]}" --epochs 1 --momentum 0.9 --checkpoint "$T/sgd.ck" --no-save --quiet
expect_error "sgd's checkpoint resumed with --optim adamw: one line" "--optim adamw: --resume $T/sgd.ck was saved by a run with --optim sgd" -- \
    "$DTRAIN" train "${C[@]}" "${A[@]}" --epochs 2 --resume "$T/sgd.ck" --no-save
expect_error "adamw's checkpoint resumed with --optim sgd: one line" "--optim sgd: --resume $T/local/ck was saved by a run with --optim adamw" -- \
    "$DTRAIN" train "${C[@]}" --epochs 2 --momentum 0.9 --resume "$T/local/ck" --no-save
expect_error "adamw's checkpoint resumed with another --beta2: one line" "--beta2 0.999: --resume $T/local/ck was saved with --beta2 0.99" -- \
    "$DTRAIN" train "${C[@]}" --optim adamw --lr 2e-3 --epochs 2 --resume "$T/local/ck" --no-save
expect_error "... under dtrain run too: one line" "--optim sgd: --resume $T/allreduce/ck.e1.rank0 was saved by a run with --optim adamw" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 2 --resume "$T/allreduce/ck" --no-save --quiet

# one optimiser's flags given to the other: one line naming the flag, before any rank starts
expect_error "--beta2 with sgd" "--beta2: an adamw flag, but --optim sgd" -- "$DTRAIN" train "${C[@]}" --beta2 0.99 --no-save
expect_error "--momentum with adamw" "--momentum 0.9: an sgd flag" -- "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --optim adamw --momentum 0.9 --no-save
expect_error "--nesterov with adamw" "--nesterov: an sgd flag" -- "$DTRAIN" train "${C[@]}" --optim adamw --nesterov --no-save
expect_error "--optim bad" "--optim" -- "$DTRAIN" train "${C[@]}" --optim adam --no-save
expect_error "--beta1 1" "--beta1" -- "$DTRAIN" train "${C[@]}" --optim adamw --beta1 1 --no-save
expect_error "--clip -1" "--clip" -- "$DTRAIN" train "${C[@]}" --clip -1 --no-save
expect_error "--decay-on bad" "--decay-on" -- "$DTRAIN" train "${C[@]}" --decay-on biases --no-save
expect_error "a warm-up as long as the run" "--lr-warmup 60: the run has 60 steps" -- \
    "$DTRAIN" train "${C[@]}" --epochs 1 --lr-warmup 60 --no-save

finish
