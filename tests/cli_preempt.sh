#!/usr/bin/env bash
# Preemption and time limits lose nothing (SIGTERM is what Slurm sends at both): with
# --checkpoint, every rank finishes its step, a checkpoint set of that step is committed
# (mid-epoch), the run exits with status 5 and one line saying how to resume, and the run
# resumed (--resume auto) ends with the weights and message counts of an uninterrupted run,
# bit for bit, training no step twice (redone_steps 0, every epoch's report the same).
# The signal may reach one rank only: the ranks agree on the stop. Also with one process,
# under dtrain run (the supervisor passes the signal on and waits for the save), for lock-step
# eventgrad, and on a loaded machine. dtrain run says status 5 whoever got the signal (a rank,
# mpiexec, both), 0 for a stop after the last step; --resume auto on a finished run is status
# 0; a signal while MPI starts is a stop too. Without --checkpoint a signal still ends the run.
# A set saved within an epoch refuses another --seed or --split.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_helpers.sh"
require_mnist

# 10,000 examples a rank at batch 16: 625 steps an epoch, a few seconds each (fewer in the
# sanitizer pass, lib.sh scaled)
C=(--model cnn1 --data mnist --train-limit $(scaled 20000) --test-limit 300 --batch 16 --lr 0.05 --momentum 0.5 --seed 4 --epochs 2
   --progress 10 --quiet)

# step_logged LOG N: LOG has a step line at step N or later (the run is past its start)
step_logged() {
    [ -s "$1" ] && /usr/bin/python3 -c 'import json, sys
s = [json.loads(l).get("step", 0) for l in open(sys.argv[1]) if l.strip() and "\"type\":\"step\"" in l]
sys.exit(not s or max(s) < int(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

# epochs' reports (loss, train accuracy, test accuracy) without their times
epoch_reports() { log_query "$1" '[(e["epoch"], e["loss"], e["train_acc"], e["test_acc"]) for e in of("epoch")]'; }

# stop_case LABEL HOW ARGS...: HOW is "run" (dtrain run, SIGTERM to it), "rank1" (mpiexec,
# SIGTERM to rank 1 only) or "one" (one process); ARGS the run's flags
stop_case() {
    local label=$1 how=$2; shift 2
    local d="$T/$label" launch
    mkdir -p "$d"
    case "$how" in
        run) launch=("$DTRAIN" run -n "$N") ;;
        rank1) launch=(mpiexec -n "$N" "$DTRAIN" train) ;;
        one) launch=("$DTRAIN" train) ;;
    esac
    "${launch[@]}" "$@" "${C[@]}" --out "$d/straight.w" --log "$d/straight.jsonl" >/dev/null 2>&1
    ( "${launch[@]}" "$@" "${C[@]}" --checkpoint "$d/ck" --resume auto --out "$d/r.w" --log "$d/r.jsonl" \
        >"$d/1.out" 2>"$d/1.err"; echo $? >"$d/1.rc" ) &
    local job=$! pid
    wait_until 120 step_logged "$d/r.jsonl" 100
    case "$how" in
        rank1) pid=$(launched_rank 1 | head -1) ;;
        run) pid=$(pgrep -f "dtrain run.*$d/ck" | head -1) ;;
        one) pid=$(pgrep -f "dtrain train.*$d/ck" | head -1) ;;
    esac
    kill -TERM "${pid:-999999999}"
    wait_until 120 test -s "$d/1.rc"
    wait "$job" 2>/dev/null
    local rc step
    rc=$(cat "$d/1.rc" 2>/dev/null || echo none)
    compare "$label: a stopped run exits with status 5" "$rc" == 5 "status $rc; stderr: $(head -c 300 "$d/1.err")"
    # (mpiexec itself may add lines of its own: Open MPI's mpirun says a rank exited non-zero)
    local lines
    if [ "$how" = rank1 ]; then lines=$(grep -c '^dtrain' "$d/1.err"); else lines=$(grep -c . "$d/1.err"); fi
    compare "$label: ... saying so in one line" "$lines" == 1 "$(head -c 300 "$d/1.err")"
    check "$label: ... naming the signal, the step and how to resume" \
        "$(grep -q 'stopped by Terminated after step [0-9]* (epoch 1, step [0-9]* of [0-9]*): checkpoint .* committed; resume with the same command and --resume' "$d/1.err"; echo $?)" \
        "$(head -c 300 "$d/1.err")"
    step=$(sed -n 's/.*after step \([0-9]*\) (epoch 1, step \([0-9]*\) of \([0-9]*\)).*/\2 \3/p' "$d/1.err")
    check "$label: ... mid-epoch, after the step it was sent at" "$(echo "$step" | awk '{ exit !($1 > 100 && $1 < $2) }'; echo $?)" \
        "step and steps of the epoch: ${step:-none}"
    [ "$how" = one ] || compare "$label: ... the set's manifest names that step" "$(sed -n 's/^step //p' "$d/ck")" == \
        "${step%% *}" "$(head -4 "$d/ck" | tr '\n' ' ')"
    mkdir -p "$d/mid" && cp "$d"/ck* "$d/mid/" # kept for the checks of another --seed or --split below
    "${launch[@]}" "$@" "${C[@]}" --checkpoint "$d/ck" --resume auto --out "$d/r.w" --log "$d/r.jsonl" >"$d/2.out" 2>"$d/2.err"
    compare "$label: the job run again resumes and finishes" "$?" == 0 "$(head -c 300 "$d/2.err")"
    identical "$label: resumed == uninterrupted, bit for bit" "$d/straight.w" "$d/r.w"
    local a b
    a=$(summary_field "$d/straight.jsonl" msgs_sent) b=$(summary_field "$d/r.jsonl" msgs_sent)
    compare "$label: ... the same messages sent" "$a" == "$b" "uninterrupted $a, resumed $b"
    compare "$label: ... no step trained twice" "$(summary_field "$d/r.jsonl" redone_steps)" == 0 ""
    a=$(epoch_reports "$d/r.jsonl") b=$(epoch_reports "$d/straight.jsonl")
    check "$label: ... the stopped epoch's report is the uninterrupted one's" "$([ -n "$a" ] && [ "$a" = "$b" ]; echo $?)" \
        "resumed $a, uninterrupted $b"
}

