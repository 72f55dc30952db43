"""One comparison's outcome (``Row``), a claim's comparisons together (``Family``), and the rules of SCIENCE.md on
one oriented interval (``_decide``); Holm's step-down, which sets the level each row is read at.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pelab.rules.compare import Comparison, Test
from pelab.rules.metrics import ALPHA, BPB, LOSS, MIN_EQUIVALENCE_SEEDS
from pelab.rules.resolution import Resolution, resolve
from pelab.rules.verdicts import INCONCLUSIVE, NO_INFO, NOT_SUPPORTED, SUPPORTED, TOO_SMALL


# --- Holm–Bonferroni --------------------------------------------------------------------
def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[tuple[bool, float]]:
    """Holm's step-down: for each p-value, whether it is rejected and the confidence level of the interval
    that decides it (1 − alpha / (m − rank)). NaN p-values (no test in the direction that matters) rank last
    and are never rejected; they still count in m."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: (math.isnan(pvalues[i]), pvalues[i]))
    out: list[tuple[bool, float]] = [(False, 1 - alpha / max(m, 1))] * m
    going = True
    for rank, i in enumerate(order):
        level_alpha = alpha / (m - rank)
        p = pvalues[i]
        going = going and not math.isnan(p) and p < level_alpha
        out[i] = (going, 1 - level_alpha)
    return out


# --- rows and families ------------------------------------------------------------------
#: better: A beats B (the interval excludes 0); beyond_margin: A beats B by more than the margin ("far better");
#: equivalent: within ±margin; not_worse: A trails B by less than the margin.
Kind = Literal["better", "beyond_margin", "equivalent", "not_worse"]


@dataclass
class Row:
    """One comparison's outcome inside a claim."""

    comparison: Comparison
    verdict: str
    test: Test | None = None  # the test that decided it (None: too small, or no metric informative)
    skipped: list[str] = field(default_factory=list)  # metrics passed over, and why
    notes: list[str] = field(default_factory=list)  # what else limited the verdict
    level: float = 1 - ALPHA  # confidence of the interval the verdict read
    interval: tuple[float, float] = (math.nan, math.nan)  # raw A − B at ``level``
    kind: Kind | None = None  # the rule the row was read by (None: no test)
    margin: float = math.nan  # the margin it was read against, in its test's units (a log-ratio's for relative ones)

    @property
    def tested(self) -> bool:
        return self.test is not None and self.verdict not in (TOO_SMALL, NO_INFO)

    @property
    def resolution(self) -> Resolution | None:
        """What the interval the verdict read establishes, whatever the verdict (``pelab.rules.resolution``):
        computed from the interval, the metric and the level, so it follows any later change of level (Holm,
        groups) and never feeds back into the verdict."""
        if self.test is None or self.kind is None or not self.tested:
            return None
        return resolve(self.kind, self.test.metric, self.interval, self.level, self.test.n, MIN_EQUIVALENCE_SEEDS)

    def describe(self) -> str:
        """The difference in words whose sign cannot be misread: 'A − B +1.2 pp [+0.3, +2.1] accuracy' or
        "A's held-out loss −8.0% [−12.1%, −3.9%] relative to B's"; or why there is no number."""
        if self.test is None:
            return "; ".join(self.skipped) or self.verdict
        return "; ".join([difference_text(self.test, self.interval), *self.notes])

    @property
    def p(self) -> float:
        """Two-sided p-value of 'no difference' (nan without a test): how telling the row is, on any metric."""
        return self.test.p_beyond(0.0) if self.test is not None else math.nan


def difference_text(t: Test, interval: tuple[float, float]) -> str:
    """A paired difference and its interval in words whose sign cannot be misread."""
    lo, hi = (t.metric.clip_diff(x) for x in interval)  # shown within the metric's range (SCIENCE.md)
    numbers = f"{t.metric.fmt_diff(t.mean)} [{t.metric.fmt_diff(lo)}, {t.metric.fmt_diff(hi)}]"
    if t.metric.relative:
        return f"A's {t.metric.label} {numbers} relative to B's"
    return f"A − B {numbers} {t.metric.label}"


#: How ``second_opinion`` notes begin, whichever loss it read (held-out loss; bits per byte).
LOSS_DOUBTS = tuple(f"{m.label} {how}" for m in (LOSS, BPB) for how in ("does not confirm", "contradicts"))


