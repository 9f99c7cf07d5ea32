"""Figures the same way for scripts/plot and scripts/report --area: matplotlib on the Agg
backend (no display), the format from the file name, written atomically, the same bytes for
the same input (no dates, fixed SVG ids), text kept as text (SVG) and TrueType (PDF), line
styles that tell 360 lines apart, 1-2-5 ticks on log axes."""
import math
import os

from dtrainout import write_atomically

FORMATS = ("pdf", "png", "svg")


class FigError(Exception):
    """A one-line reason."""


def check_out(path, flag="--out"):
    """The format of PATH from its extension; FigError for any other (before any work)."""
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in FORMATS:
        raise FigError(f"{flag} {path}: expected a file name ending in .pdf, .png or .svg")
    return ext


def pyplot():
    """matplotlib.pyplot on Agg, set up for papers; FigError if python3-matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FigError("needs matplotlib: apt-get install python3-matplotlib (scripts/install-deps)")
    matplotlib.rcParams.update({
        "svg.fonttype": "none",   # SVG text stays text (the tests read the legend back)
        "svg.hashsalt": "dtrain",  # fixed ids: the same figure gives the same file
        "pdf.fonttype": 42,       # TrueType in PDF: what publishers ask for (not Type 3)
        "font.size": 9,
        "axes.grid": True,
        "grid.color": "#e5e5e5",
        "legend.fontsize": 8,
        "savefig.dpi": 200,
    })
    return plt


def save(fig, path):
    """Writes FIG to PATH in the format of its extension through a temporary file renamed over
    PATH, so PATH is the old file or the whole new one; FigError (one line) on failure."""
    fmt = check_out(path)
    meta = {"pdf": {"CreationDate": None, "ModDate": None}, "svg": {"Date": None}, "png": {}}[fmt]
    write_atomically(path, lambda tmp: fig.savefig(tmp, format=fmt, bbox_inches="tight", metadata=meta), FigError)


# Okabe-Ito (colour-blind safe; the yellow darkened to show on white), 9 markers, 5 dash
# patterns: 8, 9 and 5 are pairwise coprime, so line i's triple (i mod 8, i mod 9, i mod 5)
# repeats only after 360 lines, and two lines of one colour (i, i + 8k, k < 9) differ in
# marker, and (k < 5) in dash too.
COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#B8A200", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", "*"]
DASHES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1))]
STYLES = len(COLOURS) * len(MARKERS) * len(DASHES)  # coprime: their lcm, 360


def style(i):
    """Line I's colour, marker and line style: no two of the first STYLES lines share all three."""
    return {"color": COLOURS[i % len(COLOURS)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": DASHES[i % len(DASHES)]}


def tick_text(v, _pos=None):
    """Tick labels: 0.5, 20, 150k, 1.5M, 1e-4."""
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.0e}".replace("e-0", "e-")
    return f"{v:g}"


def log_axis(axis, lo, hi):
    """A log axis with ticks at 1, 2 and 5 x 10^k (only 10^k over more than 4 decades)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 1
    subs = (1.0, 2.0, 5.0) if decades <= 4 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(tick_text))
    axis.set_minor_formatter(NullFormatter())
