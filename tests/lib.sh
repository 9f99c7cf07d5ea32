# Shared by the command-line tests (tests/cli_*.sh), sourced first; $1 is the dtrain binary.
# Gives: DTRAIN, a temporary folder T (removed at exit), check, summary_field, per_rank_sum,
# and finish (prints "N passed, M failed" and sets the exit status).
set -u
DTRAIN=${1:?usage: $(basename "$0") path/to/dtrain}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0 passes=0

check() { # LABEL EXIT-STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "ok   $1: $3"; passes=$((passes + 1)); else echo "FAIL $1: $3"; fails=$((fails + 1)); fi
}
# A figure of a JSON log's summary line (its first occurrence: the total, not a rank's).
summary_field() { grep '"type":"summary"' "$1" | grep -o "\"$2\":[-0-9.e]*" | head -1 | cut -d: -f2; }
# The sum of a per-rank figure over the summary's per_rank entries.
per_rank_sum() { grep '"type":"summary"' "$1" | grep -o '"per_rank".*' | grep -o "\"$2\":[0-9]*" | cut -d: -f2 | paste -sd+ | bc; }
finish() {
    echo "$passes passed, $fails failed"
    [ "$fails" -eq 0 ]
}
