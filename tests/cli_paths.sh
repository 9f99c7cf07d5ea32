#!/usr/bin/env bash
# Paths that are not regular files, full disks and leftovers. An output (--out, --checkpoint)
# or an input (--resume, a part its manifest names, eval's --weights) that is a device, a FIFO or a directory is refused
# before training, in one line naming the flag and the path, within 5 s (a FIFO never makes a
# process wait), and the node stays as it was; --log writes to a character device (/dev/null)
# or a FIFO that has a reader in place. A full disk under --log leaves whole JSON lines and a
# message naming the cause; --out on a disk too small for the weights fails before training.
# A weights file with bytes after its checksum is refused; temporaries of killed writers
# (FILE.tmp.PID.RANDOM, or an older build's FILE.tmp.PID) go when a run with that --checkpoint
# starts. A FIFO is refused wherever dtrain reads (--model, a data file, --hostfile, a model a
# weights file names); nothing is written through a symbolic link planted at a name dtrain
# makes (a temporary's guessable older name, a run folder's files).
. "$(dirname "$0")/lib.sh"
require_mnist
C=(--model cnn1 --data mnist --train-limit 256 --test-limit 100 --batch 32 --epochs 1 --quiet)
M=$T/small # a 64 kB tmpfs, mounted below
trap 'umount "$M" 2>/dev/null; rm -rf "$T" "$DTRAIN_RUN_DIR"' EXIT

mknod "$T/null" c 1 3 && mkfifo "$T/fifo" && mkdir "$T/dir"
check "a character device, a FIFO and a directory made" $? "mknod, mkfifo, mkdir"
kind() { stat -c %F "$1"; }
declare -A KIND=([null]="character special file" [fifo]="fifo" [dir]="directory")

# refused LABEL WANT -- COMMAND...: expect_error under `timeout 10`, in at most 5 s
refused() {
    local label=$1 want=$2 t0
    shift 3
    t0=$(date +%s%N)
    expect_error "$label" "$want" -- timeout 10 "$@"
    compare "... within 5 s" $((($(date +%s%N) - t0) / 1000000)) '<=' 5000 "$((($(date +%s%N) - t0) / 1000000)) ms"
}
# unchanged NODE: a check that $T/NODE is still what it was made as
unchanged() { [ "$(kind "$T/$1")" = "${KIND[$1]}" ]; check "... $1 is still a ${KIND[$1]}" $? "$(kind "$T/$1")"; }

# 1. outputs and inputs that are not regular files: one process, and `run` with two ranks
for node in null fifo dir; do
    p=$T/$node
    for flag in out checkpoint resume; do
        refused "train --$flag on a ${KIND[$node]}" "--$flag $p: " -- "$DTRAIN" train "${C[@]}" --"$flag" "$p"
        unchanged "$node"
        refused "run -n 2 --$flag on a ${KIND[$node]}" "--$flag $p: " -- "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --"$flag" "$p"
        unchanged "$node"
    done
    refused "eval --weights on a ${KIND[$node]}" "--weights $p: " -- "$DTRAIN" eval --model cnn1 --test-limit 10 --weights "$p"
    unchanged "$node"
done

# a part of a checkpoint set that is a FIFO: the rank that reads it refuses it, never waits
run -n 2 --algo allreduce "${C[@]}" --no-save --checkpoint "$T/ck"
check "a checkpoint set of two ranks" $? "$T/ck"
rm -f "$T/ck.e1.rank1" && mkfifo "$T/ck.e1.rank1"
refused "run -n 2 --resume with a part that is a FIFO" "--resume $T/ck: part $T/ck.e1.rank1: is a FIFO" -- \
    "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 2 --no-save --resume "$T/ck"
[ -p "$T/ck.e1.rank1" ]; check "... the part is still a FIFO" $? "$(kind "$T/ck.e1.rank1")"

