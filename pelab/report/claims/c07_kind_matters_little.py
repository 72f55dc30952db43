"""C7: the kind of position encoding matters little (learned ≈ sinusoidal)."""

from __future__ import annotations

from pelab.report.arms import ARM, _finish, budget_text, key_of, position_frame, rule_reported
from pelab.report.context import ReportContext
from pelab.report.evidence import compare
from pelab.report.registry import ClaimResult, claim
from pelab.report.tables import family_table
from pelab.rules import Comparison, Family, family

#: C7's deciding metrics: the final quality of the trained models, as Vaswani et al.'s Table 3 compares them
#: (perplexity and BLEU after training). How fast an arm learned (``auc``) is another question: two arms that end
#: equal may get there at different speeds, and that must not refute "the kind matters little". It is shown
#: beside the verdict, not in it; where both arms solve the task, C7 says it cannot tell.
C7_CHAIN = ("acc", "loss")


def rule_c7(comps: list[Comparison], floor: float, margin: float) -> Family:
    """C7: learned ≈ sinusoidal within the margin on *every* comparison, on final quality (``C7_CHAIN``;
    language models on bits per byte)."""
    return family(comps, C7_CHAIN, floor, margin, kind="equivalent", combine="all")


@claim(
    "C7",
    "The kind of position encoding matters little (learned ≈ sinusoidal)",
    "Learned and sinusoidal absolute positions give nearly identical results.",
    'Vaswani et al. 2017, "Attention is all you need", Table 3 row (E)',
    "equivalence: supported when learned − sinusoidal (both added) lies within the margin ({margin} accuracy, "
    "{loss_margin}) on every comparison whose arms both learned (floor {floor}; one with an "
    "arm below it is budget too small); not supported when it lies wholly "
    "outside on some comparison (Holm-corrected); deciding metric: final quality, accuracy then "
    "held-out loss (bits per byte for language models); how fast each learned is shown beside, not deciding",
    metrics=C7_CHAIN,
)
def c7(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    frame = position_frame(ctx)
    added = frame[frame["model.combine"] == "add"]
    comps = compare(added, ["model.position.scheme"], ("learned",), ("sinusoidal",))
    fam = rule_c7(comps, ctx.floor, ctx.margin)
    r.verdict = fam.verdict
    r.tables.append(family_table("learned (A) against sinusoidal (B), both added", fam, ["task.name", "model.d"]))
    speed = family([c for c in comps if not c.a.is_language_model], ("auc",), ctx.floor, ctx.margin, kind="better",
                   combine="any")  # fmt: skip
    if speed.rows:
        r.tables.append(family_table("For reference, not deciding: how fast each learned (area under the learning "
                                     "curve), learned (A) against sinusoidal (B); verdict: A faster", speed,
                                     ["task.name", "model.d"]))  # fmt: skip
    rotary = rule_reported(compare(frame, ARM, ("rotary", "none"), ("sinusoidal", "add")), ctx.floor, ctx.margin)
    if rotary.rows:
        r.tables.append(
            family_table(
                "For reference: rotary (A) against sinusoidal + add (B); verdict: A better",
                rotary,
                ["task.name", "model.d"],
            )
        )
    nope = rule_reported(compare(frame, ARM, ("none", "none"), ("sinusoidal", "add")), ctx.floor, ctx.margin)
    if nope.rows:
        r.tables.append(
            family_table(
                "For reference: no position at all (A) against sinusoidal + add (B)", nope, ["task.name", "model.d"]
            )
        )
    r.key = key_of(fam, ["task.name", "model.d"], ctx.floor, best=False)
    r.setup = f"learned and sinusoidal positions, both added, on every task that has both; {budget_text(added)}"
    _finish(r, ctx, {"learned vs sinusoidal": fam, "rotary vs sinusoidal": rotary, "none vs sinusoidal": nope,
                     "learning speed, learned vs sinusoidal": speed})  # fmt: skip
    return r
