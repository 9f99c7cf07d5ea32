#!/usr/bin/env bash
# Flags that cannot act within the run's length (src/trainer/reach.c) get one warning line each,
# from rank 0, naming the flag, its value (and whose default it is) and what the run does
# instead; a run long enough for them gets none. A test per family: a warm-up (eventgrad's
# default 30 steps: the run is dpsgd's, every message sent with --sync), a start (PowerSGD, only when it
# compresses), averagings or gossip every N steps (fedavg, DiLoCo's horizon, choco, downpour's
# push), evaluation periods (steps, epochs), a step schedule's decay; in dtrain sim too.
. "$(dirname "$0")/lib.sh"
require_mnist
# lib.sh silences the CLI's set-up warnings for the tests that count stderr's lines: these are
# what this test is about
unset DTRAIN_NO_SETUP_WARNINGS
# 1,280 examples on 2 ranks at batch 64: 10 steps an epoch
SMALL=(--model mlp --data mnist --train-limit 1280 --test-limit 500 --batch 64 --no-save)

# warns LABEL PATTERN ARGS...: the run succeeds and its stderr has exactly one warning line
# matching PATTERN, and no other "cannot act" line than those the caller expects (EXTRA)
warns() {
    local label=$1 pattern=$2; shift 2
    "$DTRAIN" "$@" --quiet >"$T/out" 2>"$T/err"
    local rc=$? n total
    n=$(grep -c -- "$pattern" "$T/err")
    total=$(grep -c "cannot act" "$T/err")
    [ $rc -eq 0 ] && [ "$n" -eq 1 ] && [ "$total" -eq "${EXTRA:-1}" ]
    check "$label" $? "exit $rc, $n line(s) matching '$pattern', $total warning(s): $(grep "cannot act" "$T/err" | head -3 | tr '\n' '|')"
}

# silent LABEL ARGS...: the run succeeds without a "cannot act" warning
silent() {
    local label=$1; shift
    "$DTRAIN" "$@" --quiet >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -eq 0 ] && ! grep -q "cannot act" "$T/err"
    check "$label" $? "exit $rc: $(grep "cannot act" "$T/err" | head -2 | tr '\n' '|')"
}

# 1. a warm-up longer than the run: eventgrad's default, named as such, and the run was dpsgd
warns "eventgrad's default warm-up (30) in 10 steps" \
    "^dtrain: warning: --warmup-steps 30 (eventgrad's default) cannot act in a run of 10 steps: the trigger never holds a send back" \
    run -n 2 --algo eventgrad --sync "${SMALL[@]}" --epochs 1 --log "$T/eg.jsonl"
compare "... and (lock-step) it sent every message, as the warning says" "$(summary_field "$T/eg.jsonl" msgs_pct)" '==' 100
warns "a given warm-up is not called a default" "^dtrain: warning: --warmup-steps 12 cannot act in a run of 10 steps" \
    run -n 2 --algo eventgrad --warmup-steps 12 "${SMALL[@]}" --epochs 1
silent "a warm-up within the run: no warning" run -n 2 --algo eventgrad --warmup-steps 5 "${SMALL[@]}" --epochs 1

# 2. periods: fedavg's local steps (DiLoCo's horizon), choco's gossip, downpour's push
warns "fedavg --local-steps 20 in 10 steps" \
    "^dtrain: warning: --local-steps 20 cannot act in a run of 10 steps: the ranks train alone" \
    run -n 2 --algo fedavg --local-steps 20 "${SMALL[@]}" --epochs 1
silent "fedavg --local-steps 10 in 10 steps (it averages once, at the last)" \
    run -n 2 --algo fedavg --local-steps 10 "${SMALL[@]}" --epochs 1
warns "DiLoCo's horizon past the run (--max-steps)" "^dtrain: warning: --local-steps 8 cannot act in a run of 6 steps" \
    run -n 2 --algo fedavg --local-steps 8 --outer-lr 0.7 --outer-momentum 0.9 --outer-nesterov "${SMALL[@]}" --epochs 2 --max-steps 6
warns "choco --gossip-every 15 in 10 steps" "^dtrain: warning: --gossip-every 15 cannot act in a run of 10 steps: the ranks never gossip" \
    run -n 2 --algo choco --gossip-every 15 "${SMALL[@]}" --epochs 1
warns "downpour --push-every 20 in 7 steps" "^dtrain: warning: --push-every 20 cannot act in a run of [0-9]* steps: the workers never push" \
    run -n 3 --algo downpour --servers 1 --push-every 20 "${SMALL[@]}" --epochs 1 --max-steps 7

# 3. a start: PowerSGD's plain-allreduce steps, only when PowerSGD compresses
warns "PowerSGD's default start (10) in 5 steps" \
    "^dtrain: warning: --powersgd-start 10 (allreduce's default) cannot act in a run of 5 steps: the gradients are never compressed" \
    run -n 2 --algo allreduce --compress powersgd:2 "${SMALL[@]}" --epochs 1 --max-steps 5
silent "allreduce without PowerSGD: its start is no concern" run -n 2 --algo allreduce "${SMALL[@]}" --epochs 1 --max-steps 5

# 4. evaluation periods and a step schedule (the trainer's own flags)
warns "--eval-every-steps 50 in 10 steps" "^dtrain: warning: --eval-every-steps 50 cannot act in a run of 10 steps: no evaluation between steps" \
    run -n 2 --algo allreduce --eval-every-steps 50 "${SMALL[@]}" --epochs 1
silent "--eval-every-steps 4 in 10 steps: no warning" run -n 2 --algo allreduce --eval-every-steps 4 "${SMALL[@]}" --epochs 1
warns "--eval-every 3 in 2 epochs" "^dtrain: warning: --eval-every 3 cannot act in a run of 2 epochs: only the run's final evaluation" \
    run -n 2 --algo allreduce --eval-every 3 "${SMALL[@]}" --epochs 2
warns "--schedule step:2:0.5 in 2 epochs" "^dtrain: warning: --schedule step:2:0.5 cannot act in a run of 2 epochs: the learning rate never decays" \
    run -n 2 --algo allreduce --schedule step:2:0.5 "${SMALL[@]}" --epochs 2
silent "--schedule step:2:0.5 in 3 epochs: no warning" run -n 2 --algo allreduce --schedule step:2:0.5 "${SMALL[@]}" --epochs 3
EXTRA=2 warns "two flags: a line each (the first)" "^dtrain: warning: --local-steps 20 " \
    run -n 2 --algo fedavg --local-steps 20 --eval-every-steps 30 "${SMALL[@]}" --epochs 1
compare "two flags: a line each (the second)" "$(grep -c -- "--eval-every-steps 30 cannot act" "$T/err")" '==' 1

# 5. one process (train) and a simulated cluster: once, from rank 0, not once per rank
warns "dtrain train: the same check" "^dtrain: warning: --eval-every-steps 100 cannot act in a run of 20 steps" \
    train --algo local --eval-every-steps 100 "${SMALL[@]}" --epochs 1
require_sim
warns "dtrain sim, 8 ranks: one line, not eight" "^dtrain: warning: --local-steps 8 cannot act in a run of 2 steps" \
    sim -n 8 --algo fedavg --local-steps 8 --compute modelled --speed 29Gf "${SMALL[@]}" --epochs 1
finish