def second_opinion(row: Row, tests: Sequence[Test]) -> str | None:
    """Whether held-out loss agrees with a directional win decided on accuracy, in words, or None when it does.

    SCIENCE.md decides on the claim's deciding metric, so this never changes a verdict; but a win of a point or
    two in accuracy (C9's wordorder arms, near 50% chance) that the loss, read at the same level, does not
    show is one a careful reader discounts, and the report says so beside it rather than leave it to be found."""
    t = row.test
    if row.verdict != SUPPORTED or t is None or t.metric.relative or not t.metric.key.startswith("acc"):
        return None
    loss = next((x for x in tests if x.metric.key in ("loss", "bpb") and x.info is None), None)
    if loss is None:
        return None
    lo, hi = loss.oriented(row.level)
    if lo > 0:
        return None
    how = "contradicts" if hi < 0 else "does not confirm"
    return f"{loss.metric.label} {how} it ({difference_text(loss, loss.interval(row.level))})"


@dataclass
class Family:
    """Every comparison behind one claim and what they add up to."""

    rows: list[Row]
    verdict: str
    kind: Kind
    combine: Literal["any", "all"]
    correction: str

    @property
    def tested(self) -> list[Row]:
        return [r for r in self.rows if r.tested]

    def explain(self) -> str:
        learned = [r for r in self.rows if r.verdict != TOO_SMALL]
        return (
            f"{len(self.rows)} comparison(s); {len(learned)} entered (arms above the floor); "
            f"{len(self.tested)} informative; {self.correction}"
        )


def _decide(kind: Kind, lo: float, hi: float, margin: float, n: int = MIN_EQUIVALENCE_SEEDS) -> str:
    """The rules of SCIENCE.md on an oriented interval (positive = A better) from ``n`` paired seeds.

    A conclusion that rests on the interval lying *inside* a margin (an equivalence, a non-inferiority,
    "no effect") needs at least MIN_EQUIVALENCE_SEEDS pairs; with fewer it stays inconclusive. An equivalence
    claim needs them either way: SCIENCE.md asks for 5 seeds wherever an equivalence is tested, so 3 seeds
    neither confirm nor refute one; so does a non-inferiority ("not worse"), save that A better beyond the
    interval needs no margin and so no seed minimum."""
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    equivalence_ok = n >= MIN_EQUIVALENCE_SEEDS
    if kind == "better":
        inside = -margin <= lo and hi <= margin
        if inside and lo > 0:
            # Sure but negligible: SCIENCE.md's directional rule also says "not supported when it lies inside the
            # equivalence margin", and a difference the margin calls negligible (0.5% of held-out loss) is no win
            # however tight its interval. Deciding that rests on the margin: 5 seeds.
            return NOT_SUPPORTED if equivalence_ok else INCONCLUSIVE
        if lo > 0:
            return SUPPORTED
        if hi < 0 or (equivalence_ok and inside):
            return NOT_SUPPORTED
        return INCONCLUSIVE
    if kind == "beyond_margin":
        if lo > margin:
            return SUPPORTED
        if hi < 0 or (equivalence_ok and hi <= margin):
            return NOT_SUPPORTED
        return INCONCLUSIVE
    if kind == "equivalent":  # SCIENCE.md: at least 5 seeds wherever an equivalence is tested, either way
        if equivalence_ok and -margin <= lo and hi <= margin:
            return SUPPORTED
        if equivalence_ok and (lo > margin or hi < -margin):
            return NOT_SUPPORTED
        return INCONCLUSIVE
    if kind == "not_worse":
        # A non-inferiority is an equivalence with one side, so it is tested on 5 seeds either way (C18's causal
        # half in quick, 3 seeds, reads like the Vaswani equivalence beside it). The one exception: A better
        # beyond the interval is not worse without any appeal to the margin, so it needs no seed minimum.
        if lo > 0 or (equivalence_ok and lo > -margin):
            return SUPPORTED
        if equivalence_ok and hi < -margin:
            return NOT_SUPPORTED
        return INCONCLUSIVE
    raise ValueError(kind)


def _capped(kind: Kind, lo: float, hi: float, margin: float, n: int) -> bool:
    """Whether only the seed count kept this interval from an equivalence-type conclusion."""
    return n < MIN_EQUIVALENCE_SEEDS and _decide(kind, lo, hi, margin) != _decide(kind, lo, hi, margin, n)
