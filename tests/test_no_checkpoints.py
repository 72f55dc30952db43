"""A study that kept no checkpoints (``pelab study --no-checkpoints``, as a GPU lease runs one: issue 42): the claims
that measure stored models (C2's overlap, C8's probe, C10's probes) leave out the arms that learned but cannot be
measured, and say so, instead of calling them "budget too small: arms did not learn"; an arm below the floor still
reads as one. No training: every run's result is written by hand, and no checkpoint exists."""

from __future__ import annotations

import json

import pytest

from pelab.records import RunResult
from pelab.report.build import build_report
from pelab.study.grid import parse_study
from pelab.study.store import Store

STUDY = """
name = "no checkpoints"
seeds = [0, 1, 2]
[task]
name = "reverse"
length = 6
vocab = 8
[model]
d = 16
n_layers = 1
n_heads = 2
[train]
steps = 100
[[grid]]
name = "encoders: reverse learns, offset does not"
set = { "model.position.scheme" = "learned" }
axes = { "task.name" = ["reverse", "offset"], "model.combine" = ["add", "concat_split"] }
[[grid]]
name = "a causal decoder without positions"
set = { "task.name" = "copy", "task.length" = 4, "model.position.scheme" = "none", "model.combine" = "none" }
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], str]:
    folder = tmp_path_factory.mktemp("no-checkpoints")
    study = parse_study(STUDY)
    with Store(folder) as store:
        store.set_meta(study=STUDY, name=study.name)
        for cfg in study.runs:
            acc = (0.30 if cfg.task.name == "offset" else 0.95) + 0.002 * cfg.seed
            n = cfg.task.length
            metrics = {"acc": acc, "loss": 1.5 - acc, "exact": acc**n, f"acc_at_{n}": acc}
            curve = [{"step": s, "loss": 2.0 - acc * s / 100, "acc": acc * s / 100} for s in (50, 100)]
            store.write(cfg, RunResult(run_id=cfg.run_id, status="done", metrics=metrics, curve=curve, params=1000))
    assert not (folder / "checkpoints").exists()
    build_report(folder)
    claims = {c["id"]: c for c in json.loads((folder / "claims.json").read_text())}
    return claims, (folder / "report.md").read_text()


def test_an_arm_that_learned_but_kept_no_checkpoint_is_not_called_below_the_floor(report) -> None:
    claims, md = report
    # reverse's add arm learned: left out, not measured; offset's did not: its row is below the floor, as before
    overlap_rows = [r for r in claims["C2"]["rows"] if r["family"] == "overlap"]
    assert [r["where"]["task.name"] for r in overlap_rows] == ["offset"]
    assert overlap_rows[0]["verdict"].startswith("budget too small")
    c10_tasks = {r["where"]["task.name"] for r in claims["C10"]["rows"]}
    assert "reverse" not in c10_tasks and "offset" in c10_tasks
    assert claims["C8"]["halves"]["a NoPE decoder learns position"] == "not run in this study"
    assert "no checkpoint: not probed" in md
    assert md.count("kept no checkpoint (the study ran with --no-checkpoints)") == 3  # C2, C8 and C10 say so
