#!/usr/bin/python3
"""Turns the raw result lines collected by bench/run into tables.

Input file, one line per run (written by bench/run):
    rep=<r> dtrain model=<m> batch=<b> precision=<p> images_per_s=<f> fwd_flops=<f> maxrss_kb=<i>
        activation_kb=<i> blas=<core> kernels=<tier> engines=<kind:engine:count,...>
    rep=<r> pytorch model=<m> batch=<b> precision=<p> images_per_s=<f> maxrss_kb=<i> blas=<core>
    (a language model's lines also have positions=<T> tokens_per_s=<f>; images are its windows)
    rep=<r> dtrain FAILED model=<m> rc=<rc>          (failed or unparsable run)

Peaks: --peak CORE=GFLOPS (repeatable), e.g. --peak Haswell=106.0 --peak SkylakeX=203.1
"""
import argparse
import statistics
import sys


def parse_kv(tokens):
    out = {}
    for t in tokens:
        if "=" in t:
            k, v = t.split("=", 1)
            out[k] = v
    return out


def load(path):
    runs = []   # dicts with rep, side, ok, fields
    with open(path) as f:
        for line in f:
            tok = line.split()
            if len(tok) < 2 or not tok[0].startswith("rep="):
                continue
            rep = int(tok[0][4:])
            side = tok[1]
            kv = parse_kv(tok[2:])
            ok = "FAILED" not in tok and "images_per_s" in kv
            runs.append({"rep": rep, "side": side, "ok": ok, "kv": kv})
    return runs


def fmt(x, nd=1):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{nd}f}"


