#!/usr/bin/env bash
# Runs never overwrite or lose each other's outputs: --log appends (a resumed run adds its
# config line and the epochs after its checkpoint), refuses a file that is not a dtrain log;
# the config line records when, how (the command) and where (out, log, checkpoint, run_dir);
# weights files name their model and dataset, so eval needs neither flag and refuses a
# contradicting one; the default weights name has the scheme and replaces only an earlier run's
# weights of the same kind; --checkpoint replaces only the checkpoint the run resumes; --run-dir
# keeps command, log, weights and console in one folder.
. "$(dirname "$0")/lib.sh"
require_mnist
C=(--train-limit 2000 --test-limit 500 --batch 32 --lr 0.05 --seed 3)
# py LOG EXPR: EXPR over the log's lines as a list L of dicts (all of them, in file order)
py() { /usr/bin/python3 -c 'import json,sys; L=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; print(eval(sys.argv[2]))' "$@"; }

# 1. a 2-epoch run with a checkpoint, then the same log resumed to 3 epochs
"$DTRAIN" train "${C[@]}" --epochs 2 --checkpoint "$T/ck" --out "$T/a.w" --log "$T/a.jsonl" --quiet
check "2 epochs with --checkpoint" $? ""
head -1 "$T/a.jsonl" >"$T/a.first"
"$DTRAIN" train "${C[@]}" --epochs 3 --resume "$T/ck" --checkpoint "$T/ck" --out "$T/a.w" --log "$T/a.jsonl" --quiet
check "resumed to 3 epochs into the same log" $? ""
compare "... 2 config lines" "$(py "$T/a.jsonl" 'sum(r["type"] == "config" for r in L)')" == 2
e=$(py "$T/a.jsonl" '[r["epoch"] for r in L if r["type"] == "epoch"]')
[ "$e" = "[1, 2, 3]" ]; check "... epochs 1, 2, 3, each once" $? "$e"
head -1 "$T/a.jsonl" | cmp -s - "$T/a.first"; check "... the first config line untouched" $? ""
t=$(py "$T/a.jsonl" '[r["type"] for r in L]')
[ "$t" = "['config', 'epoch', 'epoch', 'summary', 'config', 'epoch', 'summary']" ]; check "... in order" $? "$t"
last=$(py "$T/a.jsonl" '[r for r in L if r["type"] == "config"][-1]["resume"]')
[ "$last" = "$T/ck" ]; check "... the second config line names the checkpoint resumed" $? "$last"

