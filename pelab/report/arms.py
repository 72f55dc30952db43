"""Helpers of the claims settled by training arms against each other (C6, C7, C9, C12, C13, C14, C17).

Each such claim gathers its comparisons from the runs frame (``evidence.compare``: everything but the compared axis
held equal, seeds paired) and hands them to a pure rule (``rule_cN``, built on ``pelab.rules.family``), which reads
each comparison on the first informative metric of ``CHAIN`` and applies Holm–Bonferroni where a claim says "on
some". Here: the frames they read, the key figure a summary quotes, and the figure of an arm's accuracy.
"""

from __future__ import annotations

import math

import pandas as pd

from pelab.report.context import ReportContext
from pelab.report.evidence import arms_table
from pelab.report.figures import arms_plot
from pelab.report.registry import CHAIN, ClaimResult, Figure
from pelab.report.tables import interval_words, learned_rows, places, row_records, runs_of, used_metrics
from pelab.rules import (
    INCONCLUSIVE,
    NO_INFO,
    NOT_RUN,
    NOT_SUPPORTED,
    REPORTED,
    SUPPORTED,
    TOO_SMALL,
    UNCONFIRMED,
    Comparison,
    Family,
    difference_text,
    family,
)
from pelab.study.stats import setting_labels, t_interval, telling_keys

ARM = ["model.position.scheme", "model.combine"]
WHERE = ["task.name", "model.position.scheme", "model.d"]


def rule_reported(comps: list[Comparison], floor: float, margin: float) -> Family:
    """Claims reported without a verdict still say, per comparison, whether A beats B (Holm across them)."""
    return family(comps, CHAIN, floor, margin, kind="better", combine="any")


#: A reported claim's row verdicts in words: each is about "A better than B", not about the claim.
A_BETTER = {
    SUPPORTED: "A better",
    NOT_SUPPORTED: "A not better (B ahead, or the two within the margin)",
    INCONCLUSIVE: "not settled at this budget",
}


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


def budget_text(frame: pd.DataFrame) -> str:
    """The training budget of each task's runs in this frame ("reverse: 150 steps of 32 sequences at length 16,
    76,800 sequences"): a verdict holds at its budget, and a reader needs it beside the verdict, not at the end."""
    keys = ["task.name", "train.steps", "train.batch_size", "task.length"]
    if frame.empty or not all(k in frame for k in keys):
        return ""
    done = frame[frame.status == "done"] if "status" in frame else frame
    parts = []
    for (task, steps, batch, length), sub in done.groupby(keys, sort=False):
        seeds = sorted({int(s) for s in sub["seed"]}) if "seed" in sub else []
        many = f", seeds {seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else ""
        parts.append(f"{task}: {int(steps)} steps of {int(batch)} sequences at length {int(length)}{many}")
    return "budget: " + "; ".join(dict.fromkeys(parts)) if parts else ""


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
    if extra := telling_keys(sub, keys):  # arms these keys would pool get what sets them apart in their label
        sub = sub.assign(setting=setting_labels(sub, extra))
        keys = [*keys, "setting"]
    arms = arms_table(sub, keys, "acc")
    path = arms_plot(
        ctx.figures / f"{name}-{task}.png", arms, title, xlabel="accuracy", chance=chance(sub), floor=ctx.floor
    )
    return Figure(title, path, "mean over seeds with its 95% t-interval; parameters in brackets; floor and chance")


def key_of(fam: Family, keys: list[str], floor: float, best: bool = True, says: dict[str, str] | None = None) -> str:
    """The key figure: the most telling learned comparison. SCIENCE.md: key figures never quote an arm below the
    floor. A family whose claim counts an arm's failure (``FLOOR_POLICY``'s exception) keeps rows where one arm
    failed, so the key prefers a row whose arms both learned, and where only a row with one arm failed decides,
    it gives the paired difference that decided
    (the evidence) and says which arm is below the floor, without either arm's own level. ``says`` puts a row's
    verdict in words where the claim itself has none (a reported claim's row verdict is about "A better", which
    "not supported" alone would misstate)."""
    rows = [r for r in learned_rows(fam) if r.test is not None]
    if not fam.rows:
        return "not run: this study has none of these comparisons"
    if not rows:
        if any(r.verdict == NO_INFO for r in fam.rows):
            return "no information: every learned comparison at a ceiling"
        return "no comparison whose arms learned"
    # The most telling row: one that carries the family's verdict (a "not supported" is shown by the row that
    # refutes), then the smallest p-value, a scale-free choice across accuracy and relative loss.
    deciding = [r for r in rows if r.verdict == fam.verdict] or rows
    deciding = [r for r in deciding if r.comparison.learned(floor)] or deciding
    row = min(deciding, key=lambda r: (math.isnan(r.p), r.p)) if best else deciding[0]
    both = sum(r.comparison.learned(floor) for r in rows)
    more = (f" ({len(rows)} informative comparisons that entered, {both} of them with both arms above the floor; "
            f"{fam.correction.split(' (')[0]})" if len(rows) > 1 else "")  # fmt: skip
    early = sum(r.verdict == UNCONFIRMED for r in fam.rows)  # never a win: counted apart (``rules.decide``)
    more += f"; {UNCONFIRMED}: {early}" if early else ""
    c = row.comparison
    where = next(place for r, place in zip(fam.rows, places(fam, keys), strict=True) if r is row)
    verdict = (says or {}).get(row.verdict, row.verdict)
    assert row.test is not None
    evidence = "; ".join([f"{difference_text(row.test, row.interval)} ({interval_words(row)})", *row.notes])
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
    r.deciding = next(iter(families))


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
