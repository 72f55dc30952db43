"""C1: sinusoidal encoding disturbs few dimensions, so it is "conceptually a concatenation"."""

from __future__ import annotations

import numpy as np

from pelab.report.context import ReportContext
from pelab.report.measured import C1_D, C1_LENGTH, _figures
from pelab.report.registry import ClaimResult, Table, claim
from pelab.report.tables import pct
from pelab.rules import NOT_SUPPORTED, SUPPORTED


def rule_c1(varying: int, d: int) -> str:
    """C1: the count of dimensions that vary (range > 0.1) is 'well below d': at most half of it."""
    return SUPPORTED if varying <= d / 2 else NOT_SUPPORTED


@claim(
    "C1",
    "Sinusoidal encoding is 'conceptually a concatenation'",
    "The sinusoid disturbs the first dimensions a lot and the last ones hardly at all, so adding it leaves most "
    "of the token's dimensions alone.",
    "an answer to the question",
    f"the count of dimensions whose range over positions 0..{C1_LENGTH - 1} exceeds 0.1 (d={C1_D}, the question's "
    "figure): supported when it is well below d, which pelab takes as at most half of d; not supported otherwise. "
    "Beside it, the share of the table's variance in the last half of the dimensions; exact computation, no training",
)
def c1(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    s = ctx.analyse("spectrum", scheme="sinusoidal", d=C1_D, length=C1_LENGTH)
    quiet = C1_D - s["varying"]
    r.verdict = rule_c1(s["varying"], C1_D)
    variance = np.asarray(s["variance"], dtype=float)
    late = float(variance[C1_D // 2 :].sum() / variance.sum())
    r.key = (
        f"{s['varying']} of {C1_D} dimensions vary by > 0.1 ({quiet} hardly move); the last half of the dimensions "
        f"carry {100 * late:.1f}% of the variance"
    )
    flips = {t: c for t, c in s["varying_at"].items() if rule_c1(int(c), C1_D) != r.verdict}
    if flips:  # the rule's threshold is a choice: say where another choice would turn the verdict
        r.caveats.append(
            "The verdict rests on the 0.1 threshold: at "
            + ", ".join(f"{t} the count is {c} ({rule_c1(int(c), C1_D)})" for t, c in flips.items())
            + ". The table below gives every threshold measured."
        )
    r.tables.append(
        Table(
            "Dimensions whose range over the positions exceeds a threshold",
            ["threshold", "dimensions varying", "share of d"],
            [[str(t), str(c), pct(c / C1_D)] for t, c in s["varying_at"].items()],
        )
    )
    dims = list(dict.fromkeys(v["dimension"] for v in s["values"]))
    grid: dict[int, dict[int, float]] = {}
    for v in s["values"]:
        grid.setdefault(v["position"], {})[v["dimension"]] = v["value"]
    r.tables.append(
        Table(
            "Values at chosen positions (rows) and dimensions (columns)",
            ["position", *[f"dim {j}" for j in dims]],
            [[str(p), *[f"{row[j]:+.4f}" for j in dims]] for p, row in grid.items()],
        )
    )
    r.figures += _figures(s, {"_range.png": "range of each dimension over the positions"})
    r.setup = f"paper layout, d={C1_D}, positions 0..{C1_LENGTH - 1}; no training involved"
    return r
