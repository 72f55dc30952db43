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


def test_arms_that_the_axes_would_pool_are_told_apart_by_the_settings_that_differ() -> None:
    """Two arms share the axes' values (learned + add, d=16) but not their budget: grouping by the axes would
    average their seeds into one bar. ``telling_keys`` names the settings that differ (the seed and the settings
    a task decides do not count), and ``setting_labels`` labels each run by the values that differ from the
    most common one."""
    import pandas as pd

    from pelab.study.stats import setting_labels, telling_keys

    def run(vocab: int, steps: int, seed: int, combine: str = "add") -> dict:
        return {"model.combine": combine, "model.d": 16, "task.vocab": vocab, "train.steps": steps, "seed": seed,
                "model.n_outputs": vocab, "train.lr": 3e-3}  # fmt: skip

    frame = pd.DataFrame(
        [run(16, 600, s) for s in range(3)] + [run(32, 800, s) for s in (200, 201)]
        + [run(16, 600, s, "concat_split") for s in range(3)]
    )  # fmt: skip
    keys = ["model.combine", "model.d"]
    assert telling_keys(frame, keys) == ["task.vocab", "train.steps"]
    assert telling_keys(frame, [*keys, "task.vocab"]) == []  # the vocab alone tells these two apart
    assert telling_keys(frame.iloc[:3], keys) == []  # one arm: nothing to tell apart
    labels = setting_labels(frame, ["task.vocab", "train.steps"]).tolist()
    assert labels == ["", "", "", "vocab=32, steps=800", "vocab=32, steps=800", "", "", ""]
    groups = frame.assign(setting=labels).groupby([*keys, "setting"], sort=False).size().tolist()
    assert groups == [3, 2, 3]