# dtrain run judges a stop by its ranks (their boards), whoever got the signal.
# signal_case LABEL WHO [LAUNCHER]: `dtrain run -n 2` with --checkpoint, SIGTERM after step 100
# to WHO: rank1 (one rank), mpiexec (the launcher, which passes it on), all (the launcher and
# every rank at once, as Slurm signals the processes of a job step); status 5 and rank 0's
# line alone, whatever the launcher's own status (MPICH's mpiexec ends with 0 after a SIGTERM
# of its own, with 5 after a rank's). LAUNCHER as $DTRAIN_MPIEXEC: one that loses the ranks'
# lines leaves the line to dtrain run, from the set's manifest.
signal_case() {
    local label=$1 who=$2 d="$T/$1" pids grace=1
    mkdir -p "$d"
    # (Open MPI's mpirun passes a SIGTERM of its own on to the ranks odls_base_sigkill_timeout
    # seconds later and kills them as long after that, docs/cluster.md: with 5, the ranks that
    # got it themselves have 10 s to stop; it waits that long, also after a rank's status 5)
    [ "$who" = all ] && grace=5
    # 40 epochs: the signal must come before the run ends (C's 2 took under 2 s on a Zen 5, and on
    # a loaded one the run ended between the step line and the signal)
    OMPI_MCA_odls_base_sigkill_timeout=$grace DTRAIN_MPIEXEC=${3:-mpiexec} job "$label" -n 2 --algo allreduce "${C[@]}" --epochs 40 \
        --checkpoint "$d/ck" --log "$d/r.jsonl" --no-save
    wait_until 120 step_logged "$d/r.jsonl" 100
    case "$who" in
        rank1) pids=$(rank_pid 1) ;;
        mpiexec) pids=$(pgrep -P "$(pgrep -P "$JOB")") ;; # the job's subshell, dtrain run, its launcher
        all) pids="$(pgrep -P "$(pgrep -P "$JOB")") $(rank_pid 0) $(rank_pid 1)" ;;
    esac
    # shellcheck disable=SC2086 # the pids, split
    kill -TERM ${pids:-999999999}
    ended "$label" 120
    compare "$label: SIGTERM to $who: dtrain run exits with status 5" "$RC" == 5 "status $RC; $(head -c 400 "$T/$label.err")"
    compare "$label: ... in one line" "$(grep -c . "$T/$label.err")" == 1 "$(head -c 400 "$T/$label.err")"
    local step
    step=$(sed -n 's/^dtrain: stopped.* after step \([0-9]*\)\( (epoch [0-9]*, step [0-9]* of [0-9]*)\)\{0,1\}: checkpoint .* committed; resume with the same command and --resume .*/\1/p' \
        "$T/$label.err")
    check "$label: ... saying the step, the checkpoint and how to resume" "$([ -n "$step" ]; echo $?)" "$(head -c 300 "$T/$label.err")"
    compare "$label: ... the set's manifest names that step" "$(sed -n 's/^step //p' "$d/ck")" == "${step:-none}" \
        "$(head -4 "$d/ck" | tr '\n' ' ')"
    wait_until 10 no_rank_left
    check "$label: ... no rank or guard left" $? ""
}

