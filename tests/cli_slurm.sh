#!/usr/bin/env bash
# On a real Slurm cluster (scripts/slurmcluster: Debian's slurmctld, two slurmd presenting two
# nodes, munge): the job script the README shows (examples/slurm/train.sbatch) trains 2 ranks
# on 2 nodes to the weights of `dtrain run -n 2`, bit for bit; srun --mpi=pmi2 does too, and
# srun without it is refused in one line; a job requeued mid-epoch (scontrol requeue: SIGTERM
# to every rank, the job back in the queue) and a job whose ranks get SIGTERM (as before its
# time limit: the script requeues itself on status 5) come back by themselves and end with the
# weights of an uninterrupted run (allreduce, lock-step eventgrad, and allreduce with dtrain run
# in the job script), no step trained twice, one line per event in the job's output; a finished
# job requeued completes again, saying so. dtrain sweep --slurm: a cancelled job's run redone
# alone; a job stopped by SIGTERM with checkpoint = true recorded stopped and resumed in its
# folder; no controller answering: one line before anything is made. Skipped (with the reason,
# exit 0) where a cluster cannot be made: not root, Slurm or munge not installed
# (scripts/install-deps installs them).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_helpers.sh"
DTRAIN=$(cd "$(dirname "$DTRAIN")" && pwd)/$(basename "$DTRAIN") # the jobs run in $T
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SC=$ROOT/scripts/slurmcluster
# a cluster of its own (state in $T, its own ports), so a user's cluster is left alone
export DTRAIN_SLURM_DIR=$T/slurm DTRAIN_SLURM_PORT=26817
chmod 711 "$T" # munged (its own user) reaches its socket there
if ! why=$("$SC" check 2>&1); then
    echo "SKIP cli_slurm: a Slurm cluster cannot be made here: $why"
    echo "0 passed, 0 failed"
    exit 0
fi
require_mnist
# the cluster's logs are kept where a failure can be read (tests/cli_slurm.logs in the build's test folder)
trap 'cp "$DTRAIN_SLURM_DIR"/*.log "$T"/*.out "$LOGS"/ 2>/dev/null; "$SC" down >/dev/null 2>&1; rm -rf "$T" "$DTRAIN_RUN_DIR"' EXIT
LOGS=$PWD/cli_slurm.logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
if ! out=$("$SC" up 2 2>&1); then
    check "a Slurm cluster of 2 nodes comes up" 1 "$out"
    finish
fi
export SLURM_CONF=$DTRAIN_SLURM_DIR/slurm.conf
# the job script's dtrain and data (sbatch passes the environment on)
export DTRAIN DTRAIN_DATA=${DTRAIN_DATA:-$ROOT/data} OPENBLAS_NUM_THREADS=1
cd "$T" || exit 1
JOB=$ROOT/examples/slurm/train.sbatch
# (10,000 examples a rank at batch 16, 625 steps an epoch; fewer in the sanitizer pass)
STEPS=$(( $(scaled 20000) / 2 / 16 ))
C=(--model cnn1 --data mnist --train-limit $((STEPS * 32)) --test-limit 300 --batch 16 --lr 0.05 --momentum 0.5 --seed 4 --epochs 2
   --progress 10)

# submit NAME ARGS...: sbatch the job script with the run's flags, its folder $T/NAME; JOBID
submit() {
    local name=$1; shift
    JOBID=$(RUN_DIR=$T/$name sbatch --parsable --output="$T/$name.out" "$JOB" "$@")
}

