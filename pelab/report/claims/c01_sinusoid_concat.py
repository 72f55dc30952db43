"""C1: sinusoidal encoding disturbs few dimensions, so it is "conceptually a concatenation"."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pelab.report.context import ReportContext
from pelab.report.measured import C1_D, C1_LENGTH, _figures
from pelab.report.registry import ClaimResult, Table, claim
from pelab.report.tables import pct
from pelab.rules import NOT_SUPPORTED, SUPPORTED

#: The most of the table's variance over positions that the last half of its dimensions may carry for the sinusoid to
#: count as "conceptually a concatenation" (its last dimensions left to the token): fixed before the run, as
#: SCIENCE.md's C1 row asks ("a threshold fixed before the run (e.g. 5%)"). A table whose halves shared the variance
#: evenly would put 50% there; a true concatenation of position into the first half, 0%.
C1_MAX_SHARE = 0.05


def late_share(variance: Sequence[float]) -> float:
    """The share of the table's total variance over positions carried by the last half of its dimensions."""
    v = np.asarray(variance, dtype=float)
    return float(v[len(v) // 2 :].sum() / v.sum())


def rule_c1(share: float, threshold: float = C1_MAX_SHARE) -> str:
    """C1: supported when the last half of the dimensions carries less than ``threshold`` of the variance over
    positions (the first half, where the position signal lives, carrying the rest), not supported otherwise. The
    count of dimensions whose range passes 0.1 was the rule before: an arbitrary cut whose verdict turned with it;
    it is a table value now."""
    return SUPPORTED if share < threshold else NOT_SUPPORTED


@claim(
    "C1",
    "Sinusoidal encoding is 'conceptually a concatenation'",
    "The sinusoid disturbs the first dimensions a lot and the last ones hardly at all, so adding it leaves most "
    "of the token's dimensions alone.",
    "an answer to the question",
    f"the share of the encoding's variance over positions 0..{C1_LENGTH - 1} carried by the last half of its "
    f"dimensions (d={C1_D}, the question's figure): supported when it is below {C1_MAX_SHARE:.0%}, a threshold fixed "
    "before the run (SCIENCE.md); not supported otherwise. Beside it, a table of values: the count of dimensions whose "
    "range over the positions exceeds 0.1 (and other cuts), which is not the rule; exact computation, no training",
)
def c1(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    s = ctx.analyse("spectrum", scheme="sinusoidal", d=C1_D, length=C1_LENGTH)
    quiet = C1_D - s["varying"]
    late = late_share(s["variance"])
    r.verdict = rule_c1(late)
    r.key = (
        f"the last half of the dimensions carry {100 * late:.1f}% of the variance over positions (supported below "
        f"{C1_MAX_SHARE:.0%}); beside it, {s['varying']} of {C1_D} dimensions vary by > 0.1 ({quiet} hardly move)"
    )
    r.tables.append(
        Table(
            "Dimensions whose range over the positions exceeds a threshold (a table value, not the rule)",
            ["threshold", "dimensions varying", "share of d"],
            [[str(t), str(c), pct(c / C1_D)] for t, c in s["varying_at"].items()],
        )
    )
    variance = np.asarray(s["variance"], dtype=float)
    quarters = [float(q.sum() / variance.sum()) for q in np.array_split(variance, 4)]
    r.tables.append(
        Table(
            "Share of the variance over positions by quarter of the dimensions (the rule reads the last two)",
            ["dimensions", "share of the variance"],
            [[f"{i * C1_D // 4}–{(i + 1) * C1_D // 4 - 1}", pct(q)] for i, q in enumerate(quarters)],
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
