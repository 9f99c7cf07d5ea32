"""scripts/report --area: the SHM-Learn-Dist search. A run's figure is the area under its
training-loss curve (the step lines of --progress N) with x = images seen / the images seen at
its last step line, by the trapezoid rule: the mean loss over the run, comparable across batch
sizes (a small batch takes more steps for the same images). Per worker count and scheme the
runs form a batch x lr grid; a cell is the mean area of its runs that count (seeds), blank when
none does: diverged, not finished, fewer than two step lines, or (--loss-below X) a loss that
never fell below X, since a run that never learned must not win by a flat curve."""
import math

import dtrain.log as dtrainlog  # python/dtrain: on the path of scripts/report, which imports this
from dtrain.log import show
from dtrainout import csv_text, markdown

AXES = ("batch", "lr")
# settings that are the grid's axes or follow from them (steps_per_epoch from the batch and the
# workers): not part of a scheme's name
NOT_SCHEME = AXES + ("ranks", "training_ranks", "steps_per_epoch", "hosts")



def workers_text(w):
    """'1 worker', '4 workers'."""
    return f"{show(w)} worker{'' if w == 1 else 's'}"

def area(run):
    """(area, min loss) of RUN's step lines, or (None, why) when it has no curve to measure."""
    pts = [(dtrainlog.number(s.get("images")), dtrainlog.number(s.get("loss"))) for s in run.step_lines()]
    pts = [(x, y) for x, y in pts if x is not None and y is not None]
    if len(pts) < 2:
        return None, f"{len(pts)} step lines with images and loss (--progress N writes them)"
    pts.sort()
    total = pts[-1][0]
    if total <= 0:
        return None, "no images seen"
    a = math.fsum((x1 - x0) / total * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(pts, pts[1:]))
    return a, min(y for _, y in pts)


def measure(run, loss_below):
    """(area or None, why blank)."""
    if run.diverged is not None:
        return None, "diverged"
    if run.summary is None:
        return None, "no summary (failed or running)"
    a, m = area(run)
    if a is None:
        return None, m
    if loss_below is not None and not m < loss_below:
        return None, f"loss never below {loss_below:g} (min {m:.4g})"
    return a, ""


def report(runs, loss_below, group_ignore):
    """(Markdown, CSV, draw(path)) of the search over RUNS."""
    ignore = tuple(k for k in (group_ignore or "").split(",") if k)
    drop = NOT_SCHEME + ignore
    keys = [dict(k) for k in (dtrainlog.group_key(r, ignore) for r in runs)]
    keys = [{k: v for k, v in c.items() if not any(k == d or k.startswith(d + ".") for d in drop)} for c in keys]
    vary = dtrainlog.name_keys(keys)
    scheme_of = lambda c: dtrainlog.name_of(c, vary) or show(c.get("algo"))
    cells, per_run = {}, []
    for r, c in zip(runs, keys):
        a, why = measure(r, loss_below)
        # frozen: a setting may be any JSON value, and a list or object is not a key
        sk = (dtrainlog.freeze(r.workers), scheme_of(c))
        bl = (dtrainlog.freeze(r.get("batch")), dtrainlog.freeze(r.get("lr")))
        cells.setdefault(sk, {}).setdefault(bl, []).append((r, a))
        acc = r.summary_value("test_acc")
        per_run.append([r.label, show(r.workers), sk[1], show(r.get("batch")), show(r.get("lr")), show(r.get("seed")),
                        r.status, len(r.steps), "" if a is None else f"{a:.6f}",
                        "" if acc is None else f"{100 * acc:.2f}", why])
    sort = lambda v: (0, v) if isinstance(v, (int, float)) else (1, show(v))
    md, winners, grids = [], [], []
    for (w, scheme) in sorted(cells, key=lambda k: (sort(k[0]), k[1])):
        grid = cells[(w, scheme)]
        batches = sorted({b for b, _ in grid}, key=sort)
        lrs = sorted({lr for _, lr in grid}, key=sort)
        mean = {}
        for bl, rs in grid.items():
            good = [a for _, a in rs if a is not None]
            if good:
                mean[bl] = (math.fsum(good) / len(good), len(good), len(rs))
        rows = []
        for b in batches:
            row = [show(b)]
            for lr in lrs:
                m = mean.get((b, lr))
                row.append("" if m is None else f"{m[0]:.4f}" + ("" if m[1] == m[2] else f" ({m[1]} of {m[2]})"))
            rows.append(row)
        md.append(f"## {workers_text(w)}, {scheme}\n\n" + markdown(["batch \\ lr"] + [show(x) for x in lrs], rows))
        grids.append((w, scheme, batches, lrs, mean))
        if mean:
            (b, lr), (m, _, _) = min(mean.items(), key=lambda kv: kv[1][0])
            accs = [r.summary_value("test_acc") for r, a in grid[(b, lr)] if a is not None]
            accs = [100 * x for x in accs if x is not None]
            winners.append([show(w), scheme, show(b), show(lr), f"{m:.4f}",
                            f"{math.fsum(accs) / len(accs):.2f}" if accs else "–"])
        else:
            winners.append([show(w), scheme, "–", "–", "–", "–"])
    head = ("Area under the training-loss curve (x = images seen / the run's images seen: the mean loss "
            "over the run); lower is better. Blank: diverged, not finished, no curve"
            + (f", or the loss never below {loss_below:g}" if loss_below is not None else "") + ".\n\n")
    text = head + "\n".join(md) + "\n## Winners\n\n" + markdown(
        ["workers", "scheme", "batch", "lr", "area", "test acc %"], winners)
    csv_out = csv_text(["run", "workers", "scheme", "batch", "lr", "seed", "status", "step_lines", "area",
                            "test_acc", "blank_because"], per_run)
    return text, csv_out, lambda path: heat_map(path, grids, loss_below)


def heat_map(path, grids, loss_below):
    """A panel per worker count and scheme: batch (rows) x lr (columns), the areas annotated,
    blank cells hatched."""
    import dtrainfig
    plt = dtrainfig.pyplot()
    import numpy as np
    from matplotlib.patches import Rectangle
    n = len(grids)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.6 * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax, (w, scheme, batches, lrs, mean) in zip(axes.flat, grids):
        z = np.full((len(batches), len(lrs)), np.nan)
        for (b, lr), (m, _, _) in mean.items():
            z[batches.index(b), lrs.index(lr)] = m
        cmap = plt.get_cmap("viridis_r").copy()
        cmap.set_bad("white")
        im = ax.imshow(np.ma.masked_invalid(z), cmap=cmap, aspect="auto", origin="lower")
        ax.grid(False)
        finite = z[np.isfinite(z)]
        mid = (finite.min() + finite.max()) / 2 if finite.size else 0
        for i in range(len(batches)):
            for j in range(len(lrs)):
                if np.isfinite(z[i, j]):
                    ax.text(j, i, f"{z[i, j]:.3f}", ha="center", va="center", fontsize=7,
                            color="white" if z[i, j] > mid else "black")
                else:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///",
                                           edgecolor="#bbbbbb", linewidth=0))
        ax.set_xticks(range(len(lrs)), [show(x) for x in lrs])
        ax.set_yticks(range(len(batches)), [show(x) for x in batches])
        ax.set_xlabel("learning rate")
        ax.set_ylabel("batch")
        ax.set_title(f"{workers_text(w)}, {scheme}")
        fig.colorbar(im, ax=ax, label="mean training loss")
    dtrainfig.save(fig, path)
    plt.close(fig)
