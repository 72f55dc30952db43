"""bench/lm_flatness.py, the table pilots record (whether language models learned, how flat they ended): its numbers
against hand-made stored runs whose share and last fifth are computed here by hand, and names a terminal never acts
on."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts import load_script

from pelab.records import RunResult
from pelab.study.grid import parse_study
from pelab.study.store import Store

STUDY = """name = "flatness"
seeds = [700]
[task]
name = "charlm"
length = 32
[model]
d = 32
n_layers = 2
n_heads = 4
[train]
steps = 100
lr = 0.003
[[grid]]
name = "g"
axes = { "task.name" = ["charlm", "mlm", "reverse"] }
"""


def _bench():
    return load_script("bench/lm_flatness.py")


def test_the_table_reads_each_language_model_run_as_the_report_does(tmp_path: Path) -> None:
    study = parse_study(STUDY)
    vals = [3.0, 2.6, 2.4, 2.3, 2.25, 2.24]  # 6 points: the last fifth starts at point round(0.8 * 5) = 4
    with Store(tmp_path) as store:
        for cfg in study.runs:
            curve = [{"step": 10.0 * (i + 1), "loss": v, "acc": 0.3, "val_loss": v} for i, v in enumerate(vals)]
            metrics = {"loss": 1.5, "baseline_loss": 3.0, "acc": 0.4}
            store.write(cfg, RunResult(run_id=cfg.run_id, status="done", metrics=metrics, curve=curve, seconds=7.0))
    got = _bench().rows(tmp_path)
    assert [r[0] for r in got] == ["charlm", "mlm"]  # the synthetic task is not a language model
    task, d, combine, lr, steps, share, fifth, seconds = got[0]
    assert (d, combine, lr, steps, seconds) == (32, "add", 0.003, 100, 7.0)
    assert share == pytest.approx(0.5) and fifth == pytest.approx(1 - 2.24 / 2.25)


def test_a_folder_that_is_not_a_study_is_one_line(tmp_path: Path) -> None:
    from pelab.errors import PelabError

    with pytest.raises(PelabError, match="holds no pelab study"):
        _bench().rows(tmp_path)
