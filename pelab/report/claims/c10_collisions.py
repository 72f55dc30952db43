"""C10: after adding, token and position can collide (embed(a) + p1 ≈ embed(b) + p2)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from pelab.report.context import NOT_MEASURED, ReportContext
from pelab.report.evidence import compare, config_labels
from pelab.report.measured import TaskPlace, _seed, _token_tasks, measured_side, run_side, width_series
from pelab.report.registry import ClaimResult, Table, claim
from pelab.report.tables import family_table, pct, row_records, runs_of, used_metrics
from pelab.rules import PROBE, Comparison, Evidence, Family, Side, decide, paired_test


def rule_c10(decodability: Family) -> str:
    """C10: supported when token or position decodability from the layer-1 input under add falls below
    concat_split beyond the (Holm-corrected) interval at some width; not supported when every informative
    comparison is within the margin (or add ahead); collisions are reported beside, never the rule."""
    return decodability.verdict


#: C10's arms at each place, both with learned positions: concatenated (lossless by construction) and added.
C10_ARMS = ("concat_split", "add")


def _c10_pairs(ctx: ReportContext) -> list[tuple[TaskPlace, Any, dict[str, pd.DataFrame]]]:
    """Where C10 probes the layer-1 input: concat_split and add with learned positions in one configuration
    (everything else held equal, seeds paired), at every width of the width series, or, with none, of every
    token task: (task and what tells two configurations apart, d, each arm's rows)."""
    series = width_series(ctx)
    places = {(c.where["task.name"], c.where["model.d"]) for cs in series.values() for c in cs}
    f = ctx.frame
    if "model.position.scheme" not in f or "task.name" not in f:
        return []
    learned = f[(f["model.position.scheme"] == "learned") & f["task.name"].isin(_token_tasks(ctx))]
    comps = [
        c
        for c in compare(learned, ["model.combine"], C10_ARMS[:1], C10_ARMS[1:])
        if not places or (c.where["task.name"], c.where["model.d"]) in places
    ]
    extra = config_labels([c.where for c in comps], ["task.name", "model.d"])
    out = []
    for c, x in zip(comps, extra, strict=True):
        rows = {comb: f[f.run_id.isin(s.run_ids)] for comb, s in zip(C10_ARMS, (c.a, c.b), strict=True)}
        out.append((TaskPlace(c.where["task.name"], x), c.where["model.d"], rows))
    return sorted(out, key=lambda t: (t[0], t[1]))


def _plan_c10(ctx: ReportContext) -> None:
    for _, _, arms in _c10_pairs(ctx):
        for arm in arms.values():
            runs = ctx.learned_runs(arm)
            ctx.submit("input_probes", runs)
            if ctx.display and runs:  # the collision table's run of each arm (c10's ``shown``)
                ctx.submit("collisions", runs[:1])


@claim(
    "C10",
    "After adding, token and position can collide",
    "embed(a) + p1 ≈ embed(b) + p2: addition can make different (token, position) pairs look alike.",
    "an answer to the question",
    "supported when linear decodability of token id or of position from the layer-1 input under add falls below "
    "concat_split (lossless by construction) beyond the Holm-corrected interval over seeds at some width (arms that "
    "learned, floor {floor}); not supported when every informative comparison is within the margin ({margin}) or "
    "favours add; nearest-neighbour collisions are reported beside, not as the rule",
    metrics=("probe",),
    plan=_plan_c10,
)
def c10(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    items, table, shown, unmeasured = [], [], [], 0
    for task, d, arms in _c10_pairs(ctx):
        if any(ctx.unmeasured(arm) for arm in arms.values()):  # no checkpoint to probe: no row, not "below the floor"
            unmeasured += sum(ctx.unmeasured(arm) for arm in arms.values())
            continue
        sides, learned = {}, True
        for comb in C10_ARMS:
            arm = arms[comb]
            runs = ctx.learned_runs(arm)
            if not runs:
                learned = False
                sides[comb] = run_side(ctx, comb, list(arm.run_id))
                continue
            got = ctx.measure_many("input_probes", runs)
            sides[comb] = {
                what: measured_side(ctx, comb, runs, "probe", {_seed(ctx, run): g[what] for run, g in got.items()})
                for what in ("token", "position")
            }
            shown.append(runs[0])
            table.append(
                [
                    str(task),
                    str(d),
                    comb,
                    pct(float(np.mean([g.get("token", np.nan) for g in got.values()]))),
                    pct(float(np.mean([g["position"] for g in got.values()]))),
                    str(len(got)),
                ]
            )
        if len(sides) < 2:
            continue
        for what in ("token", "position"):
            if not learned:
                a = sides["concat_split"] if isinstance(sides["concat_split"], Side) else sides["concat_split"][what]
                b = sides["add"] if isinstance(sides["add"], Side) else sides["add"][what]
                items.append(Evidence(Comparison(task.where(**{"model.d": d}, decoded=what), a, b), False, ()))
                continue
            c = Comparison(task.where(**{"model.d": d}, decoded=what), sides["concat_split"][what], sides["add"][what])
            items.append(Evidence(c, True, (paired_test(c, PROBE),)))
    fam = decide(items, ctx.margin, kind="better", combine="any")
    r.verdict = rule_c10(fam)
    r.tables.append(
        Table(
            "Decodability from the layer-1 input (learned positions), mean over the seeds that learned",
            ["task", "d", "combine", "token probe", "position probe", "seeds"],
            table,
        )
    )
    r.tables.append(
        family_table(
            "concat_split (A) against add (B): decodability; verdict: add loses information",
            fam,
            ["task.name", "model.d", "decoded"],
        )
    )
    coll = []
    counted = ctx.measure_many("collisions", shown) if ctx.display else {}  # shown, never read by the verdict
    for run, col in counted.items():
        if col:
            row = ctx.frame[ctx.frame.run_id == run].iloc[0]
            coll.append(
                [
                    row["task.name"],
                    str(row["model.d"]),
                    row["model.combine"],
                    pct(col["token_fraction"]),
                    pct(col["position_fraction"]),
                    run,
                ]
            )
    if coll:
        r.tables.append(
            Table(
                "Nearest-neighbour collisions in the layer-1 input (reported beside, not the rule)",
                ["task", "d", "combine", "token collisions", "position collisions", "run"],
                coll,
            )
        )
    tested = [row for row in fam.rows if row.test is not None]
    if tested:
        best = max(tested, key=lambda row: row.test.mean)
        where = best.comparison.place(["task.name", "model.d", "decoded"])
        r.key = (
            f"largest concat_split − add decodability gap: {where}: {best.describe()}; {len(tested)} of "
            f"{len(fam.rows)} comparisons informative"
        )
    else:
        # Say how many comparisons each reason removed: "every probe at its ceiling" must not stand for rows that
        # the task floor removed before any probe was read.
        reasons = Counter(row.skipped[0] if row.skipped else row.verdict for row in fam.rows)
        r.key = (
            f"no informative comparison among {len(fam.rows)}: "
            + "; ".join(f"{n} with {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
            if reasons
            else "not run: this study has no add and concat_split arms of a token task at one width"
        )
    if unmeasured:
        r.caveats.append(f"{NOT_MEASURED.format(n=unmeasured)}.")
    r.notes.append("Concatenation is lossless by construction: ||[x_a − x_b; p_i − p_j]|| ≥ ||p_i − p_j||.")
    r.metric = used_metrics(fam)
    r.run_ids = runs_of(fam)
    r.rows = row_records(fam, "add loses decodability")
    return r
