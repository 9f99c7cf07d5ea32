#!/usr/bin/env bash
# A run as it goes: --val N holds out the last N training examples as a validation set,
# evaluated with the test set; --progress N writes a step line to the log every N steps (and a
# progress line to a stdout that is not a terminal); on a terminal rank 0 redraws one live line
# in place, also through `dtrain run`; --images N trains until N images were seen in total.
. "$(dirname "$0")/lib.sh"
require_mnist
C=(--model mlp --data mnist --train-limit 2000 --test-limit 500 --batch 50 --lr 0.05 --seed 3)
Q=("${C[@]}" --quiet)

# ------------------------------------------------------------------ --val
# 1. one process: val figures in every epoch line and the summary; the training set is 500 smaller
"$DTRAIN" train "${Q[@]}" --epochs 2 --val 500 --log "$T/v.jsonl" --out "$T/v.w"
check "--val 500 runs" $? ""
compare "... val_acc in [0,1] in each of the 2 epoch lines" \
    "$(log_query "$T/v.jsonl" 'sum(0 <= e["val_acc"] <= 1 and e["val_loss"] > 0 for e in of("epoch"))')" == 2 \
    "val_acc $(epoch_fields "$T/v.jsonl" val_acc)"
va=$(summary_field "$T/v.jsonl" val_acc) ta=$(summary_field "$T/v.jsonl" test_acc)
within "... and in the summary" "$va" 0 1
compare "... which is not the test accuracy" "$va" != "$ta" "val_acc $va, test_acc $ta"
compare "... 1500 examples left to train on: 30 steps per epoch" "$(log_query "$T/v.jsonl" 'one("config")["steps_per_epoch"]')" == 30
compare "... the config line says val" "$(log_query "$T/v.jsonl" 'one("config")["val"]')" == 500
"$DTRAIN" train "${Q[@]}" --epochs 1 --log "$T/nv.jsonl" --out "$T/nv.w"
compare "without --val: 40 steps per epoch" "$(log_query "$T/nv.jsonl" 'one("config")["steps_per_epoch"]')" == 40
compare "... val_acc and val_loss null in the epoch line and the summary" \
    "$(log_query "$T/nv.jsonl" 'int(of("epoch")[0]["val_acc"] is None and of("epoch")[0]["val_loss"] is None and one("summary")["val_acc"] is None)')" == 1

# 2. the held-out examples are training examples 1500..1999: the final model's val_acc is its
#    accuracy on those, evaluated by dtrain eval as a test set of their own
mkdir -p "$T/valset"
/usr/bin/python3 - "${DTRAIN_DATA:-data}/mnist" "$T/valset" <<'EOF'
import gzip, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
def read(name):
    p = os.path.join(src, name)
    return open(p, "rb").read() if os.path.exists(p) else gzip.open(p + ".gz").read()
im, lb = read("train-images-idx3-ubyte"), read("train-labels-idx1-ubyte")
open(os.path.join(dst, "t10k-images-idx3-ubyte"), "wb").write(struct.pack(">IIII", 2051, 500, 28, 28) + im[16 + 1500 * 784:16 + 2000 * 784])
open(os.path.join(dst, "t10k-labels-idx1-ubyte"), "wb").write(struct.pack(">II", 2049, 500) + lb[8 + 1500:8 + 2000])
EOF
evaluates_to "... val_acc is the final model's accuracy on training examples 1500..1999" "$va" --model mlp --weights "$T/v.w" --data-dir "$T/valset"
# ... which is not its accuracy on other examples (the check can fail)
holds "$va" '!=' "$("$DTRAIN" eval --model mlp --weights "$T/v.w" --test-limit 500 | sed -n 's/test accuracy \([0-9.]*\)%.*/\1/p' | awk '{ print $1 / 100 }')"
check "... and not its accuracy on the test set's first 500" $? ""

# 3. the same examples held out whatever the seed and the ranks: training on the first 1500 is
#    the same run, bit for bit
for seed in 3 4; do
    "$DTRAIN" train "${Q[@]}" --epochs 1 --val 500 --seed $seed --out "$T/v$seed.w"
    "$DTRAIN" train "${Q[@]}" --epochs 1 --train-limit 1500 --seed $seed --out "$T/f$seed.w"
    identical "seed $seed: --train-limit 2000 --val 500 trains as --train-limit 1500" "$T/v$seed.w" "$T/f$seed.w"
done
differ "... not as --train-limit 2000 without --val" "$T/v3.w" "$T/nv.w" 0
run -n 2 --algo allreduce "${C[@]}" --epochs 1 --val 500 --out "$T/rv.w" --log "$T/rv.jsonl"
run -n 2 --algo allreduce "${C[@]}" --epochs 1 --train-limit 1500 --out "$T/rf.w"
identical "2 ranks (allreduce): the same" "$T/rv.w" "$T/rf.w"
evaluates_to "... and its val_acc is on the same examples" "$(summary_field "$T/rv.jsonl" val_acc)" --model mlp --weights "$T/rv.w" --data-dir "$T/valset"

