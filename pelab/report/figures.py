"""Figures drawn from stored runs: arms with intervals, learning curves, gaps by width."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pelab.plots import save  # noqa: E402
from pelab.report.evidence import ArmStats  # noqa: E402


def arms_plot(
    path: Path, arms: list[ArmStats], title: str, xlabel: str = "accuracy", chance: float | None = None
) -> Path:
    """One row per arm: the mean over seeds and its 95% interval; parameters in the label."""
    arms = [a for a in arms if a.seeds]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * max(len(arms), 2) + 1.3), dpi=110)
    for i, a in enumerate(arms):
        lo = a.lo if not math.isnan(a.lo) else a.mean
        hi = a.hi if not math.isnan(a.hi) else a.mean
        ax.errorbar([a.mean], [i], xerr=[[a.mean - lo], [hi - a.mean]], fmt="o", capsize=3, color="C0")
    ax.set_yticks(range(len(arms)), [f"{a.label}  ({a.params:,} p)" for a in arms], fontsize=8)
    ax.invert_yaxis()
    if chance is not None:
        ax.axvline(chance, ls="--", lw=1, color="grey")
        ax.annotate("chance", (chance, 1.0), xycoords=("data", "axes fraction"), fontsize=8, color="grey")
    ax.set(xlabel=xlabel, title=title)
    ax.grid(axis="x", alpha=0.3)
    return save(fig, path)


def curves_plot(path: Path, curves: dict[str, list[list[dict[str, float]]]], title: str) -> Path:
    """Training loss against step, mean over seeds, one line per arm."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    for label, runs in curves.items():
        runs = [r for r in runs if r]
        if not runs:
            continue
        steps = [p["step"] for p in runs[0]]
        k = min(len(r) for r in runs)
        loss = np.mean([[p["loss"] for p in r[:k]] for r in runs], axis=0)
        ax.plot(steps[:k], loss, label=label, lw=1.2)
    ax.set(xlabel="step", ylabel="training loss (mean over seeds)", title=title)
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return save(fig, path)


def gap_plot(path: Path, points: dict[str, list[tuple[float, float, float, float]]], title: str, ylabel: str) -> Path:
    """Paired difference (with interval) against width, one line per series."""
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for label, pts in points.items():
        pts = sorted(pts)
        x = [p[0] for p in pts]
        y = np.array([p[1] for p in pts])
        lo = np.array([p[2] if not math.isnan(p[2]) else p[1] for p in pts])
        hi = np.array([p[3] if not math.isnan(p[3]) else p[1] for p in pts])
        ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="o-", capsize=3, label=label)
    ax.axhline(0, color="grey", lw=1)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="d", ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)
