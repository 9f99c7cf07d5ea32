#!/usr/bin/env bash
# dtrain sweep (docs/sweep.md): bad experiment files (one line naming file:line, exit 2,
# nothing made; an unknown key names the flag it likely is, dtrain sim's flags say simulate =
# true), --dry-run's cross product, the cost estimate (the steps as the runs then take them,
# the wall clock on the cores) and --budget, a 4-run sweep end to end, its file edited (the
# warning names the flags; --rerun-changed runs the changed runs again, their old folders
# kept whole in OUT/.old), a sweep interrupted
# and restarted (only the missing runs run again), a failing run kept as failed; runs that
# checkpoint: a path several runs share refused, checkpoint = true each run's own, a run
# stopped (status 5, by a signal of its own or the sweep's interruption) kept and resumed in
# its folder to the weights of a run never stopped.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_helpers.sh"
require_mnist
DTRAIN_DATA=$(cd "${DTRAIN_DATA:-data}" && pwd)
export DTRAIN_DATA
DTRAIN=$(cd "$(dirname "$DTRAIN")" && pwd)/$(basename "$DTRAIN")
cd "$T" || exit 1
shopt -s nullglob

# tiny runs: the mlp on 1000 MNIST images, one epoch
TINY='model = mlp
train-limit = 1000
test-limit = 200
epochs = 1
quiet = true'

# ------------------------------------------------------------------ bad files
# a file good but for one line; its errors name that line
good() {
    printf '[sweep]\nname = bad\nseeds = 1 2\n\n[base]\n%s\n\n[axes]\nlr = 0.05, 0.1\n\n[variant one]\n\n[variant two]\nn = 2\nalgo = allreduce\n' "$TINY"
}
# bad NAME LINE-TEXT-TO-REPLACE NEW-TEXT: NAME.ini is good() with that line replaced
bad() { good | sed "s|^$2\$|$3|" >"$1.ini"; }
line_of() { grep -n "^$2\$" "$1.ini" | head -1 | cut -d: -f1; }
sweep() { "$DTRAIN" sweep "$@"; }
# status_of DIR: a run folder's status and exit, "done 0"
status_of() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["status"], s["exit"])' "$1/status.json" 2>/dev/null; }

good >ok.ini
sweep ok.ini --dry-run >/dev/null 2>&1
check "the good file is good" $? "dry-run exits 0"
rm -rf runs

