"""docs/results.md, what pelab finds at the full budget, cannot go stale silently (issue 28, part 5): every run it
reports is one the current code still computes for the full preset (same config, same run id), and every arm's
first seeds are among them; and its numbers are the study's own (the generator, docs/make_results.py, copies
them from the report and claims.json; its pieces are tested here on a hand-made key)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pelab.study.grid import with_seeds

DOCS = Path(__file__).parents[1] / "docs"
FULL = Path(__file__).parents[1] / "pelab" / "presets" / "full.toml"


def _maker():
    spec = importlib.util.spec_from_file_location("make_results", DOCS / "make_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_published_runs_are_the_ones_the_current_code_computes() -> None:
    """Either every run on the page is one the code computes and every run of the first round is on it, or the page
    opens with the out-of-date banner whose counts are exactly the code's: stale, never silently."""
    maker = _maker()
    page = (DOCS / "results.md").read_text()
    stale, stored, missing = maker.staleness(DOCS)
    banners = [ln for ln in page.splitlines() if ln.startswith(maker.STALE)]
    if stale or missing:
        assert banners, (
            f"{stale} of docs/results.md's {stored} runs are no longer computed by this code for the full preset and "
            f"{missing} of its first round's runs are not on it: rerun `pelab study --preset full` and "
            "docs/make_results.py, or mark the page out of date (see its docstring)"
        )
        assert len(banners) == 1 and page.splitlines()[2] == banners[0], "the banner opens the page, once"
        counts = f"{stale} of this page's {stored} runs are no longer in it, and {missing} runs of its first round"
        assert counts in banners[0], f"the banner's counts are not the code's ({counts})"
    else:
        assert not banners, "the page is current: remove its out-of-date banner (docs/make_results.py --out-of-date)"
    assert f"| runs | {stored} finished" in page
    for name in re.findall(r"\]\((results/[\w.-]+)\)", page):
        assert (DOCS / name).is_file(), name


def test_the_banner_is_written_with_the_codes_counts_and_removed_when_current(tmp_path: Path) -> None:
    """mark_out_of_date on a page whose runs are all current leaves no banner; with runs the preset no longer
    computes it writes one with the counts staleness gives, once, however often it runs."""
    from pelab.study.grid import load_study

    maker = _maker()
    (tmp_path / "results").mkdir()
    current = sorted(r.run_id for r in load_study(FULL).runs)
    (tmp_path / "results.md").write_text(f"# Title\n\n| runs | {len(current)} finished |\n")
    (tmp_path / "results" / "run_ids.txt").write_text("\n".join(current) + "\n")
    assert maker.staleness(tmp_path) == (0, len(current), 0)
    maker.mark_out_of_date(tmp_path, "Nothing moved.")
    assert maker.STALE not in (tmp_path / "results.md").read_text()
    (tmp_path / "results" / "run_ids.txt").write_text("\n".join([*current[2:], "0" * 16]) + "\n")
    for _ in range(2):
        maker.mark_out_of_date(tmp_path, "Two runs moved.")
    text = (tmp_path / "results.md").read_text()
    assert text.count(maker.STALE) == 1 and text.splitlines()[2].startswith(maker.STALE)
    assert f"1 of this page's {len(current) - 1} runs are no longer in it, and 2 runs of its first round" in text


def test_every_file_the_page_links_can_be_committed() -> None:
    """A figure that git ignores exists in the checkout that wrote the page and nowhere else (stop 32's CI:
    docs/results/*.png matched the top-level ``*.png`` rule): every linked file must be one git would track."""
    git = shutil.which("git")
    if git is None or not (DOCS.parent / ".git").exists():
        pytest.skip("not a git checkout")
    page = (DOCS / "results.md").read_text()
    linked = [f"docs/{name}" for name in re.findall(r"\]\((results/[\w.-]+)\)", page)]
    assert linked
    ignored = subprocess.run([git, "check-ignore", *linked], cwd=DOCS.parent, capture_output=True, text=True)
    assert not ignored.stdout.strip(), f"git ignores files docs/results.md links: {ignored.stdout.split()}"


def test_key_number_keeps_the_interval_and_drops_the_prose() -> None:
    key = _maker().key_number
    long = (
        "concat_split vs add (task=reverse, scheme=sinusoidal, d=32): A − B +62.0 pp [+35.5 pp, +88.5 pp] accuracy "
        "(98.75% (Holm); interval at 99.09%); sequential seeds"
    )
    assert key(long) == (
        "concat_split vs add (task=reverse, scheme=sinusoidal, d=32): A − B +62.0 pp [+35.5 pp, +88.5 pp] accuracy"
    )
    assert key("356 of 512 dimensions vary by > 0.1 (156 hardly move); the last half") == (
        "356 of 512 dimensions vary by > 0.1 (156 hardly move)"
    )
    assert len(key("x" * 500)) == 140


