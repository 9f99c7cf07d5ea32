# Shared by the command-line tests (tests/cli_*.sh), sourced first; $1 is the dtrain binary.
# Gives DTRAIN, a temporary folder T (removed at exit), and the helpers below: checks (check,
# holds, within, compare, same, identical, differ, balanced, evaluates_to, expect_error),
# running (run, require_mnist), JSON log readers (log_query and the readers built on it), and
# finish, which prints "N passed, M failed" and sets the exit status.
set -u
DTRAIN=${1:?usage: $(basename "$0") path/to/dtrain}
T=$(mktemp -d)
# dtrain run keeps a failed run's launcher messages (dtrain-run.XXXXXX/launcher.log, named in its
# error) for the user to read: the tests' failures, some on purpose, keep theirs here, not in
# /tmp, and not in $T, where tests look for files left behind
export DTRAIN_RUN_DIR=$(mktemp -d)
trap 'rm -rf "$T" "$DTRAIN_RUN_DIR"' EXIT
fails=0 passes=0
# the tests start more ranks than a small machine has cores, and schemes on one process: the
# one-line setup warnings would add a line to the stderr they count (cli_bad_input checks them)
export DTRAIN_NO_SETUP_WARNINGS=1

# ------------------------------------------------------------------------------ checks

# check LABEL EXIT-STATUS DETAIL: one result line, "ok" when EXIT-STATUS is 0, else "FAIL".
check() {
    if [ "$2" -eq 0 ]; then echo "ok   $1: $3"; passes=$((passes + 1)); else echo "FAIL $1: $3"; fails=$((fails + 1)); fi
}

