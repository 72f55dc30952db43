"""Studies: expansion, validation, resumption after SIGKILL, crashed workers, one driver per folder."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_gpu_preset import load_preset

from pelab.config import RunConfig
from pelab.errors import PelabError
from pelab.study.grid import parse_study
from pelab.study.store import DB_NAME, StudyLock

STUDY = """
name = "tiny"
seeds = [0, 1]
[task]
name = "reverse"
length = 5
vocab = 8
[model]
d = 16
n_heads = 2
[train]
steps = {steps}
eval_batches = 2
[axes]
"model.position.scheme" = ["sinusoidal", "learned"]
"model.combine" = ["add", "concat_split"]
[[grid]]
name = "attention"
set = {{ "model.combine" = "none" }}
axes = {{ "model.position.scheme" = ["rotary", "none"] }}
"""


def write_study(tmp: Path, steps: int = 30) -> Path:
    f = tmp / "tiny.toml"
    f.write_text(STUDY.format(steps=steps))
    return f


def pelab(*args: str, **kw: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pelab", *args], capture_output=True, text=True, **kw)


def db_rows(out: Path) -> dict[str, tuple[str, str]]:
    with sqlite3.connect(out / DB_NAME) as conn:
        return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT run_id, status, metrics FROM runs")}


def test_grid_expands_pairs_seeds_and_dedupes(tmp_path: Path) -> None:
    study = parse_study(write_study(tmp_path).read_text())
    assert len(study.runs) == (2 * 2 + 2) * 2
    assert study.axes == ["model.position.scheme", "model.combine"]
    assert len({r.run_id for r in study.runs}) == len(study.runs)
    # Arms share everything but the axes: same task, training and seeds.
    assert len({r.task for r in study.runs}) == 1 and len({r.train for r in study.runs}) == 1
    assert sorted({r.seed for r in study.runs}) == [0, 1]
    twice = parse_study(STUDY.format(steps=30) + '\n[[grid]]\nname = "again"\naxes = { "model.combine" = ["add"] }\n')
    assert len(twice.runs) == len(study.runs)  # sinusoidal+add reached twice, run once


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[axes]\n"model.colour" = [1]', "unknown key 'model.colour'; allowed: task.name"),
        ('[axes]\n"model.position.scheme" = ["sinusoidal", "wavy"]', "allowed: alibi, kerple, learned"),
        ("[model]\nd = 'wide'", "model.d"),
        ("[train]\nsteps = -5", "train.steps"),
        ("seeds = []", "seeds"),
        ("colour = 1", "unknown key 'colour'"),
        ("[axes]\n\"model.combine\" = 'add'", "non-empty list"),
        ("[pretrained]\nseeds = 3\nsteps = 300", "C9's runs are ordinary [[grid]]s"),
        ("[sequential]\nmax_seeds = 1", "sequential.max_seeds: must be an integer in 3..100"),
    ],
)
def test_malformed_study_one_line_exit_2_nothing_written(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    out = tmp_path / "out"
    r = pelab("study", str(f), "--out", str(out))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()
    with pytest.raises(PelabError):
        parse_study(text)


def test_pretrained_table_points_at_the_full_preset() -> None:
    """C9's grids live in full (wordlm); the old [pretrained] seeds key points there, to a file that exists."""
    assert (Path(__file__).parents[1] / "pelab" / "presets" / "full.toml").is_file()
    with pytest.raises(PelabError, match=r"pelab/presets/full\.toml") as e:
        parse_study(STUDY.format(steps=30) + "\n[pretrained]\nseeds = 3\n")
    assert "\n" not in str(e.value)


