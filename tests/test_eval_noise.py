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
from pelab.study.store import Store

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


def test_rescoring_reproduces_the_stored_sample_then_caches(tmp_path: Path, monkeypatch) -> None:
    study = parse_study(STUDY)
    run_study(study, tmp_path / "s", workers=1, threads=1, checkpoints=True, quiet=True)
    bench = _bench()
    cache = tmp_path / "cache.csv"
    rows = bench.rescore(tmp_path / "s", "mlm", 3, cache, None)
    assert len(rows) == len(study.runs) == 12
    with Store(tmp_path / "s", create=False) as store:
        stored = {r["run_id"]: r["metrics"] for r in store.rows()}
    for r in rows:  # the study's own sample, scored again, is the stored number (rescore refuses otherwise)
        assert float(r["bpb"]) == pytest.approx(stored[r["run_id"]]["bpb"], rel=1e-9)
        assert float(r["bpb_big"]) != float(r["bpb"])  # another sample
    assert len(bench.rescore(tmp_path / "s", "mlm", 3, cache, {900, 901})) == 8  # the seeds asked for
    monkeypatch.setattr(bench, "evaluate", lambda *a, **k: pytest.fail("a cached run was scored again"))
    again = bench.rescore(tmp_path / "s", "mlm", 3, cache, None)
    first = {r["run_id"]: float(r["bpb_big"]) for r in rows}
    assert {r["run_id"]: float(r["bpb_big"]) for r in again} == first
    with cache.open() as f:
        assert len(list(csv.DictReader(f))) == 12


def _row(seed: int, combine: str, lr: float, val: float, bpb: float, big: float) -> dict:
    return {"seed": seed, "d": 32, "scheme": "learned", "combine": combine, "lr": lr, "steps": 100,
            "val_loss": val, "bpb": bpb, "bpb_big": big}  # fmt: skip


def test_each_arm_is_read_at_its_lowest_mean_validation_rate_and_spreads_are_paired() -> None:
    bench = _bench()
    rows = [
        *(_row(s, "add", 1e-3, 2.0, 9.0, 9.0) for s in (1, 2, 3)),  # add's worse rate: never read
        _row(1, "add", 3e-3, 1.0, 2.00, 2.10),
        _row(2, "add", 3e-3, 1.2, 2.10, 2.05),
        _row(3, "add", 3e-3, 0.9, 1.90, 2.00),
        _row(1, "concat_split", 1e-3, 1.0, 2.20, 2.12),
        _row(2, "concat_split", 1e-3, 1.0, 2.00, 2.08),
        _row(3, "concat_split", 1e-3, 1.0, 2.10, 2.01),
        *(_row(s, "concat_split", 3e-3, 1.1, 9.0, 9.0) for s in (1, 2, 3)),
    ]
    arms = bench.chosen(rows)
    assert {float(r["lr"]) for r in arms[(32, "learned", "add")].values()} == {3e-3}
    assert {float(r["lr"]) for r in arms[(32, "learned", "concat_split")].values()} == {1e-3}
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
    bench = _bench()
    rows = [_row(1, "add", 1e-3, 1.0, 2.0, 2.0), {**_row(2, "add", 1e-3, 1.0, 2.0, 2.0), "steps": 200}]
    with pytest.raises(SystemExit, match="--seeds"):
        bench.chosen(rows)