bad unknown-section '\[axes\]' '[axis]'
expect_error "unknown section" "unknown-section.ini:$(line_of unknown-section '\[axis\]'): unknown section [axis]" -- sweep unknown-section.ini
bad sweep-key 'name = bad' 'colour = red'
expect_error "unknown [sweep] key" "sweep-key.ini:2: unknown key 'colour' in [sweep]" -- sweep sweep-key.ini
bad key-name 'epochs = 1' 'learning rate = 1'
expect_error "a key that is no flag name" "key-name.ini:$(line_of key-name 'learning rate = 1'): key 'learning rate'" -- sweep key-name.ini
# in the last variant: its runs' flags are checked before the first run starts
bad bad-value 'algo = allreduce' 'algo = allreduce\nbatch = abc'
expect_error "a bad value" "bad-value.ini:$(line_of bad-value 'batch = abc'): key 'batch': expected an integer >= 1" -- sweep bad-value.ini
bad bad-base 'epochs = 1' 'epochs = 0'
expect_error "a bad value in [base]" "bad-base.ini:$(line_of bad-base 'epochs = 0'): key 'epochs': expected an integer >= 1" -- sweep bad-base.ini
bad duplicate 'epochs = 1' 'epochs = 1\nepochs = 2'
expect_error "a duplicate key" "duplicate.ini:$(line_of duplicate 'epochs = 2'): key 'epochs' given twice in this section (first on line $(line_of duplicate 'epochs = 1'))" -- sweep duplicate.ini
bad empty-axis 'lr = 0.05, 0.1' 'lr ='
expect_error "an empty axis" "empty-axis.ini:$(line_of empty-axis 'lr ='): axis 'lr': expected values" -- sweep empty-axis.ini
bad empty-value 'lr = 0.05, 0.1' 'lr = 0.05,,0.1'
expect_error "an empty value in an axis" "empty-value.ini:$(line_of empty-value 'lr = 0.05,,0.1'): axis 'lr': an empty value" -- sweep empty-value.ini
# an unknown key: the nearest flag named, as the command line names it for a misspelt flag
bad unknown-flag 'algo = allreduce' 'algo = allreduce\nmodle = mlp'
expect_error "an unknown flag: the nearest named" "unknown-flag.ini:$(line_of unknown-flag 'modle = mlp'): unknown flag 'modle' (did you mean 'model'?)" -- sweep unknown-flag.ini
bad underscore 'epochs = 1' 'epochs = 1\nlocal_steps = 8'
expect_error "local_steps: local-steps named" "underscore.ini:$(line_of underscore 'local_steps = 8'): unknown flag 'local_steps' (did you mean 'local-steps'?)" -- sweep underscore.ini
bad underscores 'epochs = 1' 'epochs = 1\neval_every_steps = 8'
expect_error "eval_every_steps (three edits): eval-every-steps named" "underscores.ini:$(line_of underscores 'eval_every_steps = 8'): unknown flag 'eval_every_steps' (did you mean 'eval-every-steps'?)" -- sweep underscores.ini
bad axis-typo 'n = 2' 'n = 2\naxis bacth = 16, 32'
expect_error "an unknown axis of a variant" "axis-typo.ini:$(line_of axis-typo 'axis bacth = 16, 32'): unknown flag 'bacth' (did you mean 'batch'?)" -- sweep axis-typo.ini
bad no-flag 'epochs = 1' 'epochs = 1\nzzz = 1'
expect_error "a key near no flag" "no-flag.ini:$(line_of no-flag 'zzz = 1'): key 'zzz': not a flag of dtrain train or run (see dtrain run --help)" -- sweep no-flag.ini
bad dashes 'epochs = 1' 'epochs = 1\n--lr = 0.1'
expect_error "a key written --lr" "dashes.ini:$(line_of dashes '--lr = 0.1'): key '--lr': write the flag without its dashes" -- sweep dashes.ini
bad seeds-in-base 'epochs = 1' 'epochs = 1\nparallel = 2'
expect_error "a key of [sweep] in [base]" "seeds-in-base.ini:$(line_of seeds-in-base 'parallel = 2'): key 'parallel': a key of [sweep], not a flag of the runs" -- sweep seeds-in-base.ini
bad sweep-typo 'name = bad' 'parralel = 2'
expect_error "a misspelt [sweep] key" "sweep-typo.ini:2: unknown key 'parralel' in [sweep] (did you mean 'parallel'?)" -- sweep sweep-typo.ini
bad flag-in-sweep 'name = bad' 'epochs = 2'
expect_error "a flag of the runs in [sweep]" "flag-in-sweep.ini:2: key 'epochs' in [sweep]: a flag of the runs: give it in [base]" -- sweep flag-in-sweep.ini
# dtrain sim's own flags without simulate = true: said so (it was "not a flag of dtrain train or run")
for k in link=100Mbps platform=wan latency=1ms compute=modelled speed=30Gf straggler=3:4; do
    bad "sim-${k%%=*}" 'epochs = 1' "epochs = 1\n${k%%=*} = ${k#*=}"
    expect_error "${k%%=*} without simulate = true" "sim-${k%%=*}.ini:$(line_of "sim-${k%%=*}" "${k%%=*} = ${k#*=}"): key '${k%%=*}': a flag of dtrain sim, not of dtrain train or run: simulate = true in [sweep] makes the runs simulated" -- sweep "sim-${k%%=*}.ini"
done
bad sim-typo 'epochs = 1' 'epochs = 1\nlnik = 100Mbps'
expect_error "a misspelt flag of dtrain sim" "sim-typo.ini:$(line_of sim-typo 'lnik = 100Mbps'): unknown flag 'lnik' (did you mean 'link'? a flag of dtrain sim: simulate = true in [sweep] makes the runs simulated)" -- sweep sim-typo.ini
# ... and with it, a key like any other (when dtrain-sim is built: the check runs dtrain sim)
if [ -x "$(dirname "$DTRAIN")/sim/dtrain-sim" ] || [ -x "$(dirname "$DTRAIN")/dtrain-sim" ]; then
    printf '[sweep]\nname = sim-ok\nsimulate = true\n[base]\n%s\nn = 2\nalgo = allreduce\nlink = 100Mbps\n' "$TINY" >sim-ok.ini
    sweep sim-ok.ini --dry-run >sim-ok.out 2>sim-ok.err
    grep -q "^run: .*dtrain sim -n 2 .*--link 100Mbps" sim-ok.out
    check "simulate = true: link is a flag of the runs" $? "$(cat sim-ok.out sim-ok.err | head -3 | tr '\n' ' ')"
fi
printf '[sweep]\nsimulate = true\n[base]\nmodel = mlp\nhosts = a,b\n' >sim-hosts.ini
expect_error "a flag of dtrain run in simulated runs" "sim-hosts.ini:5: key 'hosts': a flag of dtrain run, not of dtrain sim" -- sweep sim-hosts.ini
bad bad-seeds 'seeds = 1 2' 'seeds = 1 two'
expect_error "bad seeds" "bad-seeds.ini:3: key 'seeds': expected seeds" -- sweep bad-seeds.ini
bad local-ranks 'algo = allreduce' 'algo = local'
expect_error "ranks without a scheme" "local-ranks.ini:$(line_of local-ranks 'n = 2'): key 'n': 2 ranks need an algo" -- sweep local-ranks.ini
bad indented 'epochs = 1' '  epochs = 1'
expect_error "an indented line" "indented.ini:$(line_of indented '  epochs = 1'): indented line" -- sweep indented.ini
expect_error "a missing file" "missing.ini: cannot read the experiment file" -- sweep missing.ini
# what inih would have read otherwise: no seeds, a seed twice, ':' for '=', text after a
# section's bracket dropped, a line cut at a NUL byte (it was called too long)
bad no-seeds 'seeds = 1 2' 'seeds = ,,,'
expect_error "seeds = ,,," "no-seeds.ini:3: key 'seeds': an empty value in ',,,'" -- sweep no-seeds.ini
bad empty-seed 'seeds = 1 2' 'seeds = 1,,2'
expect_error "seeds = 1,,2" "empty-seed.ini:3: key 'seeds': an empty value" -- sweep empty-seed.ini
bad same-seed 'seeds = 1 2' 'seeds = 1 01'
expect_error "seeds = 1 01: one seed twice" "same-seed.ini:3: key 'seeds': seed 1 given twice" -- sweep same-seed.ini
bad colon 'epochs = 1' 'epochs: 1'
expect_error "KEY: VALUE" "colon.ini:$(line_of colon 'epochs: 1'): expected KEY = VALUE, got ':' after 'epochs'" -- sweep colon.ini
bad junk '\[base\]' '[base] junk'
expect_error "text after [base]" "junk.ini:$(line_of junk '\[base\] junk'): text after [base]: expected nothing or a ; comment, got 'junk'" -- sweep junk.ini
good | sed 's/^epochs = 1$/epochs = 1\x00/' >nul.ini
expect_error "a NUL byte" "nul.ini:$(grep -an '^epochs = 1' nul.ini | cut -d: -f1): a NUL byte: expected a text file" -- sweep nul.ini
mkfifo fifo.ini
expect_error "a FIFO as the experiment file" "fifo.ini: cannot read the experiment file: is a FIFO" -- timeout 20 "$DTRAIN" sweep fifo.ini
rm -f fifo.ini
expect_error "no file" "expected one experiment file" -- sweep

# ------------------------------------------------------------------ --dry-run
cat >cross.ini <<EOF
[sweep]
name = cross
seeds = 1 2 3            ; each run per seed
[base]
$TINY
[axes]
lr = 0.05, 0.1
[variant fed]
algo = fedavg
n = 2
axis split = random, class
[variant solo]
EOF
sweep cross.ini --dry-run >dry.out 2>dry.err
rc=$?
# fed: 2 splits x 2 lr x 3 seeds = 12; solo: 2 lr x 3 seeds = 6
{
    for s in random class; do for lr in 0.05 0.1; do for sd in 1 2 3; do echo "fed-split=$s-lr=$lr-seed$sd"; done; done; done
    for lr in 0.05 0.1; do for sd in 1 2 3; do echo "solo-lr=$lr-seed$sd"; done; done
} | sort >want.names
cut -d: -f1 dry.out | sort >got.names
compare "dry-run: 18 runs" "$(wc -l <dry.out)" == 18
cmp -s want.names got.names
check "dry-run: the names of the cross product" $? "$(comm -3 want.names got.names | head -3 | tr '\n' ' ')"
grep -q "^fed-split=class-lr=0.1-seed2: .*dtrain run -n 2 .*--algo fedavg .*--split class .*--lr 0.1 .*--seed 2 --log runs/cross/fed-split=class-lr=0.1-seed2/log.jsonl --out runs/cross/fed-split=class-lr=0.1-seed2/model.weights$" dry.out
check "dry-run: an MPI run's command" $? "$(grep '^fed-split=class-lr=0.1-seed2:' dry.out)"
grep -q "^solo-lr=0.05-seed3: .*dtrain train --model mlp .*--lr 0.05 --seed 3 --log " dry.out
check "dry-run: a one-process run's command" $? "$(grep '^solo-lr=0.05-seed3:' dry.out)"
[ "$rc" -eq 0 ] && [ ! -e runs ]
check "dry-run: exit 0, nothing made" $? "exit $rc, $(ls -d runs 2>/dev/null)"

# ------------------------------------------------------------------ the cost estimate, --budget
# estimate_of ERR FIELD: from ERR's "sweep: estimate:" line, its core-minutes (core), the
# training steps of all ranks (steps) or the wall clock in seconds (wall)
estimate_of() {
    python3 - "$@" <<'PY'
import re, sys
m = None
for l in open(sys.argv[1]):
    m = m or re.match(r"sweep: estimate: (\S+) core-minutes for the \d+ runs? to do, about (?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)? of wall clock.*\((\d+) training steps", l)
if m:
    h, mi, se = (int(x) if x else 0 for x in m.group(2, 3, 4))
    print({"core": m.group(1), "steps": m.group(5), "wall": 3600 * h + 60 * mi + se}[sys.argv[2]])
PY
}
# the steps as the trainer counts them: one process keeps its last partial batch (1000 / 64:
# 16), two ranks take full batches of their shards (500 / 64: 7 each), --max-steps 5, --val
# 500 (500 left: 8), --images 640 (640 / 64: 10); 53 in all, what the runs' logs then say
cat >cost.ini <<EOF
[sweep]
name = cost
[base]
$TINY
[variant plain]
[variant ranks]
n = 2
algo = allreduce
[variant capped]
max-steps = 5
[variant val]
val = 500
[variant images]
epochs = false
images = 640
EOF
sweep cost.ini --dry-run >cost-dry.out 2>cost-dry.err
rc=$?
compare "the estimate: the training steps of every rank" "$(estimate_of cost-dry.err steps)" == 53 "exit $rc; $(grep -m1 'estimate:' cost-dry.err)"
compare "... its core-minutes above 0" "$(estimate_of cost-dry.err core)" '>' 0
grep -q "^sweep: estimate: an estimate of the training steps and evaluations ([0-9.e-]* of the core-minutes), timed on this machine: data loading, start-up, communication and a simulation's own work are left out" cost-dry.err
check "... says it is an estimate and what it leaves out" $? "$(tail -2 cost-dry.err | head -1)"
sweep cost.ini --budget 100 >cost.out 2>cost.err
rc=$?
taken=$(for d in runs/cost/*/; do log_query "$d/log.jsonl" 'sum(r["steps"] for r in one("summary")["per_rank"])'; done | awk '{ n += $1 } END { print n }')
compare "--budget over the estimate: the sweep runs" "$rc" == 0 "$(tail -1 cost.err)"
compare "... and its runs took the steps estimated" "$taken" == 53
# twice the epochs: twice the steps, and (a step timed again: loosely) twice the core-minutes
printf '[sweep]\nname = cost1\n[base]\n%s\n[axes]\nlr = 0.05, 0.1\n' "$TINY" >cost1.ini
sed -e 's/^epochs = 1$/epochs = 2/' -e 's/^name = cost1$/name = cost2/' cost1.ini >cost2.ini
sweep cost1.ini --dry-run >/dev/null 2>cost1.err
sweep cost2.ini --dry-run >/dev/null 2>cost2.err
compare "epochs 1: 32 steps" "$(estimate_of cost1.err steps)" == 32
compare "epochs 2: 64 steps" "$(estimate_of cost2.err steps)" == 64
within "epochs 2 / epochs 1: about twice the core-minutes" "$(ratio "$(estimate_of cost2.err core)" "$(estimate_of cost1.err core)")" 1.3 3
expect_error "--budget under the estimate: refused, nothing made" "cost1.ini: the runs to do are estimated at" -- sweep cost1.ini --budget 0.000001
grep -q "over --budget 1e-06: nothing started" "$T/.expect_err"
check "... naming the budget" $? "$(cat "$T/.expect_err")"
expect_error "--budget with --dry-run: refused too" "over --budget" -- sweep cost1.ini --budget 0.000001 --dry-run
expect_error "--budget 0" "dtrain sweep: --budget 0: expected a number > 0" -- sweep cost1.ini --budget 0
# the wall clock: the runs placed on the cores as the sweep places them; on one core the sum of
# the runs, on three the longest (each ~12 s of steps here: seconds on any machine, so that
# the wall clock's rounding to the second counts little)
printf '[sweep]\nname = wall\nparallel = 1\n[base]\nmodel = mlp\ntrain-limit = 1000\nepochs = 5000\n[axes]\nlr = 0.01, 0.02, 0.03\n' >wall1.ini
sed 's/^parallel = 1$/parallel = 3/' wall1.ini >wall3.ini
timeout 60 "$DTRAIN" sweep wall1.ini --dry-run >/dev/null 2>wall1.err
timeout 60 "$DTRAIN" sweep wall3.ini --dry-run >/dev/null 2>wall3.err
seconds_of() { awk -v c="$(estimate_of "$1" core)" 'BEGIN { if (c != "") print c * 60 }'; }
within "parallel = 1: the wall clock is the core time" "$(ratio "$(estimate_of wall1.err wall)" "$(seconds_of wall1.err)")" 0.85 1.15
within "parallel = 3: a third of it" "$(ratio "$(estimate_of wall3.err wall)" "$(seconds_of wall3.err)")" 0.25 0.45
# a simulated run computes every rank's steps on its one core, whatever --compute says
if [ -x "$(dirname "$DTRAIN")/sim/dtrain-sim" ] || [ -x "$(dirname "$DTRAIN")/dtrain-sim" ]; then
    printf '[sweep]\nname = simcost\nsimulate = true\nparallel = 4\n[base]\nmodel = mlp\ntrain-limit = 1000\nepochs = 20000\nn = 4\nalgo = allreduce\ncompute = modelled\nspeed = 30Gf\n' >simcost.ini
    timeout 60 "$DTRAIN" sweep simcost.ini --dry-run >/dev/null 2>simcost.err
    compare "simulated, 4 ranks: every rank's steps" "$(estimate_of simcost.err steps)" == $((4 * 20000 * 3)) "$(head -1 simcost.err)"
    within "... all on its one core: the wall clock is the core time" "$(ratio "$(estimate_of simcost.err wall)" "$(seconds_of simcost.err)")" 0.85 1.15
fi

# ------------------------------------------------------------------ a 4-run sweep
cat >four.ini <<EOF
[sweep]
name = four
seeds = 1 2
[base]
$TINY
[variant one]
[variant two]
n = 2
algo = allreduce
EOF
sweep four.ini >four.out 2>four.err
rc=$?
check "4 runs: exit 0" "$rc" "$(tail -1 four.err)"
n=0
for r in one-seed1 one-seed2 two-seed1 two-seed2; do
    d=runs/four/$r
    st=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["status"], s["exit"])' "$d/status.json" 2>/dev/null)
    [ "$st" = "done 0" ] && n=$((n + 1))
    compare "$r: one summary" "$(line_count "$d/log.jsonl" summary)" == 1
    compare "$r: the seed" "$(log_query "$d/log.jsonl" 'of("config")[-1]["seed"]')" == "${r##*seed}"
    compare "$r: ranks" "$(log_query "$d/log.jsonl" 'of("config")[-1]["ranks"]')" == "$([ "${r%%-*}" = two ] && echo 2 || echo 1)"
    [ -s "$d/model.weights" ] && [ -f "$d/console.txt" ] && grep -q " --log $d/log.jsonl --out $d/model.weights\$" "$d/command.txt"
    check "$r: weights, console.txt, command.txt" $? "$(cat "$d/command.txt" 2>/dev/null)"
done
compare "4 runs: status done" "$n" == 4
differ "seeds 1 and 2 differ" runs/four/one-seed1/model.weights runs/four/one-seed2/model.weights 0
compare "sweep.json lists the 4 runs" "$(python3 -c 'import json; j=json.load(open("runs/four/sweep.json")); print(len(j["runs"]) if sorted(r["name"] for r in j["runs"]) == ["one-seed1","one-seed2","two-seed1","two-seed2"] else -1)')" == 4
sums=$(md5sum runs/four/*/log.jsonl)
sweep four.ini >again.out 2>again.err
rc=$?
[ "$rc" -eq 0 ] && ! grep -q "^sweep: start" again.err && ! grep -q "^sweep: warning" again.err && [ "$(md5sum runs/four/*/log.jsonl)" = "$sums" ]
check "done runs are not run again" $? "exit $rc, $(grep -c '^sweep: start' again.err) started"
# the file edited since: the done runs are kept, each with a warning
sed 's/^epochs = 1$/epochs = 2/' four.ini >four-edited.ini
sed -i 's/^name = four$/name = four\nout = runs\/four/' four-edited.ini
sweep four-edited.ini >edited.out 2>edited.err
rc=$?
[ "$rc" -eq 0 ] && ! grep -q "^sweep: start" edited.err && [ "$(md5sum runs/four/*/log.jsonl)" = "$sums" ]
check "edited file: nothing run again" $? "exit $rc"
compare "edited file: a warning per run kept" "$(grep -c "^sweep: warning: .*: kept as done, but its command.txt differs" edited.err)" == 4
compare "... naming the flag that changed and --rerun-changed" \
    "$(grep -c "^sweep: warning: .*: kept as done, but its command.txt differs from the file's command now (epochs 1 → 2); dtrain sweep --rerun-changed runs it again" edited.err)" == 4 "$(grep -m1 '^sweep: warning' edited.err)"
# --rerun-changed: the changed runs run again (here variant two's), their old folders moved
# whole to OUT/.old/NAME.K, the others kept
sed 's/^algo = allreduce$/algo = allreduce\nmomentum = 0.5/' four.ini >four-two.ini
one_logs=$(md5sum runs/four/one-*/log.jsonl)
two_log=$(md5sum <runs/four/two-seed1/log.jsonl)
sweep four-two.ini --dry-run --rerun-changed >rerun-dry.out 2>rerun-dry.err
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep -c "^sweep: two-seed[12]: done before, but its command changed (momentum (not set) → 0.5): would run again" rerun-dry.err)" -eq 2 ] &&
    ! grep -q "^sweep: one-" rerun-dry.err && [ ! -e runs/four/.old ] && [ "$(md5sum <runs/four/two-seed1/log.jsonl)" = "$two_log" ]
