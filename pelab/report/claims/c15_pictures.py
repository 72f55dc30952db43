"""C15: what the encoding looks like (the question's figures)."""

from __future__ import annotations

import numpy as np

from pelab.report.context import ReportContext
from pelab.report.measured import C1_D, C1_LENGTH, _figures
from pelab.report.registry import ClaimResult, claim
from pelab.rules import EXACT, NOT_SUPPORTED


@claim(
    "C15",
    "What the encoding looks like (the question's figures)",
    "The heatmap of p (positions × dimensions) and curves of selected dimensions.",
    "the question's figures",
    "exact when the images exist and the plotted table matches the closed form to 1e-12",
)
def c15(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    from pelab.config import PositionConfig
    from pelab.tables import scheme_table

    s = ctx.analyse("spectrum", scheme="sinusoidal", d=C1_D, length=C1_LENGTH)
    pos = np.arange(C1_LENGTH)[:, None]
    i = np.arange(C1_D)[None, :]
    closed = np.where(
        i % 2 == 0, np.sin(pos / 10000 ** ((i - i % 2) / C1_D)), np.cos(pos / 10000 ** ((i - i % 2) / C1_D))
    )
    drawn = scheme_table(PositionConfig(scheme="sinusoidal"), C1_D, C1_LENGTH).numpy()
    err = float(np.abs(drawn - closed).max())
    r.figures += _figures(
        s,
        {
            "_heatmap.png": "sinusoidal table, paper layout (d=512, 128 positions)",
            "_curves.png": "chosen dimensions against position",
        },
    )
    t2t = ctx.analyse("spectrum", scheme="sinusoidal", layout="tensor2tensor", d=C1_D, length=C1_LENGTH)
    r.figures += _figures(t2t, {"_heatmap.png": "sinusoidal table, tensor2tensor layout (all sines, then cosines)"})
    r.verdict = EXACT if err < 1e-12 and r.figures else NOT_SUPPORTED
    r.key = f"max |drawn − closed form| = {err:.1e}"
    r.notes.append("PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).")
    return r
