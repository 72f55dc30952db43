"""The report's forest plots, drawn from the rows the claims produced (``ClaimResult.rows``), never recomputed.

* ``overview_figure``: every add-against-concat comparison of the study (``first_screen.overview_rows``), right
  meaning concatenation better, for the first screen.
* ``claim_forests``: one forest per claim whose rows are paired comparisons, put first among its figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pelab.report.context import ReportContext
from pelab.report.evidence import config_labels
from pelab.report.first_screen import flipped, overview_rows, pair
from pelab.report.forest import ForestPoint, forest_plot, group_of, points_from_rows
from pelab.report.registry import ClaimResult, Figure
from pelab.rules import NOT_RUN

CAPTION = (
    "each point is one paired comparison, A − B, with the interval its verdict read (95%, or the Holm-corrected "
    "level where several comparisons back one claim); right of 0 means A did better; the grey band is the margin "
    "the row was read against; colour is the row's verdict; a hollow point (▽) has an arm below the floor, counted "
    "only where that arm's failure is the claim (C19); a cross marks a comparison without an interval (an arm below "
    "the floor, or no metric informed)"
)


TASK = (("task.name", ""),)
PLACE = (("model.d", "d="), ("model.position.scheme", ""))


def label_of(row: Mapping[str, Any], wide: bool = True, extra: str = "") -> str:
    """A point's label: where it stands within its task (width, scheme, and ``extra``: what tells it from a row
    that reads alike), and, unless ``wide`` is False, its arms."""
    place = group_of(row.get("where") or {}, PLACE)
    arms = f"{row['a']} vs {row['b']}" if wide else ""
    return " · ".join(x for x in (place, extra, arms) if x) or "–"


def extras(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """For each row, the settings that tell its comparison from another of the same task, width and scheme
    ("task.length=12, task.vocab=32"; "layout=tensor2tensor"), or "": two points never read alike."""
    shown = ["task.name", *(k for k, _ in PLACE)]
    wheres = [{k: v for k, v in (r.get("where") or {}).items()} for r in rows]
    return [x.replace("model.position.", "").replace("task.", "") for x in config_labels(wheres, shown)]


MIRROR = "; a pair of arms compared both ways is drawn once, as the claim first reads it (the tables have both)"


def overview_points(ctx: ReportContext, claims: Sequence[ClaimResult]) -> list[ForestPoint]:
    """The overview's points (A the concatenating arm); a row without an interval is a cross in its own panel."""
    points: list[ForestPoint] = []
    listed = overview_rows(claims)
    for (cid, group, row), extra in zip(listed, extras([r for *_, r in listed]), strict=True):
        drawn = points_from_rows(cid, [row], ctx.floor, ctx.margin, empty=True)
        where = row.get("where") or {}
        task = group_of(where, TASK)
        wide = cid != "C6" or "wide" in str(row.get("family"))
        points += [ForestPoint(**{**vars(p), "group": f"{cid} {group}" + (f": {task}" if task else ""),
                                  "label": label_of(row, wide=wide, extra=extra)})
                   for p in drawn]  # fmt: skip
    return points


def overview_figure(ctx: ReportContext, claims: Sequence[ClaimResult]) -> tuple[Figure | None, list[ForestPoint]]:
    """The first screen's figure and the points it drew (None and [] when the study has no add-against-concat
    comparison)."""
    points = overview_points(ctx, claims)
    if not points:
        return None, []
    path = ctx.figures / "overview-forest.png"
    drawn = forest_plot(path, points, "Concatenated (A) against added (B): every comparison", "concat better")
    return Figure("Every add-against-concat comparison", path, CAPTION), drawn


def claim_points(ctx: ReportContext, c: ClaimResult) -> list[ForestPoint]:
    """A claim's rows, grouped by family and task, each pair of arms once: a family that reads the same pair the
    other way round (C6's "add vs concat_split") repeats its mirror image, so the first reading is drawn."""
    out, seen, rows = [], set(), []
    for row in c.rows:
        if row.get("a_runs") and row.get("b_runs"):
            if flipped(row) in seen:
                continue
            seen.add(pair(row))
        rows.append(row)
    for row, extra in zip(rows, extras(rows), strict=True):
        for p in points_from_rows(c.id, [row], ctx.floor, ctx.margin, empty=True):
            task = group_of(row.get("where") or {}, TASK)
            family = str(row.get("family") or "")
            group = " · ".join(x for x in (family, task) if x)
            out.append(ForestPoint(**{**vars(p), "group": group, "label": label_of(row, extra=extra)}))
    return out


def claim_forests(ctx: ReportContext, claims: Sequence[ClaimResult]) -> dict[str, list[ForestPoint]]:
    """A forest plot first among the figures of every claim with paired comparisons; the points drawn, by claim."""
    drawn = {}
    for c in claims:
        if c.verdict == NOT_RUN:
            continue
        points = claim_points(ctx, c)
        if not any(not math.isnan(p.mid) for p in points):  # nothing but crosses: the table says it better
            continue
        path = ctx.figures / f"forest-{c.id.lower()}.png"
        drawn[c.id] = forest_plot(path, points, f"{c.id}: every comparison, A − B")
        c.figures.insert(0, Figure(f"{c.id}: every comparison", path, CAPTION + MIRROR))
    return drawn


__all__ = ["CAPTION", "claim_forests", "claim_points", "overview_figure", "overview_points"]
