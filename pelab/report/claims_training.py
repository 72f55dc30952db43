"""Claims settled by training arms against each other: C5, C6, C7, C12, C13, C14, C17.

Each claim gathers its comparisons from the runs frame (``evidence.compare``: everything
but the compared axis held equal, seeds paired) and hands them to a pure rule
(``rule_cN``, built on ``rules.family``), which reads each comparison on the first
informative metric of ``CHAIN`` and applies Holm–Bonferroni where a claim says "on some".
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

import pandas as pd

from pelab.records import sizes_in
from pelab.report.claims import (
    CHAIN,
    ClaimResult,
    Figure,
    ReportContext,
    Table,
    claim,
    family_table,
    interval_cell,
    learned_rows,
    level_cell,
    places,
    row_records,
    runs_of,
    speed_only,
    used_metrics,
)
from pelab.report.evidence import arms_table, compare, compare_wide, config_columns, config_labels, split_configs
from pelab.report.figures import arms_plot
from pelab.report.rules import (
    LOSS_FLOOR,
    Comparison,
    Family,
    difference_text,
    family,
    from_diffs,
    holm,
    metric,
    swapped,
)
from pelab.report.verdicts import EXACT, INCONCLUSIVE, NO_INFO, NOT_RUN, NOT_SUPPORTED, REPORTED, SUPPORTED, TOO_SMALL
from pelab.study.stats import t_interval

if TYPE_CHECKING:
    from pelab.tasks.base import Task

ARM = ["model.position.scheme", "model.combine"]
WHERE = ["task.name", "model.position.scheme", "model.d"]


# --- the pure rules -----------------------------------------------------------------------
def rule_c6(comps: list[Comparison], floor: float, margin: float) -> Family:
    """C6: concat_split beats add at equal width on *some* comparison (Holm across them). Add failing where
    concat_split learned is the win the claim speaks of (``FLOOR_POLICY``)."""
    return family(comps, CHAIN, floor, margin, kind="better", combine="any")


#: C7's deciding metrics: the final quality of the trained models, as Vaswani et al.'s Table 3 compares them
#: (perplexity and BLEU after training). How fast an arm learned (``auc``) is another question: two arms that end
#: equal may get there at different speeds, and that must not refute "the kind matters little". It is shown
#: beside the verdict, not in it; where both arms solve the task, C7 says it cannot tell.
C7_CHAIN = ("acc", "loss")


def rule_c7(comps: list[Comparison], floor: float, margin: float) -> Family:
    """C7: learned ≈ sinusoidal within the margin on *every* comparison, on final quality (``C7_CHAIN``;
    language models on bits per byte)."""
    return family(comps, C7_CHAIN, floor, margin, kind="equivalent", combine="all")


def rule_reported(comps: list[Comparison], floor: float, margin: float) -> Family:
    """Claims reported without a verdict still say, per comparison, whether A beats B (Holm across them)."""
    return family(comps, CHAIN, floor, margin, kind="better", combine="any")


#: A reported claim's row verdicts in words: each is about "A better than B", not about the claim.
A_BETTER = {
    SUPPORTED: "A better",
    NOT_SUPPORTED: "A not better (B ahead, or the two within the margin)",
    INCONCLUSIVE: "not settled at this budget",
}


# --- helpers ------------------------------------------------------------------------------
def reported_or_too_small(*fams: Family) -> str:
    """A claim reported without a verdict still says when none of its comparisons had an arm that learned, or
    when the study ran none of them."""
    if not any(fam.rows for fam in fams):
        return NOT_RUN
    return REPORTED if any(learned_rows(fam) for fam in fams) else TOO_SMALL


def position_frame(ctx: ReportContext) -> pd.DataFrame:
    """Runs that compare ways to bring in *position*: no segment task (C13) and no frozen MiniLM table (C9)."""
    f = ctx.frame
    keep = pd.Series(True, index=f.index)
    if "model.n_segments" in f:
        keep &= f["model.n_segments"].fillna(0) == 0
    if "model.token_table" in f:
        keep &= f["model.token_table"].isna()
    return f[keep]


def _tasks(frame: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame["task.name"])) if "task.name" in frame else []


def chance(frame: pd.DataFrame) -> float | None:
    """Accuracy of guessing uniformly among the model's outputs."""
    if "model.n_outputs" not in frame or frame.empty:
        return None
    return 1.0 / float(frame["model.n_outputs"].max())