# late_case LABEL: SIGTERM to dtrain run once its ranks trained their last step (in the final
# evaluation): too late to matter, the run is complete (status 0, weights and summary, at
# most the line that says so), and the job run again with --resume auto (a job script requeued
# after its run ended) finds the finished run: status 0, one line, nothing written
late_case() {
    local label=$1 d="$T/$1" steps
    steps=$(( $(scaled 4000) / 32 ))
    local L=(--model cnn1 --data mnist --train-limit $((steps * 32)) --test-limit 10000 --batch 16 --lr 0.05 --seed 4 --epochs 1
             --progress 1 --quiet --checkpoint "$d/ck" --resume auto --out "$d/w" --log "$d/r.jsonl")
    mkdir -p "$d"
    job "$label" -n 2 --algo allreduce "${L[@]}"
    wait_until 120 grep -qs "\"step\":$steps,\"epoch\"" "$d/r.jsonl"
    kill -TERM "$(pgrep -P "$JOB")"
    ended "$label" 120
    compare "$label: SIGTERM after the last step: the run completes (status 0)" "$RC" == 0 "status $RC; $(head -c 400 "$T/$label.err")"
    check "$label: ... its weights written" "$([ -s "$d/w" ]; echo $?)" "$(ls "$d" | tr '\n' ' ')"
    compare "$label: ... and its summary" "$(line_count "$d/r.jsonl" summary)" == 1 ""
    compare "$label: ... said in one line at most" \
        "$(grep -vc '^dtrain: Terminated came after the last step: the run is complete, nothing to resume$' "$T/$label.err")" == 0 \
        "$(head -c 400 "$T/$label.err")"
    cp "$d/w" "$d/w.first" && cp "$d/r.jsonl" "$d/r.first"
    "$DTRAIN" run -n 2 --algo allreduce "${L[@]}" >"$d/2.out" 2>"$d/2.err"
    compare "$label: --resume auto on the finished run's checkpoint: status 0" $? == 0 "$(head -c 400 "$d/2.err")"
    check "$label: ... saying the run is finished, in one line" "$([ "$(grep -c . "$d/2.out" "$d/2.err" | paste -sd ' ')" = "$d/2.out:1 $d/2.err:0" ] &&
        grep -qF "dtrain: --resume auto: checkpoint $d/ck is of the finished run (1 of 1 epochs; its weights: $d/w): nothing to train" \
        "$d/2.out"; echo $?)" "$(cat "$d/2.out" "$d/2.err" | head -c 300)"
    check "$label: ... its weights and log untouched" "$(cmp -s "$d/w" "$d/w.first" && cmp -s "$d/r.jsonl" "$d/r.first"; echo $?)" ""
}

