"""C9: adding a position encoding to pretrained (frozen) word vectors damages them.

C9's frozen-word-vector arms are ordinary ``[[grid]]``s of the study (see ``pelab.pretrained.frozen.grids_toml``),
trained by `pelab study` with every other run; they read MiniLM's frozen word vectors.
"""

from __future__ import annotations

import pandas as pd

from pelab.report.arms import arm_figure, key_of
from pelab.report.context import ReportContext
from pelab.report.evidence import compare, compare_wide
from pelab.report.registry import CHAIN, ClaimResult, claim
from pelab.report.tables import family_table, row_records, runs_of, used_metrics
from pelab.rules import NOT_RUN, Comparison, Family, family


def rule_c9(comps: list[Comparison], floor: float, margin: float) -> Family:
    """C9: concatenation beats addition at equal width (concat_split against add at d, concat_wide against add at
    d + d_position) on some comparison, beyond the Holm-corrected interval, among comparisons whose arms both
    learned (``FLOOR_POLICY``). Every C9 arm sits near the 80% floor on a 50%-chance task, so a row with an arm
    below it is budget too small, however its interval lies."""
    return family(comps, CHAIN, floor, margin, kind="better", combine="any")


def c9_frame(ctx: ReportContext) -> pd.DataFrame:
    f = ctx.frame
    if "model.token_table" not in f:
        return f.iloc[0:0]
    return f[(f["task.name"] == "wordorder") & (f["model.token_table"] == "minilm")]


@claim(
    "C9",
    "Adding a position encoding to pretrained (frozen) word vectors damages them",
    "Frozen pretrained word vectors carry meaning in all their dimensions; adding positions on top corrupts it, "
    "while concatenating leaves it intact.",
    "an answer to the question",
    "supported when add trails a concat arm at equal width (concat_split against add at d; concat_wide against add "
    "at its total width d + d_position) beyond the Holm-corrected interval on some comparison whose arms are "
    "both above the study's floor ({floor}); not supported when every informative comparison is within the margin "
    "({margin}) or favours add; deciding metric: accuracy, then held-out loss",
    metrics=CHAIN,
)
def c9(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    wo = c9_frame(ctx)
    if wo.empty:
        r.verdict = NOT_RUN
        r.key = "not run: this study has no wordorder runs on MiniLM's frozen word vectors (the quick preset has them)"
        r.caveats.append(r.key)
        return r
    comps = []
    for scheme in dict.fromkeys(wo["model.position.scheme"]):
        sub = wo[wo["model.position.scheme"] == scheme]
        comps += compare(sub, ["model.combine"], ("concat_split",), ("add",))
        comps += compare_wide(sub)
    fam = rule_c9(comps, ctx.floor, ctx.margin)
    r.verdict = fam.verdict
    first = ctx.study.runs[[x.run_id for x in ctx.study.runs].index(wo.run_id.iloc[0])]
    t, m = first.task, first.model
    r.setup = (
        f"task wordorder (a real paragraph's first {t.length} MiniLM word pieces, forwards or reversed; chance 50%); "
        f"MiniLM's frozen word vectors; seeds {', '.join(map(str, sorted({int(x) for x in wo.seed})))}, "
        f"{first.train.steps} steps of "
        f"{first.train.batch_size}, {m.n_layers} layer(s). Word vectors narrower than 384 are a fixed PCA of the "
        "table; all are scaled to unit RMS. Parameters are trainable ones."
    )
    r.tables.append(family_table("concat arm (A) against add at the same width (B)", fam,
                                 ["model.position.scheme", "model.d", "width"]))  # fmt: skip
    control = wo[wo["model.combine"] == "none"]
    if not control.empty:
        acc = control[control.status == "done"]["m.acc"]
        r.notes.append(f"Control without positions (must sit near 50%): {100 * acc.mean():.1f}% over {len(acc)} seeds.")
    if ctx.display:
        r.figures.append(arm_figure(ctx, wo, "wordorder", "c9", "wordorder on frozen MiniLM vectors: accuracy per arm"))
    r.key = key_of(fam, ["model.position.scheme", "model.d", "width"], ctx.floor)
    r.metric = used_metrics(fam)
    r.run_ids = runs_of(fam)
    r.rows = row_records(fam, "concat beats add")
    return r