# 2. the config line: started_utc, the command as given, the outputs
py "$T/a.jsonl" 'L[0]["started_utc"]' | grep -qE '^20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]Z$'
check "config: started_utc, ISO 8601 UTC" $? "$(py "$T/a.jsonl" 'L[0].get("started_utc")')"
want=$(/usr/bin/python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$DTRAIN" train "${C[@]}" --epochs 2 --checkpoint "$T/ck" --out "$T/a.w" --log "$T/a.jsonl" --quiet)
got=$(py "$T/a.jsonl" 'json.dumps(L[0]["command"])')
[ "$got" = "$want" ]; check "config: command is the argv given" $? "$got"
o=$(py "$T/a.jsonl" '[L[0][k] for k in ("out", "log", "checkpoint", "run_dir")]')
[ "$o" = "['$T/a.w', '$T/a.jsonl', '$T/ck', None]" ]; check "config: out, log, checkpoint, run_dir" $? "$o"

# 3. --log on a file that is not a dtrain log: refused, the file unchanged
printf '# notes\nkeep me\n' >"$T/README.md"
cp "$T/README.md" "$T/README.copy"
expect_error "--log on a file that is not a log" "--log $T/README.md: exists and is not a dtrain log" -- \
    "$DTRAIN" train "${C[@]}" --epochs 1 --no-save --log "$T/README.md"
cmp -s "$T/README.md" "$T/README.copy"; check "... the file unchanged" $? ""
expect_error "run: --log on a file that is not a log" "--log $T/README.md: exists and is not a dtrain log" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 1 --no-save --log "$T/README.md"
rm -f "$T/README.copy"

# 3b. --checkpoint never replaces what this run does not resume: a file that is no checkpoint
#     (a text file, a weights file; with --resume auto too), a checkpoint of one process or a
#     set of two ranks without --resume or with --resume of another file: refused before any
#     training in one line, every file (a set's parts too) unchanged. --resume auto (a requeued
#     job) continues the set it finds there. (Before, each was overwritten, a set's parts removed.)
M=(--model mlp --train-limit 1000 --test-limit 200 --batch 32 --seed 3 --quiet)
"$DTRAIN" train "${M[@]}" --epochs 1 --checkpoint "$T/one" --out "$T/m.w"
run -n 2 --algo allreduce "${M[@]}" --epochs 1 --checkpoint "$T/set" --no-save
printf 'notes\n' >"$T/notes.txt"
sums() { (cd "$T" && md5sum notes.txt m.w one set set.e1.rank0 set.e1.rank1); }
before=$(sums)
expect_error "--checkpoint on a text file" "--checkpoint $T/notes.txt: exists and is not a checkpoint (a file dtrain did not write)" -- \
    "$DTRAIN" train "${M[@]}" --epochs 1 --no-save --checkpoint "$T/notes.txt"
expect_error "... with --resume auto" "--checkpoint $T/notes.txt: exists and is not a checkpoint" -- \
    "$DTRAIN" train "${M[@]}" --epochs 1 --no-save --checkpoint "$T/notes.txt" --resume auto
expect_error "... by run -n 2" "--checkpoint $T/notes.txt: exists and is not a checkpoint" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${M[@]}" --epochs 1 --no-save --checkpoint "$T/notes.txt"
expect_error "--checkpoint on a weights file" "--checkpoint $T/m.w: exists and is not a checkpoint (a weights file)" -- \
    "$DTRAIN" train "${M[@]}" --epochs 1 --no-save --checkpoint "$T/m.w"
expect_error "--checkpoint on a checkpoint, no --resume" "--checkpoint $T/one: holds a checkpoint of one process (after epoch 1), which this run's first save would replace: resume it" -- \
    "$DTRAIN" train "${M[@]}" --epochs 2 --no-save --checkpoint "$T/one"
expect_error "... resuming another file" "--checkpoint $T/one: holds a checkpoint of one process (after epoch 1), and this run resumes another (--resume $T/set)" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${M[@]}" --epochs 2 --no-save --checkpoint "$T/one" --resume "$T/set"
expect_error "--checkpoint on a set of two ranks, no --resume (run -n 2)" "--checkpoint $T/set: holds a checkpoint set of 2 ranks (after epoch 1)" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${M[@]}" --epochs 2 --no-save --checkpoint "$T/set"
expect_error "... (train, one process)" "--checkpoint $T/set: holds a checkpoint set of 2 ranks" -- \
    "$DTRAIN" train "${M[@]}" --epochs 2 --no-save --checkpoint "$T/set"
[ "$(sums)" = "$before" ]; check "... every file unchanged, the set's parts too" $? "$(sums | tr '\n' ' ')"
run -n 2 --algo allreduce "${M[@]}" --epochs 2 --no-save --checkpoint "$T/set" --resume auto
check "--resume auto continues the set it finds (a requeued job)" $? ""
grep -qx "epoch 2" "$T/set" && [ -e "$T/set.e2.rank1" ]; check "... and saves its next epoch there" $? "$(head -2 "$T/set" | tr '\n' ' ')"
rm -f "$T"/set* "$T/one" "$T/m.w" "$T/notes.txt"

# 4. eval takes model and data from the weights file; contradicting flags refused
acc=$(py "$T/a.jsonl" '[r for r in L if r["type"] == "summary"][-1]["test_acc"]')
evaluates_to "eval --weights alone reproduces the run's accuracy" "$acc" --weights "$T/a.w" --test-limit 500
expect_error "eval: another --model" "eval: --model cnn2: $T/a.w holds weights of cnn1" -- \
    "$DTRAIN" eval --weights "$T/a.w" --model cnn2
expect_error "eval: another --data" "eval: --data fashion-mnist: $T/a.w was trained on mnist" -- \
    "$DTRAIN" eval --weights "$T/a.w" --data fashion-mnist
expect_error "resume: another --model" "a checkpoint of model cnn1, this run trains --model mlp" -- \
    "$DTRAIN" train "${C[@]}" --model mlp --epochs 3 --resume "$T/ck" --no-save
expect_error "resume: another --data" "a checkpoint of a run on mnist, this run trains on --data fashion-mnist" -- \
    "$DTRAIN" train "${C[@]}" --data fashion-mnist --epochs 3 --resume "$T/ck" --no-save

# 5. a spec file's weights evaluate without --model (the spec text is in the file), even when
# the spec file is gone; another file with the same text is the same model
"$DTRAIN" info --spec --model mlp >"$T/my.spec"
"$DTRAIN" train "${C[@]}" --model "$T/my.spec" --epochs 1 --out "$T/s.w" --log "$T/s.jsonl" --quiet
check "a spec-file model trains" $? ""
cp "$T/my.spec" "$T/copy.spec"
rm "$T/my.spec"
evaluates_to "... its weights evaluate without --model" "$(summary_field "$T/s.jsonl" test_acc)" --weights "$T/s.w" --test-limit 500
evaluates_to "... and with a copy of the spec" "$(summary_field "$T/s.jsonl" test_acc)" --weights "$T/s.w" --model "$T/copy.spec" --test-limit 500
rm "$T/copy.spec"
expect_error "... but not with another model" "holds weights of $T/my.spec" -- "$DTRAIN" eval --weights "$T/s.w" --model cnn1

# 6. without --out, two schemes leave two weights files; a file of another kind under the
# default name is not replaced
mkdir "$T/cwd"
DATA=$(cd "${DTRAIN_DATA:-data}" && pwd)
( cd "$T/cwd" && export DTRAIN_DATA="$DATA" && "$DTRAIN" train "${C[@]}" --epochs 1 --quiet && "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 1 --quiet )
check "train, then run --algo allreduce, both without --out" $? ""
[ -s "$T/cwd/dtrain-cnn1-mnist-local.weights" ] && [ -s "$T/cwd/dtrain-cnn1-mnist-allreduce.weights" ]
check "... two weights files, named by scheme" $? "$(ls "$T/cwd" | tr '\n' ' ')"
cp "$T/cwd/dtrain-cnn1-mnist-local.weights" "$T/local.copy"
( cd "$T/cwd" && DTRAIN_DATA="$DATA" "$DTRAIN" train "${C[@]}" --epochs 1 --seed 9 --quiet )
check "... the same command again replaces its own weights" $? ""
cmp -s "$T/cwd/dtrain-cnn1-mnist-local.weights" "$T/local.copy"; [ $? -ne 0 ]; check "... (they changed: seed 9)" $? ""
echo "my notes" >"$T/cwd/dtrain-cnn1-mnist-local.weights"
( cd "$T/cwd" && DTRAIN_DATA="$DATA" "$DTRAIN" train "${C[@]}" --epochs 1 --quiet ) 2>"$T/foreign.err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$T/foreign.err")" -eq 1 ] && grep -q "use --out" "$T/foreign.err" &&
    [ "$(cat "$T/cwd/dtrain-cnn1-mnist-local.weights")" = "my notes" ]
check "... a file it did not write is refused, unchanged" $? "rc $rc: $(cat "$T/foreign.err")"

# 7. --run-dir: command, log, weights, console in one folder; a finished one is not reused
R="$T/runs/one"
"$DTRAIN" train "${C[@]}" --epochs 2 --run-dir "$R" >"$T/rd.out" 2>&1
check "train --run-dir (parents created)" $? "$(tail -1 "$T/rd.out")"
for f in command.txt log.jsonl model.weights console.txt; do [ -s "$R/$f" ] || echo "missing $f"; done >"$T/rd.missing"
[ ! -s "$T/rd.missing" ]; check "... command.txt, log.jsonl, model.weights, console.txt" $? "$(cat "$T/rd.missing")"
n=$(grep -c '^epoch ' "$R/console.txt"); compare "... console.txt has the epoch lines" "$n" == 2
cmp -s "$R/console.txt" "$T/rd.out"; check "... and is what the terminal showed" $? ""
read -r cmdline <"$R/command.txt"
eval "words=($cmdline)"
[ "${words[*]}" = "$DTRAIN train ${C[*]} --epochs 2 --run-dir $R" ] && [ "$(wc -l <"$R/command.txt")" -eq 1 ]
check "... command.txt: the command, one line a shell reads back" $? "$cmdline"
o=$(py "$R/log.jsonl" '[L[0][k] for k in ("out", "log", "run_dir")]')
[ "$o" = "['$R/model.weights', '$R/log.jsonl', '$R']" ]; check "... the config line names them" $? "$o"
evaluates_to "... its weights" "$(summary_field "$R/log.jsonl" test_acc)" --weights "$R/model.weights" --test-limit 500
expect_error "--run-dir of a finished run" "--run-dir $R: holds a finished run" -- "$DTRAIN" train "${C[@]}" --epochs 2 --run-dir "$R"
"$DTRAIN" train "${C[@]}" --epochs 1 --run-dir "$T/runs/two" --log "$T/two.jsonl" --out "$T/two.w" --quiet
[ -s "$T/two.jsonl" ] && [ -s "$T/two.w" ] && [ ! -e "$T/runs/two/log.jsonl" ] && [ ! -e "$T/runs/two/model.weights" ]
check "... explicit --log and --out win" $? "$(ls "$T/runs/two" | tr '\n' ' ')"

# a finished folder continues with --resume: the log and the console grow, nothing is lost
Q="$T/runs/res"
"$DTRAIN" train "${C[@]}" --epochs 1 --run-dir "$Q" --checkpoint "$Q/checkpoint" >/dev/null 2>&1
"$DTRAIN" train "${C[@]}" --epochs 2 --run-dir "$Q" --checkpoint "$Q/checkpoint" --resume "$Q/checkpoint" >/dev/null 2>&1
check "--run-dir of a finished run with --resume" $? ""
e=$(py "$Q/log.jsonl" '[r["epoch"] for r in L if r["type"] == "epoch"]')
[ "$e" = "[1, 2]" ] && [ "$(grep -c '^epoch ' "$Q/console.txt")" -eq 2 ]
check "... log.jsonl and console.txt hold both runs' epochs" $? "log $e, console $(grep -c '^epoch ' "$Q/console.txt")"
grep -q -- "--resume" "$Q/command.txt"; check "... command.txt is the latest command" $? "$(cat "$Q/command.txt")"

# 8. run -n 2 --run-dir: the supervisor keeps the folder; rank 0's lines once in console.txt;
# the ranks log the command the user typed (not mpiexec's)
M="$T/runs/mpi it's"  # a space and a quote: command.txt and the ranks' command keep them
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 2 --run-dir "$M" >"$T/m.out" 2>&1
check "run -n 2 --run-dir" $? "$(tail -1 "$T/m.out")"
n=$(grep -c '^epoch ' "$M/console.txt"); compare "... console.txt has rank 0's epoch lines once" "$n" == 2
n=$(grep -c '^training cnn1' "$M/console.txt"); compare "... and its start line once" "$n" == 1
[ -s "$M/model.weights" ] && [ -s "$M/command.txt" ]; check "... model.weights, command.txt" $? ""
want=$(/usr/bin/python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 2 --run-dir "$M")
got=$(py "$M/log.jsonl" 'json.dumps(L[0]["command"])')
[ "$got" = "$want" ]; check "... the config line's command is dtrain run's, as given" $? "$got"
read -r cmdline <"$M/command.txt"
eval "words=($cmdline)"
[ "${words[*]}" = "$DTRAIN run -n 2 --algo allreduce ${C[*]} --epochs 2 --run-dir $M" ] && [ "${#words[@]}" -eq 20 ]
check "... command.txt reads back as the same words" $? "$cmdline"
finish
