"""Every numeric option has a bound (issue 30, part 5): a count or size past it, or below 1, is one line naming
the option and its range, exit 2, before anything starts or is written; a learning rate no run can survive is
refused up front; an evaluation budget is counted in the time estimate."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hardening import TINY, cli, one_line, tiny

HUGE = str(10**30)


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("--workers", HUGE, "workers: must be in 1..4,096 (got about 2^99)"),
        ("--workers", "0", "workers: must be in 1..4,096 (got 0)"),
        ("--threads", HUGE, "threads: must be in 1..1,024"),
        ("--runs-per-gpu", HUGE, "runs_per_gpu: must be in 1..64"),
        ("--retries", HUGE, "retries: must be in 0..100"),
        ("--retries", "-1", "retries: must be in 0..100 (got -1)"),
    ],
)
def test_study_options_are_bounded(tmp_path: Path, capsys, monkeypatch, option: str, value: str, words: str) -> None:
    (tmp_path / "s.toml").write_text(TINY)
    out = tmp_path / "o"
    one_line(cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(out), option, value), words)
    assert not out.exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (["params", "--length", "0"], "length: must be in 1..1,048,576 (got 0)"),
        (["params", "--length", "-5"], "length: must be in 1..1,048,576 (got -5)"),
        (["run", "--threads", HUGE], "threads: must be in 1..1,024"),
        (["analyze", "spectrum", "--seed", HUGE], "seed: must be in 0..4,294,967,295"),
        (["analyze", "spectrum", "--seed", "-1"], "seed: must be in 0..4,294,967,295 (got -1)"),
        (["run", "--lr", "1e308"], "train.lr"),
        (["run", "--steps", HUGE], "train.steps"),
    ],
)
def test_command_options_are_bounded(tmp_path: Path, capsys, monkeypatch, args: list[str], words: str) -> None:
    monkeypatch.chdir(tmp_path)
    one_line(cli(capsys, monkeypatch, *args), words)
    assert list(tmp_path.iterdir()) == []


def test_an_absurd_learning_rate_is_refused_before_any_run(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "s.toml").write_text(tiny("train", "lr = 1e308"))
    out = tmp_path / "o"
    line = one_line(cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(out)), "train.lr")
    assert "10" in line and not out.exists()


def test_the_estimate_counts_evaluation_batches() -> None:
    from pelab.config import RunConfig, build
    from pelab.study.estimate import describe, eval_seconds, run_seconds

    base = dict(task=dict(name="reverse", length=4), model=dict(d=16))
    small = build(RunConfig, **base, train=dict(steps=1))
    huge = build(RunConfig, **base, train=dict(steps=1, eval_batches=10**9))
    assert eval_seconds(small) == 0.0  # the default budget is inside the fit
    # a billion evaluation batches is told in hours: their forward passes on top of the run's training
    assert run_seconds(huge) == pytest.approx(run_seconds(small) + eval_seconds(huge))
    assert eval_seconds(huge) > 100 * 3600 and describe(run_seconds(huge)).endswith(" h")


def test_huge_numbers_print_as_their_size() -> None:
    from pelab.errors import PelabError, check_range, shown

    assert shown(12) == "12" and shown(10**5000) == "about 2^16609" and shown(-(2**70)) == "-about 2^70"
    with pytest.raises(PelabError, match=r"^workers: must be in 1\.\.8 \(got about 2\^16609\)$"):
        check_range("workers", 10**5000, 1, 8)
    check_range("workers", None, 1, 8)
