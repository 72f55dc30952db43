"""C2: with learned embeddings, addition is a super-case of concatenation (training can split the dimensions
itself).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from pelab.report.context import NOT_MEASURED, ReportContext
from pelab.report.evidence import compare
from pelab.report.measured import TaskPlace, _arm, _configs, _figures, _seed, _token_tasks, measured_side, run_side
from pelab.report.registry import CHAIN, ClaimResult, Table, claim
from pelab.report.tables import family_table, row_records, runs_of, used_metrics
from pelab.rules import (
    INCONCLUSIVE,
    NO_INFO,
    NOT_RUN,
    NOT_SUPPORTED,
    OVERLAP,
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

#: C2's overlap is read without a margin: SCIENCE.md asks that the trained subspaces be closer to orthogonal than at
#: initialisation "beyond the interval", and an overlap (cos² of principal angles) has no margin of its own; the
#: study's margin is in accuracy, and borrowing it called a fall that excluded 0 "no change" (quick's charlm,
#: −0.004 [−0.008, −0.0002]).
OVERLAP_MARGIN = 0.0


def rule_c2(geometry: Family, not_worse: Family, concat_wins: Family) -> str:
    """C2: supported when trained subspaces are closer to orthogonal than at init (every learned arm, over
    seeds) and add is not worse than concat_split beyond the margin on every learned comparison; not
    supported when concat_split beats add on some comparison (Holm), or add is worse beyond the margin, or the
    overlap grows."""
    if NOT_SUPPORTED in (geometry.verdict, not_worse.verdict) or concat_wins.verdict == SUPPORTED:
        return NOT_SUPPORTED
    if geometry.verdict == SUPPORTED and not_worse.verdict == SUPPORTED:
        return SUPPORTED
    for v in (TOO_SMALL, NOT_RUN, NO_INFO):
        if v in (geometry.verdict, not_worse.verdict):
            return v
    return INCONCLUSIVE


def c2_families(comps: list[Comparison], floor: float, margin: float) -> tuple[Family, Family]:
    """C2's two comparison halves over add (A) against concat_split (B): "add not worse" on every comparison,
    and "concat_split better" on some (Holm). SCIENCE.md says none of the learned comparisons may be dropped:
    every comparison whose arms both learned (``FLOOR_POLICY``) enters both families."""
    not_worse = family(comps, CHAIN, floor, margin, kind="not_worse", combine="all")
    concat_wins = family(swapped(comps), CHAIN, floor, margin, kind="better", combine="any")
    return not_worse, concat_wins


def _c2_arms(ctx: ReportContext) -> Iterator[tuple[TaskPlace, Any, pd.DataFrame, list[str]]]:
    """C2's add + learned arms, one per configuration of each token task: (task, with what tells two
    configurations apart; d; its runs; the runs it probes)."""
    for task in _token_tasks(ctx):
        arm = _arm(ctx, task__name=task, model__position__scheme="learned", model__combine="add")
        for extra, w, sub in sorted(_configs(arm, ["model.d"]), key=lambda t: t[1]["model.d"]):
            yield TaskPlace(task, extra), w["model.d"], sub, ctx.learned_runs(sub)


def _plan_c2(ctx: ReportContext) -> None:
    for *_, runs in _c2_arms(ctx):
        ctx.submit("overlap", runs)


@claim(
    "C2",
    "With learned embeddings, addition is a super-case of concatenation",
    "Training can split the dimensions itself: token and position vectors move into separate subspaces, so "
    "adding loses nothing against concatenating.",
    "an answer to the question",
    "supported when, over seeds, the trained token/position subspaces overlap less than at initialisation beyond "
    "the interval (every add + learned arm that learned) and add is not worse than concat_split (both learned "
    "positions) beyond the margin ({margin} accuracy, {loss_margin}) on every comparison whose arms both learned "
    "(floor {floor}; none may be dropped); not supported when concat_split beats add beyond the Holm-corrected "
    "interval on some comparison, or add is worse beyond the margin, or the overlap grows beyond the interval. "
    "The overlap has no margin: SCIENCE.md asks only that it fall beyond the interval",
    metrics=CHAIN,
    plan=_plan_c2,
)
def c2(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    geo_rows, table, unmeasured = [], [], 0
    for task, d, sub, runs in _c2_arms(ctx):
        done = sub[sub.status == "done"]
        if not runs and ctx.unmeasured(sub):  # learned, but no checkpoint to measure: no row, not "below the floor"
            unmeasured += 1
            continue
        if not runs:
            side = run_side(ctx, "trained", list(done.run_id))
            geo_rows.append(Evidence(Comparison(task.where(**{"model.d": d}), side, side), False, ()))
            continue
        got = ctx.measure_many("overlap", runs)
        got = {run: g for run, g in got.items() if g}
        trained = {_seed(ctx, run): g["trained"] for run, g in got.items()}
        init = {_seed(ctx, run): g["init"] for run, g in got.items()}
        c = Comparison(
            task.where(**{"model.d": d}),
            measured_side(ctx, "trained", list(got), "overlap", trained),
            measured_side(ctx, "at init", list(got), "overlap", init),
        )
        geo_rows.append(Evidence(c, True, (paired_test(c, OVERLAP),)))
        rand = float(np.mean([g["random"] for g in got.values()]))
        table.append(
            [
                str(task),
                str(d),
                f"{np.mean(list(init.values())):.3f}",
                f"{np.mean(list(trained.values())):.3f}",
                f"{rand:.3f}",
                str(len(got)),
            ]
        )
    geometry = decide(geo_rows, OVERLAP_MARGIN, kind="better", combine="all")
    learned_pos = ctx.frame[ctx.frame["model.position.scheme"] == "learned"]
    learned_pos = learned_pos[learned_pos["task.name"].isin(_token_tasks(ctx))]
    comps = compare(learned_pos, ["model.combine"], ("add",), ("concat_split",))
    not_worse, concat_wins = c2_families(comps, ctx.floor, ctx.margin)
    r.verdict = rule_c2(geometry, not_worse, concat_wins)
    r.tables.append(
        Table(
            "Overlap of token and position subspaces (mean cos² of principal angles), mean over the seeds "
            "of add + learned arms that learned",
            ["task", "d", "at init", "trained", "random subspaces", "seeds"],
            table,
        )
    )
    r.tables.append(
        family_table(
            "Trained (A) against initial (B) overlap, paired by seed; verdict: A lower",
            geometry,
            ["task.name", "model.d"],
        )
    )
    r.tables.append(
        family_table(
            "add (A) against concat_split (B), learned positions, every comparison; verdict: add not worse",
            not_worse,
            ["task.name", "model.d"],
        )
    )
    r.tables.append(
        family_table(
            "concat_split (A) against add (B); verdict: concat_split better", concat_wins, ["task.name", "model.d"]
        )
    )
    halves = {
        "overlap falls": geometry.verdict,
        "add not worse": not_worse.verdict,
        "concat_split better somewhere": concat_wins.verdict,
    }
    r.halves = halves
    r.key = "; ".join(f"{k}: {v}" for k, v in halves.items())
    learned_geo = [row for row in geometry.rows if row.test is not None]
    if learned_geo:
        drop = -float(np.mean([row.test.mean for row in learned_geo]))
        r.key += f" (overlap fell by {drop:.3f} on average over {len(learned_geo)} arm(s))"
    if learned_geo and ctx.display:
        first = learned_geo[0].comparison.a.run_ids[0]
        g = ctx.analyse("geometry", run_id=first)
        r.figures += _figures(g, {"_subspaces.png": f"subspaces, run {first}"})
    r.caveats.append(
        "Compare the fall with the overlap expected of random subspaces of the same dimensions (the 'random "
        "subspaces' column): a fall that stays near that baseline is a small effect."
    )
    if unmeasured:
        r.caveats.append(f"Overlap: {NOT_MEASURED.format(n=unmeasured)}.")
    r.metric = used_metrics(not_worse, concat_wins)
    r.run_ids = runs_of(geometry, not_worse)
    r.rows = (
        row_records(geometry, "overlap")
        + row_records(not_worse, "add not worse")
        + row_records(concat_wins, "concat_split better")
    )
    return r