check "--rerun-changed --dry-run: says which run again, moves nothing" $? "exit $rc, $(head -3 rerun-dry.err | tr '\n' ' ')"
sweep four-two.ini --rerun-changed >rerun.out 2>rerun.err
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep '^sweep: start' rerun.err | sort | tr '\n' ' ')" = "sweep: start two-seed1 sweep: start two-seed2 " ]
check "--rerun-changed: runs the changed runs, only them" $? "exit $rc, $(grep '^sweep: start' rerun.err | tr '\n' ' ')"
[ "$(md5sum runs/four/one-*/log.jsonl)" = "$one_logs" ] && [ "$(md5sum <runs/four/.old/two-seed1.1/log.jsonl)" = "$two_log" ] &&
    ! grep -q momentum runs/four/.old/two-seed1.1/command.txt && [ -s runs/four/.old/two-seed2.1/model.weights ]
check "... the others untouched, the old folders whole in .old/NAME.1" $? "$(ls -A runs/four runs/four/.old 2>&1 | tr '\n' ' ')"
[ "$(status_of runs/four/two-seed1)" = "done 0" ] && grep -q -- "--momentum 0.5" runs/four/two-seed1/command.txt &&
    [ "$(log_query runs/four/two-seed1/log.jsonl 'of("config")[-1]["momentum"]')" = 0.5 ] && [ "$(line_count runs/four/two-seed1/log.jsonl config)" = 1 ]
