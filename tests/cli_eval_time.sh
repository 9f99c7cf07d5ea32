#!/usr/bin/env bash
# Evaluation is never training time (issue 47, item 1): the same simulated run (16 hosts,
# 100 Mbit/s, compute modelled: a function of its inputs) with an evaluation every 5 steps and
# with none trains for the same simulated seconds: the summary's train_s, the epoch line's
# seconds (the slowest rank's, where the other ranks once counted their wait for rank 0's
# evaluation) and the exposed communication agree, while eval_s grows with the evaluations;
# every eval line's train_s grows with its step and stays below the summary's. allreduce,
# fedavg and eventgrad: the new user's sweep (experiments/compare.ini).
. "$(dirname "$0")/lib.sh"
require_mnist
require_sim
COMMON=(-n 16 --link 100Mbps --compute modelled --speed 29Gf --model cnn1 --data mnist --train-limit 16384
        --test-limit 1000 --batch 64 --epochs 1 --no-save --quiet)
for algo in allreduce fedavg eventgrad; do
    extra=()
    [ $algo = fedavg ] && extra=(--local-steps 8)
    "$DTRAIN" sim "${COMMON[@]}" --algo $algo "${extra[@]}" --log "$T/$algo-none.jsonl" 2>"$T/err" ||
        { check "$algo: the run without evaluations" 1 "$(tail -1 "$T/err")"; continue; }
    "$DTRAIN" sim "${COMMON[@]}" --algo $algo "${extra[@]}" --eval-every-steps 5 --log "$T/$algo-5.jsonl" 2>"$T/err" ||
        { check "$algo: the run with evaluations" 1 "$(tail -1 "$T/err")"; continue; }
    a=$(summary_field "$T/$algo-none.jsonl" train_s) b=$(summary_field "$T/$algo-5.jsonl" train_s)
    r=$(ratio "$b" "$a")
    within "$algo: training seconds with evaluations every 5 steps / without ($b / $a)" "$r" 0.95 1.05
    a=$(last_epoch_field "$T/$algo-none.jsonl" seconds) b=$(last_epoch_field "$T/$algo-5.jsonl" seconds)
    r=$(ratio "$b" "$a")
    within "$algo: the epoch line's seconds, the same ($b / $a)" "$r" 0.95 1.05
    a=$(summary_field "$T/$algo-none.jsonl" exposed_comm_pct) b=$(summary_field "$T/$algo-5.jsonl" exposed_comm_pct)
    within "$algo: exposed communication % within a point ($b, $a)" "$(awk -v a="$a" -v b="$b" 'BEGIN { print b - a }')" -1 1
    a=$(summary_field "$T/$algo-none.jsonl" eval_s) b=$(summary_field "$T/$algo-5.jsonl" eval_s)
    compare "$algo: ... while evaluating took longer ($b s against $a s)" "$b" '>' "$(awk -v a="$a" 'BEGIN { print 2 * a }')"
    n=$(line_count "$T/$algo-5.jsonl" eval)
    compare "$algo: an eval line every 5 steps ($n)" "$n" '>=' 3
    ok=$(log_query "$T/$algo-5.jsonl" 'int(all(a["train_s"] < b["train_s"] for a, b in zip(of("eval"), of("eval")[1:])) and max(e["train_s"] for e in of("eval")) <= one("summary")["train_s"])')
    compare "$algo: the eval lines' train_s grow and stay within the summary's" "$ok" '==' 1
done
finish
