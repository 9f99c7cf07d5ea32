#!/usr/bin/env bash
# What libdtrain.so exports (nm -D --defined-only) is exactly the library's interface: every
# function the public headers (include/dtrain.h, include/dtrain/*.h) declare, found by the
# compiler (gcc -aux-info: the prototypes of the headers, not the static inline ones), their
# extern arrays (dt_optim_names, ...), and the MPI functions the library intercepts, as
# dtrain.h's "MPI calls libdtrain intercepts" lists them (src/comm/pmpi.c). The library is
# compiled with -fvisibility=hidden and the public declarations carry DT_API (dtrain.h): an
# internal function exported, or a public one left hidden, fails here, named.
# The library checked: the build's (beside the dtrain binary), or $DTRAIN_LIB.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$(dirname "$DTRAIN")" && pwd)
LIB=${DTRAIN_LIB:-$BUILD/libdtrain.so}
CC=${CC:-cc}

[ -e "$LIB" ]; check "the shared library is there" $? "$LIB"
# AddressSanitizer adds an ODR indicator, __odr_asan.NAME, beside each exported variable: the
# instrumentation's, not the library's (the sanitizer pass of CI builds with it).
nm -D --defined-only "$LIB" 2>"$T/nm.err" | awk 'NF == 3 { print $3 }' | sed 's/@.*//' | grep -v '^__odr_asan[.]' |
    sort -u >"$T/exported"
[ -s "$T/exported" ]; check "nm -D --defined-only" $? "$(wc -l <"$T/exported") symbols $(head -c 200 "$T/nm.err")"

# the functions the headers declare (not static): the compiler's list of every prototype
# (<mpi.h>: the folder the build found it in)
mpi_inc=$(sed -n 's/^MPI_C_HEADER_DIR:PATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
printf '#include <dtrain.h>\n#include <dtrain/scheme.h>\n#include <dtrain/server.h>\n' |
    $CC -std=c11 -fsyntax-only -aux-info "$T/aux" -I"$SRC/include" ${mpi_inc:+-I"$mpi_inc"} -x c - 2>"$T/cc.err"
check "the public headers' prototypes (gcc -aux-info)" $? "$(head -c 300 "$T/cc.err")"
for h in "$SRC"/include/dtrain.h "$SRC"/include/dtrain/*.h; do
    grep -F "/* $h:" "$T/aux" | grep -v '^/\*[^*]*\*/ static ' | grep -oE '\bdt_[a-z0-9_]+ \(' | tr -d ' ('
    # extern arrays of names
    grep -hoE '^(DT_API )?extern [^;(]*\bdt_[a-z0-9_]+\[\]' "$h" | grep -oE 'dt_[a-z0-9_]+\[' | tr -d '['
done | sort -u >"$T/public"
n_public=$(wc -l <"$T/public")
compare "the headers declare the library's functions" "$n_public" '>=' 100
# the interceptors, as dtrain.h documents them
sed -n '/MPI calls libdtrain intercepts/,/^ \* Why:/p' "$SRC/include/dtrain.h" | grep -oE '\bMPI_[A-Z][a-z_]+' | sort -u >"$T/mpi"
n_mpi=$(wc -l <"$T/mpi")
compare "dtrain.h lists the intercepted MPI calls" "$n_mpi" '>=' 10
sort -u "$T/public" "$T/mpi" >"$T/expected"

extra=$(comm -13 "$T/expected" "$T/exported" | head -20 | tr '\n' ' ')
[ -z "$extra" ]; check "nothing exported beyond the headers and the MPI interceptors" $? "${extra:-none} ($(wc -l <"$T/exported") exported)"
missing=$(comm -23 "$T/expected" "$T/exported" | head -20 | tr '\n' ' ')
[ -z "$missing" ]; check "every public function and interceptor exported" $? "missing: ${missing:-none} ($n_public public, $n_mpi MPI)"
finish