check "... the new run in a new folder, its log its own" $? "$(cat runs/four/two-seed1/command.txt)"
sweep four-two.ini --rerun-changed >rerun2.out 2>rerun2.err
rc=$?
[ "$rc" -eq 0 ] && ! grep -q "^sweep: start" rerun2.err && ! grep -q "changed" rerun2.err
check "... and once done, not again" $? "exit $rc, $(grep -c '^sweep: start' rerun2.err) started"
sed -i 's/^momentum = 0.5$/momentum = 0.6/' four-two.ini
sweep four-two.ini --rerun-changed >rerun3.out 2>rerun3.err
rc=$?
[ "$rc" -eq 0 ] && [ -d runs/four/.old/two-seed1.1 ] && grep -q -- "--momentum 0.5" runs/four/.old/two-seed1.2/command.txt
check "... edited again: the next old folder is NAME.2, NAME.1 kept" $? "exit $rc, $(ls -A runs/four/.old | tr '\n' ' ')"
# a file the run names outside its folder (log = FILE) is the old run's: the new run would
# append to it (a checkpoint: resume it), so the rerun is refused, nothing moved
printf '[sweep]\nname = outlog\n[base]\n%s\nlog = outlog.jsonl\n' "$TINY" >outlog.ini
sweep outlog.ini >/dev/null 2>&1
sed 's/^epochs = 1$/epochs = 2/' outlog.ini >outlog2.ini
expect_error "--rerun-changed: a log outside the run's folder" \
    "outlog2.ini:$(grep -n '^log = ' outlog2.ini | cut -d: -f1): run 'run': --rerun-changed: its log outlog.jsonl, outside its folder, is the old run's" -- sweep outlog2.ini --rerun-changed
