#!/usr/bin/python3
"""PyTorch reference for dtrain's single-rank training-step benchmark.

Builds the same models as dtrain, trains them on random in-memory data with
SGD (lr 0.05, momentum 0.9) in float32 (or bf16 autocast: --precision bf16) on
one thread, and prints one line:

    pytorch model=<m> batch=<b> precision=<p> images_per_s=<float> maxrss_kb=<int>

(a language model, gpt-tiny or gpt-small: images_per_s counts windows of T tokens, and the line
also has positions=<T> tokens_per_s=<float>)

Only forward + cross-entropy + backward + optimizer.step (with
zero_grad(set_to_none=True)) is timed; data generation is done up front.
Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import ctypes
import math
import resource
import sys
import time
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- models

# dtrain's automatic layer names (src/models/spec.c): the kind's prefix and a running count per
# prefix. Naming the Sequential's modules so makes the state_dict keys dtrain's tensor names
# ("conv1.weight", "fc2.bias"): a safetensors file written by dtrain loads with strict=True.
_PREFIX = {nn.Conv2d: "conv", nn.Linear: "fc", nn.ReLU: "relu", nn.MaxPool2d: "maxpool",
           nn.Dropout: "dropout", nn.Dropout2d: "dropout", nn.Flatten: "flatten"}


def _seq(*mods):
    count, named = {}, []
    for m in mods:
        p = _PREFIX[type(m)]
        count[p] = count.get(p, 0) + 1
        named.append((f"{p}{count[p]}", m))
    return nn.Sequential(OrderedDict(named))


def mlp():
    return _seq(nn.Flatten(), nn.Linear(784, 100), nn.ReLU(),
                nn.Linear(100, 10))


def _lenet(k, flat):
    return _seq(
        nn.Conv2d(1, 10, k), nn.MaxPool2d(2), nn.ReLU(),
        nn.Conv2d(10, 20, k), nn.Dropout2d(0.5), nn.MaxPool2d(2), nn.ReLU(),
        nn.Flatten(),
        nn.Linear(flat, 100), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(100, 10))


def cnn1():
    return _lenet(5, 320)          # 20 * 4 * 4


def cnn2():
    return _lenet(3, 500)          # 20 * 5 * 5


def downpour_cnn():
    return _seq(
        nn.Conv2d(1, 32, 3), nn.ReLU(),
        nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),   # 64 * 12 * 12 = 9216
        nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, 10))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False),
                nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18Cifar(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        # named as dtrain's resnet18-cifar (layer1.0.conv1, ..., linear): the same state_dict keys
        cin = 64
        for i, (cout, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2))):
            setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.linear = nn.Linear(512, num_classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


def resnet18_cifar():
    m = ResNet18Cifar()
    n = sum(p.numel() for p in m.parameters())
    assert n == 11173962, f"resnet18-cifar has {n} parameters, want 11173962"
    return m


def alexnet_cifar():
    return _seq(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 192, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),                                       # 256 * 4 * 4 = 4096
        nn.Dropout(0.5), nn.Linear(4096, 1024), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(1024, 1024), nn.ReLU(),
        nn.Linear(1024, 10))


def _same(x):
    return x


class CausalSelfAttention(nn.Module):
    """nanoGPT's (model.py), without dropout: torch 1.13 has no scaled_dot_product_attention,
    so its manual path, the causal mask a buffer (not persistent: state_dict keys stay
    dtrain's tensor names; nanoGPT's own module saves it as attn.bias, which its loader drops)."""
    r = staticmethod(_same)  # scripts/torch_oracle.py rounds here: dtrain stores this output

    def __init__(self, width, heads, context):
        super().__init__()
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.heads = heads
        self.register_buffer("bias", torch.tril(torch.ones(context, context)).view(1, 1, context, context),
                             persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        y = self.r(att @ v)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Mlp(nn.Module):
    r = staticmethod(_same)

    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(self.r(F.gelu(self.c_fc(x), approximate="tanh")))  # GPT-2's GELU, dtrain's


class Block(nn.Module):
    r = staticmethod(_same)

    def __init__(self, width, heads, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, context)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = Mlp(width)

    def forward(self, x):
        x = self.r(x + self.attn(self.ln_1(x)))
        return self.r(x + self.mlp(self.ln_2(x)))


class Gpt(nn.Module):
    """nanoGPT's GPT (model.py, bias=True, dropout 0): its module names, so its state_dict keys
    are dtrain's tensor names (and lm_head.weight, the tied transformer.wte.weight); its
    initialisation."""
    r = staticmethod(_same)

    def __init__(self, layers, heads, width, context, vocab):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width), wpe=nn.Embedding(context, width),
            h=nn.ModuleList([Block(width, heads, context) for _ in range(layers)]), ln_f=nn.LayerNorm(width)))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for m in self.modules():  # nanoGPT's _init_weights
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for n, p in self.named_parameters():
            if n.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))

    def forward(self, idx):
        t = idx.size(1)
        tok = self.r(self.transformer.wte(idx))
        x = self.r(tok + self.transformer.wpe(torch.arange(t)))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def gpt_tiny():
    return Gpt(4, 4, 128, 64, 256)    # nanoGPT's CPU configuration on bytes: 834,304 parameters


def gpt_small():
    return Gpt(6, 6, 384, 256, 256)


MODELS = {
    # name: (constructor, input shape per image); a language model's: (T,) token ids
    "gpt-tiny": (gpt_tiny, (64,)),
    "gpt-small": (gpt_small, (256,)),
    "mlp": (mlp, (1, 28, 28)),
    "cnn1": (cnn1, (1, 28, 28)),
    "cnn2": (cnn2, (1, 28, 28)),
    "downpour-cnn": (downpour_cnn, (1, 28, 28)),
    "resnet18-cifar": (resnet18_cifar, (3, 32, 32)),
    "alexnet-cifar": (alexnet_cifar, (3, 32, 32)),
}


# ---------------------------------------------------------------- main

def openblas_core():
    """OpenBLAS kernel family torch's BLAS calls (nn.Linear) use, or '?'.

    Debian's torch reaches OpenBLAS through libblas.so.3; convolutions go
    through oneDNN, which picks its own ISA."""
    for lib in ("libopenblas.so.0", "libblas.so.3"):
        try:
            f = ctypes.CDLL(lib).openblas_get_corename
            f.restype = ctypes.c_char_p
            return f().decode()
        except (OSError, AttributeError):
            continue
    return "?"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', torch.bfloat16), "
                         "PyTorch's mixed precision (fp32 weights and optimiser)")
    args = ap.parse_args(argv)
    if args.batch < 1 or args.steps < 1 or args.warmup < 0:
        ap.error("--batch and --steps must be >= 1, --warmup >= 0")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    ctor, shape = MODELS[args.model]
    model = ctor().float()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr,
                          momentum=args.momentum)

    # Pre-generated random data: a small pool of distinct batches, cycled. A language model:
    # token ids and a target at every position (its loss over batch x T rows, as dtrain's).
    nbatches = min(args.warmup + args.steps, 8)
    lm = isinstance(model, Gpt)
    if lm:
        vocab = model.lm_head.out_features
        xs = [torch.randint(0, vocab, (args.batch, *shape)) for _ in range(nbatches)]
        ys = [torch.randint(0, vocab, (args.batch * shape[0],)) for _ in range(nbatches)]
    else:
        xs = [torch.randn(args.batch, *shape) for _ in range(nbatches)]
        ys = [torch.randint(0, 10, (args.batch,)) for _ in range(nbatches)]

    def step(i):
        x, y = xs[i % nbatches], ys[i % nbatches]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            z = model(x)
            loss = F.cross_entropy(z.view(-1, z.size(-1)) if lm else z, y)
        loss.backward()
        opt.step()
        return loss

    for i in range(args.warmup):
        step(i)

    t0 = time.perf_counter()
    for i in range(args.steps):
        loss = step(args.warmup + i)
    loss = float(loss)                      # (CPU: already synchronous)
    dt = time.perf_counter() - t0
    if loss != loss:
        print(f"pytorch: loss is NaN for model {args.model}", file=sys.stderr)

    # Informational, on stderr (stdout carries exactly the one result line).
    print(f"pytorch_train: torch {torch.__version__} openblas_core={openblas_core()} "
          f"threads={torch.get_num_threads()} loss={loss:.4f}", file=sys.stderr)

    ips = args.batch * args.steps / dt
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tokens = f" positions={shape[0]} tokens_per_s={ips * shape[0]:.1f}" if lm else ""
    print(f"pytorch model={args.model} batch={args.batch} precision={args.precision} "
          f"images_per_s={ips:.1f}{tokens} maxrss_kb={maxrss}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
