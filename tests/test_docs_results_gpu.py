"""docs/results-gpu.md, what pelab finds on one GPU (issue 42), can only be written from what a lease of the gpu
preset brings back (docs/make_results_gpu.py). Until a lease has run, the page does not exist and the staleness tests
skip, saying so; once it exists, every run it reports must be one the current code still computes for the gpu preset.
The generator itself is tested here on a hand-made lease (a database, claims, a report, figures, timings, a device
readout), so it works the day a real one comes back."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_gpu_preset import load_preset

from pelab.config import RunConfig
from pelab.records import RunResult
from pelab.study.store import Store

DOCS = Path(__file__).parents[1] / "docs"
PAGE = DOCS / "results-gpu.md"
NO_LEASE = (
    "docs/results-gpu.md does not exist: no GPU lease has run the gpu preset yet (blocked: no GPU lent to the session "
    "that built it); bash bench/gpu_lease.sh runs it and docs/make_results_gpu.py writes the page from what it returns"
)


def maker():
    if "make_results_gpu" not in sys.modules:
        spec = importlib.util.spec_from_file_location("make_results_gpu", DOCS / "make_results_gpu.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["make_results_gpu"] = module
        spec.loader.exec_module(module)
    return sys.modules["make_results_gpu"]


@pytest.mark.skipif(not PAGE.exists(), reason=NO_LEASE)
def test_the_published_gpu_runs_are_the_ones_the_current_code_computes() -> None:
    stored = set((DOCS / "results-gpu" / "run_ids.txt").read_text().split())
    computed = {r.run_id for r in load_preset("gpu").runs}
    stale = stored - computed
    assert not stale, (
        f"{len(stale)} of docs/results-gpu.md's {len(stored)} runs are no longer computed by this code for the gpu "
        "preset: run a lease again (bash bench/gpu_lease.sh) and docs/make_results_gpu.py"
    )
    page = PAGE.read_text()
    assert f"| runs | {len(stored)} done" in page
    for name in re.findall(r"\]\((results-gpu/[\w.-]+)\)", page):
        assert (DOCS / name).is_file(), name


@pytest.mark.skipif(not PAGE.exists(), reason=NO_LEASE)
def test_every_file_the_gpu_page_links_can_be_committed() -> None:
    git = shutil.which("git")
    if git is None or not (DOCS.parent / ".git").exists():
        pytest.skip("not a git checkout")
    linked = [f"docs/{n}" for n in re.findall(r"\]\((results-gpu/[\w.-]+)\)", PAGE.read_text())]
    ignored = subprocess.run([git, "check-ignore", *linked], cwd=DOCS.parent, capture_output=True, text=True)
    assert not ignored.stdout.strip(), f"git ignores files docs/results-gpu.md links: {ignored.stdout.split()}"


# --- the generator, on a hand-made lease --------------------------------------------------------------------------
STUDY = """name = "a hand-made lease"
seeds = [500, 501]
[task]
name = "charlm"
length = 16
[model]
d = 16
n_layers = 1
[train]
steps = 10
curve_points = 5
[axes]
"model.combine" = ["add", "concat_split"]
"""
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


def fake_lease(tmp: Path) -> Path:
    """What bench/gpu_lease.sh leaves in OUT, made by hand: 4 runs (2 arms x 2 seeds) stored as two stacks, the
    add arm's from 0 to 10 s and concat_split's from 5 to 15 s; add's curves level off, concat_split's do not."""
    from pelab.study.grid import parse_study

    lease, folder = tmp / "lease", tmp / "study"
    lease.mkdir()
    study = parse_study(STUDY)
    t0 = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC).timestamp()
    with Store(folder) as store:
        store.set_meta(study=STUDY, name="a hand-made lease", command="pelab study --preset gpu", study_seconds="15")
        for cfg in study.runs:
            add = cfg.model.combine == "add"
            vals = [3.0, 2.5, 2.2, 2.1, 2.09] if add else [3.0, 2.6, 2.4, 2.3, 2.2]
            curve = [{"step": 2 * (i + 1), "loss": v, "acc": 0.3, "val_loss": v} for i, v in enumerate(vals)]
            versions = {"stack": "2", "pelab_source": "f00d", "python": "3.12.3"}
            result = RunResult(run_id=cfg.run_id, status="done", metrics={"loss": vals[-1], "acc": 0.3}, curve=curve,
                               seconds=5.0, versions=versions)  # fmt: skip
            store.write(cfg, result)
            end = datetime.fromtimestamp(t0 + (10 if add else 15), UTC).isoformat(timespec="seconds")
            store.conn.execute("UPDATE runs SET finished_at = ? WHERE run_id = ?", (end, cfg.run_id))
            store.conn.commit()
    (lease / "results.sqlite.gz").write_bytes(gzip.compress((folder / "results.sqlite").read_bytes()))
    claims = [
        {
            "id": "C6",
            "verdict": "inconclusive at this budget",
            "key": "concat_split vs add (task=charlm, d=16): A − B +1.0% [-0.5%, +2.5%] bits per byte (95%)",
        }
    ]
    (lease / "claims.json").write_text(json.dumps(claims))  # fmt: skip
    (lease / "report.md").write_text(
        "# a hand-made lease\n\n## What this run says\n\nThe answer ([C6](#c6)).\n\n"
        "![Concatenating against adding](figures/gap-lm.png)\n\n![Every comparison](figures/overview-forest.png)\n\n"
        "## Every claim\n\n- C6\n"
    )
    for name in ("gap-lm.png", "overview-forest.png", "curves-charlm.png"):
        (folder / "figures").mkdir(exist_ok=True)
        (folder / "figures" / name).write_bytes(PNG)
    with tarfile.open(lease / "report.tar.gz", "w:gz") as tar:
        tar.add(folder / "figures", arcname="figures")
    phases = [
        {"name": n, "seconds": s, "rc": 0} for n, s in (("setup", 9), ("tests", 61), ("study", 17), ("report", 48))
    ]
    timings = {"phases": phases, "stored": {"done": 4}, "runs_per_gpu": "4"}
    (lease / "timings.json").write_text(json.dumps(timings))
    (lease / "device.txt").write_text(
        "gpu: NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04\n"
        "torch: 2.11.0+cu130, CUDA 13.0, cuDNN 91300, CUDA available: True\n"
        "device 0: NVIDIA H100 80GB HBM3, 79.2 GiB, 132 SMs, capability 9.0, bf16: True\n"
        "cpu: Intel Xeon Platinum, 16 cores\npython: 3.12.3 (/opt/torch/.venv/bin/python3)\ncommit: unknown\n"
    )
    (lease / "lease.log").write_text("setup: ...\ntests: rc=0 86 passed in 61.20s\nphase tests 61\n")
    return lease


def test_the_page_is_written_from_what_the_lease_brought_back(tmp_path: Path) -> None:
    lease = fake_lease(tmp_path)
    docs = tmp_path / "docs"
    page = maker().write_page(lease, docs, "1a2b3c4").read_text()
    for words in (
        "| commit | `1a2b3c4` (pelab source f00d) |",
        "| GPU | NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04 (name, memory, driver)",
        "| software | torch 2.11.0+cu130, CUDA 13.0",
        "| CUDA tests | rc=0 86 passed in 61.20s |",
        "| study | 15 s (bench/gpu_cost.py had said",
        "| report | 48 s |",
        "| runs | 4 done of 4; run ids in [results-gpu/run_ids.txt](results-gpu/run_ids.txt) |",
        "## The answer on one GPU",
        "The answer ([C6](claims.md#c6)).",
        "![Concatenating against adding](results-gpu/gap-lm.png)",
        "| [C6](claims.md#c6)",
    ):
        assert words in page, words
    assert sorted(p.name for p in (docs / "results-gpu").iterdir()) == [
        "gap-lm.png", "overview-forest.png", "run_ids.txt"
    ]  # fmt: skip
    assert len((docs / "results-gpu" / "run_ids.txt").read_text().split()) == 4
    # the last fifth: add's runs 2.1 -> 2.09 (0.5%), concat_split's 2.3 -> 2.2 (4.3%): not flat
    assert "| causal | 16 | 16 | 4 | 2.4% | 4.3% | no |" in page
    assert "4 runs done in 15 s of study: 16.0 runs per GPU-minute" in page
    assert "| 1 | 0.2 | 12.0 | 2 |" in page and "| 2 | 0.1 | 24.0 | 4 |" in page


def test_a_lease_cut_short_says_so() -> None:
    """The page never claims a whole study: runs short of the design are named as the time box's."""
    text = (DOCS / "make_results_gpu.py").read_text()
    assert "the study's time box stopped it" in text


