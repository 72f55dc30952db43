"""The time a study is expected to take: the per-run formula by hand, and the work-queue spread."""

from __future__ import annotations

import pytest

from pelab.config import RunConfig
from pelab.study import estimate
from pelab.study.grid import load_study
from pelab.study.groups import study_seconds


def _cfg(seed: int = 0) -> RunConfig:
    return RunConfig.model_validate(
        {"task": {"name": "reverse", "length": 10}, "model": {"d": 32, "n_layers": 2, "n_heads": 4},
         "train": {"steps": 300, "batch_size": 32}, "seed": seed}
    )  # fmt: skip


def test_group_seconds_is_the_fitted_formula_on_the_runs_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # every constant nonzero, so a term the formula dropped would show (the fit itself sets some to 0)
    monkeypatch.setattr(estimate, "CPU_FIT", (0.5, 2e-3, 3e-3, 1.5, 3.5, 1.25))
    group = [_cfg(s) for s in range(5)]
    C, F = 32, 128  # width and feed-forward width
    per_layer = 2 * C * 3 * C + 2 * C * C + 2 * 2 * C * F + 2 * 2 * 10 * C
    flops_per_token = 2 * per_layer + 2 * C * 16  # two layers and the head over 16 symbols
    tokens = 300 * 32 * 10
    c0, c_step, c_seed_step, c_tok, c_flop, c_pair = estimate.CPU_FIT
    per_seed = c_tok * tokens / 1e5 + c_flop * tokens * flops_per_token / 1e11 + c_pair * tokens * 10 / 1e7
    expect = c0 + 300 * (c_step + 5 * c_seed_step) + 5 * per_seed
    assert estimate.group_seconds(group) == pytest.approx(expect)
    assert estimate.run_seconds(group[0]) == pytest.approx(c0 + 300 * (c_step + c_seed_step) + per_seed)


def test_spread_puts_longest_jobs_first() -> None:
    assert estimate.spread([3.0, 2.0, 2.0], workers=2) == 4.0  # 3 | 2 + 2
    assert estimate.spread([3.0, 2.0, 2.0], workers=1) == 7.0
    assert estimate.spread([], workers=4) == 0.0


def test_study_seconds_estimates_the_groups_the_driver_makes() -> None:
    runs = [_cfg(s) for s in range(5)]
    one = estimate.group_seconds(runs)
    assert study_seconds(runs, workers=1) == pytest.approx(one)
    halves = estimate.spread([estimate.group_seconds(runs[:3]), estimate.group_seconds(runs[3:])], 2)
    assert study_seconds(runs, workers=2) == pytest.approx(halves)


def test_the_quick_preset_is_estimated_within_its_ten_minutes() -> None:
    from pelab.cli import preset_path

    study = load_study(preset_path("quick"))
    assert 60 < study_seconds(study.runs, workers=2) < 9 * 60


def test_describe() -> None:
    assert estimate.describe(12.2) == "13 s"
    assert estimate.describe(600) == "10 min"
    assert estimate.describe(13 * 3600) == "13.0 h"