[ ! -e runs/outlog/.old ] && [ "$(line_count outlog.jsonl config)" = 1 ]
check "... nothing moved, the log as it was" $? "$(ls -A runs/outlog | tr '\n' ' ')"

# ------------------------------------------------------------------ interrupted and restarted
# one at a time, a few seconds each: when one is done and the next running, three more are to
# come, so the interruption cannot miss them however slow the machine
cat >stop.ini <<EOF
[sweep]
name = stop
parallel = 1
[base]
model = mlp
train-limit = 30000
test-limit = 200
epochs = 6
quiet = true
[axes]
lr = 0.01, 0.02, 0.03, 0.04, 0.05
EOF
"$DTRAIN" sweep stop.ini >stop.out 2>stop.err &  # not the function: $! must be dtrain
pid=$!
ok=0
for _ in $(seq 600); do # until a run is done and another one running
    done_n=$(find runs/stop -name status.json 2>/dev/null | wc -l)
    running=0
    for d in runs/stop/*/; do [ -d "$d" ] && [ ! -e "$d/status.json" ] && running=1; done
    if [ "$done_n" -ge 1 ] && [ "$running" -eq 1 ]; then ok=1; break; fi
    sleep 0.1
done
kill -INT "$pid"
wait "$pid"
rc=$?
check "caught the sweep with a run done and one running" $((1 - ok)) "$done_n done"
compare "interrupted: exit 130" "$rc" == 130
compare "interrupted: one line about it" "$(grep -c '^sweep: interrupted' stop.err)" == 1
sleep 1
compare "interrupted: no run left running" "$(ps -eo args | grep -F -- "--log runs/stop/" | grep -vc grep)" == 0
declare -A before
kept=0 cut_short=0
for d in runs/stop/*/; do
    if [ -e "$d/status.json" ]; then before[$d]=$(md5sum <"$d/log.jsonl")@$(stat -c %Y.%y "$d/log.jsonl"); kept=$((kept + 1))
    else cut_short=$((cut_short + 1)); fi
