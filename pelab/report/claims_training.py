"""Claims settled by training arms against each other: C5, C6, C7, C12, C13, C14, C17."""

from __future__ import annotations

import pandas as pd

from pelab.report.claims import (
    ClaimResult,
    Figure,
    ReportContext,
    Table,
    arm_cell,
    comparison_table,
    directional_verdict,
    equivalence_verdict,
    pp,
)
from pelab.report.evidence import arms_table, compare
from pelab.report.figures import arms_plot
from pelab.report.verdicts import INCONCLUSIVE, REPORTED, combine_all, combine_any

WHERE = ["task.name", "model.position.scheme", "model.combine", "model.d"]
ARM = ["model.position.scheme", "model.combine"]


def _tasks(frame: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame["task.name"])) if "task.name" in frame else []


def _arm_figure(ctx: ReportContext, frame: pd.DataFrame, task: str, metric: str, name: str, title: str) -> Figure:
    sub = frame[frame["task.name"] == task]
    keys = ARM + (["model.d"] if sub["model.d"].nunique() > 1 else [])
    arms = arms_table(sub, keys, metric)
    path = arms_plot(ctx.figures / f"{name}-{task}.png", arms, title, xlabel=metric.replace("_", " "))
    return Figure(title, path, "mean over seeds with its 95% t-interval; parameters in brackets")


def _runs(comparisons: list) -> list[str]:
    return sorted({r for c in comparisons for r in c.a.run_ids + c.b.run_ids})


def c5(ctx: ReportContext) -> ClaimResult:
    from pelab.sizes import combiner_sizes
    from pelab.tasks import make_task

    r = ClaimResult(
        id="C5",
        title="Concatenation costs more parameters and computation",
        claim="Concatenating a position vector widens the input, so it costs parameters and FLOPs; adding is free.",
        source="a common answer to the question",
        rule="exact counts from the model itself; no verdict needed beyond the table",
        verdict="exact",
    )
    template = next((run for run in ctx.study.runs if run.model.vocab_size), ctx.study.runs[0])
    task = make_task(template.task)
    T = task.seq_len(task.n)
    rows = [
        [x.combine, x.position, str(x.d_token), str(x.d_position), str(x.d_model), f"{x.params:,}",
         f"{x.params_vs_add:.3f}", f"{x.flops_per_token:,}", f"{x.flops_vs_add:.3f}"]
        for x in combiner_sizes(template.model, T)
    ]  # fmt: skip
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
    wide = next(row for row in rows if row[0] == "concat_wide")
    split = next(row for row in rows if row[0] == "concat_split")
    r.key = f"concat_wide ×{wide[6]} params, ×{wide[8]} FLOPs; concat_split ×{split[6]} / ×{split[8]}"
    r.notes.append(
        "Only concat_wide (and, slightly, concat_project) costs more: concat_split keeps the width, so its "
        "layers cost the same and its embeddings are a little smaller."
    )
    return r


def c6(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C6",
        title="Concatenation can beat addition without making the model bigger",
        claim="[x ; p] with a smaller token part (same model width) learns better than x + p.",
        source="the question's proposal",
        rule="supported when concat_split − add is above 0 beyond the 95% interval on some task "
        f"(both arms above the floor of {ctx.floor:.0%} accuracy)",
    )
    comps = compare(ctx.frame, ["model.combine"], ("concat_split",), ("add",))
    verdicts = [directional_verdict(c, ctx) for c in comps]
    r.verdict = combine_any(verdicts) if comps else INCONCLUSIVE
    r.tables.append(
        comparison_table(
            "concat_split (A) against add (B), all else equal",
            comps,
            ["task.name", "model.position.scheme", "model.d"],
            verdicts,
        )
    )
    wide = compare(ctx.frame, ["model.combine"], ("concat_wide",), ("add",))
    if wide:
        r.tables.append(
            comparison_table(
                "For size: concat_wide (A, a bigger model) against add (B)",
                wide,
                ["task.name", "model.position.scheme", "model.d"],
                [directional_verdict(c, ctx) for c in wide],
            )
        )
    for task in _tasks(ctx.frame[ctx.frame["model.combine"].isin(["add", "concat_split"])]):
        r.figures.append(_arm_figure(ctx, ctx.frame, task, "acc", "arms", f"{task}: accuracy per arm"))
    best = max(comps, key=lambda c: c.diff if c.diff == c.diff else -1, default=None)
    r.key = (
        f"largest gap {pp(best.diff, best.lo, best.hi)} ({best.where(['task.name', 'model.position.scheme'])})"
        if best
        else "no pairs"
    )
    r.setup = f"{len(comps)} paired comparisons; parameters of both arms beside each"
    r.run_ids = _runs(comps + wide)
    r.caveats.append("Small synthetic tasks saturate: when both arms reach ~100%, the interval is tight around 0.")
    return r