# 2. --log to a character device: written in place, the device stays; a FIFO: in place when a
#    process reads it (every line arrives whole), refused in one line when none does
"$DTRAIN" train "${C[@]}" --no-save --log "$T/null" 2>"$T/null.err"
check "train --log on a character device: written in place" $? "$(head -c 300 "$T/null.err")"
unchanged null
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --no-save --log "$T/null" 2>"$T/null.err"
check "run -n 2 --log on a character device: written in place" $? "$(head -c 300 "$T/null.err")"
unchanged null
refused "train --log on a FIFO nobody reads" "--log $T/fifo: " -- "$DTRAIN" train "${C[@]}" --no-save --log "$T/fifo"
unchanged fifo
timeout 20 cat "$T/fifo" >"$T/fifo.jsonl" &
reader=$!
timeout 20 "$DTRAIN" train "${C[@]}" --no-save --log "$T/fifo" 2>"$T/fifo.err"
check "train --log on a FIFO with a reader: written in place" $? "$(head -c 300 "$T/fifo.err")"
wait "$reader"
compare "... the reader got every line, whole" "$(line_count "$T/fifo.jsonl" summary)" == 1
unchanged fifo

# 3. a weights file with bytes after its checksum is refused
"$DTRAIN" train "${C[@]}" --out "$T/good.w"
check "a weights file to spoil" $? "$T/good.w"
{ cat "$T/good.w"; printf 'extra'; } >"$T/trail.w"
expect_error "eval: bytes after the checksum" "$T/trail.w: 5 bytes after the checksum" -- \
    "$DTRAIN" eval --model cnn1 --test-limit 10 --weights "$T/trail.w"
expect_error "--resume: bytes after the checksum" "trail.w: 5 bytes after the checksum" -- \
    "$DTRAIN" train "${C[@]}" --no-save --resume "$T/trail.w"

# 4. temporaries of a killed writer (pid 999999 is not running; FILE.tmp.PID.RANDOM, and an
#    older build's FILE.tmp.PID) go when the next run with that --checkpoint starts, even one
#    that saves nothing (it diverges in its first epoch); the temporary of a writer that still
#    runs (this script) stays
for n in 1 2; do
    mkdir -p "$T/stale$n"
    s=$T/stale$n
    r=Ab3dEf6hIj9L
    touch "$s/ck.tmp.999999" "$s/ck.e1.rank0.tmp.999999" "$s/ck.e4.rank$((n - 1)).tmp.999999" "$s/ck.tmp.$$" \
        "$s/ck.tmp.999999.$r" "$s/ck.e1.rank0.tmp.999999.$r" "$s/ck.tmp.$$.$r"
    if [ "$n" -eq 1 ]; then "$DTRAIN" train "${C[@]}" --no-save --lr 1e6 --checkpoint "$s/ck" 2>/dev/null
    else "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --no-save --lr 1e6 --checkpoint "$s/ck" 2>/dev/null; fi
    compare "$n rank(s), a run that diverges: exit status 3" $? == 3
    left=$(cd "$s" && ls -- *.999999 *.999999.* 2>/dev/null | tr '\n' ' ')
    [ -z "$left" ]; check "... the killed writers' temporaries are gone" $? "left: ${left:-none}"
    [ -e "$s/ck.tmp.$$" ] && [ -e "$s/ck.tmp.$$.$r" ]; check "... a running writer's temporaries stay" $? "ck.tmp.$$[.$r]"
done

