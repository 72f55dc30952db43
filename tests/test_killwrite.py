"""Kill -9 the whole study as each file is being written (issue 15): the rerun completes and matches a clean run.

``tests/data/killwrite/sitecustomize.py`` rides on PYTHONPATH into every pelab process and SIGKILLs the process
group at a chosen write, after the temporary file is whole on disk and before it replaces its target: the moment a
kill -9 must not be able to turn into a half file, a folder that cannot resume, or a temp file left for good.

CI kills one folder three times in a row, at writes of three kinds: a checkpoint (run phase), the pretrained
analysis's record (the file that once left a folder unable to resume), and report.html; and once more at one
write drawn by a seeded draw (``$PELAB_KILL_SEED``, else the day: one pass of the full sweep a day). With
``PELAB_KILL_EVERY_WRITE=1`` it kills at every write of a clean run instead, one fresh folder each (about a
minute per write on 2 cores).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_study import STUDY as TINY

from pelab.files import TEMP
from pelab.study.folder import LEFTOVER
from pelab.study.store import DB_NAME

SITE = Path(__file__).parent / "data" / "killwrite"
STUDY = TINY.format(steps=20)  # test_study's 12-run study: 4 input arms + 2 attention arms, 2 seeds
ARGS = ("--workers", "1", "--threads", "1", "--checkpoints")


def study(file: Path, out: Path, log: Path, **kill: str) -> subprocess.CompletedProcess:
    """``pelab study`` in its own process group, its writes into ``out`` logged and, with ``kill``, killed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")])}
    env.update(PELAB_KILL_DIR=str(out.resolve()), PELAB_KILL_LOG=str(log), **kill)
    log.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pelab", "study", str(file), "--out", str(out), *ARGS]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, start_new_session=True, timeout=600)


def writes(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def rows(out: Path) -> dict[str, tuple[str, str]]:
    with sqlite3.connect(out / DB_NAME) as conn:
        return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT run_id, status, metrics FROM runs")}


def files(out: Path) -> set[str]:
    """The folder's files, less the lock and SQLite's -wal/-shm (present while any connection is open, this
    test's included, so they say nothing about the study)."""
    skip = ("study.lock", "results.sqlite-wal", "results.sqlite-shm")
    return {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name not in skip}


def leftovers(out: Path) -> list[str]:
    return sorted(f for f in files(out) if TEMP.fullmatch(Path(f).name) or LEFTOVER.fullmatch(Path(f).name))


def assert_whole(path: Path) -> None:
    """The file a kill interrupted is absent or whole: never a prefix of itself."""
    if not path.exists():
        return
    if path.suffix == ".json":
        json.loads(path.read_text())
    elif path.suffix == ".html":
        assert path.read_text().rstrip().endswith("</html>")
    elif path.suffix == ".safetensors":
        from pelab.checkpoint import load

        load(path)


def assert_killed_at(r: subprocess.CompletedProcess, out: Path, log: Path) -> str:
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr[-2000:])
    name = writes(log)[-1]
    assert_whole(out / name)
    assert any(Path(f).name.startswith(f".{Path(name).name}.") for f in leftovers(out)), "the kill left no temp"
    return name


def assert_matches(out: Path, ref: Path) -> None:
    assert not leftovers(out), leftovers(out)
    assert rows(out) == rows(ref)  # same runs, statuses and metrics, to the bit
    assert files(out) == files(ref)
    for name in files(ref):
        if name.startswith("checkpoints/"):
            assert (out / name).read_bytes() == (ref / name).read_bytes(), name
        assert_whole(out / name)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    tmp = tmp_path_factory.mktemp("killwrite")
    file = tmp / "study.toml"
    file.write_text(STUDY)
    ref, log = tmp / "clean", tmp / "clean.log"
    r = study(file, ref, log)
    assert r.returncode == 0, r.stderr[-2000:]
    return file, ref, writes(log)


def test_the_clean_run_writes_each_kind_of_file_once(clean: tuple[Path, Path, list[str]]) -> None:
    _, ref, log = clean
    assert len(log) == len(set(log)), "a file written twice in one run"
    assert sum(n.startswith("checkpoints/") for n in log) == 12
    assert {"report.html", "report.md", "analyses/pretrained/pretrained.json"} <= set(log)
    assert set(log) <= files(ref) and not leftovers(ref)