def test_the_page_lists_only_the_runs_of_the_studys_design(tmp_path: Path) -> None:
    """A store may hold runs outside the design its rounds set (a round begun under other decisions, then
    interrupted): the page counts and lists the design's runs alone. Here a store holds the full preset's first
    round (no round recorded yet, so the design is that round) and one run of an eleventh seed."""
    import sqlite3

    from pelab.study.grid import load_study

    study = load_study(FULL)
    first = sorted(r.run_id for r in study.runs)
    extra = next(r.run_id for r in with_seeds(study, {study.runs[0].arm_id: 11}).runs if r.run_id not in set(first))
    with sqlite3.connect(tmp_path / "results.sqlite") as conn:
        conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, status TEXT)")
        conn.executemany("INSERT INTO runs VALUES (?, 'done')", [(r,) for r in [*first, extra]])
    assert _maker().run_ids(tmp_path) == first


def test_the_readmes_picture_is_the_quick_presets_runs() -> None:
    """docs/quick/gap-lm.png, the README's picture, was drawn from the main job's runs: docs/quick/run_ids.txt
    lists them and they are exactly the quick preset's runs as the code computes them now, so a change to quick
    fails here until the main job is run again and its figure and ids are copied (docs/benchmarks.md)."""
    from pelab.study.grid import load_study

    quick = load_study(Path(__file__).parents[1] / "pelab" / "presets" / "quick.toml")
    stored = set((DOCS / "quick" / "run_ids.txt").read_text().split())
    assert stored == {r.run_id for r in quick.runs}, "rerun the main job and copy figures/gap-lm.png and the run ids"
    assert (DOCS / "quick" / "gap-lm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_published_runs_are_the_pages_runs_byte_for_byte(tmp_path: Path) -> None:
    """publish_runs writes claims.json as the study wrote it and the stored rows of exactly the page's runs (a
    failed run and a run outside the page are left out), the same bytes for the same runs."""
    import csv
    import gzip
    import io
    import sqlite3

    folder, out = tmp_path / "study", tmp_path / "results"
    folder.mkdir()
    out.mkdir()
    (folder / "claims.json").write_text('[{"id": "C6", "verdict": "supported"}]')
    with sqlite3.connect(folder / "results.sqlite") as conn:
        conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, config TEXT, status TEXT, metrics TEXT)")
        conn.executemany(
            "INSERT INTO runs VALUES (?, ?, ?, ?)",
            [("b", '{"d": 32}', "done", '{"loss": 1.5}'), ("a", "{}", "done", "{}"), ("c", "{}", "failed", "{}"),
             ("z", "{}", "done", "{}")],
        )  # fmt: skip
    maker = _maker()
    maker.publish_runs(folder, out, ["a", "b", "c"])
    first = (out / "runs.csv.gz").read_bytes()
    rows = list(csv.reader(io.StringIO(gzip.decompress(first).decode())))
    assert rows == [["run_id", "config", "status", "metrics"], ["a", "{}", "done", "{}"],
                    ["b", '{"d": 32}', "done", '{"loss": 1.5}']]  # fmt: skip
    assert (out / "claims.json").read_text() == (folder / "claims.json").read_text()
    maker.publish_runs(folder, out, ["a", "b", "c"])
    assert (out / "runs.csv.gz").read_bytes() == first
    (out / "db.sqlite").write_bytes(gzip.decompress((out / "results.sqlite.gz").read_bytes()))
    with sqlite3.connect(out / "db.sqlite") as conn:  # the whole database, every run in it
        assert conn.execute("SELECT run_id, status FROM runs ORDER BY run_id").fetchall() == [
            ("a", "done"), ("b", "done"), ("c", "failed"), ("z", "done")
        ]  # fmt: skip
    assert not (out / "protocol.json").exists()  # not in the folder: not published
    (folder / "protocol.json").write_text('{"rules": 1}')
    maker.publish_runs(folder, out, ["a", "b", "c"])
    assert (out / "protocol.json").read_text() == '{"rules": 1}'


def test_the_page_is_not_written_from_a_folder_with_a_link(tmp_path: Path) -> None:
    """A study folder is someone else's input: claims.json as a link (to any file on the machine) is refused in one
    PelabError before the page copies it into docs/."""
    from pelab.errors import PelabError

    folder = tmp_path / "study"
    folder.mkdir()
    (tmp_path / "secret").write_text("not for docs/")
    (folder / "claims.json").symlink_to(tmp_path / "secret")
    with pytest.raises(PelabError, match="claims.json"):
        _maker().write_page(folder, tmp_path / "docs", "c", "x", "cpu", "1 min")
    assert not (tmp_path / "docs" / "results" / "claims.json").exists()


