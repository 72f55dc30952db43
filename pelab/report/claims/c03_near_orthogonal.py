"""C3: in high dimensions random vectors are nearly orthogonal, so token and position information barely
interfere, and less so as d grows.
"""

from __future__ import annotations

from typing import Any

from pelab.report.context import ReportContext
from pelab.report.figures import gap_plot
from pelab.report.measured import _figures, width_series
from pelab.report.registry import CHAIN, ClaimResult, Figure, Table, claim
from pelab.report.tables import family_table, row_records, runs_of, used_metrics
from pelab.rules import (
    ACC,
    LOSS_DOUBTS,
    MIN_EQUIVALENCE_SEEDS,
    SOLVED_SILENCES,
    Comparison,
    Evidence,
    Family,
    Side,
    decide,
    enters,
    family,
    from_diffs,
    margin_for,
    metric,
    paired_test,
    solved,
)
from pelab.study.stats import t_interval


def rule_c3(series: list[Evidence], margin: float) -> Family:
    """C3: on each width series, the concat_split − add gap (in the direction it has at the narrowest width)
    is smaller at the widest width than at the narrowest, over paired seeds: supported when it shrinks beyond
    the interval on every series; not supported when it grows, or stays within the margin, on some."""
    return decide(series, margin, kind="better", combine="all")


def shrink_evidence(name: str, cs: list[Comparison], floor: float, margin: float) -> Evidence:
    """C3's evidence on one width series (concat_split against add, narrowest width first).

    Only widths at which both arms learned enter (``FLOOR_POLICY``); the narrowest and the widest of them are
    compared.
    Per seed and on each metric of CHAIN, the *add penalty* (concat_split better than add, so positive =
    adding hurts) at the narrowest width minus the penalty at the widest: positive = the penalty shrank as d
    grew. The direction is fixed before looking at the data, by the claim itself (adding interferes, less so in
    high dimensions), not by the sign the narrowest gap happens to have. On a relative metric (held-out loss) a
    penalty is the per-seed log-ratio the rules read (``Metric.diff``), so the change is a difference of
    log-ratios, log of a ratio of ratios, read against the same ±2% margin as a log-ratio (``margin_for``).

    A metric carries no information on the series (the chain falls back to the next one) when either end has
    both its arms at a bound of it (a ceiling or floor says nothing of a penalty), or when the narrowest width
    shows no penalty (its 95% interval inside the margin, on at least MIN_EQUIVALENCE_SEEDS seeds): there is no
    gap to shrink, and "nothing to nothing" would read as "not supported". No metric of the task does when both arms
    at either end solved the task (``rules.solved``): a penalty that "shrinks" to two solved arms is the ceiling's.
    """
    learned = [c for c in cs if enters(c, floor)]
    widths = [c.where["model.d"] for c in learned]
    where = {"series": name, "widths learned": ", ".join(map(str, widths)) or "none"}
    if len(learned) < 2:
        empty = Side("add penalty", {})
        return Evidence(Comparison(where, empty, empty), False, ())
    small, large = learned[0], learned[-1]
    tests = []
    for key in CHAIN:
        m = metric(key)
        sign = 1.0 if m.higher_is_better else -1.0
        arms = [small.a.of(key), small.b.of(key), large.a.of(key), large.b.of(key)]
        seeds = sorted(set.intersection(*(set(a) for a in arms)))

        def penalty(a: dict[int, float], b: dict[int, float], s: int, m: Any = m, sign: float = sign) -> float:
            return sign * m.diff(a[s], b[s])

        diffs = [penalty(arms[0], arms[1], s) - penalty(arms[2], arms[3], s) for s in seeds]
        # Either end with both its arms at a bound carries no penalty on this metric (SCIENCE.md: a comparison at
        # a ceiling or floor carries no information), so neither does the change between the ends; nor, on any of
        # the task's metrics, an end whose two arms both solved the task
        ends = [(small, arms[0], arms[1]), (large, arms[2], arms[3])]
        at = [(c, m.arms_at_bound([a[s] for s in seeds], [b[s] for s in seeds])) for c, a, b in ends]
        bound = next(((c, x) for c, x in at if x), None)
        info = f"both arms at the {bound[1]} of {m.label} at d={bound[0].where['model.d']}" if bound else None
        done = next(((c, why) for c in (small, large) if key in SOLVED_SILENCES and (why := solved(c))), None)
        if done is not None:
            info = f"at d={done[0].where['model.d']}, {done[1]}"
        narrow = [penalty(arms[0], arms[1], s) for s in seeds]
        m_narrow = margin_for(m, margin)
        if info is None and len(narrow) >= MIN_EQUIVALENCE_SEEDS:
            _, lo, hi = t_interval(narrow)
            if -m_narrow <= lo and hi <= m_narrow:
                info = f"no add penalty on {m.label} at d={small.where['model.d']} to shrink (inside the margin)"
        tests.append(from_diffs(_flip(m), diffs, info))
    a = Side(
        f"add penalty at d={small.where['model.d']}",
        {},
        small.a.params,
        small.a.flops,
        small.a.run_ids + small.b.run_ids,
    )
    b = Side(
        f"add penalty at d={large.where['model.d']}",
        {},
        large.a.params,
        large.a.flops,
        large.a.run_ids + large.b.run_ids,
    )
    return Evidence(Comparison(where, a, b), True, tuple(tests))


