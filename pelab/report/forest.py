"""Forest plots: every paired comparison of a family as one point with its interval, grouped, on one page.

A comparison's row (``claims.json`` rows: ``a``, ``b``, ``where``, ``metric``, ``diff``, ``lo``, ``hi``, ``level``,
``verdict``, ``a_acc``, ``b_acc``) becomes a ``ForestPoint``: oriented so that right means A better, in the metric's
display units (percentage points for accuracy-like metrics; for relative ones, held-out loss and bits per byte, 100
times the per-seed log-ratio the rules read, on an axis labelled in the percent it stands for, so a ratio and its
inverse sit at the same distance from 0), with the margin the row was read against shaded around 0.
``points_from_rows`` is a pure function, so what is drawn can be checked against the rows; ``forest_plot`` draws
exactly the points it is given and returns them.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from pelab.plots import save  # noqa: E402
from pelab.rules import (  # noqa: E402
    INCONCLUSIVE,
    NO_INFO,
    NOT_SUPPORTED,
    SUPPORTED,
    TOO_SMALL,
    UNCONFIRMED,
    margin_for,
    metric,
)

#: A verdict's colour in a forest plot: the hues of the report's badges (report.html.j2), strong enough for a dot.
COLOUR = {
    SUPPORTED: "#16a34a",
    NOT_SUPPORTED: "#dc2626",
    INCONCLUSIVE: "#b45309",
    UNCONFIRMED: "#0e7490",
    NO_INFO: "#64748b",
    TOO_SMALL: "#7c3aed",
}
OTHER = "#334155"
#: The panel of rows without an interval: shown, so a reader sees that they exist and why nothing is drawn.
NO_INTERVAL = "no interval: an arm below the floor, or no metric informed"
#: Tasks whose arms learn by loss, not accuracy (``rules.Side.is_language_model``).
LANGUAGE_MODELS = ("charlm", "mlm", "wordlm")
#: The accuracy panel's unit (``scale_of("acc")``).
ACCURACY = "pp accuracy"
#: Keys of a row's ``where`` that name its group, in order, with their short names.
GROUP_KEYS = (("task.name", ""), ("model.d", "d="), ("model.position.scheme", ""))


@dataclass(frozen=True)
class ForestPoint:
    """One comparison, oriented (positive: A better), in its panel's display units."""

    claim: str
    group: str
    label: str
    panel: str
    mid: float
    lo: float
    hi: float
    margin: float
    verdict: str
    below_floor: bool
    #: a relative metric's point: 100 × the oriented log-ratio, its axis labelled in percent (``percent_label``)
    relative: bool = False


def scale_of(key: str) -> tuple[float, str]:
    """(factor, unit) turning a metric's raw difference into its display units: accuracy ×100 'pp', a relative
    metric's log-ratio ×100 (labelled in percent by ``percent_label``), anything else as it is."""
    m = metric(key)
    if m.relative:
        return 100.0, f"% in {m.label}, log-ratio scale"
    if m.bounds == (0.0, 1.0) and m.key != "overlap":
        return 100.0, f"pp {m.label}"
    return 1.0, m.label


def group_of(where: Mapping[str, Any], keys: Sequence[tuple[str, str]] = GROUP_KEYS) -> str:
    """ "reverse · d=32 · sinusoidal" from a row's ``where`` (the keys it has)."""
    return " · ".join(f"{short}{where[k]}" for k, short in keys if where.get(k) is not None)


def percent_label(v: float, _pos: object = None) -> str:
    """A tick of a relative panel (100 × an oriented log-ratio) in the percent it stands for, the same both ways:
    +50% right of 0 (B's loss 1.5 times A's: A better), −50% left of it (A's 1.5 times B's)."""
    size = 100 * math.expm1(abs(v) / 100)
    number = f"{size:.2g}" if size < 10 else f"{size:.0f}"
    return "0" if v == 0 else f"{'+' if v > 0 else '−'}{number}%"


