"""bench/eval_noise.py, which sizes a language-model design's seeds and test sample: it re-scores a study's stored
models (reproducing the stored bits per byte before it trusts its own scoring), reads each arm at the rate the
report keeps, and its spreads are checked here against numbers computed by hand."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import pytest
from scipy import stats
from scripts import load_script

from pelab.study.driver import run_study
from pelab.study.grid import parse_study

STUDY = """name = "eval noise"
seeds = [900, 901, 902]
[task]
name = "mlm"
length = 16
[model]
d = 16
n_layers = 1
n_heads = 2
[train]
steps = 6
batch_size = 4
eval_batches = 2
eval_batch_size = 8
lr = [1e-3, 3e-3]
[[grid]]
name = "g"
axes = { "model.combine" = ["add", "concat_split"] }
"""


def _bench():
    return load_script("bench/eval_noise.py")


def test_rescoring_reproduces_the_stored_sample_then_caches(tmp_path: Path, monkeypatch, capsys) -> None:
    study = parse_study(STUDY)
    run_study(study, tmp_path / "s", workers=1, threads=1, checkpoints=True, quiet=True)
    bench = _bench()
    cache = tmp_path / "cache.csv"
    stored = bench.stored(tmp_path / "s", "mlm", None)
    rows = bench.rescore(tmp_path / "s", stored, 3, cache)
    assert len(rows) == len(study.runs) == 12
    metrics = {r["run_id"]: r["metrics"] for r in stored}
    for r in rows:  # the study's own sample, scored again, is the stored number (rescore refuses otherwise)
        assert float(r["bpb"]) == pytest.approx(metrics[r["run_id"]]["bpb"], rel=1e-9)
        assert float(r["bpb_big"]) != float(r["bpb"])  # another sample
    assert len(bench.stored(tmp_path / "s", "mlm", {900, 901})) == 8  # the seeds asked for
    # the whole command on a fresh cache: one cell, its two arms at their kept rates
    monkeypatch.setattr("sys.argv", ["eval_noise", str(tmp_path / "s"), "--batches", "3", "--cache",
                                     str(tmp_path / "fresh.csv")])  # fmt: skip
    bench.main()
    out = capsys.readouterr().out
    assert out.count("| d=16: concat_split vs add | sinusoidal | 3 |") == 1
    assert out.count("| 16 | sinusoidal |") == 2
    monkeypatch.setattr(bench, "evaluate", lambda *a, **k: pytest.fail("a cached run was scored again"))
    again = bench.rescore(tmp_path / "s", stored, 3, cache)
    first = {r["run_id"]: float(r["bpb_big"]) for r in rows}
    assert {r["run_id"]: float(r["bpb_big"]) for r in again} == first
    with cache.open() as f:
        assert len(list(csv.DictReader(f))) == 12


def test_a_link_at_the_caches_name_is_refused_never_followed(tmp_path: Path) -> None:
    """The default cache lives in the study folder, which may be someone else's: a planted link there is neither
    read through nor written through."""
    from pelab.errors import PelabError

    outside = tmp_path / "outside.csv"
    outside.write_text("run_id,bpb\n")
    (tmp_path / "cache.csv").symlink_to(outside)
    with pytest.raises(PelabError, match="cache.csv"):
        _bench().rescore(tmp_path, [], 3, tmp_path / "cache.csv")
    _bench().write(tmp_path / "cache.csv", [{"run_id": "a", "bpb": 1.0}])
    assert outside.read_text() == "run_id,bpb\n" and not (tmp_path / "cache.csv").is_symlink()


def _stored(seed: int, combine: str, lr: float, val: float) -> dict:
    """A run as a study's store gives it back, with what ``kept`` reads: its config and validation loss."""
    config = {"seed": seed, "task": {"name": "mlm", "length": 32}, "train": {"lr": lr, "steps": 100},
              "model": {"d": 32, "combine": combine, "position": {"scheme": "learned"}}}  # fmt: skip
    return {
        "run_id": f"{combine}-{lr:g}-{seed}",
        "status": "done",
        "reason": None,
        "config": config,
        "metrics": {"val_loss": val},
        "params": 1,
        "flops_per_token": 1,
        "tokens_per_s": 1.0,
        "seconds": 1.0,
    }


def _row(seed: int, combine: str, lr: float, bpb: float, big: float, steps: int = 100) -> dict:
    return {"run_id": f"{combine}-{lr:g}-{seed}", "seed": seed, "d": 32, "scheme": "learned", "combine": combine,
            "lr": lr, "steps": steps, "bpb": bpb, "bpb_big": big}  # fmt: skip


def test_each_arm_is_read_at_its_lowest_mean_validation_rate_and_spreads_are_paired() -> None:
    """add keeps 3e-3 (mean validation 1.033 against 2.0), concat_split keeps 1e-3 (1.0 against 1.1): chosen by
    hand here, against the report's own choice the bench calls."""
    bench = _bench()
    stored = [
        *(_stored(s, "add", 1e-3, 2.0) for s in (1, 2, 3)),
        *(_stored(s, "add", 3e-3, v) for s, v in ((1, 1.0), (2, 1.2), (3, 0.9))),
        *(_stored(s, "concat_split", 1e-3, 1.0) for s in (1, 2, 3)),
        *(_stored(s, "concat_split", 3e-3, 1.1) for s in (1, 2, 3)),
    ]
    keep = bench.kept(stored)
    assert keep == {f"add-0.003-{s}" for s in (1, 2, 3)} | {f"concat_split-0.001-{s}" for s in (1, 2, 3)}
    scored = [
        *(_row(s, "add", 1e-3, 9.0, 9.0) for s in (1, 2, 3)),  # add's worse rate: never read
        _row(1, "add", 3e-3, 2.00, 2.10),
        _row(2, "add", 3e-3, 2.10, 2.05),
        _row(3, "add", 3e-3, 1.90, 2.00),
        _row(1, "concat_split", 1e-3, 2.20, 2.12),
        _row(2, "concat_split", 1e-3, 2.00, 2.08),
        _row(3, "concat_split", 1e-3, 2.10, 2.01),
        *(_row(s, "concat_split", 3e-3, 9.0, 9.0) for s in (1, 2, 3)),
    ]
    arms = bench.arms(scored, keep)
    for key, a, b in (
        ("bpb", [2.20, 2.00, 2.10], [2.00, 2.10, 1.90]),
        ("bpb_big", [2.12, 2.08, 2.01], [2.10, 2.05, 2.00]),
    ):
        x = [100 * math.log(p / q) for p, q in zip(a, b, strict=True)]
        n, sd, half = bench.spread(arms[(32, "learned", "concat_split")], arms[(32, "learned", "add")], key)
        assert n == 3 and sd == pytest.approx(statistics.stdev(x))
        assert half == pytest.approx(stats.t.ppf(0.975, 2) * statistics.stdev(x) / math.sqrt(3))
    big = [2.12, 2.08, 2.01]  # concat_split alone, at its kept rate
    assert bench.cv(arms[(32, "learned", "concat_split")]) == pytest.approx(100 * statistics.stdev(big) / (6.21 / 3))


def test_one_arm_at_two_budgets_is_refused() -> None:
    rows = [_row(1, "add", 1e-3, 2.0, 2.0), {**_row(2, "add", 1e-3, 2.0, 2.0, steps=200), "run_id": "x"}]
    with pytest.raises(SystemExit, match="--steps"):
        _bench().arms(rows, {r["run_id"] for r in rows})
