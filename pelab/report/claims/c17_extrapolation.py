"""C17: encodings differ in how they extrapolate to longer inputs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from pelab.records import sizes_in
from pelab.report.arms import ARM, arm_frame, chance
from pelab.report.context import ReportContext
from pelab.report.evidence import arms_table, config_columns, config_labels, split_configs
from pelab.report.figures import arms_plot
from pelab.report.registry import ClaimResult, Figure, Table, claim
from pelab.report.tables import interval_cell
from pelab.rules import NOT_RUN, REPORTED, TOO_SMALL, from_diffs, holm, metric
from pelab.study.stats import setting_labels, t_interval, telling_keys

if TYPE_CHECKING:
    from pelab.tasks.base import Task


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
        if extra := telling_keys(sub, keys):  # arms these keys would pool (a scheme's option varied) stay apart
            sub = sub.assign(setting=setting_labels(sub, extra))
            keys = [*keys, "setting"]
        arms = []
        for values, g in sub.groupby(keys, sort=False, dropna=False):
            done = g[g.status == "done"]
            label = " + ".join(str(v) for v in (values if isinstance(values, tuple) else (values,)) if str(v) != "")
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