# 3b. downpour: its server evaluates the held-out set too (epoch lines, eval lines, summary); its
#     rank 0 trains no batch, so --progress writes no step line
run -n 3 --algo downpour "${C[@]}" --epochs 2 --val 500 --eval-every-steps 10 --progress 5 --no-save --log "$T/dp.jsonl"
compare "downpour --val 500: val_acc in its 2 epoch lines, its eval lines and the summary" \
    "$(log_query "$T/dp.jsonl" 'int(len(of("epoch")) == 2 and len(of("eval")) > 0 and all(0 <= e["val_acc"] <= 1 for e in of("epoch") + of("eval") + of("summary")))')" == 1
compare "... and no step line (rank 0 is its server)" "$(line_count "$T/dp.jsonl" step)" == 0

# 4. a held-out set as large as the training set is refused
expect_error "--val 2000 of 2000 examples refused" "--val 2000: must be smaller than the training set" -- \
    "$DTRAIN" train "${Q[@]}" --val 2000 --no-save

# ------------------------------------------------------------------ --progress: the log
# 5. step lines every 5 steps: where, how many images, the mean loss, and the same weights
"$DTRAIN" train "${Q[@]}" --epochs 2 --progress 5 --log "$T/p.jsonl" --out "$T/p.w"
"$DTRAIN" train "${Q[@]}" --epochs 2 --out "$T/np.w"
compare "--progress 5: step lines at steps 5, 10, ..., 80" \
    "$(log_query "$T/p.jsonl" 'int([s["step"] for s in of("step")] == list(range(5, 81, 5)))')" == 1 \
    "steps $(log_query "$T/p.jsonl" '[s["step"] for s in of("step")]')"
compare "... images = step x 50, epoch = the step's" \
    "$(log_query "$T/p.jsonl" 'int(all(s["images"] == 50 * s["step"] and s["epoch"] == (s["step"] - 1) // 40 + 1 for s in of("step")))')" == 1
compare "... losses finite and positive, seconds not decreasing" \
    "$(log_query "$T/p.jsonl" 'int(all(isinstance(s["loss"], float) and 0 < s["loss"] < 100 for s in of("step")) and all(x["seconds"] <= y["seconds"] for x, y in zip(of("step"), of("step")[1:])))')" == 1
# every batch holds 50 examples: an epoch's loss is the mean of its 8 step lines' means
for e in 1 2; do
    compare "... epoch $e: the mean of its step lines' losses is the epoch's loss" \
        "$(log_query "$T/p.jsonl" 'int(abs(sum(s["loss"] for s in of("step") if s["epoch"] == int(a[0])) / 8 - of("epoch")[int(a[0]) - 1]["loss"]) < 2e-6)' $e)" == 1 \
        "$(log_query "$T/p.jsonl" '[s["loss"] for s in of("step") if s["epoch"] == int(a[0])]' $e) vs $(epoch_fields "$T/p.jsonl" loss)"
done
identical "... the same weights as without --progress" "$T/p.w" "$T/np.w"
compare "... without it, no step line" "$(line_count "$T/nv.jsonl" step)" == 0

# 6. on 2 ranks: rank 0's losses, images of both ranks, the same weights and messages
run -n 2 --algo allreduce "${C[@]}" --epochs 1 --progress 5 --out "$T/rp.w" --log "$T/rp.jsonl"
run -n 2 --algo allreduce "${C[@]}" --epochs 1 --out "$T/rnp.w" --log "$T/rnp.jsonl"
compare "2 ranks, --progress 5: step lines at 5, 10, 15, 20" "$(log_query "$T/rp.jsonl" 'int([s["step"] for s in of("step")] == [5, 10, 15, 20])')" == 1
compare "... images = step x 50 x 2" "$(log_query "$T/rp.jsonl" 'int(all(s["images"] == 100 * s["step"] for s in of("step")))')" == 1
identical "... the same weights as without --progress" "$T/rp.w" "$T/rnp.w"
compare "... and the same messages" "$(summary_field "$T/rp.jsonl" msgs_sent)" == "$(summary_field "$T/rnp.jsonl" msgs_sent)"

