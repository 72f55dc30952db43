"""The time a study is expected to take: the per-run formula by hand, and the work-queue spread."""

from __future__ import annotations

import pytest

from pelab.config import RunConfig
from pelab.study import estimate
from pelab.study.grid import load_study


def test_run_seconds_is_the_fitted_formula_on_the_runs_size() -> None:
    cfg = RunConfig.model_validate(
        {"task": {"name": "reverse", "length": 10}, "model": {"d": 32, "n_layers": 2, "n_heads": 4},
         "train": {"steps": 300, "batch_size": 32}}
    )  # fmt: skip
    C, F = 32, 128  # width and feed-forward width
    per_layer = 2 * C * 3 * C + 2 * C * C + 2 * 2 * C * F + 2 * 2 * 10 * C
    flops_per_token = 2 * per_layer + 2 * C * 16  # two layers and the head over 16 symbols
    tokens = 300 * 32 * 10
    c0, c_step, c_tok, c_flop = estimate.CPU_FIT
    expect = c0 + c_step * 300 + c_tok * tokens / 1e5 + c_flop * tokens * flops_per_token / 1e11
    assert estimate.run_seconds(cfg) == pytest.approx(expect)


def test_study_seconds_spreads_longest_runs_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(estimate, "run_seconds", lambda s: s)
    assert estimate.study_seconds([3.0, 2.0, 2.0], workers=2) == 4.0  # 3 | 2 + 2
    assert estimate.study_seconds([3.0, 2.0, 2.0], workers=1) == 7.0
    assert estimate.study_seconds([], workers=4) == 0.0


def test_the_quick_preset_is_estimated_within_its_ten_minutes() -> None:
    from pelab.cli import preset_path

    study = load_study(preset_path("quick"))
    assert 60 < estimate.study_seconds(study.runs, workers=2) < 9 * 60


def test_describe() -> None:
    assert estimate.describe(12.2) == "13 s"
    assert estimate.describe(600) == "10 min"
    assert estimate.describe(13 * 3600) == "13.0 h"
