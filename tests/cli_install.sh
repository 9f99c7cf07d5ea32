#!/usr/bin/env bash
# The installed library: `cmake --install` of this build into a temporary prefix, then
# examples/train_one.c and examples/train_mpi.c compiled against that prefix only (with
# pkg-config, shared and static, and with find_package(dtrain) in a tiny CMake project) and run:
# each trains a short MNIST run and exits 0 only when its test accuracy reaches the bar it is
# given (a bar of 1.01 must make it exit 1). Also: the installed headers compile alone.
# A scheme of one's own (examples/my_scheme.c, word for word the worked example of
# include/dtrain/scheme.h) built both ways: under `mpiexec -n 2 ... train` its log's config,
# epoch and summary lines have the keys of a built-in scheme's (fedavg's, the installed
# dtrain's; the summary plus the scheme's own member), its messages are 25% of the baseline
# (every 4th of 16 steps); `run -n 2` starts the ranks from the program itself (its scheme
# would be unknown to bin/dtrain).
. "$(dirname "$0")/lib.sh"
require_mnist
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$(dirname "$DTRAIN")" && pwd)
export DTRAIN_DATA=${DTRAIN_DATA:-$SRC/data} OPENBLAS_NUM_THREADS=1
P=$T/prefix
CC=${CC:-cc}
# a sanitizer build's library is instrumented: its users compile and link with the same
# sanitizers (tests/CMakeLists.txt says which); the examples' own leaks are not this test's
# subject (the library's are checked by every other test), so LeakSanitizer is off for them
SAN=${DTRAIN_SANITIZE_FLAGS:-}
if [ -n "$SAN" ]; then
    CC="$CC $SAN"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

cmake --install "$BUILD" --prefix "$P" >"$T/install.log" 2>&1
check "cmake --install" $? "into $P"
missing=""
for f in bin/dtrain lib/libdtrain.a lib/libdtrain.so lib/libdtrain.so.0.9 include/dtrain.h \
         include/dtrain/scheme.h include/dtrain/comm.h \
         lib/pkgconfig/dtrain.pc lib/cmake/dtrain/dtrainConfig.cmake \
         lib/cmake/dtrain/dtrainConfigVersion.cmake lib/cmake/dtrain/dtrainTargets.cmake; do
    [ -e "$P/$f" ] || missing="$missing $f"