def oriented(key: str, lo: float, hi: float, mid: float) -> tuple[float, float, float]:
    """(mid, lo, hi) with positive meaning A better, in display units, the interval clipped to the metric's range
    (accuracy within ±100 pp; a log-ratio needs no clip)."""
    m = metric(key)
    factor, _ = scale_of(key)
    lo, hi = m.clip_diff(lo), m.clip_diff(hi)
    if not m.higher_is_better:
        lo, hi, mid = -hi, -lo, -mid
    return factor * mid, factor * lo, factor * hi


def row_margin(row: Mapping[str, Any], margin: float) -> float:
    """The margin a row was read against, in display units (``rules.margin_for``): the study's margin for
    accuracy-like metrics; for a relative one ±2% as a log-ratio, the same whatever B's value."""
    factor, _ = scale_of(row["metric"])
    return factor * margin_for(metric(row["metric"]), margin)


def below_floor(row: Mapping[str, Any], floor: float, sides: str = "ab") -> bool:
    """An arm of the row (of ``sides``: "a", "b" or both) ends below the study's floor (mean accuracy at the
    training size). A language model's floor is its loss against a context-free model's (``rules.Side.learned``),
    which a row does not carry: its rows (decided on bits per byte) are never marked."""
    where = row.get("where") or {}
    if row.get("metric") == "bpb" or where.get("task.name") in LANGUAGE_MODELS:
        return False
    accs = [row.get(f"{side}_acc") for side in sides]
    return any(a is not None and not math.isnan(a) and a < floor for a in accs)


def points_from_rows(
    claim: str,
    rows: Sequence[Mapping[str, Any]],
    floor: float,
    margin: float,
    label: Callable[[Mapping[str, Any]], str] | None = None,
    empty: bool = False,
) -> list[ForestPoint]:
    """Every row with an interval as a point; with ``empty``, a row without one (no metric informed, or neither arm
    learned) too, in the panel ``NO_INTERVAL``, drawn as a grey cross at 0 (``undrawn`` counts them); ``label`` names
    the row (default "A vs B")."""
    out = []
    for r in rows:
        if not all(k in r for k in ("a", "b", "verdict")):  # not a paired comparison (C17's ranking records)
            continue
        if not has_interval(r):
            if empty:
                name = label(r) if label else f"{r['a']} vs {r['b']}"
                out.append(ForestPoint(claim, group_of(r.get("where") or {}), name, NO_INTERVAL, math.nan, math.nan,
                                       math.nan, 0.0, str(r.get("verdict")), below_floor(r, floor)))  # fmt: skip
            continue
        mid, lo, hi = oriented(r["metric"], float(r["lo"]), float(r["hi"]), float(r["diff"]))
        _, unit = scale_of(r["metric"])
        out.append(
            ForestPoint(
                claim=claim,
                group=group_of(r.get("where") or {}),
                label=label(r) if label else f"{r['a']} vs {r['b']}",
                panel=unit,
                mid=mid,
                lo=lo,
                hi=hi,
                margin=row_margin(r, margin),
                verdict=str(r["verdict"]),
                below_floor=below_floor(r, floor),
                relative=metric(r["metric"]).relative,
            )
        )
    return out


def has_interval(r: Mapping[str, Any]) -> bool:
    """A row whose verdict read an interval on a metric."""
    values = [r.get(k) for k in ("lo", "hi", "diff")]
    return bool(r.get("metric")) and all(v is not None and not math.isnan(float(v)) for v in values)


def undrawn(rows: Sequence[Mapping[str, Any]]) -> int:
    """Rows without an interval (no informative metric, or an arm below the floor)."""
    return sum(not has_interval(r) for r in rows)


def ordered(points: Sequence[ForestPoint]) -> list[ForestPoint]:
    """Points grouped (groups in order of first appearance), each group's points in input order."""
    groups = list(dict.fromkeys(p.group for p in points))
    return sorted(points, key=lambda p: groups.index(p.group))


