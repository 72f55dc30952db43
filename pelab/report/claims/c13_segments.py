"""C13: BERT sums token, segment and position embeddings."""

from __future__ import annotations

from pelab.report.arms import A_BETTER, WHERE, _finish, _tasks, arm_figure, key_of, reported_or_too_small, rule_reported
from pelab.report.context import ReportContext
from pelab.report.evidence import compare
from pelab.report.registry import CHAIN, ClaimResult, claim
from pelab.report.tables import family_table


@claim(
    "C13",
    "BERT sums token, segment and position embeddings",
    "Adding segment embeddings mixes different 'units'; concatenating them keeps them apart.",
    "Devlin et al. 2019 (BERT); the question's follow-ups",
    "reported: segment embeddings concatenated against added, with the interval on the deciding metric",
    metrics=CHAIN,
)
def c13(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    f = ctx.frame
    seg = f[f["model.n_segments"].fillna(0) > 0] if "model.n_segments" in f else f.iloc[0:0]
    fam = rule_reported(compare(seg, ["model.combine"], ("concat_split",), ("add",)), ctx.floor, ctx.margin)
    r.verdict = reported_or_too_small(fam)
    r.tables.append(family_table("segments concatenated (A) against added (B)", fam, WHERE))
    for task in _tasks(seg):
        r.figures.append(arm_figure(ctx, seg, task, "segments", f"{task}: accuracy per arm"))
    r.setup = (
        "two-segment task with segment (token-type) ids; positions by rotary inside attention, so the "
        "input combiner acts on the segment embedding alone and the comparison isolates it"
    )
    r.key = key_of(fam, ["task.name"], ctx.floor, says=A_BETTER) if fam.rows else "not run"
    _finish(r, ctx, {"segments": fam})
    return r
