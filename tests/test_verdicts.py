"""The verdict rules, case by case, and the t-interval against a hand computation."""

from __future__ import annotations

import math

from pelab.report.verdicts import (
    INCONCLUSIVE,
    NOT_SUPPORTED,
    SUPPORTED,
    TOO_SMALL,
    combine_all,
    combine_any,
    directional,
    equivalent,
)
from pelab.study.stats import t_interval


def test_directional() -> None:
    assert directional(0.01, 0.05, 0.01) == SUPPORTED
    assert directional(-0.05, -0.02, 0.01) == NOT_SUPPORTED  # excludes 0 the wrong way
    assert directional(-0.005, 0.008, 0.01) == NOT_SUPPORTED  # inside the equivalence margin
    assert directional(-0.02, 0.05, 0.01) == INCONCLUSIVE
    assert directional(-0.05, -0.01, 0.01, direction=-1) == SUPPORTED
    assert directional(math.nan, math.nan, 0.01) == INCONCLUSIVE


def test_equivalent() -> None:
    assert equivalent(-0.005, 0.009, 0.01) == SUPPORTED
    assert equivalent(0.02, 0.04, 0.01) == NOT_SUPPORTED
    assert equivalent(-0.04, -0.02, 0.01) == NOT_SUPPORTED
    assert equivalent(-0.02, 0.005, 0.01) == INCONCLUSIVE


def test_combining() -> None:
    assert combine_any([NOT_SUPPORTED, SUPPORTED, TOO_SMALL]) == SUPPORTED
    assert combine_any([NOT_SUPPORTED, NOT_SUPPORTED]) == NOT_SUPPORTED
    assert combine_any([TOO_SMALL]) == TOO_SMALL
    assert combine_all([SUPPORTED, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine_all([SUPPORTED, SUPPORTED, TOO_SMALL]) == SUPPORTED


def test_t_interval_by_hand() -> None:
    # values 1, 2, 3: mean 2, sd 1, t(0.975, 2) = 4.302652729911275
    mean, lo, hi = t_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)
    assert mean == 2.0 and math.isclose(lo, 2 - half) and math.isclose(hi, 2 + half)
    assert math.isnan(t_interval([1.0])[1])