done
[ -z "$missing" ]; check "installed files" $? "missing:${missing:- none}"
ver=$(sed -n 's/^project(dtrain VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ -e "$P/lib/libdtrain.so.$ver" ]; check "shared library versioned" $? "libdtrain.so.$ver"
"$P/bin/dtrain" --help 2>&1 | grep -q "^usage: dtrain"; check "installed dtrain runs" $? "$P/bin/dtrain --help"

# the header alone, with nothing but its include directory
echo '#include <dtrain.h>' | $CC -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$P/include" -x c - 2>"$T/hdr.err"
check "dtrain.h self-contained" $? "$(head -c 300 "$T/hdr.err")"

# (a) pkg-config
export PKG_CONFIG_PATH=$P/lib/pkgconfig
pc_ver=$(pkg-config --modversion dtrain)
[ "$pc_ver" = "$ver" ]; check "pkg-config version" $? "$pc_ver (expected $ver)"
# the scheme header alone: it needs MPI's include folder, which dtrain.pc's flags carry
# shellcheck disable=SC2046
echo '#include <dtrain/scheme.h>' | $CC -std=c11 -Wall -Wextra -Werror -fsyntax-only $(pkg-config --cflags dtrain) -x c - 2>"$T/hdr.err"
check "dtrain/scheme.h self-contained (pkg-config --cflags)" $? "$(head -c 300 "$T/hdr.err")"
# the header's worked example is examples/my_scheme.c below its opening comment, word for word
sed -n '/--- example begin ---/,/--- example end ---/p' "$SRC/include/dtrain/scheme.h" | sed '1d;$d' |
    sed -e 's/^ \* \{0,1\}//' >"$T/header_example.c"
awk 'started; /^ \*\/$|\*\/$/ && !started { started = 1; getline; }' "$SRC/examples/my_scheme.c" >"$T/file_example.c"
[ -s "$T/header_example.c" ] && cmp -s "$T/header_example.c" "$T/file_example.c"
check "the header's example is examples/my_scheme.c" $? "$(diff "$T/header_example.c" "$T/file_example.c" | head -5)"
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Wextra -Werror -O2 "$SRC/examples/my_scheme.c" $(pkg-config --cflags --libs dtrain) -o "$T/my_scheme" 2>"$T/cc.err"
check "pkg-config build of my_scheme.c" $? "$(head -c 300 "$T/cc.err")"
# shellcheck disable=SC2046
$CC -std=c11 -O2 "$SRC/examples/train_one.c" $(pkg-config --cflags --libs dtrain) -o "$T/one_shared" 2>"$T/cc.err"
check "pkg-config shared build" $? "$(head -c 300 "$T/cc.err")"
ldd "$T/one_shared" 2>/dev/null | grep -q "libdtrain.so"; check "linked to libdtrain.so" $? "ldd one_shared"
# static: the same flags with --static, libdtrain.a by name (-l: takes the archive over the .so)
libs=$(pkg-config --static --libs dtrain)
# shellcheck disable=SC2046,SC2086
$CC -std=c11 -O2 "$SRC/examples/train_one.c" $(pkg-config --cflags dtrain) ${libs/-ldtrain/-l:libdtrain.a} -o "$T/one_static" 2>"$T/cc.err"
check "pkg-config static build" $? "$(head -c 300 "$T/cc.err")"
! ldd "$T/one_static" 2>/dev/null | grep -q "libdtrain"; check "static: no libdtrain.so" $? "ldd one_static"
# shellcheck disable=SC2046
$CC -std=c11 -O2 "$SRC/examples/train_mpi.c" $(pkg-config --cflags --libs dtrain mpich) -o "$T/mpi_shared" 2>"$T/cc.err"
check "pkg-config MPI build" $? "$(head -c 300 "$T/cc.err")"
# static with dt_train (every scheme, the one-sided transport and its XXH64): dtrain.pc names
# everything libdtrain.a needs (train_one.c alone pulls in too little of the archive to tell)
# shellcheck disable=SC2046,SC2086
$CC -std=c11 -O2 "$SRC/examples/train_mpi.c" $(pkg-config --cflags dtrain) ${libs/-ldtrain/-l:libdtrain.a} -o "$T/mpi_static" 2>"$T/cc.err"
check "pkg-config static MPI build" $? "$(head -c 300 "$T/cc.err")"

# (b) find_package(dtrain)
mkdir -p "$T/proj"
cat >"$T/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.18)
project(uses_dtrain C)
find_package(dtrain $ver REQUIRED)
add_executable(one_static "$SRC/examples/train_one.c")
target_link_libraries(one_static PRIVATE dtrain::dtrain_static)
add_executable(mpi_shared "$SRC/examples/train_mpi.c")
target_link_libraries(mpi_shared PRIVATE dtrain::dtrain MPI::MPI_C)
add_executable(my_scheme "$SRC/examples/my_scheme.c")
target_link_libraries(my_scheme PRIVATE dtrain::dtrain)
CM
cmake -S "$T/proj" -B "$T/proj/build" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$SAN" >"$T/cm.log" 2>&1 &&
    cmake --build "$T/proj/build" >>"$T/cm.log" 2>&1
check "find_package(dtrain) build" $? "$(grep -m3 -i error "$T/cm.log")"

# run them: a short MNIST run each, the bar met; an unreachable bar must fail
export LD_LIBRARY_PATH=$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for exe in one_shared one_static proj/build/one_static; do
    out=$("$T/$exe" 4096 0.80 2>&1); check "$exe trains" $? "$out"
    "$T/$exe" 256 1.01 >/dev/null 2>&1; rc=$?
    [ "$rc" -eq 1 ]; check "$exe: a missed bar fails" $? "exit $rc (expected 1)"
done
for exe in mpi_shared proj/build/mpi_shared; do
    out=$(mpiexec -n 2 "$T/$exe" 0.70 2>&1); check "mpiexec -n 2 $exe trains" $? "$out"
    mpiexec -n 2 "$T/$exe" 1.01 >/dev/null 2>&1; rc=$?
    [ "$rc" -eq 1 ]; check "$exe: a missed bar fails" $? "exit $rc (expected 1)"
done
# the scheme of one's own, as dtrain runs a built-in one
S=(--epochs 1 --train-limit 2048 --test-limit 500 --batch 64 --no-save)
"$T/my_scheme" train --help >"$T/my_help" 2>&1
grep -q "every-k  *average the gradients every K steps" "$T/my_help" && grep -q -- "--reduce-every N" "$T/my_help"
check "my_scheme train --help lists every-k and --reduce-every" $? "$(grep -i -m3 "every" "$T/my_help")"
out=$(mpiexec -n 2 "$T/my_scheme" train --algo every-k --reduce-every 4 "${S[@]}" --log "$T/mine.jsonl" 2>&1)
check "mpiexec -n 2 my_scheme train --algo every-k trains" $? "$(tail -3 <<<"$out")"
out=$(mpiexec -n 2 "$P/bin/dtrain" train --algo fedavg --local-steps 4 "${S[@]}" --log "$T/builtin.jsonl" 2>&1)
check "mpiexec -n 2 dtrain train --algo fedavg trains" $? "$(tail -3 <<<"$out")"
for t in config epoch summary; do
    k_mine=$(log_query "$T/mine.jsonl" '" ".join(sorted(set(one(a[0])) - {"reduced_steps"}))' $t)
    k_builtin=$(log_query "$T/builtin.jsonl" '" ".join(sorted(one(a[0])))' $t)
    [ -n "$k_mine" ] && [ "$k_mine" = "$k_builtin" ]
    check "every-k's $t line has the keys of a built-in scheme's" $? "mine: $k_mine; built-in: $k_builtin"
done
k_mine=$(log_query "$T/mine.jsonl" '" ".join(sorted(one("summary")["per_rank"][0]))')
k_builtin=$(log_query "$T/builtin.jsonl" '" ".join(sorted(one("summary")["per_rank"][0]))')
[ -n "$k_mine" ] && [ "$k_mine" = "$k_builtin" ]; check "... and its summary's per-rank counters" $? "mine: $k_mine"
name=$(summary_field "$T/mine.jsonl" algo); [ "$name" = every-k ]; check "every-k: the log names it" $? "algo: $name"
compare "every-k: its flag in the config line" "$(log_query "$T/mine.jsonl" 'one("config")["scheme"]["reduce-every"]')" == 4
compare "every-k: 16 steps" "$(summary_field "$T/mine.jsonl" steps)" == 16
compare "every-k: 4 of 16 steps averaged (its own summary member)" "$(summary_field "$T/mine.jsonl" reduced_steps)" == 4
compare "every-k: 25% of the messages (its own baseline)" "$(summary_field "$T/mine.jsonl" msgs_pct)" == 25
compare "every-k: the models' spread reported" "$(summary_field "$T/mine.jsonl" spread_before_avg)" '>' 0
# a scheme's flag named as one of the command's own would never reach it: refused, named
sed 's/"reduce-every"/"epochs"/' "$SRC/examples/my_scheme.c" >"$T/clash.c"
# shellcheck disable=SC2046
$CC -std=c11 -O2 "$T/clash.c" $(pkg-config --cflags --libs dtrain) -o "$T/clash" 2>"$T/cc.err"
check "a scheme declaring --epochs builds" $? "$(head -c 300 "$T/cc.err")"
expect_error "... and the command refuses it, naming the scheme" \
    "--epochs: a flag of dtrain itself, declared again by a scheme (every-k)" -- "$T/clash" train --algo every-k
# dtrain run from the find_package build: the supervisor starts the ranks from my_scheme itself
out=$("$T/proj/build/my_scheme" run -n 2 --algo every-k --reduce-every 8 "${S[@]}" --quiet --log "$T/run.jsonl" 2>&1)
check "my_scheme run -n 2 --algo every-k (find_package build) trains" $? "$(tail -3 <<<"$out")"
compare "... 12.5% of the messages (every 8th step)" "$(summary_field "$T/run.jsonl" msgs_pct)" == 12.5
finish
