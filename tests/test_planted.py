"""End to end: a results store with planted effects, and the verdicts the report prints from it.

No training: every run's result is written by hand, so the right verdict is known. Planted:
a clear win (concat_split over add on reverse with learned positions), a tie inside the
margin (learned vs sinusoidal on reverse), a task every arm solved (100% on rotate: no information on any metric,
held-out loss included), and a task no arm learned (offset, below the floor).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pelab.records import RunResult
from pelab.report.build import build_report
from pelab.study.grid import parse_study
from pelab.study.store import Store

STUDY = """
name = "planted effects"
seeds = [0, 1, 2, 3, 4]
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
name = "planted"
[grid.axes]
"task.name" = ["reverse", "rotate", "offset"]
"model.position.scheme" = ["sinusoidal", "learned"]
"model.combine" = ["add", "concat_split"]
"""

JITTER = [0.000, 0.003, -0.002, 0.001, -0.001]


def planted(task: str, scheme: str, combine: str, seed: int) -> tuple[float, float]:
    """(accuracy, held-out loss) of one run."""
    j = (
        JITTER[seed]
        + (0.0007 * seed if combine == "concat_split" else 0.0)
        + (0.0004 * seed if scheme == "learned" else 0)
    )
    if task == "offset":  # nobody learns: below the 80% floor
        return 0.30 + j, 1.9 + j
    if task == "rotate":  # everyone at the ceiling; losses within a fraction of a percent
        return 1.0, 0.050 * (1 + j / 10)
    if scheme == "learned" and combine == "concat_split":  # the clear win
        return 0.960 + j, 0.12 + j
    return 0.900 + j, 0.30 + j  # the rest tie


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    folder = tmp_path_factory.mktemp("planted")
    study = parse_study(STUDY)
    with Store(folder) as store:
        store.set_meta(study=STUDY, name=study.name)
        for cfg in study.runs:
            acc, loss = planted(cfg.task.name, cfg.model.position.scheme, cfg.model.combine, cfg.seed)
            n = cfg.task.length
            metrics = {"acc": acc, "loss": loss, "exact": acc**n, f"acc_at_{n}": acc, f"acc_at_{2 * n}": acc / 2}
            curve = [{"step": s, "loss": loss * 100 / s, "acc": min(acc, s / 100)} for s in (25, 50, 75, 100)]
            store.write(cfg, RunResult(run_id=cfg.run_id, status="done", metrics=metrics, curve=curve, params=1000))
    build_report(folder)
    claims = {c["id"]: c for c in json.loads((folder / "claims.json").read_text())}
    return folder, claims


def test_clear_win_is_supported_and_below_floor_takes_no_part(report: tuple[Path, dict]) -> None:
    _, claims = report
    c6 = claims["C6"]
    assert c6["verdict"] == "supported", c6
    rows = [r for r in c6["rows"] if r["family"] == "concat_split vs add"]
    by = {(r["where"]["task.name"], r["where"]["model.position.scheme"]): r for r in rows}
    assert by[("reverse", "learned")]["verdict"] == "supported"
    assert by[("offset", "learned")]["verdict"].startswith("budget too small")
    assert by[("offset", "sinusoidal")]["verdict"].startswith("budget too small")
    # Both arms solved rotate: no information on any metric (SCIENCE.md, "Solved is not informative"), not a loss
    # comparison between two arms that give the same answers.
    assert by[("rotate", "learned")]["metric"] is None and by[("rotate", "learned")]["verdict"] == "no information"
    assert by[("rotate", "learned")]["skipped"] == ["both arms solved the task (accuracy 100.0% and 100.0%)"]
    assert "offset" not in c6["key"]  # key figures never quote an arm below the floor


def test_a_tie_makes_an_equivalence_and_a_solved_task_takes_no_part(report: tuple[Path, dict]) -> None:
    _, claims = report
    c7 = claims["C7"]
    assert c7["verdict"] == "supported", c7
    rows = {r["where"]["task.name"]: r for r in c7["rows"] if r["family"] == "learned vs sinusoidal"}
    assert rows["reverse"]["metric"] == "acc" and rows["reverse"]["verdict"] == "supported"
    assert rows["rotate"]["metric"] is None and rows["rotate"]["verdict"] == "no information"
    assert rows["offset"]["verdict"].startswith("budget too small")


def test_concat_winning_refutes_c2(report: tuple[Path, dict]) -> None:
    _, claims = report
    # add + learned trails concat_split + learned on reverse: 'add is not worse' fails, whatever the geometry.
    assert claims["C2"]["verdict"] == "not supported"


def test_the_report_prints_these_verdicts(report: tuple[Path, dict]) -> None:
    folder, claims = report
    md = (folder / "report.md").read_text()
    html = (folder / "report.html").read_text()
    for cid in ("C6", "C7", "C2"):
        heading = next(line for line in md.splitlines() if line.startswith(f"## {cid} ·"))
        assert heading.endswith(claims[cid]["verdict"]), heading
        assert f'id="{cid.lower()}"' in html
    assert "Holm" in md  # the number of comparisons and the correction are stated
    assert (folder / "claims.md").exists() and "#c6" in html