def forest_plot(path: Path, points: Sequence[ForestPoint], title: str, a_better: str = "A better") -> list[ForestPoint]:
    """One panel per display unit, one row per point (grouped, group names as headings), its interval as a bar,
    the row's margin shaded around 0, colour by the row's verdict; a point with an arm below the floor hollow,
    marked "▽". Returns the points in the order drawn, top to bottom (the figure's data, for a test)."""
    # accuracy first (what a reader compares most easily), then the other units as they come, no interval last
    panels = sorted(dict.fromkeys(p.panel for p in points), key=lambda u: (u == NO_INTERVAL, u != ACCURACY))
    by_panel = {u: ordered([p for p in points if p.panel == u]) for u in panels}
    heights = [len(v) + len({p.group for p in v}) + 1 for v in by_panel.values()]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(8, 0.24 * sum(heights) + 1.3 * len(panels) + 0.6), dpi=110, squeeze=False,
        gridspec_kw={"height_ratios": heights}, layout="constrained",
    )  # fmt: skip
    drawn: list[ForestPoint] = []
    for ax, unit in zip(axes[:, 0], panels, strict=True):
        pts = by_panel[unit]
        labels, y, group = [], 0, None
        for p in pts:
            if p.group != group:
                group = p.group
                labels.append((y, p.group or "(all)", True))
                y += 1
            colour = COLOUR.get(p.verdict, OTHER)
            if math.isnan(p.mid):
                ax.plot([0], [y], "x", color=colour, ms=7)
                why = "an arm below the floor" if p.verdict == TOO_SMALL else p.verdict
                labels.append((y, f"{p.label}  ({why})", False))
                drawn.append(p)
                y += 1
                continue
            ax.fill_betweenx([y - 0.45, y + 0.45], -p.margin, p.margin, color="#cbd5e1", alpha=0.6, lw=0)
            ax.plot([p.lo, p.hi], [y, y], color=colour, lw=2, solid_capstyle="butt")
            ax.plot([p.mid], [y], "o", color=colour, mfc="white" if p.below_floor else colour, ms=6, zorder=3)
            labels.append((y, p.label + ("  ▽ below floor" if p.below_floor else ""), False))
            drawn.append(p)
            y += 1
        ax.axvline(0, color="0.3", lw=1)
        ax.set_yticks([t[0] for t in labels], [t[1] for t in labels], fontsize=8)
        for tick, (_, _, heading) in zip(ax.get_yticklabels(), labels, strict=True):
            tick.set_fontweight("bold" if heading else "normal")
        ax.set_ylim(y - 0.5, -0.5)
        if unit == NO_INTERVAL:
            ax.set_xticks([])
            ax.set_xlabel(unit, fontsize=8)
        elif any(p.relative for p in pts):  # ticks in the percent a log-ratio stands for, the same size either way
            ax.xaxis.set_major_formatter(FuncFormatter(percent_label))
            ax.set_xlabel(f"A against B, {unit}: how much higher the worse arm's value is  (right: {a_better})",
                          fontsize=8)  # fmt: skip
        else:
            ax.set_xlabel(f"A − B, {unit}  (right: {a_better})", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(textwrap.fill(title, 100), fontsize=10)  # the figure's width, not the plot's: long titles fit
    handles = [Line2D([], [], color=COLOUR[v], marker="o", lw=2, label=v) for v in COLOUR
               if any(p.verdict == v for p in points if not math.isnan(p.mid))]  # fmt: skip
    if any(math.isnan(p.mid) for p in points):
        handles.append(Line2D([], [], color=OTHER, marker="x", lw=0, label="no interval"))
    handles.append(Line2D([], [], color="#cbd5e1", lw=8, label="margin"))
    if any(p.below_floor for p in points):
        handles.append(Line2D([], [], color=OTHER, marker="o", mfc="white", lw=0, label="an arm below the floor"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4), fontsize=8, frameon=False)
    save(fig, path, tight=False)
    return drawn
