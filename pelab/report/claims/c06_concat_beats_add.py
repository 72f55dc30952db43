"""C6: concatenation can beat addition without making the model bigger (concat_split vs add at equal d)."""

from __future__ import annotations

from pelab.report.arms import (
    A_BETTER,
    WHERE,
    _finish,
    _tasks,
    arm_figure,
    budget_text,
    key_of,
    position_frame,
    rule_reported,
)
from pelab.report.context import ReportContext
from pelab.report.evidence import compare, compare_wide
from pelab.report.registry import CHAIN, ClaimResult, claim
from pelab.report.tables import family_table, row_records, speed_only
from pelab.rules import Comparison, Family, family, swapped


def rule_c6(comps: list[Comparison], floor: float, margin: float) -> Family:
    """C6: concat_split beats add at equal width on *some* comparison (Holm across them), among comparisons whose
    arms both learned (``FLOOR_POLICY``): a win over an arm that had not learned says how fast each learns."""
    return family(comps, CHAIN, floor, margin, kind="better", combine="any")


@claim(
    "C6",
    "Concatenation can beat addition without making the model bigger",
    "[x ; p] with a smaller token part (same model width) learns better than x + p.",
    "the question's proposal",
    "supported when concat_split − add is above 0 beyond the Holm-corrected interval on some comparison "
    "whose arms both learned (floor {floor}; a win over an arm below it is budget too small, not a win); not "
    "supported when every informative comparison has add ahead or the two "
    "within the margin ({margin} accuracy, {loss_margin}); deciding metric: accuracy, then held-out loss where "
    "accuracy carries no information (zero spread), then how fast each learned (area under the learning curve) where "
    "neither does; a win on that last one alone is named a learning-speed win; {solved}",
    metrics=CHAIN,
)
def c6(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    frame = position_frame(ctx)
    same = compare(frame, ["model.combine"], ("concat_split",), ("add",))
    fam = rule_c6(same, ctx.floor, ctx.margin)
    # The other way, by the same rule and correction, so a reader can set the two sides beside each other
    adds = rule_reported(swapped(same), ctx.floor, ctx.margin)
    wides = compare_wide(frame)
    wide, wide_adds = rule_reported(wides, ctx.floor, ctx.margin), rule_reported(swapped(wides), ctx.floor, ctx.margin)
    r.verdict = fam.verdict
    r.tables.append(family_table("concat_split (A) against add (B), all else equal", fam, WHERE))
    r.tables.append(family_table("The other way: add (A) against concat_split (B); verdict: add better (not the "
                                 "claim's rule, shown so both sides are read at one level)", adds, WHERE,
                                 A_BETTER))  # fmt: skip
    if wide.rows:
        width = ["task.name", "model.position.scheme", "width"]
        r.tables.append(family_table("For size: concat_wide (A, d + d_position wide) against add at the same total "
                                     "width (B); verdict: does concat_wide beat a model as wide as itself", wide,
                                     width))  # fmt: skip
        r.tables.append(family_table("The other way: add at concat_wide's width (A) against concat_wide (B); "
                                     "verdict: add better", wide_adds, width, A_BETTER))  # fmt: skip
    for task in _tasks(frame[frame["model.combine"].isin(["add", "concat_split"])]) if ctx.display else ():
        r.figures.append(arm_figure(ctx, frame, task, "arms", f"{task}: accuracy per arm"))
    r.key = key_of(fam, WHERE, ctx.floor)
    if speed_only(row_records(fam)):
        r.key += (
            " — a learning-speed win only: on every comparison concat_split won, accuracy and held-out loss told the "
            "arms apart on no seed (zero spread), so it learned faster, not better"
        )
    r.setup = f"{len(fam.rows)} paired comparisons over tasks, schemes and widths; parameters of both arms beside each"
    tasks = {row.comparison.where.get("task.name") for f in (fam, wide) for row in f.rows}
    read = frame[frame["model.combine"].isin(["add", "concat_split", "concat_wide"]) & frame["task.name"].isin(tasks)]
    if budget := budget_text(read):  # the budget of the tasks its comparisons read
        r.setup += f"; {budget}"
    _finish(r, ctx, {"concat_split vs add": fam, "add vs concat_split": adds, "concat_wide vs add at its width": wide,
                     "add at its width vs concat_wide": wide_adds})  # fmt: skip
    return r
