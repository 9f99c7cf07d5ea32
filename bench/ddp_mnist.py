#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo) on dtrain's cnn1 and MNIST, logged as dtrain logs.

The anchor of issue 9's link-speed comparison: what dtrain's users would otherwise run, on the
same model (bench/pytorch_train.py's cnn1, dtrain's src/models/zoo.c spec), the same data (the
raw IDX files in data/mnist, each pixel (p/255 - 0.1307)/0.3081 as src/data/dataset.c), the
same batch per rank and the same SGD (lr 0.05, momentum 0, weight decay 0: dtrain's defaults),
with the training set split at random across the ranks (one seeded permutation, an equal
share each, reshuffled every epoch, the last partial batch dropped, as dtrain's --split
random) and one thread per rank. Started by MPICH's mpiexec (rank and size from PMI_RANK /
PMI_SIZE, else RANK / WORLD_SIZE, else one process), e.g. across scripts/netcluster hosts:

    scripts/netcluster mpiexec -n 4 /usr/bin/python3 bench/ddp_mnist.py \\
        --master-addr 10.213.7.1 --hook powersgd --powersgd-rank 1 --target-acc 0.97 \\
        --eval-every-steps 150 --log results/links-100mbit-ddp-powersgd-r1.jsonl

--hook none: DDP's own bucketed allreduce (no comm hook); fp16: default_hooks.
fp16_compress_hook; powersgd: powerSGD_hook.PowerSGDState(matrix_approximation_rank=R,
start_powerSGD_iter=10, the other settings PyTorch's defaults: error feedback, warm start)
with powerSGD_hook.powerSGD_hook.

The log (--log, written by rank 0) is in dtrain's format, so scripts/table and scripts/plot read
it unchanged: a "config" line, "eval" lines (--eval-every-steps), one "epoch" line per epoch
(and one for the part epoch a --target-acc or --max-seconds stop ends), a "summary" line with
every rank's counters. The lines go to LOG.tmp.PID as they are made and the file is renamed to
LOG at the end (also when a signal ends rank 0: then without a summary, as a killed dtrain run).

What is measured, per rank:
- training seconds: the steps only (forward, backward with DDP's allreduce, optimizer step);
  evaluation and the tiny collectives deciding whether to stop are excluded, as in dtrain.
- bytes and messages sent: counted as dtrain counts collectives (docs/accounting.md): every
  allreduce of B bytes is 2(N-1) messages and 2(N-1)/N*B bytes per rank (ring). B is what is
  handed to the allreduce: with --hook none DDP's bucket buffers in fp32 (their sizes from DDP's
  logging data); with a hook, every torch.distributed.all_reduce the hook calls (fp16: the
  bucket in fp16; PowerSGD: the uncompressed tensors, then the P and the Q matrices; plain fp32
  buckets before start_powerSGD_iter). DDP's broadcast of rank 0's weights at start is set-up
  and not counted (dtrain does not count its set-up either).
- exposed communication seconds: per step, the time from the moment the last parameter
  gradient of the backward pass is computed (a tensor hook on every parameter; DDP's bucket
  hooks fire right after it) to the return of loss.backward(). DDP launches each bucket's
  allreduce while backward goes on and loss.backward() returns only when every bucket's
  allreduce (and a hook's decoding) is done, so this is the time the step waited for the
  network once its own computation was over: communication not hidden behind backward,
  including a hook's compression work after the last gradient and waiting for slower ranks
  (as dtrain's comm s of a blocking collective includes them). It is reported as per_rank
  comm_s (and exposed_comm_s); compute_s is the rest of the training time.
- time per step (step_s) and images/s (batch x steps / training seconds) per rank.

dtrain switches OpenBLAS to its AVX-512 kernels where it detects an older family (dtrain bench
prints blas=NAME); for the same kernels here, set OPENBLAS_CORETYPE=NAME (scripts/experiments
links does); the config line's scheme.blas says which family torch used.

Errors are one line on stderr and exit status 2. Run with Debian's /usr/bin/python3
(python3-torch, PyTorch 1.13).
"""
import argparse
import gzip
import ipaddress
import json
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import time


OPEN_LOGS = []  # temporary log files an error removes


def die(msg, status=2):
    for tmp in OPEN_LOGS:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    print(f"ddp_mnist: {msg}", file=sys.stderr)
    sys.exit(status)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, like dtrain
        die(f"error: {message}")


def number(conv, ok, what):
    """An argparse type: conv(text), accepted when ok(value), else 'expected WHAT'."""
    def parse(text):
        try:
            v = conv(text)
        except ValueError:
            v = None
        if v is None or not ok(v):
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'")
        return v
    return parse


positive_int = number(int, lambda v: v >= 1, "a whole number >= 1")
nonneg_int = number(int, lambda v: v >= 0, "a whole number >= 0")
positive_float = number(float, lambda v: 0 < v < math.inf, "a number > 0")
accuracy = number(float, lambda v: 0 < v <= 1, "an accuracy in (0, 1]")


def parse_args(argv):
    p = Parser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--hook", choices=("none", "fp16", "powersgd"), default="none",
                   help="DDP communication hook [none: DDP's own allreduce]")
    p.add_argument("--powersgd-rank", type=positive_int, default=1, help="PowerSGD matrix approximation rank [1]")
    p.add_argument("--powersgd-start", type=nonneg_int, default=10,
                   help="PowerSGD: plain allreduce before this iteration (start_powerSGD_iter) [10]")
    p.add_argument("--epochs", type=positive_int, default=10, help="epochs [10]")
    p.add_argument("--batch", type=positive_int, default=64, help="mini-batch size per rank [64]")
    p.add_argument("--lr", type=positive_float, default=0.05, help="learning rate [0.05]")
    p.add_argument("--momentum", type=float, default=0.0, help="SGD momentum, dtrain's default [0]")
    p.add_argument("--weight-decay", type=float, default=0.0, help="L2 weight decay, dtrain's default [0]")
    p.add_argument("--seed", type=nonneg_int, default=1, help="weights, split, shuffling, dropout [1]")
    p.add_argument("--target-acc", type=accuracy, default=None,
                   help="stop at the first evaluation with this test accuracy, in (0, 1]")
    p.add_argument("--eval-every-steps", type=nonneg_int, default=0,
                   help="also evaluate every N steps (not counted as training time) [0: only per epoch]")
    p.add_argument("--max-seconds", type=positive_float, default=None,
                   help="stop at the first evaluation or epoch end after this many seconds since start (wall)")
    p.add_argument("--train-limit", type=positive_int, default=None, help="use only the first N training examples")
    p.add_argument("--val", type=nonneg_int, default=0,
                   help="hold out the last N training examples (after --train-limit) as a validation set, as dtrain's --val [0]")
    p.add_argument("--target-on", choices=("test", "val"), default="test",
                   help="the accuracy --target-acc is about: val (with --val) for a search that must not see the test set [test]")
    p.add_argument("--test-limit", type=positive_int, default=None, help="use only the first N test examples")
    p.add_argument("--data-dir", default=None, help="folder with the MNIST IDX files [$DTRAIN_DATA/mnist or data/mnist]")
    p.add_argument("--log", default=None, help="JSON-lines log in dtrain's format (written by rank 0)")
    p.add_argument("--bucket-cap-mb", type=positive_float, default=25.0, help="DDP bucket size [25, DDP's default]")
    p.add_argument("--master-addr", default=None, help="rank 0's address [$MASTER_ADDR or 127.0.0.1]")
    p.add_argument("--master-port", type=positive_int, default=None, help="rendezvous port [$MASTER_PORT or 29500]")
    p.add_argument("--iface", default=None,
                   help="network interface for gloo [$GLOO_SOCKET_IFNAME, else the one on MASTER_ADDR's subnet]")
    p.add_argument("--timeout", type=positive_float, default=300.0, help="collective timeout, seconds [300]")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    a = p.parse_args(argv)
    if not 0 <= a.momentum < 1:
        p.error(f"--momentum: expected a number in [0, 1), got '{a.momentum}'")
    if a.weight_decay < 0:
        p.error(f"--weight-decay: expected a number >= 0, got '{a.weight_decay}'")
    return a


# ---------------------------------------------------------------- data

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # src/data/dataset.c


def find_idx(folder, stem):
    """dtrain's accepted spellings: STEM-idxN-ubyte or STEM.idxN-ubyte, raw or .gz."""
    n = "3" if stem.endswith("images") else "1"
    for name in (f"{stem}-idx{n}-ubyte", f"{stem}.idx{n}-ubyte"):
        for suffix in ("", ".gz"):
            path = os.path.join(folder, name + suffix)
            if os.path.exists(path):
                return path
    die(f"{os.path.join(folder, f'{stem}-idx{n}-ubyte')}: not found (nor .gz, nor the '{stem}.idx{n}-ubyte' "
        f"spelling); MNIST's four IDX files are expected in {folder} (scripts/quickstart fetches them)")


def read_idx(path, want_dims):
    try:
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
            raw = f.read()
    except OSError as e:
        die(f"{path}: cannot read: {e.strerror or e}")
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8 or raw[3] != want_dims:
        die(f"{path}: not an IDX file of unsigned bytes with {want_dims} dimension(s)")
    hdr = 4 + 4 * want_dims
    if len(raw) < hdr:
        die(f"{path}: truncated header")
    dims = struct.unpack(">" + "I" * want_dims, raw[4:hdr])
    count = math.prod(dims)
    if len(raw) - hdr != count:
        die(f"{path}: {len(raw) - hdr} bytes of data, the header says {count}")
    return dims, raw[hdr:]


def load_mnist(folder, train, limit):
    import torch
    stem = "train" if train else "t10k"
    ipath, lpath = find_idx(folder, f"{stem}-images"), find_idx(folder, f"{stem}-labels")
    idims, ibytes = read_idx(ipath, 3)
    ldims, lbytes = read_idx(lpath, 1)
    if idims[1:] != (28, 28):
        die(f"{ipath}: images of {idims[1]}x{idims[2]}, expected 28x28")
    if idims[0] != ldims[0]:
        die(f"{ipath}: {idims[0]} images but {lpath} has {ldims[0]} labels")
    n = idims[0] if limit is None else min(limit, idims[0])
    x = torch.frombuffer(bytearray(ibytes[: n * 784]), dtype=torch.uint8).reshape(n, 1, 28, 28)
    x = (x.float() / 255.0 - MNIST_MEAN) / MNIST_STD
    y = torch.frombuffer(bytearray(lbytes[:n]), dtype=torch.uint8).long()
    if int(y.max()) > 9:
        die(f"{lpath}: a label above 9")
    return x, y


# ---------------------------------------------------------------- launch

def env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            try:
                return int(v)
            except ValueError:
                die(f"${n} is '{v}', expected a whole number")
    return None


def iface_for(addr):
    """The interface holding an address on addr's subnet (host 0 holds addr itself), or None."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(addr))
        except OSError:
            return None
    if ip.is_loopback:
        return None
    try:
        out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == "inet":
            try:
                if ip in ipaddress.ip_interface(f[3]).network:
                    return f[1]
            except ValueError:
                continue
    return None


class Log:
    """dtrain's JSON lines, appended to LOG.tmp.PID as made and renamed to LOG at the end."""

    def __init__(self, path):
        self.path, self.f, self.tmp = path, None, None
        if path is None:
            return
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            die(f"--log {path}: folder '{folder}' does not exist")
        self.tmp = f"{path}.tmp.{os.getpid()}"
        try:
            self.f = open(self.tmp, "w", encoding="utf-8")
        except OSError as e:
            die(f"--log {path}: cannot write: {e.strerror}")
        OPEN_LOGS.append(self.tmp)

    def line(self, rec):
        if self.f:
            self.f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            self.f.flush()

    def close(self):
        if self.f:
            self.f.flush()
            os.fsync(self.f.fileno())
            self.f.close()
            self.f = None
            os.replace(self.tmp, self.path)
            OPEN_LOGS.remove(self.tmp)


def rnd(x):
    """An accuracy or loss to 6 places; None (no --val) stays None (null in the log)."""
    return None if x is None else round(x, 6)


def r3(x):
    return None if x is None else round(x, 3)


# ---------------------------------------------------------------- main

def main(argv=None):
    a = parse_args(argv)
    t_start = time.perf_counter()
    rank = env_int("PMI_RANK", "RANK", "OMPI_COMM_WORLD_RANK")
    world = env_int("PMI_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")
    rank, world = (0 if rank is None else rank), (1 if world is None else world)
    if not 0 <= rank < world:
        die(f"rank {rank} is not in 0..{world - 1} (PMI_RANK / PMI_SIZE)")
    addr = a.master_addr or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    port = a.master_port or env_int("MASTER_PORT") or 29500
    iface = a.iface or os.environ.get("GLOO_SOCKET_IFNAME") or iface_for(addr)
    if iface:
        os.environ["GLOO_SOCKET_IFNAME"] = iface
    folder = a.data_dir or os.path.join(os.environ.get("DTRAIN_DATA") or "data", "mnist")
    if not os.path.isdir(folder):
        die(f"{folder}: no such folder (MNIST's IDX files; --data-dir DIR or $DTRAIN_DATA/mnist)")
    log = Log(a.log if rank == 0 else None)

    def on_signal(signum, _frame):  # a killed run leaves the lines it has, as dtrain's log does
        if log.f:
            log.close()
        os._exit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    except ImportError as e:
        die(f"{sys.executable} cannot import torch ({e}); install Debian's python3-torch")
    from datetime import timedelta
    sys.dont_write_bytecode = True  # no bench/__pycache__ in the work tree
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from pytorch_train import cnn1, openblas_core  # dtrain's cnn1, as the speed benchmark builds it
    torch.set_num_threads(1)

    xtr, ytr = load_mnist(folder, True, a.train_limit)
    xte, yte = load_mnist(folder, False, a.test_limit)
    if a.target_on == "val" and (not a.val or a.target_acc is None):
        die("error: --target-on val: needs --val N (the held-out set) and --target-acc A")
    if a.val >= xtr.shape[0]:
        die(f"error: --val {a.val}: must be smaller than the training set ({xtr.shape[0]} examples)")
    # the last N examples (after --train-limit), as dtrain's --val: the same for every seed
    xva, yva = xtr[xtr.shape[0] - a.val:], ytr[xtr.shape[0] - a.val:]
    xtr, ytr = xtr[:xtr.shape[0] - a.val], ytr[:ytr.shape[0] - a.val]
    shard = xtr.shape[0] // world
    steps_per_epoch = shard // a.batch
    if steps_per_epoch < 1:
        die(f"{xtr.shape[0]} training examples over {world} ranks leave fewer than one batch of {a.batch} per rank")

    try:
        dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=a.timeout))
    except (RuntimeError, ValueError) as e:
        die(f"rank {rank}: cannot join the gloo group at {addr}:{port}"
            f"{' over ' + iface if iface else ''}: {str(e).splitlines()[0]}")

    torch.manual_seed(a.seed)
    model = cnn1()
    params = sum(p.numel() for p in model.parameters())
    g = torch.Generator().manual_seed(a.seed)
    perm = torch.randperm(xtr.shape[0], generator=g)
    mine = perm[rank * shard:(rank + 1) * shard]
    torch.manual_seed(a.seed * 1000 + rank + 1)  # dropout: each rank its own stream
    ddp = DDP(model, bucket_cap_mb=a.bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)

    # ---- counting what the hooks hand to torch.distributed.all_reduce
    ring = 2.0 * (world - 1) / world
    count = {"on": False, "bytes": 0.0, "msgs": 0}
    real_all_reduce = dist.all_reduce

    def counted_all_reduce(tensor, *args, **kwargs):
        if count["on"]:
            count["bytes"] += ring * tensor.numel() * tensor.element_size()
            count["msgs"] += 2 * (world - 1)
        return real_all_reduce(tensor, *args, **kwargs)

    scheme = {"hook": a.hook, "bucket_cap_mb": a.bucket_cap_mb, "backend": "gloo", "torch": torch.__version__,
              "blas": openblas_core()}
    if a.hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        scheme["compress"] = "fp16"
    elif a.hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=a.powersgd_rank,
                                            start_powerSGD_iter=a.powersgd_start, random_seed=a.seed)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        scheme.update(compress=f"powersgd:{a.powersgd_rank}", powersgd_rank=a.powersgd_rank,
                      start_powerSGD_iter=a.powersgd_start, min_compression_rate=2, error_feedback=True,
                      warm_start=True)
    else:
        scheme["compress"] = "none"
    if a.hook != "none":
        dist.all_reduce = counted_all_reduce

    def bucket_bytes():  # --hook none: DDP's buckets, fp32
        sizes = ddp._get_ddp_logging_data().get("bucket_sizes", "")
        return [int(s) for s in str(sizes).split(",") if s.strip()] or [4 * params]

    # ---- the moment the last gradient is computed (see the docstring)
    last_grad = [0.0]

    def mark(grad):
        last_grad[0] = time.perf_counter()
        return grad
    for p in ddp.parameters():
        p.register_hook(mark)

    hosts = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    log.line({"type": "config", "version": "ddp_mnist", "commit": None, "model": "cnn1", "data": "mnist",
              "algo": "ddp", "ranks": world, "training_ranks": world, "hosts": hosts, "split": "random",
              "seed": a.seed, "epochs": a.epochs, "batch": a.batch, "lr": a.lr, "schedule": "const",
              "momentum": a.momentum, "nesterov": False, "weight_decay": a.weight_decay, "max_steps": 0,
              "eval_every": 1, "eval_every_steps": a.eval_every_steps, "target_acc": a.target_acc,
              "target_on": a.target_on, "val": a.val, "train_limit": a.train_limit or 0, "test_limit": a.test_limit or 0, "augment": False,
              "resume": None, "restarts": 0, "steps_per_epoch": steps_per_epoch, "max_seconds": a.max_seconds,
              "scheme": scheme})

    def evaluate(xs, ys):
        """Accuracy and mean loss on (xs, ys); (None, None) for an empty set (no --val)."""
        if xs.shape[0] == 0:
            return None, None
        m = ddp.module
        m.eval()
        correct, loss = 0, 0.0
        with torch.no_grad():
            for i in range(0, xs.shape[0], 1000):
                out = m(xs[i:i + 1000])
                loss += float(F.cross_entropy(out, ys[i:i + 1000], reduction="sum"))
                correct += int((out.argmax(1) == ys[i:i + 1000]).sum())
        m.train()
        return correct / xs.shape[0], loss / xs.shape[0]

    train_s = exposed_s = 0.0
    step = 0
    bytes_sent = msgs_sent = 0
    none_bytes = none_msgs = None
    eval_s = 0.0
    reached = None  # (train_s, step, msgs all ranks, mb all ranks)
    stop_reason = None
    last_acc = last_loss = last_val = last_val_loss = None
    epochs_done = 0

    def sent():
        if a.hook == "none":
            return bytes_sent, msgs_sent
        return count["bytes"], count["msgs"]

    def checkpoint_eval(at_epoch_end):
        """Rank 0 evaluates; every rank learns whether to stop. Not training time."""
        nonlocal eval_s, reached, last_acc, last_loss, last_val, last_val_loss
        t0 = time.perf_counter()
        flag = torch.zeros(1)
        if rank == 0:
            acc, tl = evaluate(xte, yte)
            last_acc, last_loss = acc, tl
            last_val, last_val_loss = evaluate(xva, yva)
            b, m = sent()
            judged = last_val if a.target_on == "val" else acc
            if a.target_acc is not None and judged >= a.target_acc and reached is None:
                reached = (train_s, step, m * world, b * world / 1e6)
                flag[0] = 1
            elif a.max_seconds is not None and time.perf_counter() - t_start >= a.max_seconds:
                flag[0] = 2
            if not at_epoch_end:
                log.line({"type": "eval", "step": step, "epoch": round(step / steps_per_epoch, 4),
                          "test_acc": round(acc, 6), "test_loss": round(tl, 6), "val_acc": rnd(last_val),
                          "val_loss": rnd(last_val_loss), "train_s": r3(train_s),
                          "eval_s": r3(time.perf_counter() - t0), "msgs_sent": m * world,
                          "mb_sent": round(b * world / 1e6, 4)})
        dist.broadcast(flag, 0)  # also the barrier: the others wait here while rank 0 evaluates
        eval_s += time.perf_counter() - t0
        return int(flag[0])

    ddp.train()
    for epoch in range(1, a.epochs + 1):
        g_ep = torch.Generator().manual_seed(a.seed * 7919 + epoch * 104729 + rank)
        order = mine[torch.randperm(shard, generator=g_ep)]
        ep_loss = ep_correct = ep_seen = 0.0
        ep_s = 0.0
        ep_steps = 0
        flag = 0
        for s in range(steps_per_epoch):
            idx = order[s * a.batch:(s + 1) * a.batch]
            x, y = xtr[idx], ytr[idx]
            count["on"] = True
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            out = ddp(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            t_bw = time.perf_counter()
            opt.step()
            t1 = time.perf_counter()
            count["on"] = False
            exposed_s += max(0.0, t_bw - last_grad[0])
            train_s += t1 - t0
            ep_s += t1 - t0
            step += 1
            ep_steps += 1
            if a.hook == "none":
                if none_bytes is None or step <= 2:  # DDP rebuilds its buckets after the first step
                    bb = bucket_bytes()
                    none_bytes, none_msgs = ring * sum(bb), 2 * (world - 1) * len(bb)
                bytes_sent += none_bytes
                msgs_sent += none_msgs
            ep_loss += float(loss) * y.shape[0]
            ep_correct += int((out.argmax(1) == y).sum())
            ep_seen += y.shape[0]
            if not math.isfinite(float(loss)):
                die(f"rank {rank}: loss is not finite at step {step} (epoch {epoch})", 3)
            if a.eval_every_steps and step % a.eval_every_steps == 0 and s != steps_per_epoch - 1:
                flag = checkpoint_eval(False)
                if flag:
                    break
        # epoch line (for a stopped epoch too): the ranks' training loss and accuracy averaged
        stats = torch.tensor([ep_loss, ep_correct, ep_seen], dtype=torch.float64)
        real_all_reduce(stats)
        if not flag:
            flag = checkpoint_eval(True)
        epochs_done = epoch
        b, m = sent()
        log.line({"type": "epoch", "epoch": epoch, "loss": round(float(stats[0] / stats[2]), 6),
                  "train_acc": round(float(stats[1] / stats[2]), 6), "test_acc": round(last_acc or 0.0, 6),
                  "test_loss": round(last_loss or 0.0, 6), "val_acc": rnd(last_val), "val_loss": rnd(last_val_loss),
                  "lr": a.lr, "seconds": r3(ep_s),
                  "images_per_s": round(world * a.batch * ep_steps / ep_s, 1) if ep_s > 0 else 0.0,
                  "msgs_pct": 100.0, "msgs_sent": m * world, "mb_sent": round(b * world / 1e6, 4), "spread": 0})
        if not a.quiet and rank == 0:
            print(f"epoch {epoch}: loss {float(stats[0] / stats[2]):.4f} test acc {100 * (last_acc or 0):.2f}% "
                  f"train {ep_s:.1f} s, {world * a.batch * ep_steps / max(ep_s, 1e-9):.0f} img/s, "
                  f"{b * world / 1e6:.1f} MB sent", flush=True)
        if flag:
            stop_reason = "target" if flag == 1 else "max_seconds"
            break

    b, m = sent()
    mine_stats = {"rank": rank, "msgs_sent": m, "bytes_sent": int(round(b)), "msgs_recv": m,
                  "bytes_recv": int(round(b)), "baseline_msgs": m, "fresh_recv": 0, "overwritten": 0,
                  "torn_retries": 0, "comm_s": r3(exposed_s), "compute_s": r3(train_s - exposed_s), "steps": step,
                  "exposed_comm_s": r3(exposed_s), "train_s": r3(train_s),
                  "step_s": round(train_s / step, 6) if step else None,
                  "images_per_s": round(a.batch * step / train_s, 1) if train_s > 0 else None}
    per_rank = [None] * world
    dist.all_gather_object(per_rank, mine_stats)
    if rank == 0:
        tot_b = sum(r["bytes_sent"] for r in per_rank)
        tot_m = sum(r["msgs_sent"] for r in per_rank)
        log.line({"type": "summary", "model": "cnn1", "data": "mnist", "algo": "ddp", "ranks": world,
                  "epochs": epochs_done, "batch": a.batch, "lr": a.lr, "steps": step,
                  "test_acc": round(last_acc or 0.0, 6), "val_acc": rnd(last_val), "val_loss": rnd(last_val_loss),
                  "params": params, "msgs_sent": tot_m,
                  "baseline_msgs": tot_m, "msgs_pct": 100.0, "mb_sent": round(tot_b / 1e6, 4),
                  "spread_before_avg": 0, "wall_s": r3(time.perf_counter() - t_start), "eval_s": r3(eval_s),
                  "train_s": r3(train_s), "restarts": 0, "redone_steps": 0, "target_acc": a.target_acc,
                  "target_on": a.target_on,
                  "time_to_target_s": r3(reached[0]) if reached else None,
                  "steps_to_target": reached[1] if reached else None,
                  "msgs_to_target": reached[2] if reached else None,
                  "mb_to_target": round(reached[3], 4) if reached else None,
                  "stopped": stop_reason or "epochs",
                  "capped_s": a.max_seconds if stop_reason == "max_seconds" else None,
                  "exposed_comm_s": r3(max(r["exposed_comm_s"] for r in per_rank)),
                  # as dtrain's summary: all ranks' exposed seconds over all ranks' training seconds
                  "comm_s": r3(sum(r["comm_s"] for r in per_rank)),
                  "compute_s": r3(sum(r["compute_s"] for r in per_rank)),
                  "exposed_comm_pct": round(100 * sum(r["exposed_comm_s"] for r in per_rank)
                                            / max(sum(r["train_s"] for r in per_rank), 1e-9), 2),
                  "step_s": round(max(r["train_s"] for r in per_rank) / step, 6) if step else None,
                  "per_rank": per_rank})
        log.close()
        if not a.quiet:
            print(f"ddp {a.hook}: {world} ranks, {step} steps, test acc {100 * (last_acc or 0):.2f}%, "
                  f"train {train_s:.1f} s ({1e3 * train_s / max(step, 1):.1f} ms/step, exposed comm "
                  f"{exposed_s:.1f} s), {tot_b / world / 1e6:.1f} MB sent per rank"
                  + (f", {a.target_acc:g} reached after {reached[0]:.1f} s" if reached else ""), flush=True)
    dist.barrier()
    # every line is written and every rank is past the barrier: leave without
    # destroy_process_group, which waited forever on rank 0 once its peers had exited (gloo,
    # 4 ranks on one machine: the run's log complete, the job never ending)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
