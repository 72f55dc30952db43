"""Verdict rules of SCIENCE.md, as pure functions of an interval.

Directional claim ("A beats B", difference = A - B): *supported* when the 95% interval
excludes 0 in the claimed direction; *not supported* when it excludes 0 the other way
or lies inside the equivalence margin; *inconclusive at this budget* otherwise.

Equivalence claim ("A ≈ B"): *supported* when the whole interval lies inside
±margin; *not supported* when it lies wholly outside; *inconclusive* otherwise.
"""

from __future__ import annotations

import math

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
INCONCLUSIVE = "inconclusive at this budget"
TOO_SMALL = "budget too small: arms did not learn"
NO_INFO = "no information"  # both arms at a ceiling, or paired differences with zero spread, on every metric
REPORTED = "reported"
EXACT = "exact"
ERROR = "error"
#: Every word a claim's verdict can be, in the order a reader meets them.
VERDICTS = (EXACT, SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NO_INFO, TOO_SMALL, REPORTED, ERROR)


def directional(lo: float, hi: float, margin: float, direction: int = 1) -> str:
    """Verdict on "difference > 0" (direction=1) or "difference < 0" (direction=-1)."""
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    lo, hi = (lo, hi) if direction > 0 else (-hi, -lo)
    if lo > 0:
        return SUPPORTED
    if hi < 0 or (-margin <= lo and hi <= margin):
        return NOT_SUPPORTED
    return INCONCLUSIVE


def equivalent(lo: float, hi: float, margin: float) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    if -margin <= lo and hi <= margin:
        return SUPPORTED
    if lo > margin or hi < -margin:
        return NOT_SUPPORTED
    return INCONCLUSIVE


def combine_any(verdicts: list[str]) -> str:
    """ "On some task": supported if any is; not supported if all are not; else inconclusive."""
    real = [v for v in verdicts if v != TOO_SMALL]
    if not real:
        return TOO_SMALL
    if SUPPORTED in real:
        return SUPPORTED
    if all(v == NOT_SUPPORTED for v in real):
        return NOT_SUPPORTED
    return INCONCLUSIVE


def combine_all(verdicts: list[str]) -> str:
    """ "Everywhere": supported if every learned comparison is; not supported if any is not."""
    real = [v for v in verdicts if v != TOO_SMALL]
    if not real:
        return TOO_SMALL
    if NOT_SUPPORTED in real:
        return NOT_SUPPORTED
    if all(v == SUPPORTED for v in real):
        return SUPPORTED
    return INCONCLUSIVE
