#!/usr/bin/env bash
# Faults of what runs around the ranks, as a user's cluster meets them: a host the launcher
# cannot reach, a launcher that starts nothing, the guard of a rank and the launcher's own
# process (hydra_pmi_proxy) killed or stopped, dtrain run interrupted, mpiexec killed or sent
# SIGTERM, a rank that fails on its own. Each ends in bounded time with exactly one line saying what
# happened; with --checkpoint and --max-restarts the job ends with the uninterrupted run's
# weights; no rank is left running.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_helpers.sh"
require_mnist
export DTRAIN_RUN_DIR=$T
C=(--model cnn1 --data mnist --train-limit $(scaled 12000) --test-limit 1000 --batch 64 --lr 0.05 --seed 5 --quiet)
TIMEOUT=5

# 1. hosts: a name that does not resolve, given with --hosts and in a hostfile, ends within 30 s
#    naming the host and ssh's reason; a hostfile naming nothing, a launcher that starts no rank
#    and a -n that cannot fit here are refused in one line
printf 'nosuchhost-dt2\n' >"$T/hosts"
for how in "--hosts nosuchhost-dt1" "--hostfile $T/hosts"; do
    host=${how##*/}; [ "$host" = hosts ] && host=nosuchhost-dt2 || host=${how#--hosts }
    t0=$SECONDS
    timeout 120 "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 1 --no-save $how >"$T/h.out" 2>"$T/h.err"
    rc=$? took=$((SECONDS - t0))
    compare "$how: a host that cannot be reached ends the job, non-zero" "$rc" == 2 "status $rc"
    compare "... within 30 s" "$took" '<=' 30 "$took s"
    compare "... in one line" "$(said h)" == 1 "$(head -c 300 "$T/h.err")"
    grep -q "^dtrain: error: the launcher could not start the ranks: .*$host" "$T/h.err"
    check "... naming the host and the launcher's reason" $? "$(head -c 300 "$T/h.err")"
done
: >"$T/empty"
expect_error "an empty hostfile" "names no host" -- run -n 2 "${C[@]}" --epochs 1 --hostfile "$T/empty"
expect_error "-n beyond 16 ranks a core on one machine" "more than 16 ranks per core" -- run -n 100000 "${C[@]}" --epochs 1
DTRAIN_MPIEXEC=true "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 1 --no-save >"$T/t.out" 2>"$T/t.err"
compare "a launcher that starts no rank: non-zero" $? == 2
grep -q "^dtrain: error: the launcher (true) ended with status 0 but started 0 of 2 ranks" "$T/t.err"
check "... saying nothing was trained" $? "$(head -c 300 "$T/t.err")"

# 2. the guards and the launcher's process: killed (-9) or stopped (-STOP) once training runs.
#    Each ends the job within --timeout + 10 s of the fault (a stopped one once training ended)
#    in one line naming the rank; with a checkpoint and --max-restarts 1 the job finishes
#    with the uninterrupted run's weights (allreduce is deterministic). (6 epochs: the fault
#    comes after the first and its checkpoint, and an epoch takes a third of a second: on a
#    loaded machine 3 could be over before it.)
"$DTRAIN" run -n 4 --algo allreduce "${C[@]}" --epochs 6 --out "$T/straight.w" 2>"$T/straight.err"
check "allreduce, uninterrupted" $? "$(head -c 300 "$T/straight.err")"
for fault in "9 guard 2" "STOP guard 1" "9 proxy 3" "STOP proxy 0"; do
    read -r sig what victim <<<"$fault"
    name="${what}_$sig"
    rm -f "$T/ck"*
    job "$name" -n 4 --algo allreduce "${C[@]}" --epochs 6 --timeout $TIMEOUT --out "$T/$name.w" --log "$T/$name.jsonl" \
        --checkpoint "$T/ck" --max-restarts 1
    wait_until 120 epochs_logged "$T/$name.jsonl" 1 && wait_until 30 checkpointed && wait_until 20 guard_pid "$victim" >/dev/null
    [ "$what" = guard ] && pid=$(guard_pid "$victim") || pid=$(proxy_pid "$victim")
    [ "$what" = guard ] && named="dtrain guard rank $victim" || named=hydra_pmi_proxy
    [ "$(tr '\0' ' ' <"/proc/$pid/cmdline" | sed 's/ *$//')" = "$named" ] || [ "$(cat "/proc/$pid/comm")" = "$named" ]
    check "$what of rank $victim: named '$named' in ps" $? "$(ps -o pid=,comm=,args= -p "$pid")"
    kill -"$sig" "$pid"
    if [ "$sig" = 9 ]; then
        # the attempt ends and the restart begins within --timeout + 10 s of the fault
        wait_until $((TIMEOUT + 10)) grep -q "^dtrain: restart 1 of 1" "$T/$name.err"
        check "kill -9 of the $what of rank $victim: the attempt ends within --timeout + 10 s" $? "$(head -c 400 "$T/$name.err")"
        ended "$name" 180
    else
        # a stopped guard or proxy holds the job only once the ranks finished: from then on
        ended "$name" 180
        since=$(($(date +%s) - $(stat -c %Y "$T/$name.w" 2>/dev/null || echo 0)))
        compare "kill -STOP of the $what of rank $victim: the job ends within --timeout + 10 s of the ranks' end" \
            "$since" '<=' $((TIMEOUT + 10)) "$since s"
    fi
    compare "... the run finishes" "$RC" == 0 "status $RC; $(head -c 400 "$T/$name.err")"
    compare "... with one line on the fault" "$(said "$name")" == 1 "$(head -c 600 "$T/$name.err")"
    if [ "$what" = guard ]; then pat="the guard of rank $victim on .*(pid $pid)"; else pat="the launcher's process above ranks\? [0-9, ]*$victim[0-9, ]* on .*(pid $pid, hydra_pmi_proxy"; fi
    grep -q "^dtrain: \(error\|warning\): $pat" "$T/$name.err"
    check "... naming it and its rank" $? "$(head -c 600 "$T/$name.err")"
    identical "... with the uninterrupted run's weights" "$T/straight.w" "$T/$name.w"
    kill -CONT "$pid" 2>/dev/null
    wait_until 10 no_rank_left
    check "... and no rank or guard is left" $? ""
done

# 3. the user's Ctrl-C or SIGTERM to dtrain run, mpiexec killed, and SIGTERM to mpiexec (which
#    passes it on to the ranks: an interruption, though not dtrain run's own): one line, no
#    rank left. interrupt_case FAULT NAME
interrupt_case() {
    local fault=$1 name=$2
    ( exec "$DTRAIN" run -n 4 --algo allreduce "${C[@]}" --epochs 6 --no-save --log "$T/$name.jsonl" \
        >"$T/$name.out" 2>"$T/$name.err" ) &
    J=$!
    wait_until 120 epochs_logged "$T/$name.jsonl" 1
    case $fault in
        mpiexec) kill -9 "$(pgrep -P $J)" ;;
        mpiexec_TERM) kill -TERM "$(pgrep -P $J)" ;;
        *) kill -"$fault" $J ;;
    esac
    t0=$SECONDS
    wait $J
    rc=$?
    if [ "$fault" = mpiexec ]; then
        compare "mpiexec killed: status 2" $rc == 2
        pat="the launcher (mpiexec) was killed by signal 9 (Killed) during epoch"
    elif [ "$fault" = mpiexec_TERM ]; then
        compare "SIGTERM to mpiexec ($name): status 143, as to dtrain run" $rc == 143
        pat="interrupted (Terminated, passed on to the ranks by the launcher) during epoch"
    else
        compare "SIG$fault to dtrain run: status 128 + signal" $rc == $((128 + $(kill -l "$fault")))
        pat="interrupted (.*) during epoch"
    fi
    compare "... within 10 s" $((SECONDS - t0)) '<=' 10
    compare "... one line" "$(said "$name")" == 1 "$(head -c 400 "$T/$name.err")"
    grep -q "^dtrain: error: $pat" "$T/$name.err"
    check "... saying what happened" $? "$(head -c 400 "$T/$name.err")"
    wait_until 10 no_rank_left
    check "... and no rank or guard is left" $? ""
}
for fault in INT TERM mpiexec mpiexec_TERM; do interrupt_case $fault "i_$fault"; done
# (the signal passed on, with every core busy)
busy_cores
interrupt_case mpiexec_TERM i_mpiexec_TERM_loaded
idle_cores

