"""The verdict words, and the t-interval against a hand computation (the rules: tests/test_rules.py)."""

from __future__ import annotations

import math

from pelab.rules import NO_INFO, TOO_SMALL, VERDICTS
from pelab.study.stats import t_interval


def test_verdict_words_are_distinct() -> None:
    assert len(set(VERDICTS)) == len(VERDICTS) and NO_INFO in VERDICTS and TOO_SMALL in VERDICTS


def test_t_interval_by_hand() -> None:
    # values 1, 2, 3: mean 2, sd 1, t(0.975, 2) = 4.302652729911275
    mean, lo, hi = t_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)
    assert mean == 2.0 and math.isclose(lo, 2 - half) and math.isclose(hi, 2 + half)
    assert math.isnan(t_interval([1.0])[1])
