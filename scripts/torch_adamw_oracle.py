#!/usr/bin/python3
"""PyTorch oracle for dtrain's optimiser (AdamW, gradient clipping, the learning-rate schedule).

Run by hand (NOT by the tests) with Debian's python3 that has torch (PyTorch 1.13):

    /usr/bin/python3 scripts/torch_adamw_oracle.py [OUTFILE]

OUTFILE defaults to tests/data/adamw_oracle.tns; tests/test_optim.c reads it with dtrain's own
tensor-file reader (the DTRTNS01 format of src/core/tensorfile.h: named float tensors and a
CRC-32).

AdamW: resblock-tiny (scripts/torch_oracle.py's model, batch-norm weights and biases randomised
as there) trains 10 steps in train mode on random batches (N(0,1) inputs, labels 0..9,
F.cross_entropy), and so does gpt-micro (torch_oracle.py's nanoGPT GPT with gpt-tiny's
structure, smaller; records prefixed gpt:, on 3 windows of 40 random byte ids with a random
target at every position; the tied head counted once, under transformer.wte.weight); each step torch.nn.utils.clip_grad_norm_(max_norm=CLIP), then
torch.optim.AdamW (foreach=False: the single-tensor step) with two parameter groups: weight
decay WD on the conv and linear weights (dtrain's --decay-on weights), none on the batch-norm
and layer-norm parameters, the biases and the embeddings. The learning rate of step k is
nanoGPT's get_lr(k) with warm-up WARMUP and lr_decay_iters LAST (the run's last step), rounded to float32 as dtrain holds it.
The test replays the same gradients (dtrain's own backward would differ in the last bits, and
AdamW's per-element normalisation turns such noise in near-zero gradients into whole steps), so
what it checks is the optimiser alone. Until the first step that clips, dtrain's AdamW is
PyTorch's bit for bit (written on a CPU with AVX2, where PyTorch's kernels fuse the moments'
multiply-adds as dtrain does; its DEFAULT kernels on an older CPU would not); from it on, the gradient's norm (PyTorch sums it in float in the CPU's
vector lanes, dtrain in double) may differ in its last bit, and so everything after it.

Records
-------
    config              [LR, MIN_LR, WARMUP, LAST, BETA1, BETA2, EPS, WD, CLIP, STEPS, EXACT] (float32)
    decay:<name>        1 when weight decay applies to parameter <name>, else 0
    param0:<name>       the parameters before the first step (PyTorch's names)
    grad<k>:<name>      step k's gradient as backward left it, before clipping (k = 0..9)
    lr                  [STEPS] the learning rate of each step (float32 of get_lr)
    norm                [STEPS] clip_grad_norm_'s total norm of each step, before clipping
    param<EXACT>:<name> the parameters after step EXACT - 1, the last before clipping first
                        changes a gradient: dtrain's AdamW must give these bit for bit
    param<STEPS>:<name> the parameters after the last step
    exp_avg:<name>, exp_avg_sq:<name>  AdamW's moments after the last step

Schedule tables (nanoGPT's get_lr, train.py, for it = 0..lr_decay_iters + 10):
    sched:char          learning_rate 1e-3, min_lr 1e-4, warmup_iters 100, lr_decay_iters 5000:
                        the shakespeare_char recipe, with learning_rate and min_lr the float32
                        values dtrain holds (so the values must agree exactly)
    sched:char-exact    the same with Python's decimal 1e-3 and 1e-4 (within float rounding)
    sched:short         learning_rate 0.05, min_lr 0, warmup 5, lr_decay_iters 29
"""
import math
import os
import struct
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_oracle import LmInput, ResblockTiny, gpt_micro, init_model  # noqa: E402  (test_oracle's models)

SEED = 20240701
STEPS = 10
LR, MIN_LR, WARMUP, LAST = 1e-2, 1e-3, 3, STEPS - 1
BETAS, EPS = (0.9, 0.99), 1e-8
WD, CLIP = 0.1, 1.9
EXACT = 2  # steps before the first that clips (below)
# gpt-micro's (records gpt:*): its gradient's norm falls from the first step (2.1, then 2.0,
# 1.8, 1.3, ...), so the steps that clip come first and none is bit for bit (EXACT 0)
GPT_LR, GPT_CLIP, GPT_EXACT = 1e-2, 1.5, 0


def f32(x):
    return float(np.float32(x))


def get_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    """nanoGPT's train.py, word for word."""
    # 1) linear warmup for warmup_iters steps
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    # 2) if it > lr_decay_iters, return min learning rate
    if it > lr_decay_iters:
        return min_lr
    # 3) in between, use cosine decay down to min learning rate
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # coeff ranges 0..1
    return min_lr + coeff * (learning_rate - min_lr)


