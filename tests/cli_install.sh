#!/usr/bin/env bash
# The installed library: `cmake --install` of this build into a temporary prefix, then
# examples/train_one.c and examples/train_mpi.c compiled against that prefix only (with
# pkg-config, shared and static, and with find_package(dtrain) in a tiny CMake project) and run:
# each trains a short MNIST run and exits 0 only when its test accuracy reaches the bar it is
# given (a bar of 1.01 must make it exit 1). Also: the installed header compiles alone.
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
finish