def c7(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C7",
        title="The kind of position encoding matters little (learned ≈ sinusoidal)",
        claim="Learned and sinusoidal absolute positions give nearly identical results.",
        source='Vaswani et al. 2017, "Attention is all you need", Table 3 row (E)',
        rule=f"equivalence: supported when learned − sinusoidal lies within ±{100 * ctx.margin:.0f} pp on every "
        "task (both arms above the floor)",
    )
    added = ctx.frame[ctx.frame["model.combine"] == "add"]
    comps = compare(added, ["model.position.scheme"], ("learned",), ("sinusoidal",))
    verdicts = [equivalence_verdict(c, ctx) for c in comps]
    r.verdict = combine_all(verdicts) if comps else INCONCLUSIVE
    r.tables.append(
        comparison_table("learned (A) against sinusoidal (B), both added", comps, ["task.name", "model.d"], verdicts)
    )
    nope = compare(ctx.frame, ARM, ("none", "none"), ("sinusoidal", "add"))
    if nope:
        r.tables.append(
            comparison_table(
                "For reference: no position at all (A) against sinusoidal + add (B)", nope, ["task.name", "model.d"]
            )
        )
    r.key = "; ".join(f"{c.group.get('task.name')}: {pp(c.diff, c.lo, c.hi)}" for c in comps[:3])
    r.run_ids = _runs(comps + nope)
    return r


def c12(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C12",
        title="Position can be combined multiplicatively (rotary) rather than additively",
        claim="Rotating queries and keys by position (RoPE) is an alternative to adding or concatenating.",
        source="Su et al. 2021 (RoFormer); answers pointing at 'vector-matrix multiplication'",
        rule="report rotary against add and concat_split with intervals",
        verdict=REPORTED,
    )
    comps = []
    for base in (("sinusoidal", "add"), ("learned", "add"), ("sinusoidal", "concat_split")):
        comps += compare(ctx.frame, ARM, ("rotary", "none"), base)
    r.tables.append(comparison_table("rotary (A) against input schemes (B)", comps, ["task.name", "model.d"]))
    r.key = "; ".join(f"{c.group.get('task.name')} vs {c.b.label}: {pp(c.diff, c.lo, c.hi)}" for c in comps[:2])
    r.run_ids = _runs(comps)
    return r


def c13(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C13",
        title="BERT sums token, segment and position embeddings",
        claim="Adding segment embeddings mixes different 'units'; concatenating them keeps them apart.",
        source="Devlin et al. 2019 (BERT); the question's follow-ups",
        rule="report segment embeddings added against concatenated, with the interval",
        verdict=REPORTED,
    )
    seg = ctx.frame[ctx.frame.get("model.n_segments", pd.Series(0, index=ctx.frame.index)).fillna(0) > 0]
    comps = compare(seg, ["model.combine"], ("concat_split",), ("add",))
    r.tables.append(
        comparison_table(
            "segments concatenated (A) against added (B)", comps, ["task.name", "model.position.scheme", "model.d"]
        )
    )
    for task in _tasks(seg):
        r.figures.append(_arm_figure(ctx, seg, task, "acc", "segments", f"{task}: accuracy per arm"))
    r.setup = (
        "two-segment task with segment (token-type) ids; positions by rotary inside attention, so the "
        "input combiner acts on the segment embedding alone and the comparison isolates it"
    )
    r.key = "; ".join(pp(c.diff, c.lo, c.hi) for c in comps[:2]) or "not run"
    r.run_ids = _runs(comps)
    return r