# init_case LABEL HOW: SIGTERM to rank 0 while it starts, waiting in MPI_Init for rank 1, which
# its launcher starts 3 s later ($T/late-mpiexec). With --checkpoint a signal from a rank's
# first moment is a stop (it killed the rank: mpiexec's status 15, nothing said): the run
# stops once the ranks can agree, status 5, one line. HOW: run (dtrain run) or mpiexec.
cat >"$T/late-mpiexec" <<'EOF'
#!/bin/sh
# mpiexec [OPTIONS] -n 2 PROGRAM ARGS...: rank 0 at once, rank 1 three seconds later
[ "$1" = --version ] && exec mpiexec --version
pre=
while [ $# -gt 0 ] && [ "$1" != -n ]; do pre="$pre $1"; shift; done
shift 2
# shellcheck disable=SC2086 # the options, split
exec mpiexec $pre -n 1 "$@" : -n 1 sh -c 'sleep 3; exec "$0" "$@"' "$@"
EOF
chmod +x "$T/late-mpiexec"
# term_caught PID: the process has a handler for SIGTERM (bit 15 of /proc's SigCgt)
term_caught() { local m; m=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null) && [ -n "$m" ] && (( 0x$m & 0x4000 )); }
# first_rank: rank 0 of the job under mpiexec alone (no guard), in pid
first_rank() { pid=$(launched_rank 0 | head -1); [ -n "$pid" ]; }
init_case() {
    local label=$1 how=$2 d="$T/$1" pid=
    mkdir -p "$d"
    local A=(--algo allreduce "${C[@]}" --checkpoint "$d/ck" --no-save)
    if [ "$how" = run ]; then
        DTRAIN_MPIEXEC="$T/late-mpiexec" job "$label" -n 2 "${A[@]}"
        wait_until 60 has_pid 0 && pid=$(rank_pid 0)
    else
        ( "$T/late-mpiexec" -n 2 "$DTRAIN" train "${A[@]}" >"$T/$label.out" 2>"$T/$label.err"; echo $? >"$T/$label.rc" ) &
        JOB=$!
        wait_until 60 first_rank
    fi
    # once its handler is there, or 2 s on (rank 1 starts after 3): a build without one dies
    wait_until 2 term_caught "${pid:-999999999}"
    kill -TERM "${pid:-999999999}"
    ended "$label" 120
    compare "$label: SIGTERM to rank 0 in MPI_Init ($how): status 5" "$RC" == 5 "status $RC; $(head -c 400 "$T/$label.err")"
    # (mpiexec itself may add lines of its own: Open MPI's mpirun says a rank exited non-zero)
    local lines
    if [ "$how" = mpiexec ]; then lines=$(grep -c '^dtrain' "$T/$label.err"); else lines=$(grep -c . "$T/$label.err"); fi
    compare "$label: ... in one line" "$lines" == 1 "$(head -c 400 "$T/$label.err")"
    grep -q '^dtrain: stopped by Terminated after step [0-9]* (epoch 1, step [0-9]* of [0-9]*): checkpoint .* committed; resume' "$T/$label.err"
    check "$label: ... the stop's line, its checkpoint committed" $? "$(head -c 300 "$T/$label.err")"
    wait_until 10 no_rank_left
    check "$label: ... no rank or guard left" $? ""
}

N=1 stop_case one one
N=2 stop_case allreduce-run run --algo allreduce
N=2 stop_case allreduce-rank1 rank1 --algo allreduce
N=3 stop_case eventgrad-sync-rank1 rank1 --algo eventgrad --sync --threshold adaptive --warmup-steps 5
# SIGTERM to mpiexec alone: MPICH's (Open MPI's mpirun passes it on only after
# odls_base_sigkill_timeout, and kills the ranks as long after: docs/cluster.md)
openmpi=$(mpiexec --version 2>&1 | grep -c -e 'Open MPI' -e OpenRTE)
launchers="rank1 all"
[ "$openmpi" -gt 0 ] || launchers="rank1 mpiexec all"
for who in $launchers; do signal_case "signal-$who" "$who"; done
# a launcher that loses the ranks' lines (MPI_Abort's cleanup can; here its stderr is gone)
printf '#!/bin/sh\nexec mpiexec "$@" 2>/dev/null\n' >"$T/mute-mpiexec"
chmod +x "$T/mute-mpiexec"
signal_case signal-rank1-mute rank1 "$T/mute-mpiexec"
late_case late
init_case init-run run
init_case init-mpiexec mpiexec

# a set saved within an epoch continues that epoch's order of examples: resumed with another
# --seed or --split it is refused in one line naming the flag and both values (before,
# accepted: some examples trained twice, others never)
expect_error "mid-epoch, one process: another --seed" "--seed: $T/one/mid/ck was saved within epoch 1 by a run with --seed 4, this run has --seed 5" -- \
    "$DTRAIN" train "${C[@]}" --seed 5 --no-save --resume "$T/one/mid/ck"
