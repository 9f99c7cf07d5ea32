#!/usr/bin/env bash
# dtrain sweep against what users and machines do to it (issue 27): a sweep never removes nor
# writes into a folder it did not make (a user's ./data with `out = .`, a symlink, a file);
# it says with --dry-run what it would replace; a second sweep of the same folder is refused
# naming the first's pid; a sweep killed with kill -9 takes its runs with it, and its restart
# runs each missing run once; a failed `dtrain run` keeps its launcher.log in its folder; an
# experiment file that fills every list of the reader is one line, not a crash; --slurm
# without sbatch or a controller is one line before anything is made, and a job sbatch
# refuses fails naming sbatch's line in slurm.txt. The faults run twice: on an idle machine
# and with both cores busy.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_helpers.sh"
require_mnist
DTRAIN_DATA=$(cd "${DTRAIN_DATA:-data}" && pwd)
export DTRAIN_DATA
DTRAIN=$(cd "$(dirname "$DTRAIN")" && pwd)/$(basename "$DTRAIN")
cd "$T" || exit 1
sweep() { "$DTRAIN" sweep "$@"; }
tree_sum() { find "$1" -printf '%P %s %T@\n' | sort | md5sum; }

# ------------------------------------------------------------------ what is not the sweep's
# The issue's k.ini: out = . and a variant named data, beside the user's data folder
mkdir -p data/mnist && echo "the user's" >data/mnist/train-images && ln -s "$DTRAIN_DATA" data/linked
printf '[sweep]\nout = .\n[base]\nmodel = mlp\nepochs = 1\n[variant data]\n' >k.ini
before=$(tree_sum data)
expect_error "out = . beside ./data: refused" "k.ini:6: run 'data': ./data exists and is not a folder a dtrain sweep made" -- sweep k.ini
expect_error "--dry-run says so too" "k.ini:6: run 'data': ./data exists" -- sweep k.ini --dry-run
compare "./data untouched" "$([ "$(tree_sum data)" = "$before" ] && echo 1 || echo 0)" == 1
# a symlink or a file at a run's path is not a folder the sweep made either
mkdir -p elsewhere && echo keep >elsewhere/mine && mkdir -p runs/sym && ln -s "$T/elsewhere" runs/sym/run
printf '[sweep]\nname = sym\n[base]\nmodel = mlp\nepochs = 1\n' >sym.ini
expect_error "a symlink at a run's path: refused" "sym.ini:3: run 'run': runs/sym/run exists and is not a folder" -- sweep sym.ini
[ -L runs/sym/run ] && [ "$(cat elsewhere/mine)" = keep ]
check "the symlink and what it points to untouched" $? "$(ls -la runs/sym elsewhere | tr '\n' ' ')"
mkdir -p runs/file && echo notes >runs/file/run
printf '[sweep]\nname = file\n[base]\nmodel = mlp\nepochs = 1\n' >file.ini
expect_error "a file at a run's path: refused" "runs/file/run exists and is not a folder" -- sweep file.ini
# another program's sweep.json in out is not replaced
mkdir -p notmine && echo '{"mine": true}' >notmine/sweep.json
printf '[sweep]\nout = notmine\n[base]\nmodel = mlp\nepochs = 1\n' >notmine.ini
expect_error "a sweep.json no sweep wrote: refused" "out 'notmine' holds a sweep.json that no dtrain sweep wrote" -- sweep notmine.ini
compare "... and left as it was" "$(grep -c '"mine": true' notmine/sweep.json)" == 1
# a variant may not take the sweep's own file names
printf '[sweep]\nname = own\n[base]\nmodel = mlp\n[variant sweep.lock]\n' >own.ini
expect_error "a run named sweep.lock" "own.ini:5: a run named 'sweep.lock' would take the sweep's own file" -- sweep own.ini
# every list of the reader at its bound: 256 [base] keys, 256 axes, a variant with 255 flags
# and 40 axes (a fixed array of 772 overflowed the stack: exit 139)
python3 -c '
print("\n".join(["[base]"] + ["b%d=1" % i for i in range(256)] + ["[axes]"] + ["a%d=1" % i for i in range(256)]
                + ["[variant v]"] + ["v%d=1" % i for i in range(255)] + ["axis w%d=1" % i for i in range(40)]))' >full.ini
expect_error "every list full: one line" "full.ini:2: key 'b0': not a flag of dtrain" -- sweep full.ini

