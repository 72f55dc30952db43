"""A claim's comparisons as the report shows them (one table row per comparison, cells of intervals, speeds and
levels) and as claims.json records them; and what a claim's rows add up to in words (the metric used, the runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pelab.report.registry import Table
from pelab.rules import (
    ACC,
    BASELINE,
    NO_INFO,
    OVERLAP,
    PROBE,
    SHARE,
    SUPPORTED,
    TOO_SMALL,
    Family,
    Row,
    Side,
    metric,
)
from pelab.study.protocol import reading


# --- formatting ---------------------------------------------------------------------
def pct(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def clip(lo: float, hi: float, bounds: tuple[float, float] = (0.0, 1.0)) -> tuple[float, float]:
    """An interval of a bounded metric, for display: never past the metric's range."""
    return (max(lo, bounds[0]), min(hi, bounds[1]))


def interval_cell(mean: float, lo: float, hi: float, key: str = "acc") -> str:
    """An arm's mean and 95% interval over seeds, clipped to the metric's range."""
    m = metric(key)
    if math.isnan(mean):
        return "–"
    if math.isnan(lo):
        return m.fmt_value(mean)
    lo, hi = clip(lo, hi, m.bounds)
    return f"{m.fmt_value(mean)} [{m.fmt_value(lo)}, {m.fmt_value(hi)}]"


def side_cell(s: Side, key: str = "acc") -> str:
    from pelab.study.stats import t_interval

    values = list(s.of(key).values())
    if not values:
        return f"{s.label}: no finished run"
    return f"{s.label}: {interval_cell(*t_interval(values), key)}"


def speed_cell(s: Side) -> str:
    """Mean steps to reach the floor over the seeds that did, and how many did: learning speed, which still
    differs where final accuracy has saturated."""
    reached = list(s.of("steps_to_floor").values())
    seeds = s.seeds()
    if not seeds or "steps_to_floor" not in s.values or s.is_language_model:  # an accuracy floor: not for LMs
        return "–"
    if not reached:
        return f"never (0/{seeds})"
    return f"{sum(reached) / len(reached):.0f} ({len(reached)}/{seeds})"


def level_cell(row: Row) -> str:
    """The level the verdict read; with sequential seeds, also the nominal level its last look was read at (with
    overrunning data, the look it stopped at: ``rules.decide``)."""
    text = "95%" if abs(row.level - 0.95) < 1e-9 else f"{100 * row.level:.2f}% (Holm)"
    if row.test is not None and row.test.looks is not None:
        text += f"; interval at {100 * row.test.read_level(row.level):.2f}%, {_whose(row)}"
    return text


def interval_words(row: Row) -> str:
    """ "95% interval", "98.75% (Holm) interval", and with sequential seeds "...; read at 96.35%, its last look's
    nominal level": what a key figure's parenthesis says of its interval."""
    text = ("95%" if abs(row.level - 0.95) < 1e-9 else f"{100 * row.level:.2f}% (Holm)") + " interval"
    if row.test is not None and row.test.looks is not None:
        text += f"; read at {100 * row.test.read_level(row.level):.2f}%, {_whose(row)}"
    return text


def _whose(row: Row) -> str:
    """Whose nominal level a sequential row's interval was read at."""
    assert row.test is not None and row.test.looks is not None
    if row.test.looks.overrun:
        return f"the nominal level of the look it stopped at, on all {row.test.looks.overrun} seeds"
    return "its last look's nominal level"


def family_table(title: str, fam: Family, where_keys: Sequence[str], words: dict[str, str] | None = None) -> Table:
    """One row per comparison: held-equal keys, both arms (accuracy, and the deciding metric when it is
    another), the metric that decided, the paired difference at the level that decided it, size, verdict."""
    words = words or {}
    rows = []
    for row, place in zip(fam.rows, places(fam, where_keys), strict=True):
        c, t = row.comparison, row.test
        # probe scores, overlaps: measured on the models, not run metrics; a run has no accuracy to show beside them
        measured = t is not None and t.metric.key not in RUN_METRICS
        # a row without a test (a measure at its ceiling) still shows the measure, not the task's accuracy
        shown = t.metric.key if t is not None else next((k for k in c.a.values if k in MEASURES), None)
        cells = (
            [f"{side_cell(s, shown)} {metric(shown).label}" for s in (c.a, c.b)]
            if shown is not None and shown not in RUN_METRICS
            else [side_cell(c.a), side_cell(c.b)]
        )
        if c.a is c.b:  # a row that stands for an arm never measured (C2's overlap, C8's probe): one arm, shown once
            cells[1] = "–"
        if t is not None and not measured and t.metric.key != "acc":
            cells = [f"{cell}; {side_cell(s, t.metric.key).split(': ', 1)[1]} {t.metric.label}"
                     for cell, s in zip(cells, (c.a, c.b), strict=True)]  # fmt: skip
        decided = t.metric.label if t is not None else "–"
        if row.skipped and t is not None:
            decided += f" ({'; '.join(row.skipped)})"
        rows.append(
            [
                place,
                *cells,
                decided,
                row.describe() if t is not None else "; ".join(row.skipped) or "–",
                level_cell(row) if t is not None else "–",
                res.text if (res := row.resolution) is not None else "–",
                f"{min(c.a.seeds(), c.b.seeds())}, {reading(c)}",
                f"{c.a.params:,} / {c.b.params:,}" if c.a.params and c.b.params else "–",
                f"{c.a.flops:,} / {c.b.flops:,}" if c.a.flops and c.b.flops else "–",
                f"{speed_cell(c.a)} / {speed_cell(c.b)}",
                words.get(row.verdict, row.verdict),
            ]
        )
    return Table(f"{title} — {fam.explain()}", FAMILY_COLUMNS, rows)