def arm_figure(ctx: ReportContext, frame: pd.DataFrame, task: str, name: str, title: str) -> Figure:
    sub = fold_rank(frame[frame["task.name"] == task])
    keys = ARM + (["model.d"] if sub["model.d"].nunique() > 1 else [])
    arms = arms_table(sub, keys, "acc")
    path = arms_plot(
        ctx.figures / f"{name}-{task}.png", arms, title, xlabel="accuracy", chance=chance(sub), floor=ctx.floor
    )
    return Figure(title, path, "mean over seeds with its 95% t-interval; parameters in brackets; floor and chance")


def key_of(fam: Family, keys: list[str], floor: float, best: bool = True, says: dict[str, str] | None = None) -> str:
    """The key figure: the most telling learned comparison. SCIENCE.md: key figures never quote an arm below the
    floor. A family keeps rows where one arm failed (``FLOOR_POLICY``), so the key prefers a row whose arms
    both learned, and where only a row with one arm failed decides, it gives the paired difference that decided
    (the evidence) and says which arm is below the floor, without either arm's own level. ``says`` puts a row's
    verdict in words where the claim itself has none (a reported claim's row verdict is about "A better", which
    "not supported" alone would misstate)."""
    rows = [r for r in learned_rows(fam) if r.test is not None]
    if not fam.rows:
        return "not run: this study has none of these comparisons"
    if not rows:
        if any(r.verdict == NO_INFO for r in fam.rows):
            return "no information: every learned comparison at a ceiling"
        return "no comparison with an arm above the floor"
    # The most telling row: one that carries the family's verdict (a "not supported" is shown by the row that
    # refutes), then the smallest p-value, a scale-free choice across accuracy and relative loss.
    deciding = [r for r in rows if r.verdict == fam.verdict] or rows
    deciding = [r for r in deciding if r.comparison.learned(floor)] or deciding
    row = min(deciding, key=lambda r: (math.isnan(r.p), r.p)) if best else deciding[0]
    both = sum(r.comparison.learned(floor) for r in rows)
    more = (f" ({len(rows)} informative comparisons with an arm above the floor, {both} of them with both; "
            f"{fam.correction.split(' (')[0]})" if len(rows) > 1 else "")  # fmt: skip
    c = row.comparison
    where = next(place for r, place in zip(fam.rows, places(fam, keys), strict=True) if r is row)
    verdict = (says or {}).get(row.verdict, row.verdict)
    assert row.test is not None
    evidence = "; ".join([f"{difference_text(row.test, row.interval)} ({level_cell(row)} interval)", *row.notes])
    if not c.learned(floor):
        won, lost = (c.a, c.b) if c.a.learned(floor) else (c.b, c.a)
        seeds = list(lost.of("acc").values())
        # an arm whose seeds reach the floor is no failure beside one just over it: say so (C9's add, 79.8%)
        edge = not lost.is_language_model and len(seeds) > 1 and t_interval(seeds)[2] >= floor
        reach = ", though its 95% interval over seeds reaches it" if edge else ""
        return (
            f"{c.a.label} vs {c.b.label} ({where}): {evidence}; {lost.label}'s final mean is below the "
            f"{floor:.0%} floor{reach}; {won.label}'s is above → {verdict}{more}"
        )
    return f"{c.a.label} vs {c.b.label} ({where}): {evidence} → {verdict}{more}"