# ------------------------------------------------------------------ the console
# 7. not a terminal: a plain progress line every 5 steps with --progress, none without, none quiet
"$DTRAIN" train "${C[@]}" --epochs 1 --progress 5 --no-save >"$T/plain.txt"
compare "stdout not a terminal, --progress 5: 8 progress lines" "$(grep -c '^epoch 1 step [0-9]*/40  .* img/s  loss [0-9.]*' "$T/plain.txt")" == 8
compare "... at steps 5, 10, ..." "$(grep -o '^epoch 1 step [0-9]*' "$T/plain.txt" | awk '{ s = s $4 " " } END { print (s == "5 10 15 20 25 30 35 40 ") }')" == 1
compare "... and no '\\r'" "$(tr -cd '\r' <"$T/plain.txt" | wc -c)" == 0
"$DTRAIN" train "${C[@]}" --epochs 1 --no-save >"$T/none.txt"
compare "... without --progress: none" "$(grep -c 'step [0-9]*/' "$T/none.txt")" == 0
compare "... (the epoch line is there)" "$(grep -c '^epoch   1/1' "$T/none.txt")" == 1
"$DTRAIN" train "${Q[@]}" --epochs 1 --progress 5 --no-save >"$T/quiet.txt"
compare "... --quiet: none" "$(grep -c 'step [0-9]*/' "$T/quiet.txt")" == 0

# 8. a terminal (script gives the run one): the live line, redrawn with '\r', cleared before the
#    epoch line; the same through dtrain run's relay; none with --quiet
live() { grep -c $'\repoch 1 step [0-9]*/[0-9]*  .* img/s  loss' "$1"; }
cleared() { grep -c $'\r *\repoch   1/1' "$1"; }
script -qfec "$(printf '%q ' "$DTRAIN" train "${C[@]}" --epochs 1 --batch 10 --no-save)" /dev/null >"$T/tty.txt" 2>&1
check "on a terminal: runs" $? ""
compare "... a live line" "$(live "$T/tty.txt")" '>=' 1 "$(head -c 300 "$T/tty.txt" | cat -v)"
compare "... cleared before the epoch line" "$(cleared "$T/tty.txt")" == 1
script -qfec "$(printf '%q ' "$DTRAIN" train "${Q[@]}" --epochs 1 --batch 10 --no-save)" /dev/null >"$T/ttyq.txt" 2>&1
compare "... --quiet: no live line" "$(tr -cd '\r' <"$T/ttyq.txt" | wc -c)" == 0
script -qfec "$(printf '%q ' "$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 1 --batch 10 --no-save)" /dev/null >"$T/ttyr.txt" 2>&1
check "dtrain run -n 2 on a terminal: runs" $? ""
compare "... the live line through the relay" "$(live "$T/ttyr.txt")" '>=' 1 "$(head -c 400 "$T/ttyr.txt" | cat -v)"
compare "... cleared before the epoch line" "$(cleared "$T/ttyr.txt")" == 1
"$DTRAIN" run -n 2 --algo allreduce "${C[@]}" --epochs 1 --progress 5 --no-save >"$T/pipe.txt" 2>&1
compare "dtrain run -n 2 --progress 5 into a file: no '\\r'" "$(tr -cd '\r' <"$T/pipe.txt" | wc -c)" == 0
compare "... the epoch line is there" "$(grep -c '^epoch   1/1' "$T/pipe.txt")" == 1
compare "... rank 0's progress lines alone: one every 5 of its 20 steps" "$(grep -c '^epoch 1 step [0-9]*/20 ' "$T/pipe.txt")" == 4

# ------------------------------------------------------------------ --images
# 9. 3000 images, batch 50, 2 ranks: 30 steps per rank, over 2 epochs of 20 (the last partial)
run -n 2 --algo allreduce "${C[@]}" --images 3000 --no-save --log "$T/im.jsonl"
check "--images 3000 on 2 ranks runs" $? ""
compare "... 30 steps on each of the 2 ranks" \
    "$(log_query "$T/im.jsonl" 'int([r["steps"] for r in one("summary")["per_rank"]] == [30, 30])')" == 1 \
    "steps $(log_query "$T/im.jsonl" '[r["steps"] for r in one("summary")["per_rank"]]')"
compare "... 2 epochs, both evaluated" "$(line_count "$T/im.jsonl" epoch)" == 2
compare "... the config says images 3000, epochs 2, max_steps 30" \
    "$(log_query "$T/im.jsonl" 'int(one("config")["images"] == 3000 and one("config")["epochs"] == 2 and one("config")["max_steps"] == 30)')" == 1
"$DTRAIN" train "${Q[@]}" --images 3001 --no-save --log "$T/im1.jsonl"
compare "one process, --images 3001: ceil(3001 / 50) = 61 steps" "$(summary_field "$T/im1.jsonl" steps)" == 61
expect_error "--images with --epochs refused" "--images 3000: not with --epochs 2" -- \
    "$DTRAIN" train "${Q[@]}" --images 3000 --epochs 2 --no-save
expect_error "--images with --max-steps refused" "not with --max-steps" -- \
    "$DTRAIN" run -n 2 "${Q[@]}" --images 3000 --max-steps 5 --no-save

finish