def test_the_published_database_is_one_file_with_what_the_studys_log_still_held(tmp_path: Path) -> None:
    """A study keeps its database in WAL mode and may be writing while it is published: the copy holds the rows
    only its -wal held so far, and is one file in rollback mode (a WAL-mode copy unpacked alone opens as a
    database, but its VACUUM went to a -wal that was never published)."""
    import gzip
    import sqlite3
    from contextlib import closing

    folder, out = tmp_path / "study", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    with closing(sqlite3.connect(folder / "results.sqlite", isolation_level=None)) as study:
        study.execute("PRAGMA journal_mode=WAL")
        study.execute("PRAGMA wal_autocheckpoint=0")  # the rows stay in the -wal while the study is open
        study.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, value BLOB)")
        study.executemany("INSERT INTO runs VALUES (?, ?)", [(f"r{i}", b"x" * 4000) for i in range(50)])
        study.execute("DELETE FROM runs WHERE run_id > 'r1'")  # pages a VACUUM gives back
        assert (folder / "results.sqlite-wal").stat().st_size > 0
        _maker().publish_database(folder, out)
    raw = gzip.decompress((out / "results.sqlite.gz").read_bytes())
    assert raw[18:20] == b"\x01\x01"  # the file format's read and write versions: 1 is rollback, 2 is WAL
    (tmp_path / "copy.sqlite").write_bytes(raw)
    with closing(sqlite3.connect(tmp_path / "copy.sqlite")) as copy:
        assert copy.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall() == [("r0",), ("r1",)]
        assert copy.execute("PRAGMA freelist_count").fetchone() == (0,)  # vacuumed: the deleted runs' pages gone
    assert not list(out.glob("*-wal"))


def test_a_running_study_is_carried_as_its_database_protocol_and_design(tmp_path: Path) -> None:
    """``make_results.py FOLDER --carry DIR`` (docs/study.md): what another machine needs to go on; refused
    until every finished run's measures are kept (``pelab report --keep-measures``), and again when a run
    finished since."""
    import gzip
    import sqlite3
    import subprocess
    import sys
    from contextlib import closing

    from pelab.study.store import Store, StudyLock

    folder = tmp_path / "study"

    def finish(run_id: str) -> None:
        with closing(sqlite3.connect(folder / "results.sqlite")) as db, db:
            db.execute("INSERT INTO runs (run_id, config, status, metrics, evals, curve, finished_at) VALUES "
                       "(?, '{}', 'done', '{}', '{}', '[]', 'now')", (run_id,))  # fmt: skip

    Store(folder).close()
    finish("a")
    (folder / "protocol.json").write_text("{}")
    (folder / "sequential.json").write_text('{"design": {}}')
    script = Path(__file__).parents[1] / "docs" / "make_results.py"

    def carry() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, script, str(folder), "--carry", str(tmp_path / "to")], capture_output=True, text=True
        )

    r = carry()
    assert r.returncode == 1 and "measures were never kept; run `pelab report" in r.stderr
    assert not (tmp_path / "to").exists()
    with Store(folder) as store:
        store.set_meta(measures_kept=store.finished_stamp())
    r = carry()
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "to").iterdir()) == ["protocol.json", "results.sqlite.gz",
                                                                 "sequential.json"]  # fmt: skip
    (tmp_path / "db").write_bytes(gzip.decompress((tmp_path / "to" / "results.sqlite.gz").read_bytes()))
    with closing(sqlite3.connect(tmp_path / "db")) as db:
        assert db.execute("SELECT run_id FROM runs").fetchall() == [("a",)]
    with StudyLock(folder):  # a study writing it: not carried
        r = carry()
    assert r.returncode == 1 and r.stderr.startswith("carry: out: another pelab study") and "Traceback" not in r.stderr
    finish("b")  # finished after the measures were kept: it would travel with neither weights nor measures
    r = carry()
    assert r.returncode == 1 and "runs changed since its measures were kept" in r.stderr
    r = subprocess.run([sys.executable, script, "--carry", str(tmp_path / "to")], capture_output=True, text=True)
    assert r.returncode == 2 and "--carry needs the study folder" in r.stderr


def test_the_page_says_how_its_runs_came_about(tmp_path: Path) -> None:
    """The command row says "from a fresh clone" only where the runs were that; a study resumed over sittings from a
    carried database says so instead, and the opening sentence then claims no fresh clone either."""
    import sqlite3

    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "report.md").write_text("# x\n\n## What this run says\n\nanswer\n\n## C1 · a\n\nrow\n")
    (folder / "claims.json").write_text("[]")
    with sqlite3.connect(folder / "results.sqlite") as conn:
        conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, config TEXT, status TEXT, metrics TEXT)")
    maker = _maker()
    fresh = maker.write_page(folder, tmp_path / "a", "pelab study --preset full", "abc", "cpu", "1 min").read_text()
    assert "| command | `pelab study --preset full` (from a fresh clone, the README's install) |" in fresh
    assert "(`pelab/presets/full.toml`), from a fresh clone, and its report's" in fresh
    carried = maker.write_page(folder, tmp_path / "b", "pelab study --preset full", "abc", "cpu", "1 min",
                               setup="resumed in nine sittings from one carried database").read_text()  # fmt: skip
    assert "| command | `pelab study --preset full` (resumed in nine sittings from one carried database) |" in carried
    assert "fresh clone" not in carried
    assert "(`pelab/presets/full.toml`) and its report's first screen" in carried
