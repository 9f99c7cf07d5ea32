# Sourced by scripts/experiments and scripts/tuned (from the repository root): running one
# comparison run into $OUT/NAME.jsonl (+ NAME.out), skipped when its log has a summary; the
# runs on namespace hosts (golink) under a time cap $CAP, DDP through bench/ddp_mnist.py.
# golink needs: DTRAIN, OUT, CAP, SCHEMES (names to run), NH (hosts), MASTER, PY, BLAS.
go() { # NAME ARGS...
    local name=$1; shift
    if done_log "$OUT/$name.jsonl"; then echo "$name: done already"; return; fi
    echo "$name: dtrain run $*"
    "$DTRAIN" run "$@" --log "$OUT/$name.jsonl" --no-save >"$OUT/$name.out" 2>&1 || echo "$name: FAILED (see $OUT/$name.out)"
    done_log "$OUT/$name.jsonl" && tail -1 "$OUT/$name.out"
}
# done_log LOG: LOG has its summary line (the run finished)
done_log() { [ -f "$1" ] && scripts/dtrainlog.py done "$1" 2>/dev/null; }
# links: a run stopped by the time cap gets a summary made from its log's last evaluation, with
# capped_s (scripts/table: "not in CAP s"), so that the table lists it and a rerun skips it
cap_summary() { # LOG CAP
    python3 - "$1" "$2" <<'EOP'
import json, sys
sys.dont_write_bytecode = True
sys.path.insert(0, "scripts")
import dtrainlog  # a last line cut by the kill is left out
path, cap = sys.argv[1], float(sys.argv[2])
try:
    run = dtrainlog.read_run(path)
except dtrainlog.LogError as e:
    sys.exit(f"cap_summary: {e}")
cfg, evals, epoch_s, last, reached = run.config, [], 0.0, None, None
for e in run.epoch_lines():  # an epoch's training seconds so far, as an eval line has them
    epoch_s += float(e.get("seconds") or 0)
    evals.append(dict(e, train_s=epoch_s))
evals += run.eval_lines()
for rec in sorted((r for r in evals if r.get("test_acc") is not None), key=lambda r: float(r.get("train_s") or 0)):
    last = rec
    tgt = cfg.get("target_acc")
    if reached is None and tgt is not None and rec["test_acc"] >= tgt:
        reached = rec
acc = last["test_acc"] if last else None
summary = {"type": "summary", "model": cfg.get("model"), "data": cfg.get("data"), "algo": cfg.get("algo"),
           "ranks": cfg.get("ranks"), "batch": cfg.get("batch"), "lr": cfg.get("lr"),
           "steps": last.get("step") if last else None, "test_acc": acc,
           "msgs_sent": last.get("msgs_sent") if last else None, "msgs_pct": last.get("msgs_pct") if last else None,
           "mb_sent": last.get("mb_sent") if last else None, "wall_s": cap,
           "train_s": last.get("train_s") if last else None, "target_acc": cfg.get("target_acc"),
           "time_to_target_s": reached.get("train_s") if reached else None,
           "steps_to_target": reached.get("step") if reached else None,
           "msgs_to_target": reached.get("msgs_sent") if reached else None,
           "mb_to_target": reached.get("mb_sent") if reached else None,
           "capped_s": cap, "note": "ended by the time cap; figures of the last evaluation", "per_rank": []}
with open(path, "r+b") as f:  # the summary after the last whole line (a cut one goes)
    data = f.read()
    f.truncate(data.rfind(b"\n") + 1)
    f.seek(0, 2)
    f.write((json.dumps(summary, separators=(",", ":")) + "\n").encode())
EOP
}
# links: run NAME's dtrain (ARGS: dtrain run's) or DDP (ARGS: ddp ddp_mnist.py's) under the cap
golink() { # NAME dtrain|ddp ARGS...
    local name=$1 kind=$2 rc=0; shift 2
    local scheme=${name#*-*-} # links-RATE-SCHEME[-seedS], tuned-RATE-SCHEME[-seedS]
    case " $SCHEMES " in *" ${scheme%-seed*} "*) ;; *) return 0 ;; esac
    if done_log "$OUT/$name.jsonl"; then echo "$name: done already"; return; fi
    rm -f "$OUT/$name.jsonl"
    echo "$name: $kind $*"
    if [ "$kind" = dtrain ]; then
        timeout -k 30 "$CAP" "$DTRAIN" run "$@" --log "$OUT/$name.jsonl" --no-save >"$OUT/$name.out" 2>&1 || rc=$?
    else # ddp_mnist.py stops itself at the cap (at an evaluation); timeout only guards a hang
        OPENBLAS_CORETYPE=$BLAS timeout -k 30 $((CAP + 120)) scripts/netcluster mpiexec -n "$NH" "$PY" bench/ddp_mnist.py \
            --master-addr "$MASTER" --iface eth0 --max-seconds "$CAP" "$@" --log "$OUT/$name.jsonl" \
            >"$OUT/$name.out" 2>&1 || rc=$?
    fi
    if [ "$rc" = 124 ] && [ -s "$OUT/$name.jsonl" ]; then
        cap_summary "$OUT/$name.jsonl" "$CAP" && echo "$name: stopped at the cap of $CAP s"
    elif [ "$rc" != 0 ]; then
        echo "$name: FAILED, status $rc (see $OUT/$name.out)"
    fi
    done_log "$OUT/$name.jsonl" && tail -1 "$OUT/$name.out"
}
rate_label() { [ "$1" = none ] && echo unshaped || echo "$1"; }