expect_error "mid-epoch, 2 ranks: another --split" "--split: $T/allreduce-run/mid/ck.e0.s" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --split class --no-save --resume "$T/allreduce-run/mid/ck"
grep -q "by a run with --split random, this run has --split class" "$T/.expect_err"; check "... naming both values" $? "$(cat "$T/.expect_err")"
expect_error "mid-epoch, 2 ranks: another --seed" "by a run with --seed 4, this run has --seed 7" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --seed 7 --no-save --resume "$T/allreduce-run/mid/ck"

# on a loaded machine: every core busy with other work
busy_cores
N=2 stop_case allreduce-loaded run --algo allreduce --compress int8
for who in $launchers; do signal_case "signal-$who-loaded" "$who"; done
late_case late-loaded
init_case init-run-loaded run
init_case init-mpiexec-loaded mpiexec
idle_cores

# the comparison can fail: a stopped run resumed one epoch longer differs from the straight one
d="$T/allreduce-run"
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 3 --out "$d/longer.w" >/dev/null 2>&1
differ "... and a run of another length differs (the comparison can fail)" "$d/straight.w" "$d/longer.w" 0

# --resume auto: nothing to resume from yet is a fresh start, said; without --checkpoint, refused
mkdir -p "$T/none"
"$DTRAIN" train --model mlp --data mnist --train-limit 320 --test-limit 100 --epochs 1 --checkpoint "$T/none/ck" \
    --resume auto --out "$T/auto.w" >"$T/auto.out" 2>"$T/auto.err"
compare "--resume auto with no checkpoint yet starts from the first step" "$?" == 0 "$(head -c 300 "$T/auto.err")"
check "... and says so" "$(grep -q 'no checkpoint .*none/ck yet: starting from the first step' "$T/auto.out"; echo $?)" \
    "$(head -c 300 "$T/auto.out")"
# ... run again when its run is finished: status 0 and one line, even with --quiet (one process);
# the weights never written (a run ended after its last checkpoint): the error it is, one line
"$DTRAIN" train --model mlp --data mnist --train-limit 320 --test-limit 100 --epochs 1 --checkpoint "$T/none/ck" \
    --resume auto --out "$T/auto.w" --quiet >"$T/auto2.out" 2>"$T/auto2.err"
compare "--resume auto on a finished run's checkpoint: status 0" "$?" == 0 "$(head -c 300 "$T/auto2.err")"
check "... saying so in one line" "$([ "$(cat "$T/auto2.out" "$T/auto2.err")" = "dtrain: --resume auto: checkpoint $T/none/ck is of the finished run (1 of 1 epochs; its weights: $T/auto.w): nothing to train" ]; echo $?)" \
    "$(cat "$T/auto2.out" "$T/auto2.err" | head -c 300)"
rm "$T/auto.w"
expect_error "--resume auto on a finished run's checkpoint whose weights were never written" "never written" -- "$DTRAIN" train \
    --model mlp --data mnist --train-limit 320 --test-limit 100 --epochs 1 --checkpoint "$T/none/ck" --resume auto --out "$T/auto.w"
expect_error "--resume auto without --checkpoint" "needs --checkpoint" -- "$DTRAIN" train --model mlp --data mnist \
    --epochs 1 --resume auto --no-save

# without --checkpoint, SIGTERM ends the run as before (nothing to save it in); 40 epochs (the
# last --epochs counts), ended at step 100 anyway: on a Zen 5 the 2 epochs of C took 1 s in
# all, and the signal came after the last step (the run complete, status 0)
( "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 40 --log "$T/plain.jsonl" --no-save >"$T/plain.out" 2>"$T/plain.err"
  echo $? >"$T/plain.rc" ) &
job=$!
wait_until 120 step_logged "$T/plain.jsonl" 100
kill -TERM "$(pgrep -f "dtrain run.*$T/plain.jsonl" | head -1)"
wait_until 60 test -s "$T/plain.rc"
wait "$job" 2>/dev/null
compare "without --checkpoint a SIGTERM ends the run (143)" "$(cat "$T/plain.rc")" == 143 "$(head -c 300 "$T/plain.err")"
check "... and says it was interrupted" "$(grep -q 'interrupted (Terminated)' "$T/plain.err"; echo $?)" "$(head -c 300 "$T/plain.err")"
finish