def test_grid_does_not_import_the_report() -> None:
    """The study parser stands below the report: importing it loads nothing of pelab.report."""
    code = "import sys, pelab.study.grid; print(sorted(m for m in sys.modules if m.startswith('pelab.report')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_sigkill_then_resume_matches_clean_run(tmp_path: Path) -> None:
    f = write_study(tmp_path, steps=60)
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    args = ["study", str(f), "--workers", "1", "--threads", "1", "--no-report"]  # the runs are what resumes
    proc = subprocess.Popen([sys.executable, "-m", "pelab", *args, "--out", str(killed)], stdout=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if (killed / DB_NAME).exists() and len(db_rows(killed)) >= 2:
                break
        except sqlite3.OperationalError:  # the driver is still creating the schema
            pass
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = db_rows(killed)
    assert 2 <= len(partial) < 12, "the kill should land mid-study"
    r = pelab(*args, "--out", str(killed))
    assert r.returncode == 0, r.stderr
    assert f"{len(partial)} already stored" in r.stdout
    r = pelab(*args, "--out", str(clean))
    assert r.returncode == 0, r.stderr
    resumed, fresh = db_rows(killed), db_rows(clean)
    assert len(resumed) == 12 and set(resumed) == set(fresh)
    assert all(status == "done" for status, _ in resumed.values())
    assert resumed == fresh  # same metrics, bit for bit
    for run_id, row in partial.items():
        assert resumed[run_id] == row  # finished runs were not redone


def descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, frontier = [], [pid]
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier]
        out += kids
        frontier = kids
    return out


def worker_pids(driver: int) -> list[int]:
    """Processes running a run: children of the forkserver the driver started."""
    return [p for p in descendants(driver) if _depth(p, driver) == 2]


def _depth(pid: int, root: int) -> int:
    depth = 0
    while pid not in (root, 0, 1):
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            return -1
        depth += 1
    return depth


def test_killed_worker_fails_its_run_and_the_study_goes_on(tmp_path: Path) -> None:
    """A group's process killed mid-run: that group's runs (one arm's 2 seeds, trained stacked) are stored as
    failed, the others finish, a restart retries them.
    Runs start from a fork server with torch preloaded, so a short run can end between being found and being
    killed: the victim is one long arm (1,500 steps), which the driver sends first as the costliest group; the
    other arms are short, so the test costs one long group twice, not every group."""
    f = write_study(tmp_path, steps=30)
    f.write_text(
        f.read_text() + '[[grid]]\nname = "long"\nset = { "train.steps" = 1500, "model.combine" = "add" }\n'
        'axes = { "model.position.scheme" = ["sinusoidal"] }\n'
    )
    out = tmp_path / "out"
    args = ["study", str(f), "--out", str(out), "--workers", "1", "--threads", "1", "--no-report"]
    proc = subprocess.Popen([sys.executable, "-m", "pelab", *args], stdout=subprocess.PIPE, text=True)
    killed = False
    deadline = time.time() + 60
    while not killed and time.time() < deadline:
        pids = worker_pids(proc.pid)
        if pids:
            time.sleep(0.2)  # into its run
            try:
                os.kill(pids[0], signal.SIGKILL)
                killed = True
            except ProcessLookupError:  # it ended first: take the next run's process
                continue
        time.sleep(0.05)
    assert killed, "no worker process found"
    proc.communicate(timeout=300)
    assert proc.returncode == 0
    rows = db_rows(out)
    assert len(rows) == 14
    failed = [s for s, _ in rows.values() if s == "failed"]
    assert len(failed) == 2  # one group: one arm's two seeds
    with sqlite3.connect(out / DB_NAME) as conn:
        got = conn.execute("SELECT reason, config FROM runs WHERE status = 'failed'").fetchall()
    assert all("signal 9" in reason for reason, _ in got)
    assert {RunConfig.model_validate_json(c).train.steps for _, c in got} == {1500}  # the long arm, and only it
    assert len({RunConfig.model_validate_json(c).arm_id for _, c in got}) == 1
    r = pelab(*args)  # a restart retries the failed run
    assert r.returncode == 0 and all(s == "done" for s, _ in db_rows(out).values())


