"""Figures. matplotlib with the Agg backend, so nothing needs a screen."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from pelab.files import write_atomic  # noqa: E402


def heatmap(table: np.ndarray, path: str | Path, title: str) -> Path:
    """Positions down, dimensions across, like the figures in the original question."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    lim = float(np.abs(table).max()) or 1.0
    im = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.04)
    return save(fig, path)


def _wrap(title: str, width: int = 72) -> str:
    return textwrap.fill(title, width)


def save(fig: plt.Figure, path: str | Path, tight: bool = True) -> Path:
    """Write a figure (making its folder) atomically and free it: pyplot keeps every open figure alive otherwise.

    ``tight=False`` keeps matplotlib's own layout, which a colorbar shared by two axes needs."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if tight:
        fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return write_atomic(path, buffer.getvalue())  # whole or absent; a planted link is replaced, not followed


def lines(
    path: str | Path,
    x: np.ndarray | list[float],
    series: dict[str, np.ndarray | list[float]],
    title: str,
    xlabel: str,
    ylabel: str,
    *,
    logx: bool = False,
    logy: bool = False,
    errors: dict[str, np.ndarray | list[float]] | None = None,
    hlines: dict[str, float] | None = None,
    styles: dict[str, str] | None = None,
) -> Path:
    """One curve per series over a shared x; optional error bars and labelled horizontal lines."""
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for name, y in series.items():
        y = np.asarray(y, dtype=float)
        style = (styles or {}).get(name, "o-" if len(y) <= 40 else "-")
        if errors and name in errors:
            ax.errorbar(x, y, yerr=np.asarray(errors[name], dtype=float), fmt=style, ms=3, capsize=2, label=name)
        else:
            ax.plot(x, y, style, ms=3, label=name)
    for name, v in (hlines or {}).items():
        ax.axhline(v, ls="--", lw=1, color="grey")
        ax.annotate(name, (0.01, v), xycoords=("axes fraction", "data"), fontsize=8, color="grey", va="bottom")
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.set_title(_wrap(title), fontsize=10)
    if not logx and all(float(v).is_integer() for v in np.asarray(x, dtype=float)):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    return save(fig, path)


def bars(
    path: str | Path,
    labels: list[str],
    series: dict[str, np.ndarray | list[float]],
    title: str,
    ylabel: str,
    *,
    stacked: bool = False,
    logy: bool = False,
    hlines: dict[str, float] | None = None,
) -> Path:
    """Bars per label: one set per series, side by side or stacked."""
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(labels) * max(1, len(series) if not stacked else 1)), 4.2))
    fig.set_dpi(110)
    pos = np.arange(len(labels))
    width = 0.8 if stacked else 0.8 / max(1, len(series))
    bottom = np.zeros(len(labels))
    for i, (name, v) in enumerate(series.items()):
        v = np.asarray(v, dtype=float)
        if stacked:
            ax.bar(pos, v, width, bottom=bottom, label=name)
            bottom += v
        else:
            ax.bar(pos - 0.4 + width * (i + 0.5), v, width, label=name)
    for name, v in (hlines or {}).items():
        ax.axhline(v, ls="--", lw=1, color="grey")
        ax.annotate(name, (0.01, v), xycoords=("axes fraction", "data"), fontsize=8, color="grey", va="bottom")
    ax.set_xticks(pos, labels, rotation=30 if max(len(s) for s in labels) > 6 else 0, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(_wrap(title), fontsize=10)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3, axis="y")
    if len(series) > 1:
        ax.legend(fontsize=8)
    return save(fig, path)


def heatmaps(path: str | Path, panels: dict[str, np.ndarray], title: str, xlabel: str, ylabel: str) -> Path:
    """Small multiples sharing one symmetric colour scale, so panels compare by colour."""
    n = len(panels)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.4 * cols + 0.8, 3.2 * rows + 0.5), dpi=110, squeeze=False, layout="constrained"
    )
    lim = max(float(np.abs(v).max()) for v in panels.values()) or 1.0
    im = None
    for i, (ax, (name, v)) in enumerate(zip(axes.flat, panels.items(), strict=False)):
        im = ax.imshow(v, cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
        ax.set_title(name, fontsize=9)
        if i // cols == rows - 1 or i + cols >= n:
            ax.set_xlabel(xlabel)
        if i % cols == 0:
            ax.set_ylabel(ylabel)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    if im is not None:
        fig.colorbar(im, ax=axes, fraction=0.03)
    return save(fig, path, tight=False)