# 5. a FIFO wherever dtrain reads a file is refused, never waited on: --model, a data file,
#    --hostfile, and the model a weights file names (a model named inside a file is a built-in
#    name or the file's own spec text, never a path opened)
refused "train --model on a FIFO" "$T/fifo: is a FIFO" -- "$DTRAIN" train "${C[@]}" --no-save --model "$T/fifo"
unchanged fifo
mkdir "$T/fifodata"
for f in "${DTRAIN_DATA:-data}"/mnist/*; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$T/fifodata/"; done
rm -f "$T"/fifodata/t10k-images-idx3-ubyte* && mkfifo "$T/fifodata/t10k-images-idx3-ubyte"
refused "a FIFO in place of a data file" "fifodata/t10k-images-idx3-ubyte: is a FIFO" -- \
    "$DTRAIN" train "${C[@]}" --no-save --data-dir "$T/fifodata"
refused "run --hostfile on a FIFO" "--hostfile $T/fifo: is a FIFO" -- "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" \
    --no-save --hostfile "$T/fifo"
/usr/bin/python3 "$(dirname "$0")/tfile_edit.py" "$T/good.w" "$T/fifo-model.w" text meta:model "$T/fifo" drop meta:spec
refused "eval of weights whose model is a FIFO's path, no spec text" "never opened as a path" -- \
    "$DTRAIN" eval --test-limit 10 --weights "$T/fifo-model.w"
unchanged fifo
rm -rf "$T/fifodata" "$T/fifo-model.w"

# 6. nothing is written through a symbolic link planted at a name dtrain makes itself. Its
#    temporaries are FILE.tmp.PID.RANDOM, a name nobody can know in advance: a link planted at
#    what an older build's would have been (FILE.tmp.PID, PID the writer's) is left alone and
#    the weights written (before, refused once the training was done); a run folder's
#    console.txt and log.jsonl that are links are refused
echo precious >"$T/victim"
"$DTRAIN" train "${C[@]}" --out "$T/w.weights" 2>"$T/link.err" &
pid=$!
ln -s "$T/victim" "$T/w.weights.tmp.$pid"
wait $pid
compare "a symbolic link at --out's guessable temporary name FILE.tmp.PID: exit status 0" $? == 0 "$(head -c 300 "$T/link.err")"
echo precious | cmp -s - "$T/victim" && [ -f "$T/w.weights" ] && [ ! -L "$T/w.weights" ] && [ -L "$T/w.weights.tmp.$pid" ] &&
    [ ! -s "$T/link.err" ]
check "... nothing written through it, the weights written, the link as it was" $? "$(cd "$T" && ls -l w.weights* victim | tr '\n' ' ')"
"$DTRAIN" eval --weights "$T/w.weights" --test-limit 100 >/dev/null
check "... and the weights load" $? ""
rm -f "$T/w.weights.tmp.$pid" "$T/w.weights" "$T/link.err"
for own in console.txt log.jsonl; do
    mkdir "$T/rd" && : >"$T/victim" && ln -s "$T/victim" "$T/rd/$own"
    "$DTRAIN" train --model cnn1 --data mnist --train-limit 256 --test-limit 100 --batch 32 --epochs 1 --run-dir "$T/rd" \
        >/dev/null 2>"$T/rd.err"
    compare "--run-dir whose $own is a symbolic link: exit status 2" $? == 2
    [ ! -s "$T/victim" ]; check "... nothing written through it" $? "$(head -c 200 "$T/victim" | cat -v)"
    [ "$(wc -l <"$T/rd.err")" -eq 1 ] && grep -q "$own is a symbolic link\|$own: is a symbolic link" "$T/rd.err"
    check "... one line naming it" $? "$(head -c 300 "$T/rd.err")"
    rm -rf "$T/rd" "$T/rd.err" "$T/victim"
done

# 7. a full disk: a 64 kB tmpfs (root only; a container without the right to mount skips it)
mkdir -p "$M"
if ! err=$(mount -t tmpfs -o size=64k tmpfs "$M" 2>&1); then
    if echo "$err" | grep -qi "permission denied\|not permitted"; then echo "skip the full-disk checks: $err"; finish; exit; fi
    check "mount a 64 kB tmpfs" 1 "$err"
fi
# --out: cnn1's weights (~150 kB) cannot fit: refused before a training that takes longer than 10 s
refused "--out on a disk without room for the weights" "--out $M/w.weights: " -- "$DTRAIN" train --model cnn1 \
    --data mnist --test-limit 100 --epochs 20 --quiet --out "$M/w.weights"
# --log: one page left (tmpfs counts whole pages): a line crosses into the next page and fails
head -c 4096 /dev/zero >"$M/page"
head -c 100000 /dev/zero >"$M/fill" 2>/dev/null
rm "$M/page"
"$DTRAIN" train "${C[@]}" --no-save --eval-every-steps 1 --epochs 20 --log "$M/log.jsonl" 2>"$T/full.err"
compare "--log on a full disk: exit status 2" $? == 2
compare "... one line on stderr" "$(wc -l <"$T/full.err")" == 1 "$(head -c 300 "$T/full.err")"
grep -q "^dtrain: error: --log $M/log.jsonl: .*No space left on device" "$T/full.err"
check "... naming the flag, the file and the cause" $? "$(head -c 300 "$T/full.err")"
compare "... the log is whole JSON lines (some written)" "$(log_query "$M/log.jsonl" 'len(of("eval"))')" '>=' 1
[ "$(tail -c 1 "$M/log.jsonl" | od -An -c | tr -d ' ')" = '\n' ]
check "... and ends with a newline" $? "$(tail -c 80 "$M/log.jsonl")"

finish