def places(fam: Family, keys: Sequence[str]) -> list[str]:
    """Each row's held-equal values for ``keys``, and, where two rows share those, the other settings that tell
    them apart ("task=offset, scheme=sinusoidal, d=32 (layout=tensor2tensor)"): no two rows read alike."""
    from pelab.report.evidence import config_labels

    wheres = [dict(row.comparison.where) for row in fam.rows]
    extra = config_labels(wheres, list(keys))
    return [row.comparison.place(list(keys)) + (f" ({x})" if x else "") for row, x in zip(fam.rows, extra, strict=True)]


#: Metrics every run stores: a family table shows each arm's accuracy, then the deciding one beside it.
RUN_METRICS = ("acc", "loss", "auc", "bpb")


#: What is measured on trained models rather than stored by a run (``measured_side``'s keys).
MEASURES = (PROBE.key, OVERLAP.key, SHARE.key)


FAMILY_COLUMNS = [
    "held equal",
    "arm A (accuracy [95% CI])",
    "arm B",
    "deciding metric",
    "A − B [interval]",
    "interval level",
    "what the interval establishes (resolution)",
    "seeds (confirmatory or exploratory)",
    "params A / B",
    "FLOPs/token A / B",
    "steps to floor A / B (seeds that reached it)",
    "verdict",
]


def baseline_share(side: Side) -> float | None:
    """A language model's mean held-out loss over its context-free baseline's; None for an arm that is not one."""
    if not side.is_language_model:
        return None
    share = side.mean("loss") / side.mean(BASELINE)
    return None if math.isnan(share) else share


def row_records(fam: Family, label: str = "") -> list[dict[str, Any]]:
    """A family's rows as claims.json stores them: enough to check a verdict without the report."""
    out = []
    for row in fam.rows:
        c, t = row.comparison, row.test
        out.append(
            {
                "family": label,
                "where": {k: (v.item() if hasattr(v, "item") else v) for k, v in c.where.items()},
                "a": c.a.label,
                "b": c.b.label,
                "a_runs": list(c.a.run_ids),
                "b_runs": list(c.b.run_ids),
                "a_acc": c.a.mean("acc"),
                "b_acc": c.b.mean("acc"),
                # [seed, accuracy] per seed: an arm can learn on most seeds and fail on a few, which its mean
                # hides and the first screen names
                "a_seed_acc": sorted([s, v] for s, v in c.a.of("acc").items()),
                "b_seed_acc": sorted([s, v] for s, v in c.b.of("acc").items()),
                # a language model's held-out loss over its context-free baseline's (None for other arms): whether
                # it learned (at most LM_LEARNED_SHARE), which the first screen needs so it never quotes one that did
                # not (SCIENCE.md: key figures never quote an arm below the floor)
                "a_baseline_share": baseline_share(c.a),
                "b_baseline_share": baseline_share(c.b),
                "metric": t.metric.key if t is not None else None,
                # what diff, lo and hi are: the paired difference A − B, or a relative metric's per-seed log-ratio,
                # shown as 100·(exp(x) − 1)%; and the margin it was read against, in the same units
                "difference": ("log(A / B)" if t.metric.relative else "A − B") if t is not None else None,
                "margin": row.margin if t is not None else None,
                "diff": t.mean if t is not None else None,
                "lo": row.interval[0] if t is not None else None,
                "hi": row.interval[1] if t is not None else None,
                "level": row.level,
                "seeds": min(c.a.seeds(), c.b.seeds()),
                # SCIENCE.md, "Frozen protocols": confirmatory only where every run of both arms is a confirmatory
                # grid's, trained after the protocol declared it and read by its rules (``pelab.study.protocol``)
                "reading": reading(c),
                "looks": t.looks.record() if t is not None and t.looks is not None else None,
                "resolution": res.record() if (res := row.resolution) is not None else None,
                "skipped": row.skipped,
                "notes": row.notes,
                "verdict": row.verdict,
            }
        )
    return out


def speed_only(records: Sequence[dict[str, Any]]) -> bool:
    """Every supporting row (claims.json records: ``row_records``) was decided on learning speed (AUC): both arms
    had solved the task, so the win says how fast, not how well. SCIENCE.md allows that fallback; the key and
    the first screen tell the reader."""
    wins = [r for r in records if r["verdict"] == SUPPORTED]
    return bool(wins) and all(r["metric"] == "auc" for r in wins)


def used_metrics(*families: Family) -> str:
    """The deciding metric as it was used across a claim's comparisons, for the reader."""
    used: dict[str, int] = {}
    skipped = 0
    for fam in families:
        for row in fam.rows:
            if row.test is not None:
                used[row.test.metric.label] = used.get(row.test.metric.label, 0) + 1
                skipped += bool(row.skipped)
            elif row.verdict == NO_INFO:
                used["no informative metric"] = used.get("no informative metric", 0) + 1
    if not used:
        return ""
    text = ", ".join(f"{k} ({n} comparison{'s' if n > 1 else ''})" for k, n in used.items())
    if skipped:
        text += f"; {skipped} fell back from {ACC.label}, which carried no information there"
    return text


def runs_of(*families: Family) -> list[str]:
    return sorted({r for fam in families for row in fam.rows for r in row.comparison.run_ids()})


def learned_rows(fam: Family) -> list[Row]:
    """Rows that entered the verdict (``rules.FLOOR_POLICY``)."""
    return [r for r in fam.rows if r.verdict != TOO_SMALL]