def test_killed_at_three_kinds_of_write_in_a_row_then_resumes(clean, tmp_path: Path) -> None:
    file, ref, _ = clean
    out, log = tmp_path / "killed", tmp_path / "killed.log"
    killed = []
    for kill in (
        {"PELAB_KILL_AT": "3"},
        {"PELAB_KILL_MATCH": r"pretrained\.json$"},
        {"PELAB_KILL_MATCH": r"^report\.html$"},
    ):
        killed.append(assert_killed_at(study(file, out, log, **kill), out, log))
    assert killed[0].startswith("checkpoints/") and killed[1:] == ["analyses/pretrained/pretrained.json", "report.html"]
    r = study(file, out, log)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "12 already stored" in r.stdout
    assert_matches(out, ref)


def drawn_write(count: int) -> tuple[int, int]:
    """(seed, write number): one of a clean run's ``count`` writes, drawn from ``$PELAB_KILL_SEED`` or else from
    the day, so CI walks the sweep one write a day and a failure replays with the seed it names."""
    import random
    import time

    seed = int(os.environ.get("PELAB_KILL_SEED") or int(time.time()) // 86400)
    return seed, random.Random(seed).randrange(1, count + 1)


def test_killed_at_one_drawn_write_then_resumes(clean, tmp_path: Path) -> None:
    """One pass of the kill-at-every-write sweep (below), at a write drawn by a seeded draw."""
    file, ref, log_names = clean
    seed, k = drawn_write(len(log_names))
    out, log = tmp_path / "drawn", tmp_path / "drawn.log"
    replay = f"PELAB_KILL_SEED={seed}: write {k} of {len(log_names)} ({log_names[k - 1]})"
    print(replay)  # the writes of the report's workers may land in another order: the name is the clean run's
    assert_killed_at(study(file, out, log, PELAB_KILL_AT=str(k)), out, log)
    r = study(file, out, log)
    assert r.returncode == 0, (replay, r.stderr[-2000:])
    assert_matches(out, ref)


@pytest.mark.skipif(
    os.environ.get("PELAB_KILL_EVERY_WRITE") != "1", reason="PELAB_KILL_EVERY_WRITE=1: about a minute a write"
)
def test_killed_at_every_write(clean, tmp_path: Path) -> None:
    file, ref, log_names = clean
    unresumable, leftover, mismatched = [], [], []
    for k in range(int(os.environ.get("PELAB_KILL_FROM", "1")), len(log_names) + 1):  # FROM: resume a sweep
        out, log = tmp_path / f"k{k}", tmp_path / f"k{k}.log"
        got = assert_killed_at(study(file, out, log, PELAB_KILL_AT=str(k)), out, log)
        r = study(file, out, log)
        if r.returncode != 0:
            unresumable.append((k, got, r.stderr[-500:]))
            continue
        leftover += leftovers(out)
        try:
            assert_matches(out, ref)
        except AssertionError as e:
            mismatched.append((k, got, str(e).splitlines()[0]))
        differs = bool(mismatched) and mismatched[-1][0] == k
        print(f"kill {k}/{len(log_names)} at {got}: {'DIFFERS' if differs else 'resumed and matches'}")
    print(f"kills: {len(log_names)}; could not resume: {len(unresumable)}; differ from a clean run: {len(mismatched)}; "
          f"leftover temp files: {len(leftover)}")  # fmt: skip
    assert not unresumable and not leftover and not mismatched, (unresumable, leftover, mismatched)


@pytest.mark.parametrize("after", [2, 24])  # early in the analyses, and among the figures
def test_ctrl_c_in_the_report_phase_exits_130_and_the_report_resumes(clean, tmp_path: Path, after: int) -> None:
    """Ctrl-C (SIGINT to the whole foreground group, workers included, as a terminal sends it) once ``after``
    files of the report have landed: exit 130 with the one-line message, no traceback, no process left, and the
    next `pelab report` writes the same files as a clean run."""
    import shutil
    import time

    _, ref, _ = clean
    out, log = tmp_path / "out", tmp_path / "writes.log"
    shutil.copytree(ref, out, ignore=shutil.ignore_patterns("report*", "claims*", "analyses", "figures"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")])}
    env.update(PELAB_KILL_DIR=str(out.resolve()), PELAB_KILL_LOG=str(log))
    cmd = [sys.executable, "-m", "pelab", "report", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and len(writes(log)) < after:
        time.sleep(0.05)
    assert proc.poll() is None, "the report ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err.decode()[-2000:])
    assert "pelab: interrupted" in err.decode() and "Traceback" not in err.decode(), err.decode()[-2000:]
    assert "Exception ignored" not in err.decode(), err.decode()[-2000:]
    deadline = time.time() + 15  # the pool's forkserver and resource tracker leave once their parent has gone
    while left := subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split():
        assert time.time() < deadline, f"processes left in the group: {left}"
        time.sleep(0.2)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not leftovers(out) and files(out) == files(ref)
