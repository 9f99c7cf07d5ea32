# Shared by the fault tests (cli_faults.sh, cli_supervisor.sh, cli_sweep.sh...), sourced after lib.sh: finding
# a rank's, its guard's and its launcher process's pids, waiting for a condition, and running
# `dtrain run` in the background with its output, status and time kept in $T.
# launched_rank R: the processes of this script's running job that are its rank R (every job
# here names a file in $T, so other dtrain jobs on the machine are not ours): under mpiexec
# alone the rank; under dtrain run also its guard, until it retitles itself
launched_rank() {
    local p
    for p in $(pgrep -f "dtrain train.*$T"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxE "PMI_RANK=$1|OMPI_COMM_WORLD_RANK=$1" && echo "$p"
    done
}
# rank_pid R: the pid of rank R of this script's running job under dtrain run (the rank under
# its guard, not the guard, which is "dtrain guard rank R" in ps)
rank_pid() {
    local p pp
    for p in $(launched_rank "$1"); do
        pp=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || continue
        [ "$(cat "/proc/$pp/comm" 2>/dev/null)" = dtrain-guard ] && { echo "$p"; return 0; }
    done
    return 1
}

# wait_until SECONDS COMMAND...: polls COMMAND every 0.1 s; fails after SECONDS
wait_until() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.1
    done
}
# logged LOG TYPE N: LOG holds N lines of that type or more (grep, not a JSON reader: polled
# every 0.1 s, a Python start each time lagged seconds behind on a loaded machine; rank 0 writes
# each line whole, its type first). epochs_logged LOG N: N epoch lines.
logged() {
    local n
    n=$(grep -c "\"type\":\"$2\"" "$1" 2>/dev/null) && [ "$n" -ge "$3" ]
}
epochs_logged() { logged "$1" epoch "$2"; }
has_pid() { rank_pid "$1" >/dev/null; }
checkpointed() { [ -s "$T/ck" ]; } # the manifest: a committed set

# job NAME ARGS...: starts `dtrain run ARGS...` in the background (out/err/rc in $T/NAME.*)
job() {
    local name=$1
    shift
    ( "$DTRAIN" run "$@" >"$T/$name.out" 2>"$T/$name.err"; echo $? >"$T/$name.rc" ) &
    JOB=$!
}
# ended NAME SECONDS: waits for the job; its exit status in RC, seconds it took after the fault in TOOK
ended() {
    local t0=$SECONDS
    wait_until "$2" test -s "$T/$1.rc"
    TOOK=$((SECONDS - t0))
    RC=$(cat "$T/$1.rc" 2>/dev/null || echo none)
    wait "$JOB" 2>/dev/null
}
errors() { grep -c '^dtrain: error:' "$T/$1.err"; }
# said NAME: how many lines dtrain said about the job's end (errors and warnings; a restart's
# own line is not counted)
said() { grep -c '^dtrain: \(error\|warning\):' "$T/$1.err"; }
# guard_pid R: the pid of rank R's guard (named "dtrain guard rank R" in ps)
guard_pid() {
    local p
    for p in $(pgrep -f "^dtrain guard rank $1\$"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q "^DTRAIN_BOARD=$T/" && { echo "$p"; return 0; }
    done
    return 1
}
# proxy_pid R: the launcher's process above rank R's guard (MPICH: hydra_pmi_proxy)
proxy_pid() { local g; g=$(guard_pid "$1") && awk '{print $4}' "/proc/$g/stat"; }
# busy_cores, then idle_cores: a loaded machine (every core busy with other work), and back
busy_cores() {
    HOGS=()
    for _ in $(seq "$(nproc)"); do ( while :; do :; done ) & HOGS+=($!); done
}
idle_cores() { kill "${HOGS[@]}" 2>/dev/null; wait "${HOGS[@]}" 2>/dev/null; }
# no_rank_left: none of this script's ranks or guards is running
no_rank_left() { ! pgrep -f "dtrain train.*$T" >/dev/null && ! guard_pid '[0-9]*' >/dev/null; }

