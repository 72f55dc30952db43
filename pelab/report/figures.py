"""Figures drawn from stored runs: arms with intervals, learning curves, gaps by width.

The choices a reader should not have to decode are made by small pure helpers, tested
on their own: ``arm_order`` (best arm on top), ``clip_interval`` (a t-interval of an
accuracy stays inside [0, 1]) and ``series_styles`` (no two curves drawn alike).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from pelab.plots import save  # noqa: E402
from pelab.report.evidence import ArmStats  # noqa: E402

#: Matplotlib's ten default colours; a series is told apart by colour *and* by STYLES.
COLOURS = [f"C{i}" for i in range(10)]
#: (line style, marker) pairs, plain lines first; markers are drawn sparsely (``markevery``).
STYLES = [
    ("-", ""),
    ("--", ""),
    (":", ""),
    ("-.", ""),
    ("-", "o"),
    ("--", "s"),
    (":", "^"),
    ("-.", "D"),
]
BELOW_FLOOR = "below floor"


def arm_order(arms: list[ArmStats], higher_is_better: bool = True) -> list[ArmStats]:
    """Arms with a finished seed, best mean first; arms without a mean go last, in input order."""
    arms = [a for a in arms if a.seeds]
    sign = -1.0 if higher_is_better else 1.0
    return sorted(arms, key=lambda a: (math.isnan(a.mean), 0.0 if math.isnan(a.mean) else sign * a.mean))


def clip_interval(lo: float, hi: float, bounds: tuple[float, float] | None) -> tuple[float, float]:
    """``(lo, hi)`` cut to ``bounds`` (None: unbounded); NaN ends stay NaN.

    A Student-t interval over two or three seeds easily runs past 100% accuracy; the
    metric cannot, so the figure should not either."""
    if bounds is None:
        return lo, hi
    low, high = bounds
    return (lo if math.isnan(lo) else min(max(lo, low), high), hi if math.isnan(hi) else min(max(hi, low), high))


def arms_plot(
    path: Path,
    arms: list[ArmStats],
    title: str,
    xlabel: str = "accuracy",
    chance: float | None = None,
    *,
    floor: float | None = None,
    bounds: tuple[float, float] | None = (0.0, 1.0),
    higher_is_better: bool = True,
) -> Path:
    """One row per arm, best on top: the mean over seeds and its 95% interval; parameters in the label.

    ``floor`` draws the learning floor as a solid line; arms under it (``ArmStats.learned``)
    get a hollow grey marker and "below floor" in their label, since no verdict uses them.
    ``chance`` is a dashed line. ``bounds`` clips the intervals (None for loss and the like)."""
    arms = arm_order(arms, higher_is_better)
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * max(len(arms), 2) + 1.3), dpi=110)
    labels = []
    for i, a in enumerate(arms):
        lo, hi = clip_interval(a.lo, a.hi, bounds)
        lo = a.mean if math.isnan(lo) else lo
        hi = a.mean if math.isnan(hi) else hi
        xerr = [[max(a.mean - lo, 0.0)], [max(hi - a.mean, 0.0)]]
        below = floor is not None and not a.learned(floor)
        if below:
            ax.errorbar([a.mean], [i], xerr=xerr, fmt="o", capsize=3, color="0.55", mfc="white", mec="0.45")
        else:
            ax.errorbar([a.mean], [i], xerr=xerr, fmt="o", capsize=3, color="C0")
        labels.append(f"{a.label}  ({a.params:,} p)" + (f"  · {BELOW_FLOOR}" if below else ""))
    ax.set_yticks(range(len(arms)), labels, fontsize=8)
    ax.set_ylim(len(arms) - 0.5, -0.9)  # best on top, with room under the title for the line labels
    marks = [(v, name, style) for v, name, style in ((floor, "floor", "-"), (chance, "chance", "--")) if v is not None]
    for value, _, style in marks:
        ax.axvline(value, ls=style, lw=1, color="0.35")
    x0, x1 = ax.get_xlim()
    for value, name, _ in marks:  # each name on the roomier side of its line, so it stays inside the axes
        text, side = (f" {name}", "left") if value - x0 < x1 - value else (f"{name} ", "right")
        ax.annotate(text, (value, -0.75), fontsize=8, color="0.3", va="center", ha=side)
    ax.set(xlabel=xlabel, title=title)
    ax.grid(axis="x", alpha=0.3)
    return save(fig, path)


def series_styles(labels: list[str]) -> dict[str, tuple[str, str, str]]:
    """(colour, line style, marker) for each label: ten colours first, then the next style.

    Colour is what the eye separates fastest, so the first ten series are ten solid colours
    and only the eleventh starts over in dashes; pairs stay unique up to 10 × len(STYLES).
    Tried and dropped: one colour per scheme (the part before " + "), which left seven
    same-blue lines for "learned"; and small multiples by scheme, which gave one panel
    per attention scheme holding a single line. Callers pass labels sorted, so one
    scheme's series sit together in the legend."""
    return {
        label: (COLOURS[i % len(COLOURS)], *STYLES[(i // len(COLOURS)) % len(STYLES)]) for i, label in enumerate(labels)
    }


def _natural(label: str) -> list[str | int]:
    """Sort key reading numbers as numbers: "d=8" before "d=16"."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", label)]


def _plain_log_ticks(ax: plt.Axes) -> None:
    """Tick labels such as 2.1 rather than 2.1×10⁰ on a log axis spanning less than a decade."""
    fmt = FuncFormatter(lambda v, _: f"{v:.3g}")
    ax.yaxis.set_major_formatter(fmt)
    lo, hi = ax.get_ylim()
    ax.yaxis.set_minor_formatter(fmt if hi / max(lo, 1e-12) < 10 else FuncFormatter(lambda v, _: ""))


def curves_plot(path: Path, curves: dict[str, list[list[dict[str, float]]]], title: str) -> Path:
    """Training loss against step, mean over seeds, one line per arm; the legend beside the plot."""
    series = {}
    for label, runs in sorted(curves.items(), key=lambda kv: _natural(kv[0])):  # a scheme's lines together
        runs = [r for r in runs if r]
        if not runs:
            continue
        k = min(len(r) for r in runs)
        steps = [p["step"] for p in runs[0][:k]]
        series[label] = (steps, np.mean([[p["loss"] for p in r[:k]] for r in runs], axis=0))
    styles = series_styles(list(series))
    fig, ax = plt.subplots(figsize=(9.5, 4.6), dpi=110, layout="constrained")
    for label, (steps, loss) in series.items():
        colour, ls, marker = styles[label]
        ax.plot(steps, loss, label=label, lw=1.3, color=colour, ls=ls, marker=marker or None, ms=4, markevery=0.1)
    ax.set(xlabel="step", ylabel="training loss (mean over seeds)", title=title)
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if series:
        _plain_log_ticks(ax)
        fig.legend(loc="outside right upper", fontsize=7, ncol=1 if len(series) <= 22 else 2, handlelength=3)
    return save(fig, path, tight=False)


def gap_plot(path: Path, points: dict[str, list[tuple]], title: str, ylabel: str) -> Path:
    """Paired difference (with interval) against width, one line per series. A point may carry a fifth value,
    whether it takes part in verdicts (``rules.FLOOR_POLICY``): points that do not are drawn
    hollow, so no one reads them as evidence."""
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    hollow_seen = False
    for i, (label, pts) in enumerate(points.items()):
        pts = sorted(pts)
        x = [p[0] for p in pts]
        y = np.array([p[1] for p in pts])
        lo = np.array([p[2] if not math.isnan(p[2]) else p[1] for p in pts])
        hi = np.array([p[3] if not math.isnan(p[3]) else p[1] for p in pts])
        colour = f"C{i % 10}"
        ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="-", capsize=3, color=colour, label=label)
        for p, yy in zip(pts, y, strict=True):
            learned = p[4] if len(p) > 4 else True
            hollow_seen |= not learned
            ax.plot([p[0]], [yy], "o", color=colour, mfc=colour if learned else "white", zorder=3)
    if hollow_seen:
        ax.plot([], [], "o", color="grey", mfc="white", label="hollow: both arms below the floor")
    ax.axhline(0, color="grey", lw=1)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="d", ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)
