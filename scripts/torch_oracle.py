#!/usr/bin/python3
"""PyTorch oracle for the dtrain model engine.

Run by hand (NOT by the tests) with Debian's python3 that has torch:

    /usr/bin/python3 scripts/torch_oracle.py [OUTDIR [MODEL...]]

OUTDIR defaults to tests/data next to this script's parent directory. For each model (or
only the ones named) it writes OUTDIR/<model>_oracle.bin; tests/test_oracle.c builds the same
model in C, copies the parameters in by name, runs one forward + backward and compares
everything. (The fp32 files of cnn1 and resblock-tiny come out a few float32 units different
on another CPU: name the models to write, not to churn the others.)

Models
------
cnn1           MNIST 1x28x28, batch 8, evaluated in eval() mode (dropout off).
resblock-tiny  3x8x8 input, 10 classes, batch 4, TRAIN mode (batch-norm uses batch
               statistics, biased variance, eps 1e-5; running stats updated with momentum
               0.1 and the unbiased variance, starting from mean 0 / var 1).
gpt-micro      nanoGPT's GPT with gpt-tiny's structure, smaller (2 layers, 4 heads, width 32,
               context 40, vocabulary 256: the files stay ~430 kB; 40 positions take dtrain's
               attention through two blocks of rows, 32 and 8): dtrain's dt_gpt_spec(2, 4, 32,
               40, 256). Batch 3 windows of random token ids, a target at every position
               (F.cross_entropy over the 120 rows), the head tied to the token embedding (one
               parameter: named_parameters() lists transformer.wte.weight only). nanoGPT's
               initialisation, then the other weights times 8 (so that attention and the logits
               are far from uniform: std 0.16) and every layer norm's weight U(0.5, 1.5) and
               bias U(-0.2, 0.2).
               GELU in GPT-2's tanh form (dtrain's), as nanoGPT had it.

Inputs are N(0,1), labels uniform in 0..9, loss = F.cross_entropy (mean). Everything is
float32, torch.manual_seed(SEED), one CPU thread. Weights use PyTorch's default
initialisation; batch-norm weight/bias are randomised (U(0.5,1.5) / U(-0.2,0.2)) so they are
not trivially 1 / 0.

File format (all little-endian)
-------------------------------
    char    magic[8]        "DTORACL1"
    uint32  name_len        length of the model name
    char    name[name_len]  model name, no terminator ("cnn1")
    int32   batch           batch size
    uint32  nrecords        number of records that follow
    nrecords times:
        uint32  rname_len
        char    rname[rname_len]   record name, no terminator
        int32   ndim               0 for a scalar, at most 4
        int32   dims[ndim]
        float32 data[prod(dims)]   row-major (C order); 1 value when ndim == 0

Record names
------------
    input               float32 [batch, C, H, W] (gpt-micro: [batch, 1, T, 1] token ids)
    labels              float32 [rows]  (class indices stored as floats; rows = batch, or
                        batch x T for a language model's targets)
    param:<name>        parameter value, <name> is PyTorch's (e.g. "conv1.weight")
    logits              [rows, classes]
    loss                0-d, mean cross-entropy
    grad:<name>         gradient of the mean loss w.r.t. parameter <name>
    input_grad          gradient of the mean loss w.r.t. the input, [batch, C, H, W] (token
                        ids have none: zeros)
    state:<bn>.running_mean / state:<bn>.running_var
                        batch-norm buffers after the one forward pass (resblock-tiny only)

Records appear in that order; parameters in PyTorch's named_parameters() order.

bf16 (dtrain --precision bf16)
------------------------------
Two more files per model, same parameters, input and labels:

<model>_oracle_bf16.bin      dtrain's bf16 rules written out in PyTorch, in fp32 arithmetic:
                             the input and every conv/linear weight and bias rounded to bf16
                             (their gradients are not: straight-through, fp32 master weights),
                             every conv, linear, batch-norm, add and pooled-average output
                             rounded to bf16 and so is the gradient arriving at it (relu, max
                             pool, flatten and eval-mode dropout only pass rounded values on).
                             test_oracle holds dtrain to it with a tolerance of a few bf16 units.
<model>_oracle_autocast.bin  torch.autocast("cpu", torch.bfloat16): PyTorch's own mixed
                             precision (oneDNN bf16 convolutions); a looser check that both
                             read bf16 the same way (autocast also rounds weight gradients).
"""
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from pytorch_train import Gpt  # noqa: E402  nanoGPT's GPT, dtrain's names; self.r at dtrain's stored outputs

SEED = 20240607
MAGIC = b"DTORACL1"


