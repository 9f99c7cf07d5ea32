#!/usr/bin/env bash
# dtrain tune and --plan: a plan written and used by train, bench and run (the launcher makes an
# auto plan once and hands its ranks the file); auto made on first use and reused (no planning
# line the second time); a stale (another version's) cached plan made again; bad, mismatched or
# another CPU's plan files refused in one line with nothing written; auto under mpiexec with
# several ranks refused (each rank would time on its own).
. "$(dirname "$0")/lib.sh"
require_mnist
export XDG_CACHE_HOME=$T/cache
short=(--model cnn1 --epochs 1 --train-limit 1000 --test-limit 200 --no-save)

"$DTRAIN" tune --model cnn1 --batch 32 --precision bf16 --out "$T/p.ini" >"$T/tune.out" 2>"$T/tune.err"
rc=$?
[ $rc -eq 0 ] && head -1 "$T/p.ini" | grep -q '^; dtrain kernel plan' && grep -q '^conv1 = ' "$T/p.ini" &&
    grep -q '^conv2 = ' "$T/p.ini" && grep -qE '^runs = (fp32|bf16)$' "$T/p.ini" && grep -q "written: $T/p.ini" "$T/tune.out"
check "tune writes a plan naming each conv's kernel" $? "exit $rc; $(grep -E '^(runs|conv)' "$T/p.ini" | tr '\n' ' ')"
grep -q 'tune: bf16 .* ms a step, fp32 .* (both planned)' "$T/tune.err"
check "tune says bf16's and fp32's planned step times" $? "$(tail -1 "$T/tune.err")"

"$DTRAIN" train "${short[@]}" --batch 32 --precision bf16 --plan "$T/p.ini" --log "$T/a.jsonl" >"$T/a.out" 2>&1
rc=$?
runs=$(sed -n 's/^runs = //p' "$T/p.ini")
[ $rc -eq 0 ] && [ "$(log_query "$T/a.jsonl" 'of("config")[0]["plan"]')" = "$T/p.ini" ] &&
    [ "$(log_query "$T/a.jsonl" 'of("config")[0]["precision_run"]')" = "$runs" ]
check "train --plan FILE: the log names the plan and the precision it runs ($runs)" $? "exit $rc"

"$DTRAIN" bench --model cnn1 --batch 32 --precision bf16 --steps 3 --warmup 1 --plan "$T/p.ini" >"$T/b.out" 2>&1
check "bench --plan FILE" $? "$(tail -1 "$T/b.out" | cut -c1-120)"

# auto: made once, then reused
"$DTRAIN" train "${short[@]}" --plan auto >"$T/c1.out" 2>&1
rc1=$?
"$DTRAIN" train "${short[@]}" --plan auto --log "$T/c2.jsonl" >"$T/c2.out" 2>&1
rc2=$?
n=$(find "$T/cache/dtrain" -name 'plan-cnn1-b64-fp32-*.ini' | wc -l)
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$n" -eq 1 ] && grep -q 'plan made in' "$T/c1.out" && ! grep -q 'plan' "$T/c2.out" &&
    [ "$(log_query "$T/c2.jsonl" 'of("config")[0]["plan"]')" = "$(find "$T/cache/dtrain" -name 'plan-cnn1-b64-fp32-*.ini')" ]
check "--plan auto: made on first use ($n file), reused the second time, its file in the log" $? "exit $rc1 $rc2; $(grep plan "$T/c1.out" | head -2 | tr '\n' ' ')"

# a stale cached plan (another version's) is made again, with a note
f=$(find "$T/cache/dtrain" -name 'plan-cnn1-b64-fp32-*.ini' | head -1)
sed -i 's/^dtrain = .*/dtrain = 0.0.1 (old)/' "$f"
"$DTRAIN" train "${short[@]}" --plan auto >"$T/c3.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q 'made by dtrain 0.0.1 (old).*planning again' "$T/c3.out" && ! grep -q '0.0.1' "$f"
check "--plan auto: a stale plan is made again" $? "exit $rc; $(grep -i plan "$T/c3.out" | head -2 | tr '\n' ' ')"

# dtrain run: the launcher makes it; every rank gets the file
rm -rf "$T/cache"
run -n 2 --algo allreduce "${short[@]}" --plan auto --log "$T/r.jsonl" >"$T/r.out" 2>&1
rc=$?
f=$(find "$T/cache/dtrain" -name 'plan-cnn1-b64-fp32-*.ini' | head -1)
[ $rc -eq 0 ] && [ -n "$f" ] && [ "$(log_query "$T/r.jsonl" 'of("config")[0]["plan"]')" = "$f" ]
check "run -n 2 --plan auto: made once by the launcher, its file in the ranks' log" $? "exit $rc; $(tail -2 "$T/r.out" | tr '\n' ' ')"

# bad input: one line, nothing written
echo "not a plan" >"$T/junk.ini"
sed 's/^conv2 = .*/conv2 = gpu/' "$T/p.ini" >"$T/gpu.ini"
sed 's/^cpu = .*/cpu = Intel Xeon | family 6 model 207 | kernels avx512/' "$T/p.ini" >"$T/xeon.ini"
sed 's/^conv2 = /conv9 = /' "$T/p.ini" >"$T/conv9.ini"
expect_error "--plan junk" "junk.ini:1: not a kernel plan" -- "$DTRAIN" train "${short[@]}" --batch 32 --precision bf16 --plan "$T/junk.ini"
expect_error "--plan, a bad kernel" "gpu.ini:" -- "$DTRAIN" train "${short[@]}" --batch 32 --precision bf16 --plan "$T/gpu.ini"
expect_error "--plan of another CPU" "made on another CPU (Intel Xeon" -- "$DTRAIN" train "${short[@]}" --batch 32 --precision bf16 --plan "$T/xeon.ini"
expect_error "--plan, a layer the model lacks" "layer conv9: the model has no layer" -- "$DTRAIN" train "${short[@]}" --batch 32 --precision bf16 --plan "$T/conv9.ini"
expect_error "--plan of another batch" "made for batch 32, not 64" -- "$DTRAIN" train "${short[@]}" --precision bf16 --plan "$T/p.ini"
expect_error "--plan of another precision" "made for --precision bf16, not fp32" -- "$DTRAIN" train "${short[@]}" --batch 32 --plan "$T/p.ini"
expect_error "--plan, no such file" "nothing.ini" -- "$DTRAIN" bench --model cnn1 --plan "$T/nothing.ini"
expect_error "--plan auto under mpiexec -n 2" "--plan auto with 2 ranks" -- mpiexec -n 2 "$DTRAIN" train "${short[@]}" --algo allreduce --plan auto --quiet
expect_error "sim --plan" "dtrain sim runs dtrain's own kernels only" -- "$DTRAIN" sim -n 2 --algo allreduce "${short[@]}" --plan "$T/p.ini"
"$DTRAIN" info --plan "$T/p.ini" >"$T/info.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q '^plan: cnn1 batch 32, --precision bf16' "$T/info.out" && grep -qE '^  conv2 +(own|onednn)' "$T/info.out" &&
    ! grep -q 'not usable' "$T/info.out"
check "info --plan FILE prints it" $? "exit $rc; $(head -2 "$T/info.out" | tr '\n' ' ')"
"$DTRAIN" info --plan "$T/xeon.ini" >"$T/info2.out" 2>&1
grep -q 'not usable here: made on another CPU' "$T/info2.out"
check "info --plan: another CPU's plan is printed as not usable here" $? "$(tail -1 "$T/info2.out")"
finish
