#!/usr/bin/python3
"""PyTorch reference for dtrain's single-rank training-step benchmark.

Builds the same models as dtrain, trains them on random in-memory data with
SGD (lr 0.05, momentum 0.9) in float32 (or bf16 autocast: --precision bf16) on
one thread, and prints one line:

    pytorch model=<m> batch=<b> precision=<p> images_per_s=<float> maxrss_kb=<int>

Only forward + cross-entropy + backward + optimizer.step (with
zero_grad(set_to_none=True)) is timed; data generation is done up front.
Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import ctypes
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


MODELS = {
    # name: (constructor, input shape per image)
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

    # Pre-generated random data: a small pool of distinct batches, cycled.
    nbatches = min(args.warmup + args.steps, 8)
    xs = [torch.randn(args.batch, *shape) for _ in range(nbatches)]
    ys = [torch.randint(0, 10, (args.batch,)) for _ in range(nbatches)]

    def step(i):
        x, y = xs[i % nbatches], ys[i % nbatches]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = F.cross_entropy(model(x), y)
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
    print(f"pytorch model={args.model} batch={args.batch} precision={args.precision} "
          f"images_per_s={ips:.1f} maxrss_kb={maxrss}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
