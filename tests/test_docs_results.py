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

from pelab.study.grid import parse_study, with_seeds

DOCS = Path(__file__).parents[1] / "docs"
#: Position schemes whose arms the full preset gained after docs/results.md was made (its note names them).
ADDED_SINCE_THE_PAGE = ("randomized", "xpos", "kerple")
FULL = Path(__file__).parents[1] / "pelab" / "presets" / "full.toml"


def _maker():
    spec = importlib.util.spec_from_file_location("make_results", DOCS / "make_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_published_runs_are_the_ones_the_current_code_computes() -> None:
    page = (DOCS / "results.md").read_text()
    stored = set((DOCS / "results" / "run_ids.txt").read_text().split())
    study = parse_study(FULL.read_text(), str(FULL))
    assert study.sequential is not None
    every = with_seeds(study, {r.arm_id: study.sequential.max_seeds for r in study.runs})
    computed = {r.run_id for r in every.runs}
    stale = stored - computed
    assert not stale, (
        f"{len(stale)} of docs/results.md's {len(stored)} runs are no longer computed by this code for the full "
        "preset: rerun `pelab study --preset full` and docs/make_results.py (see its docstring)"
    )
    # Arms the preset gained after the page's run, named here (and on the page) until the page is made again: C17's
    # randomized, xPos and KERPLE arms (issue 41). Every other run of the first round must be on the page.
    later = {r.run_id for r in study.runs if r.model.position.scheme in ADDED_SINCE_THE_PAGE}
    first = {r.run_id for r in study.runs} - later
    assert first <= stored, f"{len(first - stored)} runs of the full preset's first round are missing from the page"
    assert not later & stored and all(f"`{s}`" in page for s in ADDED_SINCE_THE_PAGE)
    assert f"| runs | {len(stored)} finished" in page
    for name in re.findall(r"\]\((results/[\w.-]+)\)", page):
        assert (DOCS / name).is_file(), name


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
