"""C14: ViT/MAE add 2-D positions to patch embeddings."""

from __future__ import annotations

import pandas as pd

from pelab.report.arms import A_BETTER, ARM, _finish, arm_figure, key_of, reported_or_too_small, rule_reported
from pelab.report.context import ReportContext
from pelab.report.evidence import compare
from pelab.report.registry import CHAIN, ClaimResult, claim
from pelab.report.tables import family_table
from pelab.rules import Family

#: C14's position kinds, each added and set against 1-D sinusoidal + add; and the tables compared concatenated
#: against added. One factor changes per comparison, so a difference has one cause.
C14_KINDS = (("sincos2d", "add"), ("learned", "add"), ("none", "none"))


C14_TABLES = ("sincos2d", "sinusoidal", "learned")


def c14_families(digits: pd.DataFrame, floor: float, margin: float) -> tuple[Family, Family]:
    """C14 as two families, each Holm-corrected on its own: the kind of position (all added, against 1-D
    sinusoidal + add), and the combiner (concat_split against add on the same table)."""
    kinds = [c for arm in C14_KINDS for c in compare(digits, ARM, arm, ("sinusoidal", "add"))]
    tables = [c for t in C14_TABLES for c in compare(digits, ARM, (t, "concat_split"), (t, "add"))]
    return rule_reported(kinds, floor, margin), rule_reported(tables, floor, margin)


@claim(
    "C14",
    "ViT/MAE add 2-D positions to patch embeddings",
    "For images, 2-D sin-cos positions added to patch embeddings are the standard choice.",
    "Dosovitskiy et al. 2021 (ViT); He et al. 2022 (MAE)",
    "reported: the kind of position (2-D sin-cos, learned, none; all added) each against 1-D sinusoidal + add, and "
    "concatenated against added on the same position table, each family Holm-corrected, with intervals",
    metrics=CHAIN,
)
def c14(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    digits = ctx.frame[ctx.frame["task.name"] == "digits"]
    kinds, combiners = c14_families(digits, ctx.floor, ctx.margin)
    r.verdict = reported_or_too_small(kinds, combiners)
    r.tables.append(family_table("The kind of position at the input (added; none adds nothing): each (A) against 1-D "
                                 "sinusoidal + add (B) on 8×8 digits; verdict: A better", kinds,
                                 ["model.d"]))  # fmt: skip
    r.tables.append(family_table("Concatenated (A) against added (B), the same scheme (concat_split's table is "
                                 "d_position wide, add's d); verdict: A better", combiners,
                                 ["model.position.scheme", "model.d"]))  # fmt: skip
    if not digits.empty:
        r.figures.append(arm_figure(ctx, ctx.frame, "digits", "digits", "digits: test accuracy per arm"))
    # The key quotes the first row of each family, 2-D sin-cos where it learned (C14_KINDS, C14_TABLES put it
    # first): the claim is about ViT's 2-D positions, so the smallest p among other kinds would change the subject.
    halves = []
    if kinds.rows:
        halves.append(f"kind of position: {key_of(kinds, ['model.d'], ctx.floor, best=False, says=A_BETTER)}")
    if combiners.rows:
        keys = ["model.position.scheme", "model.d"]
        halves.append(f"combiner (same scheme): {key_of(combiners, keys, ctx.floor, best=False, says=A_BETTER)}")
    r.key = "; ".join(halves) or "not run"
    _finish(r, ctx, {"kind": kinds, "combiner": combiners} if kinds.rows else {"combiner": combiners})
    return r
