"""C19: in 2-D, row and column encodings are concatenated rather than added.

C19 reads sincos2d with its row and column encodings concatenated against the same two added at full width.
"""

from __future__ import annotations

import pandas as pd

from pelab.report.arms import _finish, key_of
from pelab.report.context import ReportContext
from pelab.report.evidence import compare
from pelab.report.registry import CHAIN, ClaimResult, Table, claim
from pelab.report.tables import family_table
from pelab.rules import NOT_RUN, Comparison, Family, family

#: The 2-D scheme's option saying how its row and column encodings meet; unset means concatenated (MAE).
GRID_COMBINE = "model.position.grid_combine"


def grid_frame(ctx: ReportContext) -> pd.DataFrame:
    """sincos2d runs, with the row/column option spelled out (unset reads as MAE's concatenation)."""
    f = ctx.frame
    if f.empty or "model.position.scheme" not in f:
        return f.iloc[0:0]
    f = f[f["model.position.scheme"] == "sincos2d"].copy()
    if GRID_COMBINE not in f:
        f[GRID_COMBINE] = "concat"
    f[GRID_COMBINE] = f[GRID_COMBINE].fillna("concat")
    return f


def rule_c19(comps: list[Comparison], floor: float, margin: float) -> Family:
    """C19: concatenated row/column halves (A) beat the same encodings added (B), beyond the Holm-corrected
    interval, on some comparison. An added table that cannot tell (r, c) from (c, r) is capped below the floor on
    a task that asks which cell (5/8 on a 4×4 grid); that failure is the claim's point (``FLOOR_POLICY``'s
    exception: an arm failing where its pair learned counts)."""
    return family(comps, CHAIN, floor, margin, kind="better", combine="any", failure_is_evidence=True)


def collision_rows(ctx: ReportContext) -> list[list[str]]:
    """Per patch grid and table width in the study: cells whose code equals their transpose's, under each layout
    (reported beside the verdict, not used by it: under add on a square grid it is every off-diagonal cell)."""
    import torch

    from pelab.positions.sincos2d import sincos_2d_table, transpose_collisions

    out = []
    seen = set()
    for run in ctx.study.runs:
        if run.model.position.scheme != "sincos2d" or run.model.grid is None:
            continue
        grid, width = tuple(run.model.grid), run.model.scheme_context().width
        if (grid, width) in seen or width % 4:
            continue
        seen.add((grid, width))
        rows, cols = grid
        side = min(rows, cols)
        flat = torch.arange(rows * cols)
        cells = [f"{rows}×{cols}", str(width)]
        for how in ("add", "concat"):
            table = sincos_2d_table(flat, width, grid, how)
            cells.append(f"{transpose_collisions(table, grid)} of {side * (side - 1)}")
        out.append(cells)
    return out


@claim(
    "C19",
    "In 2-D, row and column encodings are concatenated rather than added",
    "ViT-MAE and DETR concatenate the row and column encodings, because adding them would make (x, y) and (y, x) "
    "look alike.",
    "He et al. 2022 (MAE, get_2d_sincos_pos_embed); Carion et al. 2020 (DETR)",
    "sincos2d with row and column halves concatenated (A) against the same two encodings added at full width (B), "
    "same d, combiner, task, seeds and budget; supported when A beats B beyond the Holm-corrected interval on some "
    "comparison, not supported when B is not worse anywhere; a comparison counts when an arm learned (B's failure "
    "where A learned is the claim); "
    "the count of cells that share their code with their "
    "transpose under add is reported beside it, not used by the rule (it is total by construction)",
    metrics=CHAIN,
)
def c19(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    f = grid_frame(ctx)
    comps = compare(f, [GRID_COMBINE], ("concat",), ("add",)) if not f.empty else []
    if not comps:
        r.verdict = NOT_RUN
        r.key = "not run: the study has no sincos2d runs with both row/column layouts"
        return r
    fam = rule_c19(comps, ctx.floor, ctx.margin)
    r.verdict = fam.verdict
    where = ["task.name", "model.combine", "model.d"]
    r.tables.append(family_table("concatenated halves (A) against added at full width (B); verdict: A better", fam,
                                 where))  # fmt: skip
    collisions = collision_rows(ctx)
    if collisions:
        r.tables.append(Table("Grid cells (r ≠ c) whose position code equals their transpose's",
                              ["grid", "table width", "added", "concatenated"], collisions))  # fmt: skip
    r.key = key_of(fam, where, ctx.floor)
    r.caveats.append(
        "The two layouts also differ in frequencies: added, each coordinate's code spans the full width "
        "(wavelengths 10000^(-2i/d)); concatenated, each half spans d/2. This is inherent in the two layouts."
    )
    _finish(r, ctx, {"concat vs add": fam})
    return r