# step_logged LOG N: the run's log has a step line at step N or later
step_logged() {
    [ -s "$1" ] && /usr/bin/python3 -c 'import json, sys
s = [json.loads(l).get("step", 0) for l in open(sys.argv[1]) if l.strip() and "\"type\":\"step\"" in l]
sys.exit(not s or max(s) < int(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

# (a) the job script: 2 ranks on 2 nodes == dtrain run -n 2
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --quiet --out "$T/ref.w" --log "$T/ref.jsonl" >/dev/null 2>&1
submit plain --algo allreduce "${C[@]}"
PLAIN=$JOBID
state=$("$SC" wait "$JOBID" 300)
compare "sbatch examples/slurm/train.sbatch: the job completes" "$?" == 0 "state $state; $(tail -c 400 "$T/plain.out")"
nodes=$(scontrol show job "$JOBID" 2>/dev/null | sed -n 's/^ *NodeList=//p')
check "... on 2 nodes" "$([ "$nodes" = "dtn[1-2]" ]; echo $?)" "NodeList=$nodes"
identical "... to the weights of dtrain run -n 2, bit for bit" "$T/ref.w" "$T/plain/model.weights"
compare "... and its accuracy" "$(acc "$T/plain/log.jsonl")" == "$(acc "$T/ref.jsonl")" "test accuracy"

# (b) in an allocation: srun --mpi=pmi2 runs one run of 2 ranks (without an MPI plugin, refused
# in one line), and so does dtrain run -n 2
srun -N 2 --ntasks-per-node 1 --mpi=pmi2 "$DTRAIN" train --algo allreduce "${C[@]}" --out "$T/srun.w" >"$T/srun.out" 2>&1
compare "srun --mpi=pmi2 runs the 2 ranks" "$?" == 0 "$(tail -c 300 "$T/srun.out")"
identical "... to the same weights" "$T/ref.w" "$T/srun.w"
# dtrain run in an allocation: its mpiexec (hydra) takes the job's nodes from Slurm
id=$(sbatch --parsable -N 2 --ntasks-per-node 1 -o "$T/alloc.out" --wrap \
    "$(printf '%q ' "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --quiet --out "$T/alloc.w")")
state=$("$SC" wait "$id" 300)
compare "dtrain run -n 2 inside a 2-node allocation completes" "$?" == 0 "state $state; $(tail -c 300 "$T/alloc.out")"
identical "... to the same weights" "$T/ref.w" "$T/alloc.w"
srun -N 2 --ntasks-per-node 1 --mpi=none "$DTRAIN" train --algo allreduce "${C[@]}" --no-save >"$T/none.out" 2>"$T/none.err"
rc=$?
compare "srun without an MPI plugin is refused" "$rc" != 0 "status $rc"
compare "... in one line of dtrain's" "$(grep -c '^dtrain: error: srun started 2 processes but MPI (this build.s: [^)]*) sees each alone: use srun --mpi=pmi2' "$T/none.err")" == 1 \
    "$(head -c 300 "$T/none.err")"

# (c) stopped mid-epoch, requeued, resumed: the weights of the uninterrupted run
# requeue_case LABEL HOW ARGS...: HOW is "requeue" (scontrol requeue: preemption's path) or
# "term" (SIGTERM to the ranks, as --signal=TERM@60 before the time limit: the script requeues)
requeue_case() {
    local label=$1 how=$2; shift 2
    "$DTRAIN" run -n 2 "$@" "${C[@]}" --quiet --out "$T/$label-straight.w" >/dev/null 2>&1
    submit "$label" "$@" "${C[@]}"
    local id=$JOBID
    wait_until 180 step_logged "$T/$label/log.jsonl" 100
    if [ "$how" = requeue ]; then scontrol requeue "$id"; else scancel --signal=TERM "$id"; fi
    state=$("$SC" wait "$id" 400)
    compare "$label: the job stopped mid-epoch ($how) comes back and completes" "$?" == 0 \
        "state $state; $(tail -c 600 "$T/$label.out")"
    local starts stops
    starts=$(grep -c '^dtrain job .* start' "$T/$label.out")
    stops=$(grep -c '^dtrain: stopped by Terminated after step [0-9]* (epoch 1, step [0-9]* of '"$STEPS"'): checkpoint .* committed' "$T/$label.out")
    compare "$label: ... started twice" "$starts" == 2 "$(grep 'start' "$T/$label.out" | tr '\n' ' ')"
    compare "$label: ... the stop said in one line" "$stops" == 1 "$(grep -i 'stop' "$T/$label.out" | head -3 | tr '\n' ' ')"
    compare "$label: ... and the resume" "$(grep -c '^dtrain: --resume auto: continuing from checkpoint' "$T/$label.out")" == 1 ""
    compare "$label: ... no error of dtrain's" "$(grep -c '^dtrain: error' "$T/$label.out")" == 0 "$(grep error "$T/$label.out" | head -2)"
    identical "$label: ... ends with the uninterrupted run's weights, bit for bit" "$T/$label-straight.w" "$T/$label/model.weights"
    compare "$label: ... no step trained twice" "$(summary_field "$T/$label/log.jsonl" redone_steps)" == 0 ""
}
requeue_case allreduce requeue --algo allreduce
requeue_case eventgrad term --algo eventgrad --sync --threshold adaptive --warmup-steps 5
# ... and a job script running dtrain run (as dtrain sweep --slurm runs a run of several ranks):
# scancel --signal=TERM reaches the processes of its launcher's job step (hydra's proxies, the
# guards, the ranks), not dtrain run itself, which judges the stop by its ranks: status 5, the
# script requeues, and the job ends with the uninterrupted run's weights
sed 's|^srun --mpi=pmi2 --kill-on-bad-exit=1 "$DTRAIN" train|"$DTRAIN" run -n "$SLURM_NTASKS"|' "$JOB" >"$T/run.sbatch"
check "a job script of dtrain run (examples/slurm/train.sbatch's srun line replaced)" \
    "$(grep -q '^"$DTRAIN" run -n "$SLURM_NTASKS" "$@"' "$T/run.sbatch"; echo $?)" ""
JOB=$T/run.sbatch requeue_case allreduce-run term --algo allreduce

# (c2) a job started again after its run finished (requeued by hand, or preempted in its final
# evaluation): --resume auto finds the finished run and says so, and the job completes with its
# weights and log as they were
cp "$T/plain/model.weights" "$T/plain-first.w" && cp "$T/plain/log.jsonl" "$T/plain-first.jsonl"
scontrol requeue "$PLAIN"
wait_until 120 grep -q "^dtrain job $PLAIN start 1 " "$T/plain.out"
state=$("$SC" wait "$PLAIN" 300)
compare "a finished job requeued completes again" "$?" == 0 "state $state; $(tail -c 400 "$T/plain.out")"
compare "... saying its run is finished" "$(grep -c '^dtrain: --resume auto: checkpoint .* is of the finished run (2 of 2 epochs; its weights: .*): nothing to train$' "$T/plain.out")" == 1 \
    "$(tail -c 400 "$T/plain.out")"
check "... its weights and log as they were" "$(cmp -s "$T/plain-first.w" "$T/plain/model.weights" &&
    cmp -s "$T/plain-first.jsonl" "$T/plain/log.jsonl"; echo $?)" ""

# (d) dtrain sweep --slurm: 8 runs, each one job; one job cancelled while it runs; the next
# start runs that run alone, and keeps the 7 others as they were
printf '[sweep]\nname = sw\nseeds = 1 2 3 4\nout = %s\n\n[base]\nmodel = mlp\ndata = mnist\ntrain-limit = 2000\n%s\n' \
    "$T/sw" "test-limit = 200
epochs = 1

[variant short]

[variant long]
model = cnn1
train-limit = $((STEPS * 32))
epochs = 2
progress = 10" >"$T/sw.ini"
( "$DTRAIN" sweep "$T/sw.ini" --slurm >"$T/sw1.out" 2>&1; echo $? >"$T/sw1.rc" ) &
sweep_job=$!
# the job of long-seed2, once it runs and has trained a while, is cancelled
victim_running() { squeue -h -t R -n sw/long-seed2 -o %i 2>/dev/null | grep -q . && step_logged "$T/sw/long-seed2/log.jsonl" 50; }
wait_until 300 victim_running
scancel -n sw/long-seed2
wait_until 400 test -s "$T/sw1.rc"
wait "$sweep_job" 2>/dev/null
compare "sweep --slurm: a sweep with a cancelled job ends with status 1" "$(cat "$T/sw1.rc")" == 1 "$(tail -c 400 "$T/sw1.out")"
compare "... 7 of its 8 runs done" "$(grep -l '"status":"done"' "$T"/sw/*/status.json 2>/dev/null | wc -l)" == 7 \
    "$(tail -c 300 "$T/sw1.out")"
check "... the cancelled job's run said to run again" \
    "$(grep -q '^sweep: long-seed2: its job [0-9]* was cancelled .*: it runs again on the next start' "$T/sw1.out"; echo $?)" \
    "$(grep long-seed2 "$T/sw1.out" | tr '\n' ' ')"
check "... without a status" "$([ ! -e "$T/sw/long-seed2/status.json" ]; echo $?)" "$(ls "$T/sw/long-seed2" | tr '\n' ' ')"
kept=$(stat -c %Y "$T"/sw/*/status.json | sort | md5sum)
"$DTRAIN" sweep "$T/sw.ini" --slurm >"$T/sw2.out" 2>&1
compare "sweep --slurm again: ends with status 0" "$?" == 0 "$(tail -c 400 "$T/sw2.out")"
compare "... having started one run" "$(grep -c '^sweep: start ' "$T/sw2.out")" == 1 "$(grep '^sweep: start ' "$T/sw2.out" | tr '\n' ' ')"
check "... the cancelled one" "$(grep -q '^sweep: start long-seed2$' "$T/sw2.out"; echo $?)" "$(grep '^sweep: start ' "$T/sw2.out")"
compare "... all 8 done" "$(grep -l '"status":"done"' "$T"/sw/*/status.json | wc -l)" == 8 ""
others=$(ls "$T"/sw/*/status.json | grep -v long-seed2)
# shellcheck disable=SC2086 # the 7 paths, split
check "... the 7 others untouched" "$([ "$(stat -c %Y $others | sort | md5sum)" = "$kept" ]; echo $?)" "their status.json times"
compare "... the redone run trained as a run of its own" "$(acc "$T/sw/long-seed2/log.jsonl")" ">" 0.9 "accuracy"

# (e) dtrain sweep --slurm with checkpoint = true: a job stopped by SIGTERM (what Slurm sends
# before a time limit and on preemption; --full: a sweep's job runs dtrain in its batch shell)
# leaves its run recorded stopped, and the next start resumes it in its folder, the new job's
# output added to its console.txt, to the weights of its twin never stopped
printf '[sweep]\nname = st\nout = %s\n\n[base]\nmodel = cnn1\ndata = mnist\ntrain-limit = %d\n%s\n' "$T/st" \
    $((STEPS * 16)) "test-limit = 200
batch = 16
epochs = 1
progress = 10
checkpoint = true

[variant a]

[variant b]" >"$T/st.ini"
( "$DTRAIN" sweep "$T/st.ini" --slurm >"$T/st1.out" 2>&1; echo $? >"$T/st1.rc" ) &
sweep_job=$!
wait_until 300 step_logged "$T/st/a/log.jsonl" 100
scancel --full --signal=TERM -n st/a
wait_until 300 test -s "$T/st1.rc"
wait "$sweep_job" 2>/dev/null
compare "sweep --slurm: a job stopped by SIGTERM: the sweep ends with status 1" "$(cat "$T/st1.rc")" == 1 "$(tail -c 400 "$T/st1.out")"
check "... its run recorded stopped (exit 5), not failed" "$(grep -q '"status":"stopped","exit":5' "$T/st/a/status.json"; echo $?)" \
    "$(cat "$T/st/a/status.json" 2>/dev/null)"
"$DTRAIN" sweep "$T/st.ini" --slurm >"$T/st2.out" 2>&1
compare "sweep --slurm again: ends with status 0" "$?" == 0 "$(tail -c 400 "$T/st2.out")"
check "... the stopped run resumed in its folder" "$(grep -q '1 to run (1 resumed in its folder)' "$T/st2.out"; echo $?)" \
    "$(head -2 "$T/st2.out" | tr '\n' ' ')"
compare "... its slurm.txt: both jobs' ids" "$(grep -c '^[0-9][0-9]*$' "$T/st/a/slurm.txt")" == 2 "$(cat "$T/st/a/slurm.txt")"
check "... its console.txt: the stop, then the resume" \
    "$(grep -q '^dtrain: stopped by Terminated' "$T/st/a/console.txt" && grep -q '^dtrain: --resume auto: continuing from checkpoint' "$T/st/a/console.txt"; echo $?)" \
    "$(grep '^dtrain' "$T/st/a/console.txt" | tr '\n' ' ')"
compare "... its log goes on: two config lines" "$(line_count "$T/st/a/log.jsonl" config)" == 2 ""
identical "... the weights of its twin never stopped" "$T/st/b/model.weights" "$T/st/a/model.weights"

# (f) --slurm with no controller answering (this cluster's slurm.conf, another port): one
# line, before anything is made
sed 's/^SlurmctldPort=.*/SlurmctldPort=1/' "$SLURM_CONF" >"$T/down.conf"
sed -e 's/^name = sw$/name = down/' -e "s|^out = .*|out = $T/down|" "$T/sw.ini" >"$T/down.ini"
SLURM_CONF=$T/down.conf "$DTRAIN" sweep "$T/down.ini" --slurm >"$T/down.out" 2>"$T/down.err"
rc=$?
check "sweep --slurm, no controller answering: one line, exit 2, nothing made" \
    "$([ "$rc" = 2 ] && [ "$(wc -l <"$T/down.err")" = 1 ] && grep -q '^dtrain: error: dtrain sweep --slurm: no Slurm controller answers (scontrol ping: ' "$T/down.err" && [ ! -e "$T/down" ]; echo $?)" \
    "exit $rc: $(head -c 300 "$T/down.err")"
finish
