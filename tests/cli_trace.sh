#!/usr/bin/env bash
# --trace FILE: one Chrome trace-event JSON file for all ranks (python3's json reads it), each
# rank's compute and communication events with bytes, ts in order per lane, durations >= 0,
# only steps of the --trace-steps window; the trace changes neither the weights nor the
# messages counted; bad values fail in one line with no file; a trace that cannot be written at
# the end is a warning, after the weights and the log are; nothing planted beside it stops it.
. "$(dirname "$0")/lib.sh"
require_mnist
C=(--model mlp --data mnist --train-limit 4000 --test-limit 500 --epochs 1 --batch 16 --seed 3)

# trace_ok LABEL FILE RANKS FROM TO COMM-NAMES: the file's events checked one by one
trace_ok() {
    local out
    out=$(python3 - "$2" "$3" "$4" "$5" "$6" <<'PY'
import json, sys
path, ranks, lo, hi, comm_names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(",")
d = json.load(open(path))
assert d["displayTimeUnit"] == "ms", "displayTimeUnit"
ev = d["traceEvents"]
xs = [e for e in ev if e["ph"] == "X"]
pids = sorted({e["pid"] for e in xs})
assert pids == list(range(ranks)), "pids %s" % pids
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert all(names.get(r, "").startswith("rank %d (" % r) for r in range(ranks)), names
assert {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"} >= {(e["pid"], e["tid"]) for e in xs}, "a lane without a name"
last = {}
for e in xs:
    assert e["dur"] >= 0, "negative duration %s" % e
    assert lo <= e["args"]["step"] < hi, "outside the window %d:%d: %s" % (lo, hi, e)
    k = (e["pid"], e["tid"])
    assert e["ts"] >= last.get(k, float("-inf")), "ts goes back on %s: %s" % (k, e)
    last[k] = e["ts"]
for r in range(ranks):
    mine = [e for e in xs if e["pid"] == r]
    have = {e["name"] for e in mine}
    assert {"forward", "backward", "optimizer_step"} <= have, "rank %d: compute events %s" % (r, have)
    sent = [e for e in mine if e["name"] in comm_names and e["args"].get("bytes", 0) > 0]
    assert sent, "rank %d: no %s with bytes (has %s)" % (r, comm_names, have)
    steps = {e["args"]["step"] for e in mine if e["name"] == "forward"}
    assert steps == set(range(lo, hi)), "rank %d: forward in steps %s" % (r, sorted(steps))
print("%d events, %d ranks, steps %d..%d" % (len(xs), ranks, lo, hi - 1))
PY
)
    check "$1" $? "$out"
}

# eventgrad in lock-step (deterministic, so the weights can be compared bit for bit)
E=(--algo eventgrad --sync "${C[@]}")
run -n 4 "${E[@]}" --out "$T/eg.w" --log "$T/eg.jsonl"
run -n 4 "${E[@]}" --out "$T/egt.w" --log "$T/egt.jsonl" --trace "$T/eg.json" --trace-steps 3:9
trace_ok "eventgrad --sync, 4 ranks: one trace, every rank's compute and puts/receives with bytes" "$T/eg.json" 4 3 9 put,receive
identical "... the same weights with and without --trace" "$T/eg.w" "$T/egt.w"
a=$(summary_field "$T/eg.jsonl" msgs_sent); b=$(summary_field "$T/egt.jsonl" msgs_sent)
compare "... the same messages counted" "$a" == "$b" "without $a, with $b"
a=$(summary_field "$T/eg.jsonl" mb_sent); b=$(summary_field "$T/egt.jsonl" mb_sent)
compare "... the same bytes counted" "$a" == "$b" "without $a MB, with $b MB"
ls "$T"/eg.json.tmp.* >/dev/null 2>&1; check "... no temporary left" $((!$?)) "$(ls "$T" | tr '\n' ' ')"

# eventgrad as by default (overlapped puts), the default window (steps 10..59)
run -n 4 --algo eventgrad "${C[@]}" --no-save --trace "$T/ego.json"
trace_ok "eventgrad (overlapped puts), the default window 10:60" "$T/ego.json" 4 10 60 "put (queued, overlapped),receive"

# allreduce on 2 ranks: its buckets' non-blocking allreduces and the wait for them
run -n 2 --algo allreduce "${C[@]}" --out "$T/ar.w" --log "$T/ar.jsonl"
run -n 2 --algo allreduce "${C[@]}" --out "$T/art.w" --log "$T/art.jsonl" --trace "$T/ar.json" --trace-steps 0:5
trace_ok "allreduce, 2 ranks" "$T/ar.json" 2 0 5 "iallreduce (start)"
n=$(python3 -c 'import json,sys; print(sum(e["name"] == "MPI_Waitall" and e["tid"] == 2 for e in json.load(open(sys.argv[1]))["traceEvents"]))' "$T/ar.json")
compare "... its MPI_Waitall waits on the MPI lane" "$n" '>=' 10 "$n events (2 ranks x 5 steps)"
identical "... the same weights with and without --trace" "$T/ar.w" "$T/art.w"
a=$(summary_field "$T/ar.jsonl" msgs_sent); b=$(summary_field "$T/art.jsonl" msgs_sent)
compare "... the same messages counted" "$a" == "$b" "without $a, with $b"

# nothing planted beside the trace stops it: its temporary is FILE.tmp.PID.RANDOM, a name
# nobody knows in advance; a directory or a symbolic link at what an older build's name would
# have been (FILE.tmp.PID of rank 0, this one process) is left as it was, nothing written
# through the link (before, the trace was refused at the end)
echo precious >"$T/victim"
for planted in dir link; do
    "$DTRAIN" train "${C[@]}" --out "$T/tw.w" --log "$T/tw.jsonl" --trace "$T/tw.json" >/dev/null 2>"$T/tw.err" &
    pid=$!
    if [ $planted = dir ]; then mkdir "$T/tw.json.tmp.$pid"; else ln -s "$T/victim" "$T/tw.json.tmp.$pid"; fi
    wait $pid
    compare "a $planted at the trace's guessable temporary name: exit status 0" $? == 0 "$(head -c 300 "$T/tw.err")"
    [ ! -s "$T/tw.err" ]; check "... no warning" $? "$(head -c 300 "$T/tw.err")"
    n=$(python3 -c 'import json,sys; print(sum(e["ph"] == "X" for e in json.load(open(sys.argv[1]))["traceEvents"]))' "$T/tw.json")
    compare "... the trace written (python3's json reads it)" "${n:-0}" '>' 0 "${n:-none} events"
    if [ $planted = dir ]; then [ -d "$T/tw.json.tmp.$pid" ]; else [ -L "$T/tw.json.tmp.$pid" ]; fi &&
        echo precious | cmp -s - "$T/victim"
    check "... the $planted left as it was, nothing written through a link" $? "$(ls -l "$T" | grep 'tw.json\|victim' | tr '\n' ' ')"
    rm -rf "$T/tw.w" "$T/tw.jsonl" "$T/tw.err" "$T/tw.json" "$T/tw.json.tmp.$pid"
done
rm -f "$T/victim"

# outputs in order of worth: a trace that cannot be written at the end (a 16 kB tmpfs, the
# trace ~27 kB; root only: a container without the right to mount skips it) is one warning
# line; the run exits 0 with its weights and its log's summary
M=$T/small
mkdir -p "$M"
trap 'umount "$M" 2>/dev/null; rm -rf "$T" "$DTRAIN_RUN_DIR"' EXIT
if ! err=$(mount -t tmpfs -o size=16k tmpfs "$M" 2>&1); then
    echo "skip the full-disk trace check: $err"
else
    "$DTRAIN" train "${C[@]}" --out "$T/tw.w" --log "$T/tw.jsonl" --trace "$M/tw.json" >/dev/null 2>"$T/tw.err"
    compare "a trace that cannot be written (its disk full): exit status 0" $? == 0
    [ -s "$T/tw.w" ]; check "... the weights are written" $? "$(ls "$T" | tr '\n' ' ')"
    compare "... the log ends with its summary" "$(line_count "$T/tw.jsonl" summary)" == 1
    [ "$(wc -l <"$T/tw.err")" -eq 1 ] && grep -q "^dtrain: warning: --trace $M/tw.json: .*No space left on device" "$T/tw.err"
    check "... one warning line naming --trace and the cause" $? "$(head -c 300 "$T/tw.err")"
    [ -z "$(ls -A "$M")" ]; check "... no trace, no temporary left" $? "$(ls -A "$M" | tr '\n' ' ')"
    umount "$M"
fi

# bad values: one line, exit 2, no file
expect_error "--trace-steps 5:2" "--trace-steps 5:2" -- "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --no-save --trace "$T/bad.json" --trace-steps 5:2
expect_error "--trace-steps x" "--trace-steps x" -- "$DTRAIN" train "${C[@]}" --no-save --trace "$T/bad.json" --trace-steps x
expect_error "--trace-steps without --trace" "needs --trace" -- "$DTRAIN" train "${C[@]}" --no-save --trace-steps 1:3
expect_error "--trace in a missing folder" "--trace" -- "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --no-save --trace "$T/no/such/dir/t.json"
mkdir "$T/adir"
expect_error "--trace naming a folder" "--trace" -- "$DTRAIN" train "${C[@]}" --no-save --trace "$T/adir"
finish
