#!/usr/bin/python3
"""gpt-tiny on the KJV, dtrain and PyTorch side by side: the same model, recipe and steps.

Trains nanoGPT's CPU configuration (gpt-tiny: 4 layers, 4 heads, width 128, context 64, bytes,
tied head) on data/kjv/kjv.txt with nanoGPT's recipe (AdamW lr 1e-3, betas 0.9/0.99, weight
decay 0.1 on every tensor of 2+ dimensions, embeddings included, as nanoGPT's configure_optimizers;
clip 1.0; 100 warm-up steps, then cosine to 1e-4 at the last step; batch 12; no dropout) for
--steps steps, once with `dtrain train` and once with PyTorch 1.13 (bench/pytorch_train.py's
Gpt, nanoGPT's model.py without dropout), for each seed, alternating, one thread each. Both are
then evaluated on the same held-out windows: the last tenth of the text (dtrain's test set),
windows of 64 bytes at 64-byte strides, their next bytes the targets. Prints a line per run and
the mean +- std of each side's validation loss, and their difference.

Where the two differ by construction (said in the table's note): how training windows are
drawn. nanoGPT draws each window's start uniformly from the whole training part; dtrain
shuffles the slots of 64 bytes each epoch and starts each window at a random offset within
its slot. Both see every byte about equally often.

  bench/lm_side_by_side.py [--steps 2000] [--seeds 1 2 3] [--dtrain build/dtrain]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train import gpt_tiny  # noqa: E402

T, BATCH, LR, MIN_LR, WARMUP, BETA2, DECAY, CLIP = 64, 12, 1e-3, 1e-4, 100, 0.99, 0.1, 1.0


def text_parts(path):
    data = open(path, "rb").read()
    cut = len(data) - len(data) // 10  # dtrain's held-out tail: the last tenth
    return torch.tensor(list(data[:cut]), dtype=torch.long), torch.tensor(list(data[cut:]), dtype=torch.long)


def get_lr(it, max_iters):
    """nanoGPT's train.py, lr_decay_iters = max_iters."""
    if it < WARMUP:
        return LR * (it + 1) / (WARMUP + 1)
    if it > max_iters:
        return MIN_LR
    ratio = (it - WARMUP) / (max_iters - WARMUP)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LR - MIN_LR)


def held_out_loss(model, tail):
    """Mean cross-entropy (nats) over dtrain's test windows: window i is tail[i*T : i*T+T+1]."""
    n = (len(tail) - T) // T
    model.eval()
    total = 0.0
    with torch.no_grad():
        for b in range(0, n, 256):
            idx = range(b, min(n, b + 256))
            x = torch.stack([tail[i * T:i * T + T] for i in idx])
            y = torch.stack([tail[i * T + 1:i * T + T + 1] for i in idx])
            z = model(x)
            total += float(F.cross_entropy(z.view(-1, z.size(-1)), y.view(-1), reduction="sum"))
    model.train()
    return total / (n * T), n


def pytorch_run(seed, steps, train, tail):
    torch.manual_seed(seed)
    model = gpt_tiny()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": DECAY}, {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, BETA2), foreach=False)
    g = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    for it in range(steps):
        for group in opt.param_groups:
            group["lr"] = get_lr(it, steps - 1)
        ix = torch.randint(len(train) - T - 1, (BATCH,), generator=g)
        x = torch.stack([train[i:i + T] for i in ix])
        y = torch.stack([train[i + 1:i + T + 1] for i in ix])
        z = model(x)
        loss = F.cross_entropy(z.view(-1, z.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
    secs = time.perf_counter() - t0
    return held_out_loss(model, tail)[0], secs


def dtrain_run(binary, seed, steps, data_dir, work):
    log = os.path.join(work, f"dtrain-{seed}.jsonl")
    # nanoGPT counts its iterations 0..max_iters: dtrain's N steps are its max_iters = N - 1
    cmd = [binary, "train", "--model", "gpt-tiny", "--data", "kjv", "--data-dir", data_dir, "--optim", "adamw",
           "--lr", str(LR), "--beta2", str(BETA2), "--weight-decay", str(DECAY), "--decay-on", "matrices",
           "--clip", str(CLIP), "--lr-warmup", str(WARMUP), "--schedule", f"cosine:{MIN_LR}", "--batch", str(BATCH),
           "--max-steps", str(steps), "--epochs", "100", "--eval-every", "0", "--seed", str(seed), "--no-save",
           "--quiet", "--log", log]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    secs = time.perf_counter() - t0
    summary = [json.loads(line) for line in open(log) if '"summary"' in line][-1]
    return summary["test_loss"], secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--dtrain", default="build/dtrain")
    ap.add_argument("--data-dir", default=os.path.join(os.environ.get("DTRAIN_DATA", "data"), "kjv"))
    args = ap.parse_args()
    if args.steps <= WARMUP:
        ap.error(f"--steps must be above the {WARMUP} warm-up steps")
    torch.set_num_threads(1)
    train, tail = text_parts(os.path.join(args.data_dir, "kjv.txt"))
    results = {"dtrain": [], "pytorch": []}
    with tempfile.TemporaryDirectory() as work:
        for seed in args.seeds:
            for side in ("dtrain", "pytorch"):  # alternating: a drift of the machine hits both
                if side == "dtrain":
                    loss, secs = dtrain_run(args.dtrain, seed, args.steps, args.data_dir, work)
                else:
                    loss, secs = pytorch_run(seed, args.steps, train, tail)
                results[side].append(loss)
                print(f"{side:8s} seed {seed}: held-out loss {loss:.4f} nats ({loss / math.log(2):.3f} bits per byte), "
                      f"{args.steps} steps in {secs:.0f} s", flush=True)
    for side, v in results.items():
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        print(f"{side:8s}: {statistics.mean(v):.4f} +- {sd:.4f} nats over seeds {' '.join(map(str, args.seeds))}")
    diff = statistics.mean(results["dtrain"]) - statistics.mean(results["pytorch"])
    print(f"dtrain - pytorch: {diff:+.4f} nats ({len(tail) // T - 1} held-out windows of {T} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