# ------------------------------------------------------------------ --slurm without Slurm
# sbatch and a controller are asked once, before anything is made: without them every run
# failed "see its console.txt", a file that did not exist. Fakes stand for Slurm's commands
# here (tests/cli_slurm.sh runs the real ones): an sbatch that refuses every job, and an
# scontrol whose controller is DOWN or UP.
mkdir -p nobin fake
cat >fake/sbatch <<'EOF'
#!/bin/sh
[ "$1" = --version ] && { echo "slurm 22.05.8"; exit 0; }
echo "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified" >&2
exit 1
EOF
cat >fake/scontrol <<'EOF'
#!/bin/sh
[ "$1" = ping ] || exit 1
echo "Slurmctld(primary) at fakehost is $FAKE_CONTROLLER"
[ "$FAKE_CONTROLLER" = UP ]
EOF
chmod +x fake/sbatch fake/scontrol
printf '[sweep]\nname = sl\n[base]\nmodel = mlp\nepochs = 1\n[variant a]\n[variant b]\n' >sl.ini
expect_error "--slurm, no sbatch on PATH: one line" "dtrain sweep --slurm: sbatch not found on PATH" -- \
    env PATH="$T/nobin" "$DTRAIN" sweep sl.ini --slurm
expect_error "--slurm, SLURM_CONF naming no file (Slurm's commands retry it for a minute)" \
    "dtrain sweep --slurm: SLURM_CONF=$T/nowhere.conf: No such file or directory" -- \
    env SLURM_CONF="$T/nowhere.conf" PATH="$T/fake:$PATH" "$DTRAIN" sweep sl.ini --slurm
expect_error "--slurm, no controller: one line" \
    "dtrain sweep --slurm: no Slurm controller answers (scontrol ping: Slurmctld(primary) at fakehost is DOWN)" -- \
    env FAKE_CONTROLLER=DOWN PATH="$T/fake:$PATH" "$DTRAIN" sweep sl.ini --slurm
expect_error "... and with --dry-run" "no Slurm controller answers" -- \
    env FAKE_CONTROLLER=DOWN PATH="$T/fake:$PATH" "$DTRAIN" sweep sl.ini --slurm --dry-run
# a job sbatch refuses: the run's failure names sbatch's line and the file that holds it
sed 's/^name = sl$/name = refused/' sl.ini >refused.ini
FAKE_CONTROLLER=UP PATH="$T/fake:$PATH" "$DTRAIN" sweep refused.ini --slurm >sl.out 2>sl.err
rc=$?
compare "--slurm, every job refused: exit 1" "$rc" == 1 "$(tail -2 sl.err | tr '\n' ' ')"
grep -q "^sweep: FAILED a (exit 1, [0-9]*s): sbatch: error: Batch job submission failed: Invalid account .* (in runs/refused/a/slurm.txt)$" sl.err &&
    grep -q "^sweep: failed: b (exit 1): sbatch: error: Batch job submission failed: .* (in runs/refused/b/slurm.txt)$" sl.err
check "... each run's failure: sbatch's line, naming slurm.txt" $? "$(grep -i failed sl.err | head -2 | tr '\n' ' ')"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(not s["error"].startswith("sbatch: error: Batch job submission failed"))' \
    runs/refused/a/status.json
check "... and its status.json's error" $? "$(cat runs/refused/a/status.json)"