def stat3(vals, nd=1):
    """'median (min - max)' or '-'."""
    if not vals:
        return "-"
    return f"{fmt(statistics.median(vals), nd)} ({fmt(min(vals), nd)} - {fmt(max(vals), nd)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--peak", action="append", default=[],
                    help="CORE=GFLOPS, one per measured OpenBLAS core")
    ap.add_argument("--models", default="",
                    help="space-separated model order for the tables")
    args = ap.parse_args()

    peaks = {}
    for p in args.peak:
        core, _, g = p.partition("=")
        try:
            peaks[core.lower()] = (core, float(g))
        except ValueError:
            pass

    runs = load(args.results)
    models = args.models.split() or sorted({r["kv"].get("model", "?") for r in runs})
    summary = []

    for m in models:
        mr = [r for r in runs if r["kv"].get("model") == m]
        d = {r["rep"]: r for r in mr if r["side"] == "dtrain" and r["ok"]}
        p = {r["rep"]: r for r in mr if r["side"] == "pytorch" and r["ok"]}
        dfail = sum(1 for r in mr if r["side"] == "dtrain" and not r["ok"])
        pfail = sum(1 for r in mr if r["side"] == "pytorch" and not r["ok"])
        dips = [float(r["kv"]["images_per_s"]) for r in d.values()]
        pips = [float(r["kv"]["images_per_s"]) for r in p.values()]
        ratios = [float(d[k]["kv"]["images_per_s"]) / float(p[k]["kv"]["images_per_s"])
                  for k in sorted(set(d) & set(p))
                  if float(p[k]["kv"]["images_per_s"]) > 0]
        batch = next((r["kv"].get("batch") for r in mr if r["kv"].get("batch")), "?")
        fwd = None
        cores = sorted({r["kv"].get("blas", "?") for r in d.values()})
        for r in d.values():
            try:
                fwd = float(r["kv"]["fwd_flops"])
                break
            except (KeyError, ValueError):
                pass
        train_flops = 3.0 * fwd if fwd else None
        dgf = [x * train_flops * 1e-9 for x in dips] if train_flops else []
        pgf = [x * train_flops * 1e-9 for x in pips] if train_flops else []
        core = cores[0] if len(cores) == 1 else None
        peak = peaks.get(core.lower()) if core else None
        drss = [int(r["kv"]["maxrss_kb"]) for r in d.values() if "maxrss_kb" in r["kv"]]
        prss = [int(r["kv"]["maxrss_kb"]) for r in p.values() if "maxrss_kb" in r["kv"]]

        print(f"== {m}  batch={batch}  runs: dtrain {len(d)} ok/{dfail} failed, "
              f"pytorch {len(p)} ok/{pfail} failed")
        print(f"   {'':22s} median (min - max)")
        print(f"   {'dtrain images/s':22s} {stat3(dips)}")
        print(f"   {'pytorch images/s':22s} {stat3(pips)}")
        # a language model: windows of T tokens (images/s above), and tokens a second
        dtok = [float(r["kv"]["tokens_per_s"]) for r in d.values() if "tokens_per_s" in r["kv"]]
        ptok = [float(r["kv"]["tokens_per_s"]) for r in p.values() if "tokens_per_s" in r["kv"]]
        if dtok or ptok:
            print(f"   {'dtrain tokens/s':22s} {stat3(dtok)}")
            print(f"   {'pytorch tokens/s':22s} {stat3(ptok)}")
        print(f"   {'ratio dtrain/pytorch':22s} {stat3(ratios, 2)}   (median of per-repeat ratios)")
        if train_flops:
            print(f"   {'train MFLOP/image':22s} {train_flops * 1e-6:.2f}   (3 x forward {fwd * 1e-6:.2f})")
            print(f"   {'dtrain GFLOP/s':22s} {stat3(dgf)}")
            print(f"   {'pytorch GFLOP/s':22s} {stat3(pgf)}")
            if peak and dgf:
                frac = statistics.median(dgf) / peak[1]
                print(f"   {'dtrain / sgemm peak':22s} {100 * frac:.1f}%   "
                      f"(blas={core}, peak {peak[1]:.1f} GFLOP/s)")
            else:
                print(f"   {'dtrain / sgemm peak':22s} -   (blas={','.join(cores) or '?'}: no peak measured)")
        print(f"   {'peak RSS MiB':22s} dtrain {fmt(max(drss) / 1024 if drss else None)}"
              f"   pytorch {fmt(max(prss) / 1024 if prss else None)}")
        pcores = sorted({r["kv"].get("blas", "?") for r in p.values()})
        print(f"   {'OpenBLAS core':22s} dtrain {','.join(cores) or '-'}   "
              f"pytorch nn.Linear {','.join(pcores) or '-'} (convolutions: oneDNN)")
        engines = sorted({r["kv"].get("engines", "?") for r in d.values()})
        print(f"   {'dtrain engines':22s} {' | '.join(engines)}   (own: dtrain's kernels; oneDNN: its primitives)")
        print()
        summary.append((m, batch, dips, pips, ratios, dgf, peak, drss, prss,
                        f"{','.join(cores) or '-'}/{','.join(pcores) or '-'}"))

    print("== summary (medians; single core, one thread)")
    hdr = (f"{'model':16s} {'batch':>5s} {'dtrain img/s':>13s} {'pytorch img/s':>14s} "
           f"{'ratio':>6s} {'dtrain GF/s':>11s} {'%peak':>6s} {'RSS MiB d/p':>13s}  blas d/p")
    print(hdr)
    for m, batch, dips, pips, ratios, dgf, peak, drss, prss, cores in summary:
        med = (lambda v: statistics.median(v) if v else None)
        pk = (f"{100 * statistics.median(dgf) / peak[1]:.0f}%" if peak and dgf else "-")
        rss = (f"{fmt(max(drss) / 1024 if drss else None, 0)}/"
               f"{fmt(max(prss) / 1024 if prss else None, 0)}")
        print(f"{m:16s} {batch:>5s} {fmt(med(dips)):>13s} {fmt(med(pips)):>14s} "
              f"{fmt(med(ratios), 2):>6s} {fmt(med(dgf)):>11s} {pk:>6s} {rss:>13s}  {cores}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