done
compare "interrupted: runs without status.json" "$cut_short" ">=" 1 "$cut_short >= 1 ($kept kept; $(tail -2 stop.err | tr "\n" " "))"
sweep stop.ini >restart.out 2>restart.err
rc=$?
compare "restarted: exit 0" "$rc" == 0
compare "restarted: started only the missing runs" "$(grep -c '^sweep: start' restart.err)" == $((5 - kept))
same_logs=0
for d in "${!before[@]}"; do [ "$(md5sum <"$d/log.jsonl")@$(stat -c %Y.%y "$d/log.jsonl")" = "${before[$d]}" ] && same_logs=$((same_logs + 1)); done
compare "restarted: the done runs' logs untouched" "$same_logs" == "$kept"
n=0
for d in runs/stop/*/; do grep -q '"status":"done"' "$d/status.json" && [ "$(line_count "$d/log.jsonl" summary)" = 1 ] && n=$((n + 1)); done
compare "restarted: all 5 done, each log with one summary" "$n" == 5

# ------------------------------------------------------------------ a failing run
cat >fail.ini <<EOF
[sweep]
name = fail
[base]
$TINY
[variant good]
[variant nodata]
data-dir = $T/no-such-folder
EOF
sweep fail.ini >fail.out 2>fail.err
rc=$?
compare "a failed run: exit 1" "$rc" == 1
grep -q '"status":"done"' runs/fail/good/status.json
check "a failed run: the other one done" $? "$(cat runs/fail/good/status.json)"
err=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["status"], s["exit"], s["error"])' runs/fail/nodata/status.json)
want="failed 2 $(grep '^dtrain: error:' runs/fail/nodata/console.txt | tail -1)"
[ "$err" = "$want" ] && echo "$err" | grep -q "no-such-folder"
check "a failed run: status failed with its error line" $? "$err"
grep -q "^sweep: FAILED nodata (exit 2, [0-9]*s): dtrain: error: .*no-such-folder" fail.err &&
    grep -q "^sweep: failed: nodata (exit 2): dtrain: error: .*no-such-folder" fail.err
check "a failed run: reported when it ends and at the end" $? "$(tail -2 fail.err | head -1)"
stamp=$(stat -c %y runs/fail/nodata/status.json)
sweep fail.ini >fail2.out 2>fail2.err
rc=$?
[ "$rc" -eq 1 ] && ! grep -q '^sweep: start' fail2.err && [ "$(stat -c %y runs/fail/nodata/status.json)" = "$stamp" ]
check "a failed run: not run again on the next start" $? "exit $rc, $(grep -c '^sweep: start' fail2.err) started"
sweep fail.ini --retry-failed >fail3.out 2>fail3.err
rc=$?
[ "$rc" -eq 1 ] && [ "$(grep -c '^sweep: start' fail3.err)" -eq 1 ] && grep -q '^sweep: start nodata$' fail3.err
check "--retry-failed runs it (alone) again" $? "exit $rc, $(grep '^sweep: start' fail3.err | tr '\n' ' ')"

# ------------------------------------------------------------------ runs that checkpoint
# one path for several runs: every run would replace (a checkpoint: resume) another's
ck_file() { printf '[sweep]\nname = %s\n%s\n[base]\nmodel = mlp\nepochs = 1\n%s\n[variant a]\n[variant b]\n%s\n' "$1" "$2" "$3" "$4" >"$1.ini"; }
ck_file shared '' 'checkpoint = ck' ''
expect_error "checkpoint in [base]: one path for two runs" \
    "shared.ini:7: key 'checkpoint': 'ck' is one path for several runs ('a' and 'b'): each would replace or resume another's; write checkpoint = true" -- sweep shared.ini
ck_file shared-log 'seeds = 1 2' '' 'log = b.jsonl'
expect_error "log of a variant with two seeds" "shared-log.ini:10: key 'log': 'b.jsonl' is one path for several runs ('b-seed1' and 'b-seed2')" -- sweep shared-log.ini
ck_file shared-trace '' 'trace = t.json' ''
expect_error "trace in [base]" "shared-trace.ini:7: key 'trace': 't.json' is one path for several runs" -- sweep shared-trace.ini
ck_file shared-out 'seeds = 1 2' 'out = m.weights' ''
expect_error "out in [base]" "shared-out.ini:7: key 'out': 'm.weights' is one path for several runs" -- sweep shared-out.ini
ck_file run-dir '' 'run-dir = true' ''
expect_error "run-dir = true" "run-dir.ini:7: key 'run-dir': expected a folder, got true" -- sweep run-dir.ini
# each its own: by variant, and checkpoint = true (the run's folder), with --resume auto
ck_file own '' '' 'checkpoint = ck-b'
sweep own.ini --dry-run >own.out 2>own.err
check "a checkpoint of one run: accepted" $? "$(tail -1 own.err)"
ck_file own-true 'seeds = 1 2' 'checkpoint = true' ''
sweep own-true.ini --dry-run >own-true.out 2>&1
grep -q "^a-seed2: .* --checkpoint runs/own-true/a-seed2/checkpoint .*--resume auto " own-true.out && [ ! -e runs/own-true ]
check "checkpoint = true: each run its folder's checkpoint, --resume auto" $? "$(grep '^a-seed2:' own-true.out)"
# a checkpoint outside the sweep's folders that exists before its run ever started: resumed,
# the run's new log would hold only the epochs after it
"$DTRAIN" train --model mlp --epochs 1 --train-limit 256 --test-limit 64 --checkpoint ck-b --no-save --quiet >/dev/null 2>&1
expect_error "an existing checkpoint without its run's folder" \
    "own.ini:10: run 'b': its checkpoint ck-b exists but no folder runs/own/b of the run that wrote it" -- sweep own.ini
rm -f ck-b

# A run stopped with its checkpoint committed (status 5) is kept as stopped, not failed, and
# the next start resumes it in its folder: its log and console.txt go on, and it ends with the
# weights of the same run never stopped (b: the same flags but for its checkpoint's path).
# cnn1 on 20,000 images at batch 16: 2,500 steps, a few seconds; stopped once it has logged
# 300 (a step line every 10). The checkpoints are paths of the file's, as a sweep before
# checkpoint = true took them (it recorded the run failed; restarted, it resumed a folder made
# anew from the set outside it, the log holding only the epochs after it).
cat >ck.ini <<EOF
[sweep]
name = ck
parallel = 2
[base]
model = cnn1
train-limit = 20000
test-limit = 200
batch = 16
epochs = 2
progress = 10
quiet = true
resume = auto
[variant a]
checkpoint = ck-a
[variant b]
checkpoint = ck-b
EOF
"$DTRAIN" sweep ck.ini >ck1.out 2>ck1.err & # not the function: $! must be dtrain
pid=$!
wait_until 120 logged runs/ck/a/log.jsonl step 30
kill -TERM "$(pgrep -f -- "--log runs/ck/a/log.jsonl" | head -1)" 2>/dev/null
wait "$pid"
rc=$?
compare "a run stopped (SIGTERM): the sweep exits 1" "$rc" == 1 "$(tail -2 ck1.err | tr '\n' ' ')"
st=$(status_of runs/ck/a)
[ "$st" = "stopped 5" ] && grep -q "^sweep: stopped a (exit 5, [0-9]*s): its checkpoint committed, it resumes in its folder on the next start$" ck1.err
check "... recorded stopped (exit 5), not failed, and said" $? "status: ${st:-none}; $(grep ' a ' ck1.err | head -2 | tr '\n' ' ')"
compare "... the other run done" "$(status_of runs/ck/b | cut -d' ' -f2)" == 0 "$(status_of runs/ck/b)"
sweep ck.ini --dry-run >/dev/null 2>ck-dry.err
grep -q "^sweep: a: stopped, resumes in its folder runs/ck/a from its checkpoint ck-a$" ck-dry.err
check "--dry-run: it resumes in its folder" $? "$(head -2 ck-dry.err | tr '\n' ' ')"
# a sweep before stopped runs were told apart recorded them failed with exit 5
cp runs/ck/a/status.json ck-status.json
sed -i 's/"stopped"/"failed"/' runs/ck/a/status.json
sweep ck.ini --dry-run >/dev/null 2>ck-dry.err
grep -q "^sweep: a: stopped, resumes in its folder" ck-dry.err
check "... also as an older sweep recorded it (failed, exit 5)" $? "$(head -2 ck-dry.err | tr '\n' ' ')"
cp ck-status.json runs/ck/a/status.json
b_log=$(md5sum <runs/ck/b/log.jsonl)
sweep ck.ini >ck2.out 2>ck2.err
rc=$?
compare "restarted: exit 0" "$rc" == 0 "$(tail -2 ck2.err | tr '\n' ' ')"
[ "$(grep -c '^sweep: start' ck2.err)" = 1 ] && grep -q '^sweep: start a$' ck2.err && grep -q "1 to run (1 resumed in its folder)" ck2.err
check "... started the stopped run alone, in its folder" $? "$(grep -E '^sweep: (start|ck:)' ck2.err | tr '\n' ' ')"
compare "... its log goes on: two config lines" "$(line_count runs/ck/a/log.jsonl config)" == 2
compare "... one summary" "$(line_count runs/ck/a/log.jsonl summary)" == 1
compare "... both epochs" "$(epoch_fields runs/ck/a/log.jsonl epoch | tr -d '[],')" == 12 "epochs $(epoch_fields runs/ck/a/log.jsonl epoch)"
compare "... no step trained twice" "$(summary_field runs/ck/a/log.jsonl redone_steps)" == 0
grep -q "^dtrain: stopped by Terminated after step" runs/ck/a/console.txt
check "... its console.txt kept (the stop's line in it)" $? "$(head -c 300 runs/ck/a/console.txt)"
[ "$(status_of runs/ck/a)" = "done 0" ] && [ "$(md5sum <runs/ck/b/log.jsonl)" = "$b_log" ]
check "... done, and the other run untouched" $? "$(status_of runs/ck/a)"
identical "... the weights of the run never stopped, bit for bit" runs/ck/b/model.weights runs/ck/a/model.weights
# the sweep interrupted (Ctrl-C): its run stops with its checkpoint (a sweep before recorded
# no status: its folder was made anew on the next start), and resumes in place
sed -e 's/^name = ck$/name = ck-int/' -e 's/^checkpoint = ck-a$/checkpoint = ck-int/' -e '/^\[variant b\]$/,$d' ck.ini >ck-int.ini
"$DTRAIN" sweep ck-int.ini >int1.out 2>int1.err &
pid=$!
wait_until 120 logged runs/ck-int/a/log.jsonl step 30
kill -INT "$pid"
wait "$pid"
rc=$?
st=$(status_of runs/ck-int/a)
[ "$rc" = 130 ] && [ "$st" = "stopped 5" ]
check "the sweep interrupted: its run recorded stopped (exit 5)" $? "exit $rc, status: ${st:-no status.json}; $(tail -2 int1.err | tr '\n' ' ')"
sweep ck-int.ini >int2.out 2>int2.err
compare "... restarted: exit 0" "$?" == 0 "$(tail -2 int2.err | tr '\n' ' ')"
compare "... resumed in its folder: two config lines" "$(line_count runs/ck-int/a/log.jsonl config)" == 2
compare "... both epochs" "$(epoch_fields runs/ck-int/a/log.jsonl epoch | tr -d '[],')" == 12 "epochs $(epoch_fields runs/ck-int/a/log.jsonl epoch)"
identical "... the weights of the run never stopped" runs/ck/b/model.weights runs/ck-int/a/model.weights
# checkpoint = true: each run's checkpoint in its folder, and nowhere else
ck_file own-ran '' $'train-limit = 1000\ntest-limit = 200\nquiet = true\ncheckpoint = true' ''
sweep own-ran.ini >own-ran.out 2>own-ran.err
rc=$?
[ "$rc" = 0 ] && [ -s runs/own-ran/a/checkpoint ] && [ -s runs/own-ran/b/checkpoint ] && [ ! -e checkpoint ]
check "checkpoint = true: each run checkpoints in its folder" $? "exit $rc; $(ls runs/own-ran/a | tr '\n' ' '); $(tail -1 own-ran.err)"

# --help says what a user needs before docs/sweep.md: seeds, axes, variants, resuming
h=$("$DTRAIN" sweep --help 2>&1)
grep -q "seeds = " <<<"$h" && grep -q "\[axes\]" <<<"$h" && grep -q "\[variant NAME\]" <<<"$h" &&
    grep -q "Resuming" <<<"$h" && grep -q -- "--retry-failed" <<<"$h"
check "sweep --help names seeds, axes, variants and resuming" $? "$(head -4 <<<"$h" | tr '\n' ' ')"
grep -q -- "--rerun-changed .*OUT/.old/NAME.K" <<<"$h" && grep -q -- "--budget CORE_MINUTES .*core-minutes" <<<"$h" &&
    grep -q "simulate = true" <<<"$h" && grep -q "^Cost: .*estimate" <<<"$h"
check "sweep --help names --rerun-changed, --budget, the estimate and simulate" $? "$(grep -c -- '--rerun-changed\|--budget' <<<"$h") lines"

finish