def test_runs_per_minute_against_concurrency_on_a_hand_made_timeline() -> None:
    """Two groups of 5 runs (500 seed-steps each), one from 0 to 10 s, the other from 5 to 15 s: 10 s with one group
    on the GPU (5 runs, 500 seed-steps), 5 s with two (5 runs, 500 seed-steps)."""
    m = maker()
    rows = m.by_concurrency([m.Group(0, 10, 5, 500), m.Group(5, 15, 5, 500)])
    assert rows == [(1, 10.0, 30.0, 50.0), (2, 5.0, 60.0, 100.0)]


def test_the_last_fifth_is_read_as_the_report_reads_it() -> None:
    last_fifth = maker().last_fifth
    curve = [{"val_loss": v} for v in (4.0, 3.0, 2.5, 2.2, 2.0, 1.9)]
    assert last_fifth(curve) == pytest.approx(1 - 1.9 / 2.0)  # the point at 80% of the curve is the fifth of six
    assert last_fifth(curve[:4]) is None and last_fifth([{"loss": 1.0}] * 6) is None


def test_the_runs_groups_come_from_their_stored_seconds_and_stack() -> None:
    m = maker()
    cfg = RunConfig.model_validate(
        {"task": {"name": "charlm", "length": 16}, "model": {"d": 16}, "train": {"steps": 7}}
    )
    row = {"status": "done", "finished_at": "2026-11-28T12:00:10+00:00", "seconds": 2.0, "versions": {"stack": "3"},
           "config": json.loads(cfg.canonical_json())}  # fmt: skip
    (g,) = m.groups([row, {**row, "config": json.loads(cfg.model_copy(update={"seed": 1}).canonical_json())}])
    assert g.end - g.start == 6.0 and g.runs == 2 and g.seed_steps == 14