def _finish(r: ClaimResult, ctx: ReportContext, families: dict[str, Family]) -> None:
    """Run ids, claims.json rows of every family; the deciding metric as the first family (the verdict's) used it."""
    r.metric = used_metrics(next(iter(families.values())))
    r.run_ids = runs_of(*families.values())
    r.rows = [rec for label, fam in families.items() for rec in row_records(fam, label)]


# --- claims -------------------------------------------------------------------------------
@claim(
    "C5",
    "Concatenation costs more parameters and computation",
    "Concatenating a position vector widens the input, so it costs parameters and FLOPs; adding is free.",
    "a common answer to the question",
    "exact counts from the model itself, for every combiner at the same d and for add at concat_wide's total "
    "width; no verdict needed beyond the table",
)
def c5(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    from pelab.config import ModelConfig, build
    from pelab.model import Transformer
    from pelab.sizes import CombinerSize, combiner_sizes
    from pelab.tasks import make_task

    r.verdict = EXACT
    template = next(
        (run for run in ctx.study.runs if run.model.vocab_size and run.model.token_table is None), ctx.study.runs[0]
    )
    task = make_task(template.task)
    T = task.seq_len(task.n)
    sizes = combiner_sizes(template.model, T)
    wide = next(x for x in sizes if x.combine == "concat_wide")
    base = sizes[0]
    wide_cfg = build(ModelConfig, **{**template.model.model_dump(), "d": wide.d_model, "combine": "add"})
    wide_model = Transformer(wide_cfg)
    at_width = CombinerSize("add", wide_cfg.position.scheme, wide.d_model, 0, wide.d_model,
                            wide_model.num_parameters(), wide_model.flops_per_token(T), 0.0, 0.0)  # fmt: skip
    rows = [
        [
            x.combine,
            x.position,
            str(x.d_token),
            str(x.d_position),
            str(x.d_model),
            f"{x.params:,}",
            f"{x.params_vs_add:.3f}",
            f"{x.flops_per_token:,}",
            f"{x.flops_vs_add:.3f}",
        ]
        for x in sizes
    ]
    rows.append(
        [
            f"add at concat_wide's width (d={wide.d_model})",
            at_width.position,
            str(at_width.d_token),
            str(at_width.d_position),
            str(at_width.d_model),
            f"{at_width.params:,}",
            f"{at_width.params / base.params:.3f}",
            f"{at_width.flops_per_token:,}",
            f"{at_width.flops_per_token / base.flops_per_token:.3f}",
        ]
    )
    m = template.model
    r.setup = (
        f"task {template.task.name} (sequence length {T}), d={m.d}, {m.n_layers} layers, {m.n_heads} heads, "
        f"d_position={m.d_position_requested} for concat combiners; counted by Transformer.num_parameters and "
        "Transformer.flops_per_token (2 FLOPs per multiply-accumulate, attention included)."
    )
    r.tables.append(
        Table(
            "Parameters and forward FLOPs per token",
            ["combine", "position", "d_token", "d_position", "d_model", "parameters", "× add", "FLOPs/token", "× add"],
            rows,
        )
    )
    split = next(x for x in sizes if x.combine == "concat_split")
    r.key = (
        f"concat_wide ×{wide.params_vs_add:.3f} params, ×{wide.flops_vs_add:.3f} FLOPs; concat_split "
        f"×{split.params_vs_add:.3f} / ×{split.flops_vs_add:.3f}; add at concat_wide's width "
        f"×{at_width.params / base.params:.3f} / ×{at_width.flops_per_token / base.flops_per_token:.3f}"
    )
    r.notes.append(
        "Only concat_wide (and, slightly, concat_project) costs more: concat_split keeps the width, so its "
        "layers cost the same and its embeddings are a little smaller. C6 sets concat_wide against add at the "
        "same total width, so a gain can be told apart from the size."
    )
    return r


@claim(
    "C6",
    "Concatenation can beat addition without making the model bigger",
    "[x ; p] with a smaller token part (same model width) learns better than x + p.",
    "the question's proposal",
    "supported when concat_split − add is above 0 beyond the Holm-corrected interval on some comparison "
    "with an arm above the floor of {floor} (add failing where concat_split learned counts as its win); not "
    "supported when every informative comparison has add ahead or the two "
    "within the margin ({margin} accuracy, ±2% relative loss); deciding metric: accuracy, then held-out loss "
    "where accuracy carries no information, then how fast each learned (area under the learning curve) where both "
    "arms also sit below the loss floor; a win on that last one alone is named a learning-speed win",
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
    for task in _tasks(frame[frame["model.combine"].isin(["add", "concat_split"])]):
        r.figures.append(arm_figure(ctx, frame, task, "arms", f"{task}: accuracy per arm"))
    r.key = key_of(fam, WHERE, ctx.floor)
    if speed_only(row_records(fam)):
        r.key += (
            f" — a learning-speed win only: on every comparison concat_split won, both arms solved the task (accuracy "
            f"at the ceiling, held-out loss below {LOSS_FLOOR} nats), so it learned faster, not better"
        )
    r.setup = f"{len(fam.rows)} paired comparisons over tasks, schemes and widths; parameters of both arms beside each"
    _finish(r, ctx, {"concat_split vs add": fam, "add vs concat_split": adds, "concat_wide vs add at its width": wide,
                     "add at its width vs concat_wide": wide_adds})  # fmt: skip
    return r


@claim(
    "C7",
    "The kind of position encoding matters little (learned ≈ sinusoidal)",
    "Learned and sinusoidal absolute positions give nearly identical results.",
    'Vaswani et al. 2017, "Attention is all you need", Table 3 row (E)',
    "equivalence: supported when learned − sinusoidal (both added) lies within the margin ({margin} accuracy, "
    "±2% relative loss, at least 0.01 nats) on every comparison with an arm that learned (floor {floor}; one failing "
    "where the other learned counts, on its paired interval like any other); not supported when it lies wholly "
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
    _finish(r, ctx, {"learned vs sinusoidal": fam, "rotary vs sinusoidal": rotary, "none vs sinusoidal": nope,
                     "learning speed, learned vs sinusoidal": speed})  # fmt: skip
    return r


def arm_frame(ctx: ReportContext) -> pd.DataFrame:
    return fold_rank(position_frame(ctx))


def fold_rank(frame: pd.DataFrame) -> pd.DataFrame:
    """``matrix``'s rank folded into its combiner name ("matrix r=4", "matrix r=d"), so arms compare and group
    across the rank axis the other combiners do not have."""
    if "model.matrix_rank" not in frame:
        return frame
    f = frame.copy()
    rank = f["model.matrix_rank"]
    is_matrix = f["model.combine"] == "matrix"
    f.loc[is_matrix, "model.combine"] = [f"matrix r={'d' if pd.isna(r) else int(r)}" for r in rank[is_matrix]]
    return f.drop(columns=["model.matrix_rank"])


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


def task_settings(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The frame split by task and by every other task setting (length, vocabulary, ...): arms trained at
    different lengths are never ranked together. Named by the task, and by the settings that tell two of one
    task apart."""
    if "task.name" not in frame or frame.empty:
        return []
    keys = [c for c in config_columns(frame) if c.startswith("task.")]
    groups = split_configs(frame[keys + ["run_id"]])
    named = config_labels([w for w, _ in groups], ["task.name"])
    return [
        (f"{w['task.name']} ({x})" if x else str(w["task.name"]), frame[frame.run_id.isin(g.run_id)])
        for (w, g), x in zip(groups, named, strict=True)
    ]


def seen_share(ctx: ReportContext, run_ids: set[str], n_train: int, n_eval: int) -> float:
    """``reference_accuracy`` for the task setting those runs trained on."""
    from pelab.tasks import make_task

    run = next((x for x in ctx.study.runs if x.run_id in run_ids and x.task.length == n_train), None)
    return math.nan if run is None else reference_accuracy(make_task(run.task), n_train, n_eval)


def reference_accuracy(task: Task, n_train: int, n_eval: int, samples: int = 2048) -> float:
    """Accuracy at size ``n_eval`` of a model right at every target whose answer training showed it
    (``Task.seen_targets``: positions and tokens that occur at the training size) and, everywhere else, as good
    as the better of two guesses that use no position: the most common answer at that place (which for sort's
    order statistics is far above 1 / vocabulary), or the most common symbol among the inputs it may see (all
    of them in an encoder, those before it in a decoder; the answer is often one of them). It is the
    reference C17 sets beside each arm's accuracy at longer lengths, so an arm that only solves what it has
    seen, or copies a likely symbol, is not read as extrapolating. NaN for tasks with one label per sequence.

    Which guess serves each place is chosen on a separate draw and scored on another, so the reference is not
    flattered by the sample it is scored on."""
    import torch

    draws = [task.batch("test", samples, torch.Generator().manual_seed(s), n=n_eval) for s in (0, 1)]
    batch, guide = draws
    if batch.targets.dim() < 2 or batch.inputs.dim() != 2:
        return math.nan
    causal = task.kind == "decoder"

    size = int(max(batch.inputs.max(), guide.inputs.max(), batch.targets.max(), guide.targets.max())) + 1
    answers = torch.zeros(size, dtype=torch.long)
    answers[guide.targets[guide.mask].unique()] = 1  # only tokens that can be an answer (not SEP, not a query)

    def bag_mode(b: Any) -> Any:
        """(B, T) the most common input symbol each target may see (ties: the smallest)."""
        counts = torch.nn.functional.one_hot(b.inputs, size) * answers
        counts = counts.cumsum(1) if causal else counts.sum(1, keepdim=True).expand_as(counts)
        return counts.argmax(-1)

    unseen = batch.mask & ~task.seen_targets(batch, n_train)
    right = float((batch.mask & ~unseen).sum())
    bags = bag_mode(batch), bag_mode(guide)
    for p in unseen.any(0).nonzero().flatten().tolist():
        scored, votes = guide.mask[:, p], guide.targets[guide.mask[:, p], p]
        if not len(votes):
            continue
        constant = int(votes.bincount().argmax())
        use_bag = (bags[1][scored, p] == votes).float().mean() > (votes == constant).float().mean()
        rows = unseen[:, p]
        guess = bags[0][rows, p] if use_bag else torch.full_like(batch.targets[rows, p], constant)
        right += float((batch.targets[rows, p] == guess).sum())
    return right / float(batch.mask.sum())


KAZEMNEJAD = ("none", "t5", "alibi", "rotary", "learned")


def extrapolation_flags(ranked: list[dict], reference: float, margin: float) -> list[bool]:
    """Which of one task's ranked arms extrapolate: their accuracy at the longest size beats the reference by
    more than the study's ``margin``, beyond the interval at its Holm level across the task's arms (one arm
    in a hundred would clear a 95% interval by chance). With no reference (NaN), every arm counts."""
    if math.isnan(reference):
        return [True] * len(ranked)
    bar = reference + margin
    tests = [from_diffs(metric("acc"), [v - bar for v in a["long"]]) for a in ranked]

    def p(t: Any) -> float:
        if t.n >= 2 and min(t.diffs) > 0 and not t.se > 0:  # every seed alike and above the bar (100% at 2n)
            return 0.0
        return t.p_beyond(0.0) if t.info is None and t.mean > 0 else math.nan

    return [
        bool(rejected) and (t.interval(level)[0] > 0 or not t.se > 0)
        for t, (rejected, level) in zip(tests, holm([p(t) for t in tests]), strict=True)
    ]


def c17_top(ranked: list[dict], reference: float) -> str:
    """Who leads at the longest size among the arms that extrapolate (``extrapolates`` set on each, from
    ``extrapolation_flags``), with the arms tied with it (mean inside its interval), or that none does. The
    ranking is by mean, the flag by the Holm interval, so the arm first by mean may not extrapolate while
    another does: the key then says so."""
    first = ranked[0]
    beyond = [a for a in ranked if a["extrapolates"]]
    if not beyond:  # a ranking of failures says nothing
        return (f"no arm extrapolates: none beats, beyond its interval and the margin, the {100 * reference:.0f}% a "
                f"model right only where it trained (and guessing elsewhere) would get (highest: {first['label']}, "
                f"{first['cells'][-1]})")  # fmt: skip
    lead = beyond[0]
    _, lo, _ = t_interval(lead["long"])
    text = f"{lead['label']} first ({lead['cells'][-1]})"
    if lead is not first:
        text = (
            f"{first['label']} highest ({first['cells'][-1]}) but not beyond the {100 * reference:.0f}% reference; "
            + text
        )
    ties = [a["label"] for a in beyond[1:] if t_interval(a["long"])[0] >= lo]
    if ties:
        text += f", tied with {', '.join(ties[:3])}{' and more' if len(ties) > 3 else ''}"
    return text


def rule_c17(arms: list[dict], floor: float) -> list[dict]:
    """C17's ranking: only arms that learned at n enter, sorted by accuracy at the longest size (ties keep
    their order); the rest are listed apart. Pure, over {label, at_n, long: [values]} dicts."""
    entered = [a for a in arms if not math.isnan(a["at_n"]) and a["at_n"] >= floor]
    ranked = sorted(entered, key=lambda a: -t_interval(a["long"])[0] if a["long"] else math.inf)
    return [dict(a, rank=i + 1) for i, a in enumerate(ranked)]


@claim(
    "C17",
    "Encodings differ in how they extrapolate to longer inputs",
    "Trained at length n, schemes and combiners behave differently at 1.5n and 2n.",
    "Press et al. 2022 (ALiBi); Kazemnejad et al. 2023 (decoders: NoPE ≥ T5 > ALiBi > rotary > absolute)",
    "reported: a ranking per model kind and task by accuracy at the longest size, with 95% intervals, of the "
    "arms that learned at n (floor {floor}); beside each, the accuracy of a model right only where training showed "
    "it the answer (the output and every position it reads inside the training length; for lookup, an index "
    "seen in training) and elsewhere as good as a guess that uses no position (the most common answer there, or the "
    "most common input symbol); an arm extrapolates when it beats that by more than the margin ({margin}), beyond "
    "its interval at the Holm level across the task's arms",
    metrics=("acc_at_N",),
)
def c17(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    r.verdict = REPORTED
    frame = arm_frame(ctx)
    rows, below, tops, decoders, records = [], [], [], set(), []
    for task, sub in task_settings(frame):
        sized = [(n, c) for n, c in sizes_in(sub.columns) if sub[c].notna().any()]
        if len(sized) < 2:
            continue
        n, longer_sizes = sized[0][0], [m for m, _ in sized[1:]]
        cols = [c for _, c in sized]
        longer = cols[1:]
        kind = str(sub["model.kind"].iloc[0]) if "model.kind" in sub else "encoder"
        keys = ARM + (["model.d"] if sub["model.d"].nunique() > 1 else [])
        arms = []
        for values, g in sub.groupby(keys, sort=False):
            done = g[g.status == "done"]
            label = " + ".join(str(v) for v in (values if isinstance(values, tuple) else (values,)))
            arms.append(
                {
                    "label": label,
                    "at_n": float(done["m.acc"].mean()) if len(done) else math.nan,
                    "long": done[longer[-1]].dropna().tolist(),
                    "cells": [interval_cell(*t_interval(done[c].dropna().tolist())) for c in longer],
                    "params": int(g.params.max()),
                }
            )
        ranked = rule_c17(arms, ctx.floor)
        entered_labels = {a["label"] for a in ranked}
        shares = [seen_share(ctx, set(sub.run_id), n, m) for m in longer_sizes]
        for a, flag in zip(ranked, extrapolation_flags(ranked, shares[-1], ctx.margin), strict=True):
            a["extrapolates"] = flag
        sizes = [str(m) for m in longer_sizes]
        for a in ranked:
            mean, lo, hi = t_interval(a["long"]) if a["long"] else (math.nan,) * 3
            records.append({"family": f"{kind} {task}", "arm": a["label"], "rank": a["rank"], "at_n": a["at_n"],
                            "size": longer_sizes[-1], "mean": mean, "lo": lo, "hi": hi, "reference": shares[-1],
                            "extrapolates": a["extrapolates"]})  # fmt: skip
            rows.append(
                [
                    kind,
                    task,
                    str(a["rank"]) if a["extrapolates"] else f"({a['rank']}: no extrapolation)",
                    a["label"],
                    f"{100 * a['at_n']:.1f}%",
                    " · ".join(f"n={s}: {cell}" for s, cell in zip(sizes, a["cells"], strict=True)),
                    " · ".join(f"n={s}: {100 * x:.0f}%" for s, x in zip(sizes, shares, strict=True)),
                    f"{a['params']:,}",
                ]
            )
        below += [
            f"{task}: {a['label']} ({100 * a['at_n']:.0f}% at n)" for a in arms if a["label"] not in entered_labels
        ]
        if ranked:
            tops.append(f"{kind} {task}: {c17_top(ranked, shares[-1])} at n={sizes[-1]}")
        if kind == "decoder":
            decoders.update(g for g in sub["model.position.scheme"].unique())
        entered = [a for a in arms_table(sub, keys, longer[-1][2:]) if a.label in entered_labels]
        if entered:
            r.figures.append(
                Figure(
                    f"{task}: accuracy at n={sizes[-1]} (trained at n={n}), arms that learned",
                    arms_plot(
                        ctx.figures / f"extrapolation-{task}.png",
                        entered,
                        f"{task}: accuracy at longer inputs",
                        xlabel=f"accuracy at n={sizes[-1]}",
                        chance=chance(sub),
                    ),
                )
            )
    r.tables.append(
        Table(
            "Ranking by accuracy at the longest size (arms that learned at n)",
            ["kind", "task", "rank", "arm", "at n", "at longer sizes [95% CI]", "right only where trained", "params"],
            rows,
        )
    )
    if below:
        r.notes.append("Left out of the ranking, below the floor at the training size: " + "; ".join(below) + ".")
    r.key = "; ".join(tops) or "no arm learned at n"
    if (
        frame["model.combine"].astype(str).str.startswith("matrix").any()
        or (frame["model.position.scheme"] == "learned").any()
    ):
        r.notes.append(
            "Tables learned per position (the learned scheme's rows, matrix's maps I + U_pos V_posᵀ) are sized "
            "for the longest length evaluated, but rows past the training length never receive a gradient: "
            "they keep their random initial values (weight decay aside), so at 1.5n and 2n those arms see "
            "positions they know nothing about (matrix there is the identity plus a small random map)."
        )
    missing = [x for x in KAZEMNEJAD if x not in decoders]
    if missing:
        r.caveats.append(
            "Kazemnejad et al.'s decoder ranking (NoPE ≥ T5 > ALiBi > rotary > absolute) cannot be checked here: this "
            f"study ran no causal decoder with {', '.join(missing)}."
        )
    r.run_ids = sorted(frame.run_id.tolist())
    r.rows = records
    r.verdict = REPORTED if rows else TOO_SMALL if below else NOT_RUN
    if r.verdict == NOT_RUN:
        r.key = "not run: no task in this study is evaluated beyond its training length"
    return r