def record(name, arr):
    a = np.ascontiguousarray(np.array(arr, dtype="<f4"))
    nb = name.encode("ascii")
    assert len(nb) < 64 and a.ndim <= 4
    return struct.pack("<H", len(nb)) + nb + bytes([a.ndim]) + struct.pack("<%dI" % a.ndim, *a.shape) + a.tobytes()


def t2np(t):
    return t.detach().cpu().numpy().astype(np.float32)


def resblock_batch():
    """resblock-tiny's step: 4 images of N(0,1), labels 0..9."""
    return torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))


def gpt_batch():
    """gpt-micro's step: 3 windows of 40 random byte ids, a random target at every position."""
    return torch.randint(0, 256, (3, 40)), torch.randint(0, 256, (3 * 40,))


# prefix of the records, model, its batch, and its lr and clip: a clip that the first EXACT
# steps stay under and some later steps go over (asserted below)
MODELS = [
    ("", lambda: init_model(ResblockTiny, SEED, True), resblock_batch, LR, CLIP, EXACT),
    ("gpt:", lambda: LmInput(init_model(gpt_micro, SEED, True)), gpt_batch, GPT_LR, GPT_CLIP, GPT_EXACT),
]


def adamw_records(prefix, make_model, make_batch, lr0, clip, exact):
    model = make_model()
    named = list(model.named_parameters())  # a tied head once, under the embedding's name
    modules = dict(getattr(model, "lm", model).named_modules())  # LmInput names its GPT's parameters
    decays = {n: isinstance(modules[n.rsplit(".", 1)[0]], (nn.Conv2d, nn.Linear)) and n.endswith(".weight")
              for n, _ in named}
    wd = f32(WD)  # dtrain's --weight-decay is a float
    opt = torch.optim.AdamW([{"params": [p for n, p in named if decays[n]], "weight_decay": wd},
                             {"params": [p for n, p in named if not decays[n]], "weight_decay": 0.0}],
                            lr=f32(lr0), betas=BETAS, eps=EPS, foreach=False)
    recs = [record(prefix + "config", [lr0, MIN_LR, WARMUP, LAST, BETAS[0], BETAS[1], EPS, WD, clip, STEPS, exact])]
    recs += [record(prefix + "decay:" + n, 1.0 if decays[n] else 0.0) for n, _ in named]
    recs += [record(prefix + "param0:" + n, t2np(p)) for n, p in named]
    lrs, norms, clipped = [], [], 0
    for k in range(STEPS):
        x, y = make_batch()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        recs += [record(prefix + "grad%d:%s" % (k, n), t2np(p.grad)) for n, p in named]
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip))
        clipped += norm > clip
        lr = f32(get_lr(k, f32(lr0), f32(MIN_LR), WARMUP, LAST))  # the float32 lr dtrain steps with
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        if exact and k + 1 == exact:
            recs += [record(prefix + "param%d:%s" % (exact, n), t2np(p)) for n, p in named]
        lrs.append(lr)
        norms.append(norm)
    assert 0 < clipped < STEPS, "%sclip should clip some steps and not others (%d of %d clipped; norms %s)" % (
        prefix, clipped, STEPS, norms)
    assert not exact or max(norms[:exact]) < clip, "the first EXACT steps should not clip (norms %s)" % norms
    recs += [record(prefix + "lr", lrs), record(prefix + "norm", norms)]
    recs += [record(prefix + "param%d:%s" % (STEPS, n), t2np(p)) for n, p in named]
    for n, p in named:
        st = opt.state[p]
        recs += [record(prefix + "exp_avg:" + n, t2np(st["exp_avg"])),
                 record(prefix + "exp_avg_sq:" + n, t2np(st["exp_avg_sq"]))]
    print("adamw %s: %d steps, %d clipped (norms %s), lr %s" % (
        prefix or "resblock-tiny", STEPS, clipped, " ".join("%.3g" % v for v in norms), " ".join("%.3g" % v for v in lrs)))
    return recs


def schedule_records():
    def table(lr, min_lr, warmup, last):
        return [f32(get_lr(it, lr, min_lr, warmup, last)) for it in range(last + 11)]
    return [record("sched:char", table(f32(1e-3), f32(1e-4), 100, 5000)),
            record("sched:char-exact", table(1e-3, 1e-4, 100, 5000)),
            record("sched:short", table(f32(0.05), 0.0, 5, 29))]


def main():
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data", "adamw_oracle.tns")
    recs = [r for m in MODELS for r in adamw_records(*m)] + schedule_records()
    blob = b"DTRTNS01" + struct.pack("<I", len(recs)) + b"".join(recs)
    blob += struct.pack("<I", zlib.crc32(blob))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, path)
    print("%d records, %d bytes -> %s" % (len(recs), len(blob), os.path.normpath(path)))


if __name__ == "__main__":
    main()
