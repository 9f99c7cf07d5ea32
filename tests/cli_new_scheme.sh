#!/usr/bin/env bash
# Adding a scheme is one file and one registry line: copies the sources, adds
# tests/schemes/signsgd.c to src/schemes/ and DT_SCHEME(signsgd) to schemes.def, builds
# the command, and trains with the new scheme through it (its flag parsed, checked, in
# --help and in the log's configuration line).
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
W="$T/tree"
mkdir -p "$W"
(cd "$SRC" && tar cf - --exclude=tests/data CMakeLists.txt cmake include src tests) | (cd "$W" && tar xf -)
mkdir -p "$W/tests/data"
cp "$SRC/tests/schemes/signsgd.c" "$W/src/schemes/signsgd.c"
echo 'DT_SCHEME(signsgd)' >>"$W/src/schemes/schemes.def"
changed=$(cd "$SRC" && diff -rq src "$W/src" | wc -l)
check "the new scheme touches two files of src/" $([ "$changed" -eq 2 ]; echo $?) "$changed files differ"
cmake -S "$W" -B "$W/build" -DCMAKE_BUILD_TYPE=Release -DDTRAIN_NATIVE=ON >"$T/cmake.out" 2>&1 &&
    cmake --build "$W/build" -j2 --target dtrain_cli >>"$T/cmake.out" 2>&1
rc=$?
check "the tree with the new scheme builds" $rc "$(tail -3 "$T/cmake.out")"
[ $rc -eq 0 ] || { finish; exit; }
NEW="$W/build/dtrain"

"$NEW" train --help >"$T/help"
grep -q "signsgd  *signSGD with majority vote" "$T/help" && grep -q -- "--sign-scale X *signsgd: step length" "$T/help"
check "--help lists the scheme and its flag" $? "$(grep -i sign "$T/help" | head -3)"

C=(--model mlp --data mnist --epochs 1 --max-steps 150 --batch 32 --lr 0.05 --train-limit 8000 --test-limit 1000 --no-save)
"$NEW" run -n 2 --algo signsgd --sign-scale 0.02 "${C[@]}" --quiet --log "$T/s.jsonl"
check "dtrain run --algo signsgd trains" $? ""
compare "... above chance (10%): test accuracy > 60%" "$(acc "$T/s.jsonl")" '>' 0.6
compare "... sending every step (100% of the messages)" "$(summary_field "$T/s.jsonl" msgs_pct)" == 100
compare "... the configuration line names its flag's value" "$(log_query "$T/s.jsonl" 'one("config")["scheme"][a[0]]' sign-scale)" == 0.02

# the flag's declared range is checked, in one line, before any rank starts
expect_error "a bad --sign-scale" "--sign-scale -1: expected a number > 0" -- "$NEW" run -n 2 --algo signsgd --sign-scale -1 "${C[@]}"
# and the dtrain without the file does not know it (the comparison can fail)
expect_error "the dtrain without the file refuses --algo signsgd" "--algo signsgd: unknown scheme" -- "$DTRAIN" train --algo signsgd "${C[@]}"

finish