# 4. a rank that fails on its own says why, and nothing more is said
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 1 --no-save --log /dev/full >"$T/full.out" 2>"$T/full.err"
compare "a rank failing on its own (--log /dev/full): status 2" $? == 2
compare "... one line" "$(said full)" == 1 "$(head -c 400 "$T/full.err")"
grep -q "^dtrain: error: .*/dev/full.*No space left on device" "$T/full.err"
check "... naming the file and the cause" $? "$(head -c 400 "$T/full.err")"
# ... also when the launcher loses the rank's own line on its way (MPI_Abort may end MPICH's
# proxy before it passes the line on): the rank's board holds the line, and it is said once
printf '#!/bin/sh\nexec mpiexec "$@" 2>/dev/null\n' >"$T/mute-mpiexec"
chmod +x "$T/mute-mpiexec"
DTRAIN_MPIEXEC="$T/mute-mpiexec" "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 1 --no-save --log /dev/full \
    >"$T/lostline.out" 2>"$T/lostline.err"
compare "a rank failing on its own, its line lost by the launcher: status 2" $? == 2
compare "... one line" "$(said lostline)" == 1 "$(head -c 400 "$T/lostline.err")"
grep -q "^dtrain: error: rank 0: .*/dev/full.*No space left on device" "$T/lostline.err"
check "... the rank's own, from its board" $? "$(head -c 400 "$T/lostline.err")"

finish