def c14(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C14",
        title="ViT/MAE add 2-D positions to patch embeddings",
        claim="For images, 2-D sin-cos positions added to patch embeddings are the standard choice.",
        source="Dosovitskiy et al. 2021 (ViT); He et al. 2022 (MAE)",
        rule="report 2-D vs 1-D vs learned vs none, add vs concat, with intervals",
        verdict=REPORTED,
    )
    digits = ctx.frame[ctx.frame["task.name"] == "digits"]
    comps = []
    for arm in (
        ("sincos2d", "add"),
        ("learned", "add"),
        ("none", "none"),
        ("sincos2d", "concat_split"),
        ("sinusoidal", "concat_split"),
        ("learned", "concat_split"),
    ):
        comps += compare(digits, ARM, arm, ("sinusoidal", "add"))
    r.tables.append(comparison_table("each arm (A) against 1-D sinusoidal + add (B) on 8×8 digits", comps, ["model.d"]))
    if not digits.empty:
        r.figures.append(_arm_figure(ctx, ctx.frame, "digits", "acc", "digits", "digits: test accuracy per arm"))
    r.key = "; ".join(f"{c.a.label}: {pp(c.diff, c.lo, c.hi)}" for c in comps[:2]) or "not run"
    r.run_ids = _runs(comps)
    return r


def c17(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C17",
        title="Encodings differ in how they extrapolate to longer inputs",
        claim="Trained at length n, schemes behave differently at 2n.",
        source="Press et al. 2022 (ALiBi); the question's follow-ups",
        rule="report accuracy at the training size and at 2× for every scheme and combiner",
        verdict=REPORTED,
    )
    rows, best = [], []
    for task in _tasks(ctx.frame):
        sub = ctx.frame[ctx.frame["task.name"] == task]
        cols = sorted(
            (c for c in sub.columns if c.startswith("m.acc_at_") and sub[c].notna().any()),
            key=lambda c: int(c.rsplit("_", 1)[1]),
        )
        if len(cols) < 2:
            continue
        at_n, at_2n = cols[0][2:], cols[-1][2:]
        keys = ARM + (["model.d"] if sub["model.d"].nunique() > 1 else [])
        train_arms = {a.label: a for a in arms_table(sub, keys, at_n)}
        long_arms = arms_table(sub, keys, at_2n)
        for a in long_arms:
            rows.append([task, a.label, arm_cell(train_arms[a.label]), arm_cell(a), f"{a.params:,}"])
            best.append((a.mean, task, a.label))
        r.figures.append(
            Figure(
                f"{task}: accuracy at {at_2n.rsplit('_', 1)[1]} (trained at {at_n.rsplit('_', 1)[1]})",
                arms_plot(
                    ctx.figures / f"extrapolation-{task}.png",
                    long_arms,
                    f"{task}: accuracy at 2× length",
                    xlabel="accuracy at 2× the training size",
                ),
            )
        )
    r.tables.append(Table("Accuracy at the training size and at 2×", ["task", "arm", "at n", "at 2n", "params"], rows))
    top = sorted((b for b in best if b[0] == b[0]), reverse=True)[:2]
    r.key = "; ".join(f"best at 2n: {label} on {task} ({100 * m:.0f}%)" for m, task, label in top)
    return r


CLAIMS = [c5, c6, c7, c12, c13, c14, c17]