def c3_table(fam: Family, series: dict[str, list[Comparison]], floor: float) -> Table:
    """One row per width series: the widths that learned, the add penalty at both ends, the shrink, verdict."""
    rows = []
    for row in fam.rows:
        name = row.comparison.where["series"]
        learned = [c for c in series[name] if enters(c, floor)]
        ends = []
        for c in (learned[0], learned[-1]) if len(learned) >= 2 else ():
            t = paired_test(c, row.test.metric if row.test is not None else ACC)
            lo, hi = t.oriented(clip=True)  # within the metric's range, A better upwards
            fmt = t.metric.fmt_diff
            ends.append(f"d={c.where['model.d']}: {fmt(t.sign * t.mean)} [{fmt(lo)}, {fmt(hi)}]")
        rows.append(
            [
                name,
                row.comparison.where["widths learned"],
                *(ends or ["–", "–"]),
                row.describe() if row.test is not None else "; ".join(row.skipped),
                "95%" if abs(row.level - 0.95) < 1e-9 else f"{100 * row.level:.2f}% (Holm)",
                row.verdict,
            ]
        )
    return Table(
        f"Does the add penalty shrink as d grows? — {fam.explain()}",
        [
            "series",
            "widths where both arms learned",
            "add penalty, narrowest",
            "add penalty, widest",
            "narrowest − widest (positive: shrank)",
            "interval level",
            "verdict",
        ],
        rows,
    )


def _flip(m: Any) -> Any:
    from dataclasses import replace

    return replace(m, higher_is_better=True)


@claim(
    "C3",
    "In high dimensions random vectors are nearly orthogonal",
    "So token and position information barely interfere when added, and less so as d grows.",
    "an answer to the question",
    "on every width series (concat_split against add at three or more widths), take the narrowest and the widest "
    "width at which both arms learned (floor {floor}; fewer than two such widths: budget too small); supported when "
    "the add penalty (concat_split better than add) at the narrowest minus the penalty at the widest is above 0 "
    "beyond the interval over paired seeds (the penalty shrinks as d grows); not supported when it grows, or changes "
    "by less than the margin, on some series (Holm); deciding metric: accuracy, then held-out loss",
    metrics=CHAIN,
)
def c3(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    g = ctx.analyse("geometry", scheme="sinusoidal", d=64, length=64)
    r.tables.append(
        Table(
            "Mean |cos| of random vector pairs against the law sqrt(2/(πd))",
            ["d", "measured", "sqrt(2/(πd))", "exact"],
            [
                [str(c["d"]), f"{c['mean_abs_cos']:.4f} ± {c['stderr']:.4f}", f"{c['law']:.4f}", f"{c['exact']:.4f}"]
                for c in g["random_cosines"]
            ],
        )
    )
    r.figures += _figures(g, {"_cosines.png": "random cosines against d"})
    series = width_series(ctx)
    fam = rule_c3([shrink_evidence(name, cs, ctx.floor, ctx.margin) for name, cs in series.items()], ctx.margin)
    r.verdict = fam.verdict
    for name, cs in series.items():
        r.tables.append(
            family_table(
                f"Gap by width: {name}; concat_split (A) against add (B)",
                family(cs, CHAIN, ctx.floor, ctx.margin),
                ["model.d"],
            )
        )
    r.tables.append(c3_table(fam, series, ctx.floor))

    if series:
        pts = {}
        for name, cs in series.items():
            tests = [(c.where["model.d"], paired_test(c, ACC), enters(c, ctx.floor)) for c in cs]
            pts[name] = [(d, t.mean, *t.interval(), learned) for d, t, learned in tests]
        path = gap_plot(
            ctx.figures / "c3-gap-by-d.png", pts, "concat_split − add accuracy against width", "accuracy difference"
        )
        r.figures.append(Figure("concat_split − add against d", path))
    law_ok = all(abs(c["mean_abs_cos"] - c["exact"]) < 4 * c["stderr"] + 1e-9 for c in g["random_cosines"])
    shrink = []
    for row in fam.rows:
        where = row.comparison.where
        if row.test is None:
            shrink.append(
                f"{where['series']}: {row.verdict} (widths where both arms learned: {where['widths learned']})"
            )
            continue
        lo, hi = (row.test.metric.clip_diff(x) for x in row.interval)
        fmt = row.test.metric.fmt_diff
        shrink.append(
            f"{where['series']}: add penalty shrank by {fmt(row.test.mean)} [{fmt(lo)}, {fmt(hi)}] "
            f"{row.test.metric.label} between d={where['widths learned']} ({row.verdict})"
            + "".join(f"; {n}" for n in row.notes if n.startswith(LOSS_DOUBTS))
        )
    r.key = f"random cosines follow the law: {'yes' if law_ok else 'no'}; " + ("; ".join(shrink) or "no width series")
    r.metric = used_metrics(fam)
    # every run of every width series, learned or not (the series rows themselves are built from differences)
    r.run_ids = sorted(set(runs_of(fam)) | {run for cs in series.values() for c in cs for run in c.run_ids()})
    r.rows = row_records(fam, "gap shrinks")
    return r
