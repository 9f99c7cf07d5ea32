"""scripts/report --budgets MB1,MB2,...: which configuration is ahead at each byte budget. A
run's accuracy at budget B is its test accuracy at the last evaluation (an epoch line) whose
cumulative payload (the epoch line's mb_sent, every rank's) is at most B MB: what a user who
stopped when B MB had been sent would have. A configuration's cell is the mean over its
seeds, blank ("–") unless every finished seed had an evaluation within B (a mean over the seeds
that happen to be cheap would flatter it). Per budget the best mean is marked; ties within
the two leaders' larger std are named as such. Bytes beside the payloads (set-up copies,
models averaged for evaluation, protocol headers: the summary's other_mb_sent) are not in
mb_sent; a column gives them per configuration."""
import math

import dtrain.log as dtrainlog  # python/dtrain: on the path of scripts/report, which imports this
from dtrain.log import show
from dtrainout import csv_text, markdown

DASH = "–"


def budgets_of(text):
    """'10,100,1000' -> [10.0, 100.0, 1000.0]; ValueError naming what was expected."""
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or any(not (b > 0) or math.isinf(b) for b in out):
        raise ValueError(f"--budgets {text}: expected MB values > 0, comma-separated (10,100,1000)")
    return sorted(set(out))


def acc_within(run, budget):
    """RUN's test accuracy (%) at its last evaluation with mb_sent <= BUDGET, or None."""
    best = None
    for e in run.epoch_lines():
        mb, acc = dtrainlog.number(e.get("mb_sent")), dtrainlog.number(e.get("test_acc"))
        if mb is None or acc is None or mb > budget:
            continue
        if best is None or mb >= best[0]:
            best = (mb, 100.0 * acc)
    return None if best is None else best[1]


def mean_std(vals):
    m = math.fsum(vals) / len(vals)
    s = math.sqrt(math.fsum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return m, s


def report(runs, budgets, group_ignore):
    """(Markdown, CSV) of the budget table over RUNS."""
    ignore = tuple(k for k in (group_ignore or "").split(",") if k)
    groups = dtrainlog.group_runs(runs, ignore)
    keys = dtrainlog.name_keys([k for k, _ in groups])
    rows = []  # (name, {budget: (mean, std, n) or None}, other MB, final acc)
    for k, rs in groups:
        ok = [r for r in rs if r.ok]
        cells = {}
        for b in budgets:
            vals = [acc_within(r, b) for r in ok]
            cells[b] = mean_std(vals) + (len(vals),) if ok and all(v is not None for v in vals) else None
        other = [r.summary_value("other_mb_sent") for r in ok]
        other = [o for o in other if o is not None]
        final = [100.0 * r.summary_value("test_acc") for r in ok if r.summary_value("test_acc") is not None]
        rows.append((dtrainlog.name_of(k, keys) or show(k.get("algo")), cells,
                     mean_std(other)[0] if other else None, mean_std(final) if final else None, len(ok)))
    winners = {}
    for b in budgets:
        ranked = sorted((c[b][0], c[b][1], name) for name, c, *_ in rows if c[b] is not None)
        if ranked:
            (m1, s1, n1) = ranked[-1]
            tied = [n for m, s, n in ranked[:-1] if m1 - m <= max(s1, s)]
            winners[b] = (n1, tied)
    md_h = ["configuration", "seeds"] + [f"≤ {b:g} MB" for b in budgets] + ["final test acc %", "MB beside"]
    csv_h = ["configuration", "seeds"] + [f"acc_le_{b:g}mb_{x}" for b in budgets for x in ("mean", "std")]
    csv_h += ["final_acc_mean", "final_acc_std", "other_mb_mean"]
    md_rows, csv_rows = [], []
    for name, cells, other, final, n in rows:
        md, cv = [name, n], [name, n]
        for b in budgets:
            c = cells[b]
            if c is None:
                md.append(DASH)
                cv += ["", ""]
                continue
            text = f"{c[0]:.2f} ± {c[1]:.2f}"
            md.append(f"**{text}**" if winners.get(b, ("",))[0] == name else text)
            cv += [f"{c[0]:.4f}", f"{c[1]:.4f}"]
        md.append(DASH if final is None else f"{final[0]:.2f} ± {final[1]:.2f}")
        md.append(DASH if other is None else f"{other:.1f}")
        cv += ["" if final is None else f"{final[0]:.4f}", "" if final is None else f"{final[1]:.4f}",
               "" if other is None else f"{other:.3f}"]
        md_rows.append(md)
        csv_rows.append(cv)
    lines = [f"{len(runs)} runs, {len(groups)} configurations. Test accuracy % at the last evaluation within each "
             "budget of payload MB (all ranks), mean ± std over the seeds; – where some seed had no evaluation "
             "within it; bold: the best mean."]
    for b in budgets:
        if b in winners:
            n1, tied = winners[b]
            more = f" and {len(tied) - 3} more" if len(tied) > 3 else ""
            lines.append(f"- ≤ {b:g} MB: {n1}" + (f" (within a std: {'; '.join(tied[-3:][::-1])}{more})" if tied else ""))
        else:
            lines.append(f"- ≤ {b:g} MB: no configuration evaluated within it")
    return "\n".join(lines) + "\n\n" + markdown(md_h, md_rows), csv_text(csv_h, csv_rows)
