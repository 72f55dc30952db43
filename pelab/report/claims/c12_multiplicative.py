"""C12: position can be combined multiplicatively rather than additively."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pelab.report.arms import ARM, _finish, _tasks, arm_figure, arm_frame, reported_or_too_small, rule_reported
from pelab.report.context import ReportContext
from pelab.report.evidence import compare
from pelab.report.registry import CHAIN, ClaimResult, claim
from pelab.report.tables import family_table, learned_rows
from pelab.rules import SUPPORTED

MULTIPLICATIVE = ("multiply", "matrix", "rotary")


@claim(
    "C12",
    "Position can be combined multiplicatively rather than additively",
    "Position could scale or map the token vector (x ⊙ (1 + p), one matrix per position) or rotate queries and keys "
    "(RoPE); is one matrix per position bad because of its parameters?",
    "an answer to the question ('vector-matrix multiplication'); Su et al. 2021 (RoFormer)",
    "reported: multiply (x ⊙ (1 + p)), matrix ((I + U_pos V_posᵀ) x at each rank run), rotary (a fixed rotation per "
    "position inside attention) each against add and concat_split with the same task, seeds and budget, parameters "
    "beside each; says whether any multiplicative form beats add beyond the Holm-corrected interval, and whether it "
    "does so at equal parameters",
    metrics=CHAIN,
)
def c12(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    frame = arm_frame(ctx)
    combos = frame[ARM].drop_duplicates().itertuples(index=False, name=None) if not frame.empty else []
    arms = [(p, c) for p, c in combos if c.split(" ")[0] in ("multiply", "matrix") or p == "rotary"]
    comps = []
    for arm in arms:
        for base in (
            ("sinusoidal", "add"),
            ("learned", "add"),
            ("sinusoidal", "concat_split"),
            ("learned", "concat_split"),
        ):
            if arm[1] == "multiply" and arm[0] != base[0]:
                continue  # multiply is set against the same position table it multiplies by
            comps += compare(frame, ARM, arm, base)
    fam = rule_reported(comps, ctx.floor, ctx.margin)
    r.verdict = reported_or_too_small(fam)
    r.tables.append(
        family_table(
            "multiplicative arm (A) against an additive or concatenating one (B); verdict: A better",
            fam,
            ["task.name", "model.d"],
        )
    )
    for task in _tasks(frame[frame["model.combine"].str.split(" ").str[0].isin(MULTIPLICATIVE)]):
        r.figures.append(
            arm_figure(ctx, frame, task, "c12", f"{task}: accuracy per arm, multiplicative forms included")
        )
    wins = [row for row in fam.rows if row.verdict == SUPPORTED and row.comparison.b.label.endswith("add")]
    equal = [row for row in wins if row.comparison.a.params <= row.comparison.b.params]
    kinds = sorted({a[1] if a[0] != "rotary" else "rotary" for a in arms})

    def form(row: Any) -> str:  # the multiplicative arm's kind, as ``kinds`` spells it
        scheme, comb = row.comparison.a.label.split(" + ")[:2]
        return "rotary" if scheme == "rotary" else comb

    by_form = Counter(form(row) for row in wins)
    speed = sum(row.test is not None and row.test.metric.key == "auc" for row in wins)
    r.key = (
        f"arms run: {', '.join(kinds) or 'none'}; a multiplicative form beats add on {len(wins)} of "
        f"{len([x for x in learned_rows(fam) if x.comparison.b.label.endswith('add')])} comparisons with an arm "
        "above the floor "
        f"({len(equal)} at equal or fewer parameters)"
        + (f": {', '.join(f'{k} {n}' for k, n in sorted(by_form.items()))}" if wins else "")
        + (f"; {speed} of them on learning speed alone (both arms solved the task)" if speed else "")
    )
    if not any(k.startswith(("multiply", "matrix")) for k in kinds):
        r.caveats.append("This study ran no multiply or matrix arm: only rotary answers the question here.")
    r.notes.append(
        "matrix carries one map per position (2·max_len·d·r parameters, max_len·d² at full rank); multiply adds "
        "none beyond its position table; rotary none at all. The params column shows what each costs here."
    )
    _finish(r, ctx, {"multiplicative vs additive": fam})
    return r