def test_second_driver_refuses(tmp_path: Path) -> None:
    f = write_study(tmp_path)
    out = tmp_path / "out"
    with StudyLock(out):
        r = pelab("study", str(f), "--out", str(out))
    assert r.returncode == 2
    assert "another pelab study" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_results_command(tmp_path: Path) -> None:
    f = write_study(tmp_path, steps=20)
    out = tmp_path / "out"
    assert pelab("study", str(f), "--out", str(out), "--workers", "2", "--no-report").returncode == 0
    csv = tmp_path / "arms.csv"
    r = pelab("results", str(out), "--csv", str(csv), env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    import pandas as pd

    table = pd.read_csv(csv)
    assert len(table) == 6 and (table.seeds == 2).all()
    assert {"acc", "acc_lo", "acc_hi", "params", "flops_per_token"} <= set(table.columns)
    assert (table.acc_lo <= table.acc).all() and (table.acc <= table.acc_hi).all()
    r = pelab("results", str(out), "--by", "model.colour")
    assert r.returncode == 2 and "by: unknown key" in r.stderr


def test_ctrl_c_stops_workers_stores_nothing_half_done_and_resumes(tmp_path: Path) -> None:
    f = write_study(tmp_path, steps=400)
    out = tmp_path / "out"
    args = ["study", str(f), "--out", str(out), "--workers", "2", "--threads", "1", "--no-report"]
    proc = subprocess.Popen([sys.executable, "-m", "pelab", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            if (out / DB_NAME).exists() and len(db_rows(out)) >= 1:
                break
        except sqlite3.OperationalError:
            pass
        time.sleep(0.2)
    assert proc.poll() is None, "the study ended before it could be interrupted"
    children = descendants(proc.pid)  # the forkserver and the workers
    assert len(children) >= 2
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "pelab: interrupted" in err.decode() and "Traceback" not in err.decode()
    deadline = time.time() + 10
    while time.time() < deadline and any(Path(f"/proc/{p}").exists() for p in children):
        time.sleep(0.1)
    assert not [p for p in children if Path(f"/proc/{p}").exists()]  # no worker left training for nobody
    stored = db_rows(out)
    assert 1 <= len(stored) < 12 and all(s == "done" for s, _ in stored.values())
    r = pelab(*args)
    assert r.returncode == 0, r.stderr
    assert f"{len(stored)} already stored" in r.stdout and len(db_rows(out)) == 12


@pytest.mark.parametrize("pilot", sorted((Path(__file__).parents[1] / "bench" / "pilots").glob("*.toml")), ids=str)
def test_every_recorded_pilot_loads_and_trains_no_seed_a_preset_trains(pilot: Path) -> None:
    """A pilot file is a record someone can rerun: it parses as a study, and its seeds are none a preset trains
    (sequential seeds up to the cap included, and a grid's own seeds), so no budget was fixed on the seeds its verdicts
    read."""
    from pelab.study.grid import load_study, seed_sequence

    trained: set[int] = set()
    for name in ("quick", "full", "gpu"):
        study = load_preset(name)
        cap = study.sequential.max_seeds if study.sequential else len(study.seeds)
        trained |= set(seed_sequence(study.seeds, cap)) | {s for own in study.fixed.values() for s in own}
    study = load_study(pilot)
    assert study.runs and not set(study.seeds) & trained


@pytest.mark.parametrize("preset, tasks", [
    ("quick", ("charlm",)),
    ("full", ("reverse", "offset", "rotate", "sort", "lookup")),
])  # fmt: skip
def test_a_presets_pilot_is_recorded_and_trains_no_seed_a_preset_trains(preset: str, tasks: tuple[str, ...]) -> None:
    """Informative budgets (SCIENCE.md): a preset's budgets for its encoder tasks come from a recorded pilot,
    bench/pilots/PRESET.toml, on seeds no preset trains (sequential seeds up to the cap included), at the preset's
    own settings: every arm the preset trains on those tasks was an arm of the pilot."""
    from pelab.cli import preset_path
    from pelab.study.grid import load_study, seed_sequence

    pilot = load_study(Path(__file__).parents[1] / "bench" / "pilots" / f"{preset}.toml")
    trained: set[int] = set()
    for name in ("quick", "full", "gpu"):
        study = load_preset(name)
        cap = study.sequential.max_seeds if study.sequential else len(study.seeds)
        trained |= set(seed_sequence(study.seeds, cap)) | {s for own in study.fixed.values() for s in own}
    assert not set(pilot.seeds) & trained

    def settings(runs: list[RunConfig]) -> set[tuple[object, ...]]:
        return {(r.task.name, r.task.length, r.task.vocab, r.train.steps, r.model.d, r.model.combine,
                 r.model.position.scheme, r.model.position.model_dump().get("layout"), r.model.matrix_rank)
                for r in runs if r.task.name in tasks and (preset == "quick" or r.task.length == 16)}  # fmt: skip

    ran = settings(load_study(preset_path(preset)).runs)
    assert ran and ran <= settings(pilot.runs)  # every arm of the preset on these tasks, piloted at its budget