class Cnn1(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.conv2_drop = nn.Dropout2d(0.5)  # no parameters, so no name clash
        self.fc1 = nn.Linear(320, 100)
        self.fc2 = nn.Linear(100, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, 0.5, training=self.training)
        return self.fc2(x)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(self.r(out + self.shortcut(x)))


class ResblockTiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.block = BasicBlock(8, 16, 2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.block(x)
        x = self.r(F.adaptive_avg_pool2d(x, 1))
        x = torch.flatten(x, 1)
        return self.fc(x)


def gpt_micro():
    return Gpt(2, 4, 32, 40, 256)


# name, constructor, input shape (C, H, W), classes, batch, train mode; a language model's
# input shape is (1, T, 1): T token ids below its classes (the vocabulary)
MODELS = [
    ("cnn1", Cnn1, (1, 28, 28), 10, 8, False),
    ("resblock-tiny", ResblockTiny, (3, 8, 8), 10, 4, True),
    ("gpt-micro", gpt_micro, (1, 40, 1), 256, 3, True),
]


def record(name, arr):
    a = np.array(arr, dtype="<f4", order="C")  # keeps 0-d as 0-d
    nb = name.encode("ascii")
    out = struct.pack("<I", len(nb)) + nb + struct.pack("<i", a.ndim)
    out += struct.pack("<%di" % a.ndim, *a.shape) if a.ndim else b""
    return out + a.tobytes()


def t2np(t):
    return t.detach().cpu().numpy().astype(np.float32)


class RoundBf16(torch.autograd.Function):
    """x stored as bf16, and the gradient arriving at it stored as bf16."""

    @staticmethod
    def forward(ctx, x):
        return x.bfloat16().float()

    @staticmethod
    def backward(ctx, g):
        return g.bfloat16().float()


def bf16(x):
    return x.bfloat16().float()


def round_outputs(model):
    """Forward hooks: every conv, linear and batch-norm output through RoundBf16; the models'
    add and average pool call model.r."""
    for mod in model.modules():
        if isinstance(mod, (nn.Conv2d, nn.Linear, nn.BatchNorm2d, nn.LayerNorm)):
            mod.register_forward_hook(lambda m, i, o: RoundBf16.apply(o))
        mod.r = RoundBf16.apply


def identity(x):
    return x


class LmInput(nn.Module):
    """A language model on dtrain's input layout ([batch, 1, T, 1] ids) with its logits as rows
    ([batch * T, vocab]); its parameters keep their names."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, x):
        z = self.lm(x.view(x.size(0), -1))
        return z.view(-1, z.size(-1))

    def named_parameters(self, *args, **kwargs):
        return self.lm.named_parameters(*args, **kwargs)


def init_model(ctor, seed, train):
    """The model seeded, its batch-norm weights and biases randomised (also for
    scripts/torch_adamw_oracle.py)."""
    torch.manual_seed(seed)
    model = ctor()
    for mod in model.modules():
        mod.r = identity
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (nn.BatchNorm2d, nn.LayerNorm)):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
        if isinstance(model, Gpt):  # attention and logits far from uniform: a test that can fail
            for n, p in model.named_parameters():
                if "ln" not in n:
                    p.mul_(8.0)
    model.train(train)
    return model


def build(name, ctor, shape, classes, batch, train, seed, mode="fp32"):
    """mode: fp32, bf16 (dtrain's rules emulated) or autocast."""
    model = init_model(ctor, seed, train)
    lm = isinstance(model, Gpt)
    if lm:  # token ids, a target at every position
        x = torch.randint(0, classes, (batch, *shape), dtype=torch.int64)
        y = torch.randint(0, classes, (batch * shape[1],), dtype=torch.int64)
    else:
        x = torch.randn(batch, *shape, dtype=torch.float32)
        y = torch.randint(0, classes, (batch,), dtype=torch.int64)
    params = [(n, t2np(p)) for n, p in model.named_parameters()]

    xg = x.clone().requires_grad_(not lm)
    if lm:
        model = LmInput(model)
    if mode == "bf16":
        with torch.no_grad():  # dtrain rounds its fp32 master weights for each pass
            for mod in model.modules():
                if isinstance(mod, (nn.Conv2d, nn.Linear)):
                    for p in mod.parameters(recurse=False):
                        p.copy_(bf16(p))
        round_outputs(model)
        xin = xg + (bf16(x) - x)  # rounded input, gradient passed through unrounded
        logits = model(xg if lm else xin)  # token ids are not rounded
    elif mode == "autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(xg)
        logits = logits.float()
    else:
        logits = model(xg)
    loss = F.cross_entropy(logits, y)
    model.zero_grad()
    loss.backward()

    recs = [record("input", t2np(x)), record("labels", y.numpy().astype(np.float32))]
    recs += [record("param:" + n, v) for n, v in params]
    recs.append(record("logits", t2np(logits)))
    recs.append(record("loss", np.float32(loss.item())))
    recs += [record("grad:" + n, t2np(p.grad)) for n, p in model.named_parameters()]
    recs.append(record("input_grad", np.zeros(x.shape, np.float32) if lm else t2np(xg.grad)))
    for n, b in model.named_buffers():
        if n.endswith(".running_mean") or n.endswith(".running_var"):
            recs.append(record("state:" + n, t2np(b)))

    nb = name.encode("ascii")
    head = MAGIC + struct.pack("<I", len(nb)) + nb + struct.pack("<iI", batch, len(recs))
    return head + b"".join(recs), float(loss.item())


def main():
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data")
    only = sys.argv[2:]
    unknown = [n for n in only if n not in [m[0] for m in MODELS]]
    if unknown:
        sys.exit("torch_oracle.py: unknown model %s (expected: %s)" % (unknown[0], ", ".join(m[0] for m in MODELS)))
    os.makedirs(outdir, exist_ok=True)
    for i, (name, ctor, shape, classes, batch, train) in enumerate(MODELS):
        if only and name not in only:
            continue
        for mode, suffix in (("fp32", ""), ("bf16", "_bf16"), ("autocast", "_autocast")):
            blob, loss = build(name, ctor, shape, classes, batch, train, SEED + i, mode)
            path = os.path.join(outdir, name + "_oracle" + suffix + ".bin")
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
            print("%s %s: %d bytes, loss %.6f -> %s" % (name, mode, len(blob), loss, os.path.normpath(path)))


if __name__ == "__main__":
    main()
