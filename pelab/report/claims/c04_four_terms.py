"""C4: adding makes attention do four jobs at once (token–token, token–position, position–token,
position–position).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from pelab.report.context import ReportContext
from pelab.report.evidence import compare
from pelab.report.measured import TaskPlace, _arm, _configs, _figures, _seed, _token_tasks, measured_side
from pelab.report.registry import CHAIN, ClaimResult, Table, claim
from pelab.report.tables import family_table, pct, row_records, runs_of, used_metrics
from pelab.rules import (
    INCONCLUSIVE,
    NO_INFO,
    NOT_RUN,
    NOT_SUPPORTED,
    PARTLY_RUN,
    SHARE,
    SUPPORTED,
    TOO_SMALL,
    Comparison,
    Evidence,
    Family,
    decide,
    family,
    paired_test,
    swapped,
)

#: C4: the cross terms "carry a real share" of the layer-1 logit variance above this.
CROSS_SHARE = 0.10


def c4_families(comps: list[Comparison], floor: float, margin: float) -> tuple[Family, Family]:
    """C4's half 2 both ways over add (A) against untied (B): "removing them costs" (add better) and "removing
    them helps" (untied better), each Holm-corrected, on the comparisons whose arms both learned
    (``FLOOR_POLICY``)."""
    cost = family(comps, CHAIN, floor, margin, kind="better", combine="any")
    helps = family(swapped(comps), CHAIN, floor, margin, kind="better", combine="any")
    return cost, helps


def cost_half(cost: Family, helps: Family) -> str:
    """Half 2 of C4, "removing the cross terms costs": ``cost`` is add against untied, ``helps`` the same
    comparisons the other way round (untied against add), each Holm-corrected across its comparisons.

    The half is a general statement: SCIENCE.md does not say "on some task" here, as it does for C6 and C8. So
    one comparison where removing the cross terms *helps* beyond its Holm interval refutes it, as one
    concat_split win refutes C2's "add is not worse". Read the other way, one cost would outweigh any number
    of comparisons against it (``full`` once showed 1 against 6). Supported when removing them costs somewhere
    and helps nowhere; otherwise the cost family's own verdict (not supported when every comparison lies
    inside the margin on enough seeds)."""
    if helps.verdict == SUPPORTED:
        return NOT_SUPPORTED
    return cost.verdict


def rule_c4(share: str, cost: str) -> str:  # share: the per-arm threshold family's verdict; cost: cost_half's
    """C4 has two halves and names both: the cross terms carry a real share (``share``, a one-sample verdict
    against CROSS_SHARE), and removing them costs (``cost``, from ``cost_half``). Supported when both hold; not
    supported when either fails; otherwise what keeps it open."""
    if NOT_SUPPORTED in (share, cost):
        return NOT_SUPPORTED
    if share == SUPPORTED and cost == SUPPORTED:
        return SUPPORTED
    if NOT_RUN in (share, cost) and (share, cost) != (NOT_RUN, NOT_RUN):
        return PARTLY_RUN  # one half ran and refutes nothing; the other is not in this study: both are named
    for v in (TOO_SMALL, NOT_RUN, NO_INFO):
        if v in (share, cost):
            return v
    return INCONCLUSIVE


def _c4_arms(ctx: ReportContext) -> Iterator[tuple[TaskPlace, str, Any, list[str]]]:
    """C4's add arms that learned, one per configuration: (task and what tells configurations apart, scheme,
    d, runs), whose cross-term shares it measures."""
    for task in _token_tasks(ctx):
        for scheme in ("learned", "sinusoidal"):
            arm = _arm(ctx, task__name=task, model__position__scheme=scheme, model__combine="add")
            for extra, w, sub in sorted(_configs(arm, ["model.d"]), key=lambda t: t[1]["model.d"]):
                runs = ctx.learned_runs(sub)
                if runs:
                    yield TaskPlace(task, extra), scheme, w["model.d"], runs


def _plan_c4(ctx: ReportContext) -> None:
    for *_, runs in _c4_arms(ctx):
        ctx.submit("cross_share", runs)


@claim(
    "C4",
    "Adding makes attention do four jobs at once",
    "With x + p, every layer-1 logit mixes token–token, token–position, position–token and position–position "
    "terms, and the cross terms cost something.",
    "an answer to the question; Ke et al. 2021 (TUPE)",
    f"two halves, both named: (1) the cross terms (token–position + position–token) carry at least "
    f"{CROSS_SHARE:.0%} of the within-query logit variance, beyond the 95% interval over seeds, in every add arm "
    "of a task scored per token (every such task, scheme and width; the pooled digits, cell2d and wordorder and the "
    "segment task are not analysed) that learned (floor {floor}); (2) removing them costs: add beats untied "
    "attention (cross terms dropped) beyond the Holm-corrected interval on some comparison, and untied beats add "
    "on none (a general statement: one comparison where removing them helps refutes it), on comparisons whose "
    "arms both learned; supported when both halves hold, not "
    "supported when either fails, partly run when one half was not run and the other refutes nothing",
    metrics=CHAIN,
    plan=_plan_c4,
)
def c4(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    rows, items, ids = [], [], []
    for task, scheme, d, runs in _c4_arms(ctx):
        got = ctx.measure_many("cross_share", runs)
        shares = {_seed(ctx, run): x["cross"] for run, x in got.items()}
        ids += runs
        c = Comparison(
            task.where(**{"model.position.scheme": scheme, "model.d": d}),
            measured_side(ctx, "cross terms", runs, "share", shares),
            measured_side(ctx, f"threshold {CROSS_SHARE:.0%}", runs, "share", {s: CROSS_SHARE for s in shares}),
        )
        items.append(Evidence(c, True, (paired_test(c, SHARE),)))
        rows.append(
            [
                str(task),
                scheme,
                str(d),
                *[
                    pct(float(np.mean([x.get(t, np.nan) for x in got.values()])))
                    for t in ("tt", "tp", "pt", "pp", "cross")
                ],
                str(len(got)),
            ]
        )
    share = decide(items, ctx.margin, kind="better", combine="all")
    r.tables.append(
        Table(
            "Share of layer-1 logit variance within each query (mean over heads and over the seeds that learned)",
            ["task", "scheme", "d", "tt", "tp", "pt", "pp", "cross", "seeds"],
            rows,
        )
    )
    r.tables.append(
        family_table(
            f"Half 1: cross-term share (A) against {CROSS_SHARE:.0%} (B), every add arm that learned, per seed",
            share,
            ["task.name", "model.position.scheme", "model.d"],
        )
    )
    comps = []
    for base in (("learned", "add"), ("sinusoidal", "add")):
        comps += compare(ctx.frame, ["model.position.scheme", "model.combine"], base, ("untied", "none"))
    cost, helps = c4_families(comps, ctx.floor, ctx.margin)
    costs = cost_half(cost, helps)
    r.tables.append(
        family_table(
            "Half 2: add (A) against untied (cross terms removed, B); verdict: removing them costs",
            cost,
            ["task.name", "model.d"],
        )
    )
    r.tables.append(
        family_table(
            "Half 2, the other way: untied (A) against add (B); verdict: removing them helps (each row at its own "
            "Holm level; one that holds refutes a general cost)",
            helps,
            ["task.name", "model.d"],
        )
    )
    r.verdict = rule_c4(share.verdict, costs)

    def count(fam: Family) -> int:
        return sum(row.verdict == SUPPORTED for row in fam.rows)

    direction = ""
    if cost.tested:
        direction = (
            f" (removing them cost on {count(cost)} and helped on {count(helps)} of {len(cost.tested)} informative "
            "comparisons, each beyond its Holm-corrected interval"
            + ("; one that helps refutes a general cost)" if count(helps) else ")")
        )
        speed = [row for row in cost.tested if row.test.metric.key == "auc"]
        failed = [row for row in cost.tested if not row.comparison.learned(ctx.floor)]
        if speed:
            direction += (
                f"; {len(speed)} of the {len(cost.tested)} decided on learning speed alone (accuracy and held-out loss "
                "both silent without the arms having solved the task: how fast, not how well)"
            )
        if failed:
            direction += f"; on {len(failed)} one arm did not learn where the other did (counted: see the rule)"
    r.halves = {f"cross terms carry ≥ {CROSS_SHARE:.0%}": share.verdict, "removing them costs": costs}
    # untied's extra projections: a size difference said beside any verdict on it
    ratios = [row.comparison.b.params / row.comparison.a.params for row in cost.tested if row.comparison.a.params]
    if ratios:
        lo, hi = min(ratios), max(ratios)
        direction += f"; untied has ×{lo:.2f}{f'–{hi:.2f}' if hi - lo > 0.005 else ''} add's parameters"
    r.key = f"cross terms carry ≥ {CROSS_SHARE:.0%}: {share.verdict}; removing them costs: {costs}{direction}"
    if ids:
        a = ctx.analyse("attention", run_id=ids[0])
        r.figures += _figures(a, {".png": f"four terms, run {ids[0]}"})
    r.notes.append(
        "Split used: LN(x+p) = g(x−mean x)/s + g(p−mean p)/s + b with s the scale of the sum, so the parts add "
        "up exactly; the LayerNorm bias is a part of its own."
    )
    r.caveats.append(
        "Untied attention is not a clean removal of the cross terms: it carries position only inside attention "
        "(no input table), with its own parameters (see the params column), so half 2 compares two designs."
    )
    r.metric = used_metrics(cost)
    r.run_ids = sorted(set(ids) | set(runs_of(cost)))
    r.rows = (
        row_records(share, "cross-term share")
        + row_records(cost, "removing the cross terms costs")
        + row_records(helps, "removing the cross terms helps")
    )
    return r