# holds A OP B: succeeds when A and B are both numbers and A OP B (==, !=, <, <=, >, >=).
# An empty value, null or text never holds, so a log reader that found nothing fails the check.
holds() {
    awk -v a="$1" -v op="$2" -v b="$3" '
        function num(s) { return s ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
        BEGIN {
            if (!num(a) || !num(b)) exit 1
            a += 0; b += 0
            if (op == "==") exit !(a == b)
            if (op == "!=") exit !(a != b)
            if (op == "<") exit !(a < b)
            if (op == "<=") exit !(a <= b)
            if (op == ">") exit !(a > b)
            if (op == ">=") exit !(a >= b)
            exit 1
        }'
}

# within LABEL VALUE LO HI: a check that LO <= VALUE <= HI (VALUE a number).
within() {
    holds "$2" '>=' "$3" && holds "$2" '<=' "$4"
    check "$1" $? "$2 (expected $3..$4)"
}

# compare LABEL A OP B [DETAIL]: a check that holds A OP B; DETAIL defaults to "A OP B".
compare() {
    holds "$2" "$3" "$4"
    check "$1" $? "${5-$2 $3 $4}"
}

# ratio A B: A / B to six decimals (nothing, and status 1, unless both are numbers and B != 0).
ratio() {
    holds "$2" '!=' 0 && holds "$1" '==' "$1" && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f\n", a / b }'
}

# same LABEL A B TOL: a check that weights files A and B differ by at most TOL (dtrain diff).
same() {
    local out
    out=$("$DTRAIN" diff "$2" "$3" --tol "$4" 2>&1)
    check "$1" $? "$out"
}

# identical LABEL A B: a check that weights files A and B are equal bit for bit.
identical() { same "$1" "$2" "$3" 0; }

# differ LABEL A B TOL: a check that A and B differ by more than TOL (dtrain diff exits 1):
# shows that an equality check next to it can fail.
differ() {
    "$DTRAIN" diff "$2" "$3" --tol "$4" >/dev/null 2>&1
    [ $? -eq 1 ]; check "$1" $? "diff --tol $4 exits 1"
}

# balanced LABEL LOG: a check that the messages sent equal the messages received, summed over
# the ranks of LOG's summary (every message is taken).
balanced() {
    local s r
    s=$(summary_field "$2" msgs_sent) r=$(per_rank_sum "$2" msgs_recv)
    compare "$1: messages sent ($s) == messages received ($r)" "$s" == "$r" ""
}

# evaluates_to LABEL ACC EVAL-ARGS...: a check that `dtrain eval EVAL-ARGS...` prints the test
# accuracy ACC (a fraction, as in the logs; eval prints a percentage with two decimals).
evaluates_to() {
    local label=$1 acc=$2 out eacc
    shift 2
    out=$("$DTRAIN" eval "$@" 2>&1)
    eacc=$(echo "$out" | sed -n 's/test accuracy \([0-9.]*\)%.*/\1/p')
    holds "$acc" '==' "$acc" && holds "$eacc" '==' "$eacc" &&
        awk -v a="$acc" -v e="$eacc" 'BEGIN { d = a * 100 - e; exit !(d < 0.006 && d > -0.006) }'
    check "$label" $? "log ${acc}, eval ${eacc}%"
}

# expect_error LABEL SUBSTRING -- COMMAND...: a check that COMMAND fails the way every bad input
# must: exit status 2, exactly one line on stderr containing SUBSTRING, and no file left behind
# in $T (neither an output file nor a temporary one). COMMAND may be a shell function.
expect_error() {
    local label=$1 want=$2
    if [ "${3-}" != "--" ]; then check "$label" 1 "expect_error: '--' expected before the command"; return; fi
    shift 3
    local before after rc lines new why=""
    before=$(find "$T" -mindepth 1 ! -name '.expect_*' | sort)
    "$@" >"$T/.expect_out" 2>"$T/.expect_err"
    rc=$?
    after=$(find "$T" -mindepth 1 ! -name '.expect_*' | sort)
    lines=$(wc -l <"$T/.expect_err")
    new=$(comm -13 <(echo "$before") <(echo "$after") | grep -v "^$T/log_errors$")
    [ "$rc" -eq 2 ] || why="exit status $rc, expected 2"
    [ -z "$why" ] && [ "$lines" -ne 1 ] && why="stderr has $lines lines, expected 1"
    [ -z "$why" ] && ! grep -qF -- "$want" "$T/.expect_err" && why="stderr lacks '$want'"
    [ -z "$why" ] && [ -n "$new" ] && why="left a file behind: $(echo "$new" | head -3 | tr '\n' ' ')"
    if [ -n "$why" ]; then check "$label" 1 "$why; stderr: $(head -c 400 "$T/.expect_err")"
    else check "$label" 0 "$(cat "$T/.expect_err")"; fi
}

# ------------------------------------------------------------------------------ running

# scaled N: N examples, times DTRAIN_TEST_SCALE (0 < scale <= 1; 1 when unset). CI's sanitizer
# pass sets 0.4 for the long end-to-end tests (signals, faults, Slurm): the same cases on fewer
# examples, since the sanitizers look at code paths, which do not depend on how many steps run.
scaled() {
    awk -v n="$1" -v s="${DTRAIN_TEST_SCALE:-1}" 'BEGIN { if (!(s > 0 && s <= 1)) s = 1; v = int(n * s); print v < 1 ? 1 : v }'
}

# run ARGS...: `dtrain run ARGS... --quiet` (mpiexec; ARGS start with -n N).
run() { "$DTRAIN" run "$@" --quiet; }

# require_mnist: stops the script with one failure unless MNIST is in $DTRAIN_DATA or data/.
require_mnist() {
    local d=${DTRAIN_DATA:-data}
    if [ ! -s "$d/mnist/train-images-idx3-ubyte" ] && [ ! -s "$d/mnist/train-images-idx3-ubyte.gz" ]; then
        echo "FAIL MNIST not found in $d/mnist: run scripts/get-data"; echo "0 passed, 1 failed"; exit 1
    fi
}

# require_sim: dtrain-sim beside $DTRAIN (built with SimGrid's smpicc). CI installs SimGrid
# (scripts/install-deps): a build without it fails here, not skips.
require_sim() {
    local d
    d=$(dirname "$DTRAIN")
    if ! [ -x "$d/sim/dtrain-sim" ] && ! [ -x "$d/dtrain-sim" ]; then
        check "dtrain-sim is built (needs SimGrid: apt-get install libsimgrid-dev)" 1 "no dtrain-sim beside $DTRAIN"
        finish
        exit
    fi
}

# ------------------------------------------------------------------------------ JSON logs
# A log (--log FILE) is JSON lines, each an object with a "type" ("config", "epoch",
# "transport", "summary", ...). The readers pick lines by their "type" field only, never by
# position or by text, so new line types, another order or other number formats (more
# digits, null for a non-finite number) change nothing.

# log_query LOG EXPR [ARG...]: prints the Python expression EXPR evaluated over LOG, where
#   of(TYPE)  the lines of that type, in file order (a list of dicts),
#   one(TYPE) the one line of that type (an error unless there is exactly one),
#   a         the list of ARGs (strings).
# Integral numbers print as integers, other numbers as Python prints them, null as null,
# lists and objects as compact JSON. On any error (no file, a line that is not JSON, a missing
# key) it prints nothing, says why on stderr, returns 1 and records the error: finish counts
# every such error as a failure, so a misread log never passes unnoticed.
log_query() {
    local out
    if out=$(/usr/bin/python3 - "$@" <<'EOF'
import json, sys
path, expr, a = sys.argv[1], sys.argv[2], sys.argv[3:]
def fail(why):
    sys.stderr.write(f"log_query {path}: {expr} {' '.join(a)}: {why}\n")
    sys.exit(1)
recs = []
try:
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    recs.append(json.loads(line))
                except ValueError as e:
                    fail(f"line {n} is not JSON ({e})")
except OSError as e:
    fail(e.strerror)
def of(t):
    return [r for r in recs if isinstance(r, dict) and r.get("type") == t]
def one(t):
    m = of(t)
    if len(m) != 1:
        raise LookupError(f'{len(m)} lines of type "{t}", expected 1')
    return m[0]
def plain(v):
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v
try:
    v = plain(eval(expr, {"of": of, "one": one, "a": a}))
except Exception as e:
    fail(f"{type(e).__name__}: {e}")
if isinstance(v, str):
    print(v)
elif isinstance(v, (int, float)) and not isinstance(v, bool):
    print(v)
else:
    print(json.dumps(v, separators=(",", ":")))
EOF
    ); then
        printf '%s\n' "$out"
    else
        echo "log_query $*" >>"$T/log_errors"
        return 1
    fi
}

# summary_field LOG KEY: KEY of the summary line (run totals: test_acc, msgs_sent, msgs_pct, ...).
summary_field() { log_query "$1" 'one("summary")[a[0]]' "$2"; }
# per_rank_sum LOG KEY [FROM [TO]]: KEY summed over the summary's per-rank entries whose
# "rank" is in [FROM, TO) (default: every rank).
per_rank_sum() {
    log_query "$1" 'sum(r[a[0]] for r in one("summary")["per_rank"] if int(a[1]) <= r["rank"] < int(a[2]))' \
        "$2" "${3:-0}" "${4:-1000000}"
}
# rank_field LOG RANK KEY: KEY of rank RANK's per-rank entry in the summary.
rank_field() {
    log_query "$1" '[r for r in one("summary")["per_rank"] if r["rank"] == int(a[0])][0][a[1]]' "$2" "$3"
}
# last_epoch_field LOG KEY: KEY of the epoch line with the highest "epoch".
last_epoch_field() { log_query "$1" 'max(of("epoch"), key=lambda e: e["epoch"])[a[0]]' "$2"; }
# epoch_fields LOG KEY: KEY of every epoch line, in epoch order, as a JSON list.
epoch_fields() { log_query "$1" '[e[a[0]] for e in sorted(of("epoch"), key=lambda e: e["epoch"])]' "$2"; }
# line_count LOG TYPE: how many lines of that type.
line_count() { log_query "$1" 'len(of(a[0]))' "$2"; }
# acc LOG: the final test accuracy. bytes LOG, msgs LOG: bytes and messages sent by all ranks.
acc() { summary_field "$1" test_acc; }
bytes() { per_rank_sum "$1" bytes_sent; }
msgs() { per_rank_sum "$1" msgs_sent; }

# ------------------------------------------------------------------------------ the end

# finish: counts every log-reading error as a failure, prints "N passed, M failed" and exits
# with status 0 only if nothing failed.
finish() {
    if [ -s "$T/log_errors" ]; then
        while IFS= read -r e; do echo "FAIL reading a log: $e"; fails=$((fails + 1)); done <"$T/log_errors"
    fi
    echo "$passes passed, $fails failed"
    [ "$fails" -eq 0 ]
}