# ------------------------------------------------------------------ faults, idle and loaded
# runs of a few seconds each, all six at once (parallel = 9 on any machine): one is a 2-rank
# dtrain run, so a killed sweep's `dtrain run` must end its mpiexec and ranks as well
cat >long.ini <<EOF
[sweep]
name = long
parallel = 9
[base]
model = mlp
train-limit = 10000
test-limit = 200
epochs = 2
quiet = true
[axes]
lr = 0.01, 0.02, 0.03
[variant solo]
[variant pair]
n = 2
algo = allreduce
EOF
started_all() { [ "$(find "runs/${1:-long}" -name console.txt 2>/dev/null | wc -l)" -ge 6 ]; }
every_run_once() { # every run done, its log with one config and one summary line
    local n=0 d
    for d in runs/long/*/; do
        grep -q '"status":"done"' "$d/status.json" 2>/dev/null && [ "$(line_count "$d/log.jsonl" config)" = 1 ] &&
            [ "$(line_count "$d/log.jsonl" summary)" = 1 ] && n=$((n + 1))
    done
    echo "$n"
}

# killed_once_started NAME: sweep NAME.ini from scratch, kill -9 once its 6 runs have started
killed_once_started() {
    local pid
    rm -rf "runs/$1"
    "$DTRAIN" sweep "$1.ini" >killed.out 2>killed.err &
    pid=$!
    wait_until 120 started_all "$1"
    kill -9 "$pid"
    wait "$pid" 2>/dev/null
}

faults() {
    local how=$1 pid rc
    rm -rf runs/long
    # a second sweep of the same folder while the first runs: refused naming the first
    "$DTRAIN" sweep long.ini >first.out 2>first.err & # not the function: $! must be dtrain
    pid=$!
    wait_until 120 started_all
    check "$how: the first sweep started its runs" $? "$(ls runs/long 2>/dev/null | tr '\n' ' ')"
    # (not expect_error: the first sweep's runs are writing files meanwhile.) Its runs are held
    # (SIGSTOP) meanwhile: the first sweep runs on however fast its runs would end (since runs
    # read only the examples they use, all six could end before a second sweep under the
    # sanitizers had started)
    pkill -STOP -f 'log runs/long/'
    sweep long.ini >second.out 2>second.err
    rc=$?
    pkill -CONT -f 'log runs/long/'
    [ "$rc" -eq 2 ] && [ "$(wc -l <second.err)" -eq 1 ] &&
        grep -q "^dtrain: error: long.ini: out 'runs/long' is in use by another dtrain sweep (pid $pid): wait for it" second.err
    check "$how: a second sweep of the same folder: refused in one line" $? "exit $rc: $(head -3 second.err | tr '\n' ' ')"
    wait "$pid"
    rc=$?
    compare "$how: the first sweep ends well" "$rc" == 0 "exit $rc; $(tail -1 first.err)"
    compare "$how: each of its 6 runs ran once" "$(every_run_once)" == 6
    # kill -9 of the sweep: its runs end with it (mpiexec and ranks too), and a restart at
    # once waits for them and runs each missing run once
    killed_once_started long
    sweep long.ini >restart.out 2>restart.err
    rc=$?
    compare "$how: restarted at once after kill -9: exit 0" "$rc" == 0 "exit $rc; $(tail -1 restart.err)"
    compare "$how: ... every run done, each once" "$(every_run_once)" == 6
    # runs of minutes: what ends them is the sweep's death, not their work
    killed_once_started endless
    wait_until 20 eval '! pgrep -f -- "--log runs/endless/" >/dev/null'
    check "$how: kill -9 of the sweep ends its runs (within 20 s)" $? "$(pgrep -af -- '--log runs/endless/' | head -3 | tr '\n' ' ')"
    pkill -9 -f -- "--log runs/endless/" # (a failure above must not leave them to the next checks)
}
sed -e 's/^name = long$/name = endless/' -e 's/^epochs = 2$/epochs = 400/' long.ini >endless.ini
faults idle
yes >/dev/null &
y1=$!
yes >/dev/null &
y2=$!
faults loaded
kill "$y1" "$y2"
wait "$y1" "$y2" 2>/dev/null

# ------------------------------------------------------------------ what a sweep leaves
# a run cut short (no status.json) is named by --dry-run as replaced; a temporary file of a
# writer that died is removed at the next write; a failed dtrain run's launcher.log is in its
# folder, not in $TMPDIR
sweep long.ini >/dev/null 2>&1
compare "the killed sweep's runs done by the next" "$(every_run_once)" == 6
rm -f runs/long/solo-lr=0.01/status.json
echo '{}' >runs/long/sweep.json.tmp.999999999
sweep long.ini --dry-run >dry.out 2>dry.err
grep -q "^sweep: solo-lr=0.01: its folder runs/long/solo-lr=0.01, left by a run cut short (no status.json), would be replaced$" dry.err
check "--dry-run names the folder it would replace" $? "$(head -2 dry.err | tr '\n' ' ')"
sweep long.ini >again.out 2>again.err
compare "... which runs again, alone" "$(grep -c '^sweep: start' again.err)" == 1
[ ! -e runs/long/sweep.json.tmp.999999999 ]
check "a dead writer's sweep.json.tmp.PID removed" $? "$(ls runs/long | tr '\n' ' ')"
mkdir -p tmp
printf '[sweep]\nname = nodata\n[base]\nmodel = mlp\nepochs = 1\nn = 2\nalgo = allreduce\ndata-dir = %s/no-such-folder\n' "$T" >nodata.ini
TMPDIR=$T/tmp sweep nodata.ini >nodata.out 2>nodata.err
rc=$?
compare "a failed dtrain run: exit 1" "$rc" == 1
log=$(ls runs/nodata/run/dtrain-run.*/launcher.log 2>/dev/null | head -1)
[ -s "$log" ] && [ -z "$(ls tmp)" ]
check "... its launcher.log in its folder, nothing in TMPDIR" $? "${log:-none}; tmp: $(ls tmp | tr '\n' ' ')"

finish
