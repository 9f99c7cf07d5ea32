#!/usr/bin/python3
"""PyTorch's side of tests/cli_safetensors.sh: safetensors files read and written with a few
lines of Python (Debian has no safetensors package), models from bench/pytorch_train.py.

    st_torch.py eval FILE MODEL MNIST_DIR N   accuracy (percent, 2 decimals) of FILE's weights
                                              loaded with strict=True, on the first N test images
    st_torch.py write FILE MODEL SEED DATA [SPEC]  a freshly seeded MODEL's state_dict as FILE
                                              (__metadata__ model MODEL, data DATA; with SPEC,
                                              a spec file: model SPEC and spec its text)
    st_torch.py keys FILE MODEL               exit 1 unless FILE's tensor names, dtypes and
                                              shapes are MODEL's state_dict's
    st_torch.py lmloss FILE MODEL TEXT N      a language model's mean loss (nats, 4 decimals) on
                                              the first N held-out windows of the byte text TEXT
                                              (its last tenth, as dtrain's test set)
MODEL: cnn1, resnet18-cifar, bn-tiny (tests/cli_safetensors.sh's batch-norm spec) or gpt-tiny."""
import json
import os
import struct
import sys
from collections import OrderedDict

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
from pytorch_train import cnn1, gpt_tiny, resnet18_cifar  # noqa: E402  dtrain's models, dtrain's names
from ddp_mnist import load_mnist  # noqa: E402  normalised as dtrain does

DTYPES = {"F32": torch.float32, "I64": torch.int64}


def bn_tiny():
    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(1, 4, 5, stride=2)), ("bn1", nn.BatchNorm2d(4)), ("relu1", nn.ReLU()),
        ("flatten1", nn.Flatten()), ("fc", nn.Linear(576, 10))]))


MODELS = {"cnn1": cnn1, "resnet18-cifar": resnet18_cifar, "bn-tiny": bn_tiny, "gpt-tiny": gpt_tiny}


def read(path):
    """The reading side, as a PyTorch user writes it: {name: tensor}, metadata."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = bytearray(blob[8 + n:])
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = torch.frombuffer(data[b:e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).clone()
    return out, meta


def write(path, state, meta):
    """The writing side: the reference layout, tensors in name order (not dtrain's)."""
    header, chunks, off = {}, [], 0
    for name in sorted(state):
        t = state[name].contiguous()
        raw = t.numpy().tobytes()
        dtype = {torch.float32: "F32", torch.int64: "I64"}[t.dtype]
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


def main(argv):
    cmd, path, model = argv[1], argv[2], argv[3]
    m = MODELS[model]()
    if cmd == "eval":
        state, _ = read(path)
        m.load_state_dict(state, strict=True)
        m.eval()
        x, y = load_mnist(argv[4], False, int(argv[5]))
        with torch.no_grad():
            correct = int((m(x).argmax(1) == y).sum())
        print(f"{100 * correct / len(y):.2f}")
    elif cmd == "lmloss":
        state, _ = read(path)
        m.load_state_dict(state, strict=True)  # both transformer.wte.weight and the tied lm_head.weight
        m.eval()
        data = open(argv[4], "rb").read()
        tail = torch.tensor(list(data[len(data) - len(data) // 10:]), dtype=torch.long)
        T = m.transformer.wpe.weight.shape[0]
        n = min(int(argv[5]), (len(tail) - T) // T)
        x = torch.stack([tail[i * T:i * T + T] for i in range(n)])
        y = torch.stack([tail[i * T + 1:i * T + T + 1] for i in range(n)])
        with torch.no_grad():
            z = m(x)
            loss = torch.nn.functional.cross_entropy(z.view(-1, z.size(-1)), y.view(-1))
        print(f"{float(loss):.4f}")
    elif cmd == "write":
        torch.manual_seed(int(argv[4]))
        m = MODELS[model]()
        with torch.no_grad():  # batch-norm statistics away from 0 and 1, so reading them matters
            for name, b in m.named_buffers():
                if name.endswith("running_mean"):
                    b.uniform_(-0.5, 0.5)
                elif name.endswith("running_var"):
                    b.uniform_(0.5, 2.0)
        meta = {"format": "pt", "model": model, "data": argv[5]}
        if len(argv) > 6:  # a spec file's path and its text, as dtrain writes them: dtrain reads
            meta["model"] = argv[6]  # the text, never a path a file names
            with open(argv[6]) as f:
                meta["spec"] = f.read()
        write(path, m.state_dict(), meta)
    elif cmd == "keys":
        state, _ = read(path)
        want = {k: (v.dtype, tuple(v.shape)) for k, v in m.state_dict().items()}
        got = {k: (v.dtype, tuple(v.shape)) for k, v in state.items()}
        if want != got:
            diff = sorted(set(want.items()) ^ set(got.items()))[:4]
            print(f"{path}: {len(got)} tensors, the torch model has {len(want)}; differ: {diff}")
            return 1
        print(f"{len(got)} tensors, names, dtypes and shapes as the torch model's state_dict")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
