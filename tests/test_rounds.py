"""Sequential seeds end to end (``[sequential]``, ``pelab.rounds``, ``pelab.study.design``): the study file, the
seeds each round adds, the looks the report reads, and a rerun that takes the same decisions and trains nothing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pelab.errors import PelabError
from pelab.report.build import load_context
from pelab.report.console import results_table
from pelab.report.registry import ClaimResult
from pelab.rounds import _round_line, next_counts, run_sequential
from pelab.rules import INCONCLUSIVE, SUPPORTED
from pelab.study.design import Design, arm_names, design_of, read_record, seeds_text
from pelab.study.grid import parse_study, seed_sequence, with_seeds
from pelab.study.sequential import Looks
from pelab.study.store import DB_NAME

TINY = """
name = "tiny-seq"
seeds = [0, 1, 2]
[task]
name = "reverse"
length = 5
vocab = 8
[model]
d = 16
n_heads = 2
[train]
steps = 20
eval_batches = 2
[axes]
"model.combine" = {combines}
[report]
floor = 0.1
[sequential]
max_seeds = 5
step = 1
"""


def tiny(combines: list[str] = ["add", "concat_split"]) -> str:  # noqa: B006 - read only
    return TINY.format(combines=json.dumps(combines))


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ("[sequential]\nstep = 2", "sequential.max_seeds: required"),
        ("[sequential]\nmax_seeds = 2", "sequential.max_seeds: must be an integer in 3..100"),
        ("[sequential]\nmax_seeds = 12\nstep = 0", "sequential.step: must be an integer in 1..100"),
        ("[sequential]\nmax_seeds = 12\nstep = true", "sequential.step"),
        ("[sequential]\nmax_seeds = 12\nspending = 'linear'", "allowed: obrien_fleming, pocock"),
        (
            "[sequential]\nmax_seeds = 12\ncap = 3",
            "sequential: unknown key 'cap'; allowed: max_seeds, step, spending, claims",
        ),
        ("[sequential]\nmax_seeds = 12\nclaims = 'C6'", "sequential.claims: must be a non-empty list"),
        ("[sequential]\nmax_seeds = 12\nclaims = []", "sequential.claims: must be a non-empty list"),
        ("[sequential]\nmax_seeds = 12\nclaims = ['C6', 'C6']", "sequential.claims: must be a non-empty list"),
        ("[sequential]\nmax_seeds = 12\nclaims = ['six']", "sequential.claims: must be a non-empty list"),
        ("sequential = 12", "sequential: must be a table"),
    ],
)
def test_a_bad_sequential_table_fails_in_one_line_naming_the_key(table: str, needle: str) -> None:
    text = "seeds = [0, 1, 2]\n" + table + '\n[task]\nname = "reverse"\n'
    with pytest.raises(PelabError) as e:
        parse_study(text)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_sequential_study_starts_with_at_least_two_seeds() -> None:
    with pytest.raises(PelabError, match="at least 2 seeds"):
        parse_study('seeds = [0]\n[task]\nname = "reverse"\n[sequential]\nmax_seeds = 5\n')


def test_added_seeds_are_the_next_integers_and_keep_arms_paired() -> None:
    study = parse_study(tiny())
    assert study.sequential is not None and study.sequential.record() == {
        "max_seeds": 5,
        "step": 1,
        "spending": "obrien_fleming",
    }
    assert seed_sequence([0, 1, 2], 5) == [0, 1, 2, 3, 4] and seed_sequence([7, 3], 4) == [7, 3, 8, 9]
    arms = sorted({r.arm_id for r in study.runs})
    grown = with_seeds(study, {arms[0]: 5})
    seeds = {a: sorted(r.seed for r in grown.runs if r.arm_id == a) for a in arms}
    assert seeds == {arms[0]: [0, 1, 2, 3, 4], arms[1]: [0, 1, 2]}
    # the same counts give the same runs, whenever they are asked for
    assert [r.run_id for r in with_seeds(study, {arms[0]: 5}).runs] == [r.run_id for r in grown.runs]
    assert len(study.runs) == 6  # the study itself is untouched


def test_only_the_named_claims_open_comparisons_buy_seeds() -> None:
    """``claims``: an open comparison of another claim is left as it is (it takes no seeds and is not listed)."""
    study = parse_study(tiny().replace("step = 1", 'step = 1\nclaims = ["C6"]'))
    assert study.sequential is not None and study.sequential.record()["claims"] == ["C6"]
    by_combine: dict[str, list[str]] = {}
    for r in study.runs:
        by_combine.setdefault(r.model.combine, []).append(r.run_id)
    row = {"verdict": INCONCLUSIVE, "a": "add", "b": "concat_split", "seeds": 3, "where": {}}
    row |= {"a_runs": by_combine["add"], "b_runs": by_combine["concat_split"]}
    counts = {a: 3 for a in {r.arm_id for r in study.runs}}
    assert next_counts([("C2", row)], study, counts) == ({}, [])
    target, words = next_counts([("C6", row)], study, counts)
    assert sorted(target.values()) == [4, 4] and len(words) == 1 and words[0].startswith("C6 add vs concat_split")


def test_a_sequential_claim_that_names_no_declared_claim_fails_before_training(tmp_path: Path) -> None:
    study = parse_study(tiny().replace("step = 1", 'step = 1\nclaims = ["C42"]'))
    with pytest.raises(PelabError, match="sequential.claims: unknown claim 'C42'; allowed: C1, C2"):
        run_sequential(study, tmp_path / "out", console=Console(quiet=True), decide=planted, workers=1)
    assert not (tmp_path / "out" / DB_NAME).exists()


def test_looks_count_every_round_either_arm_changed() -> None:
    """Arm a gets a seed for another comparison in round 2 (no new paired seed: no new look), b catches up in
    round 3; a third arm c never moves."""
    runs = {f"{arm}{s}": (s, 1 if s < 3 else r) for arm, r in (("a", 2), ("b", 3)) for s in range(4)}
    runs |= {f"c{s}": (s, 1) for s in range(3)}
    design = Design(cap=5, spending="obrien_fleming", runs=runs, rounds=3)
    a, b, c = ([f"{x}{s}" for s in range(4 if x != "c" else 3)] for x in "abc")
    assert design.looks(a, b) == Looks((3, 4), 5)
    assert design.looks(a, c) == Looks((3,), 5)
    assert design.looks(a, ["elsewhere"]) is None  # a run outside the design: fixed seeds


def planted(out: Path, only: Sequence[str] = ()) -> list[ClaimResult]:
    """A verdict engine with planted decisions: add and concat_split stay undecided until they have 4 paired
    seeds; every comparison with concat_wide is decided from the first look. It reads the runs as the report
    does (``load_context``: those of the rounds recorded so far), as ``decide_claims`` does."""
    rows = [r for r in load_context(out).rows if r["status"] == "done"]  # the runs of the round being decided
    runs: dict[str, list[str]] = {}
    for r in rows:
        runs.setdefault(r["config"]["model"]["combine"], []).append(r["run_id"])
    records: list[dict[str, Any]] = []
    for a, b in (("add", "concat_split"), ("add", "concat_wide")):
        seeds = min(len(runs[a]), len(runs[b]))
        verdict = INCONCLUSIVE if b == "concat_split" and seeds < 4 else SUPPORTED
        records.append({"a": a, "b": b, "a_runs": runs[a], "b_runs": runs[b], "seeds": seeds, "verdict": verdict})
    return [ClaimResult("C6", "t", "c", "s", "r", rows=records)]


def test_only_the_arms_of_open_comparisons_get_seeds_and_it_stops_when_decided(tmp_path: Path) -> None:
    study = parse_study(tiny(["add", "concat_split", "concat_wide"]))
    out = tmp_path / "out"
    console = Console(record=True, width=200)
    outcome = run_sequential(study, out, console=console, decide=planted, workers=1)
    assert outcome.seeds == {"reverse: add": 4, "reverse: concat_split": 4, "reverse: concat_wide": 3}
    assert len(outcome.rounds) == 2 and outcome.ran == 9 + 2 and outcome.still_open == []
    text = console.export_text()
    # the terminal counts (lines stay short in a log); the comparisons and arms are in sequential.json
    assert "round 1: 1 comparison(s) still open (listed in sequential.json)" in text
    assert "round 2: 2 more seed(s) to 2 arm(s)" in text
    assert "round 2: every comparison is decided" in text
    assert max(len(line) for line in text.splitlines() if line.startswith(("round", "sequential"))) <= 100
    record = read_record(out)
    assert record is not None and record["rounds"][0]["open"] == ["C6 add vs concat_split at 3 seeds"]
    assert record["rounds"][0]["added"] == {"reverse: add": 1, "reverse: concat_split": 1}
    assert record is not None and [sorted(r.values()) for r in record["counts"]] == [[3, 3, 3], [3, 4, 4]]
    table = Console(record=True, width=200)
    results_table(table, out)  # `pelab results` counts the seeds the rounds added
    cells = [line.split("│") for line in table.export_text().splitlines() if line.count("│") > 3]
    assert {c[1].strip(): c[2].strip() for c in cells} == {"add": "4", "concat_split": "4", "concat_wide": "3"}
    # a rerun replays the rounds, takes the same decisions and trains nothing
    again = run_sequential(study, out, console=Console(file=None, quiet=True), decide=planted, workers=1)
    assert again.ran == 0 and again.seeds == outcome.seeds and read_record(out) == record


def pelab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pelab", *args], capture_output=True, text=True, timeout=900)


def test_a_tiny_sequential_study_reports_its_looks_and_a_rerun_trains_nothing(tmp_path: Path) -> None:
    """The real verdict engine: C6 (concat_split against add at d=16, 20 steps) stays open to the cap of 5; the
    report reads every comparison with the looks it was examined at and names the design and each arm's seeds."""
    f = tmp_path / "tiny.toml"
    f.write_text(tiny().replace("step = 1", 'step = 1\nclaims = ["C6"]'))  # each round decides C6 alone
    out = tmp_path / "out"
    first = pelab("study", str(f), "--out", str(out), "--workers", "1")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "round 1: 2 comparison(s) still open (listed in sequential.json)" in first.stdout
    assert "sequential seeds: 3 round(s); 5 seeds for 2 arm(s)" in first.stdout
    assert "(of C6; every other claim read the same design" in (out / "report.md").read_text()
    claims = json.loads((out / "claims.json").read_text())
    c6 = next(c for c in claims if c["id"] == "C6")
    assert c6["rows"] and all(r["looks"] == {"counts": [3, 4, 5], "cap": 5, "spending": "obrien_fleming"}
                              for r in c6["rows"])  # fmt: skip
    report = (out / "report.md").read_text()
    assert "Lan–DeMets alpha spending" in report and "seeds each arm got: reverse: add 5" in report
    assert "looks at 3, 4, 5 seeds of a cap of 5" in report
    record = read_record(out)
    again = pelab("study", str(f), "--out", str(out), "--workers", "1", "--no-report")  # the rounds alone: CI time
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 run(s) in" in again.stdout
    assert read_record(out) == record  # the same rounds, the same decisions
    assert json.loads((out / "claims.json").read_text()) == claims


KILLED = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_rounds import planted, tiny
from pelab.rounds import run_sequential
from pelab.study.grid import parse_study
study = parse_study(tiny(["add", "concat_split", "concat_wide"]))
run_sequential(study, Path({out!r}), decide=planted, workers={workers}, backend={backend!r}, threads=1)
"""


def stored(out: Path) -> dict[str, str]:
    with sqlite3.connect(out / DB_NAME) as conn:
        return {r[0]: r[1] for r in conn.execute("SELECT run_id, metrics FROM runs WHERE status = 'done'")}


def test_a_sequential_study_killed_in_its_second_round_resumes_to_the_same_decisions(tmp_path: Path) -> None:
    """kill -9 once round 2 has begun, then run again: the rounds replay from the stored runs, only the runs
    missing are trained, and the record and the stored numbers are those of a study never interrupted."""
    study = parse_study(tiny(["add", "concat_split", "concat_wide"]))
    whole = tmp_path / "whole"
    run_sequential(study, whole, console=Console(quiet=True), decide=planted, workers=1)
    out = tmp_path / "killed"
    code = KILLED.format(tests=str(Path(__file__).parent), out=str(out), workers=1, backend="local")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            record = read_record(out) if (out / "sequential.json").is_file() else None
            if record is not None and len(record["rounds"]) == 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    before = stored(out)
    assert len(before) < len(stored(whole))  # killed before round 2 finished
    again = run_sequential(study, out, console=Console(quiet=True), decide=planted, workers=1)
    assert again.ran == len(stored(whole)) - len(before)  # nothing trained twice
    assert read_record(out) == read_record(whole)
    assert stored(out) == stored(whole)  # the same numbers, whether a seed trained before or after the kill


@pytest.mark.xdist_group("ray")
def test_the_ray_backend_takes_the_same_decisions(tmp_path: Path) -> None:
    """The rounds on a local Ray instance: the same record and the same stored numbers as the local backend.

    Ray binds the machine's own address even when told 127.0.0.1, so it runs in a network namespace with
    nothing but loopback (tests/netns.py, as tests/test_ray.py)."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'pelab[ray]'")
    from netns import Netns, ray_env, unavailable

    why = unavailable()
    if why is not None:
        pytest.skip(why)
    study = parse_study(tiny(["add", "concat_split", "concat_wide"]))
    local = tmp_path / "local"
    run_sequential(study, local, console=Console(quiet=True), decide=planted, workers=1)
    out = tmp_path / "ray"
    code = KILLED.format(tests=str(Path(__file__).parent), out=str(out), workers=2, backend="ray")
    with ray_env() as env, Netns("rounds") as ns:
        r = subprocess.run(ns.command(sys.executable, "-c", code), capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert read_record(out) == read_record(local)
    assert stored(out) == stored(local)


OWN = """
[[grid]]
name = "sequential"
axes = { "model.combine" = ["add", "concat_split"] }

[[grid]]
name = "confirmatory"
set = { "model.d" = 24 }
seeds = [10, 11, 12, 13, 14, 15]
axes = { "model.combine" = ["add", "concat_split"] }
"""


def own_seeds() -> str:
    """``tiny`` with a second pair of arms (d=24) on a grid with its own seeds, more of them than the cap (5)."""
    return tiny().split("[axes]")[0] + OWN + "[report]\nfloor = 0.1\n[sequential]\nmax_seeds = 5\nstep = 1\n"


def test_a_grid_with_its_own_seeds_trains_them_and_rounds_leave_it_alone() -> None:
    study = parse_study(own_seeds())
    seeds: dict[int, set[int]] = {}
    for r in study.runs:
        seeds.setdefault(r.model.d, set()).add(r.seed)
    assert seeds == {16: {0, 1, 2}, 24: set(range(10, 16))}
    fixed = {r.arm_id for r in study.runs if r.model.d == 24}
    assert set(study.fixed) == fixed and all(s == list(range(10, 16)) for s in study.fixed.values())
    overlapping = parse_study(own_seeds().replace("seeds = [10, 11, 12, 13, 14, 15]", "seeds = [0, 1]"))
    grown = with_seeds(overlapping, {r.arm_id: 5 for r in overlapping.runs})  # its first seed is the study's too
    assert sorted(r.seed for r in grown.runs if r.arm_id in overlapping.fixed) == [0, 0, 1, 1]
    every = {r.arm_id: 5 for r in study.runs}  # even when a round names them, their seeds stay as listed
    grown = with_seeds(study, every)
    assert sorted(r.seed for r in grown.runs if r.arm_id in fixed) == sorted(2 * list(range(10, 16)))
    assert len([r for r in grown.runs if r.arm_id not in fixed]) == 10
    full, design = design_of(study, [{a: 3 for a in every}, every])
    assert all(r.run_id not in design.runs for r in full.runs if r.arm_id in fixed)  # outside the design
    a, b = ([r.run_id for r in full.runs if r.arm_id in fixed and r.model.combine == c]
            for c in ("add", "concat_split"))  # fmt: skip
    assert design.looks(a, b) is None  # read without interim looks, at the plain level
    assert "fixed seeds, read without interim looks: " in seeds_text(full, design)
    assert "reverse: add, d=24 6 (seeds 10–15)" in seeds_text(full, design)


@pytest.mark.parametrize(
    ("seeds", "needle"),
    [
        ("[3]", "grid 'confirmatory' seeds: needs at least 2 seeds, for an interval"),
        ("[3, 3]", "grid 'confirmatory' seeds: a seed is listed twice"),
        ("[-1, 2]", "grid 'confirmatory' seeds: must be a non-empty list of integers"),
        ("'all'", "grid 'confirmatory' seeds: must be a non-empty list of integers"),
    ],
)
def test_a_bad_grid_seed_list_fails_in_one_line_naming_the_grid(seeds: str, needle: str) -> None:
    with pytest.raises(PelabError) as e:
        parse_study(own_seeds().replace("seeds = [10, 11, 12, 13, 14, 15]", f"seeds = {seeds}"))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_an_arm_cannot_train_two_lists_of_seeds() -> None:
    """The same arm from a grid with the study's seeds and from one with its own: which seeds it trains, and how
    its comparisons are read, would depend on the order of the grids."""
    with pytest.raises(PelabError) as e:
        parse_study(own_seeds().replace('set = { "model.d" = 24 }\n', ""))
    assert "grid 'confirmatory': an arm of it is also in grid 'sequential', which gives it the study's seeds" in (
        str(e.value)
    )
    # the same seeds in another order are the same list: two grids may give one arm its own seeds
    twice = (
        own_seeds()
        .replace('set = { "model.d" = 24 }\n', "")
        .replace('name = "sequential"\n', 'name = "sequential"\nseeds = [15, 14, 13, 12, 11, 10]\n')
    )
    assert {r.seed for r in parse_study(twice).runs} == set(range(10, 16))


def planted_by_width(out: Path, only: Sequence[str] = ()) -> list[ClaimResult]:
    """add against concat_split at d=16 (sequential) stays open until 4 paired seeds; at d=24 (the grid's own
    seeds) it is open whatever the seeds."""
    rows = [r for r in load_context(out).rows if r["status"] == "done"]
    runs: dict[tuple[int, str], list[str]] = {}
    for r in rows:
        runs.setdefault((r["config"]["model"]["d"], r["config"]["model"]["combine"]), []).append(r["run_id"])
    records: list[dict[str, Any]] = []
    for d in (16, 24):
        a, b = runs[(d, "add")], runs[(d, "concat_split")]
        seeds = min(len(a), len(b))
        verdict = INCONCLUSIVE if d == 24 or seeds < 4 else SUPPORTED
        records.append({"a": "add", "b": "concat_split", "a_runs": a, "b_runs": b, "seeds": seeds, "verdict": verdict})
    return [ClaimResult("C6", "t", "c", "s", "r", rows=records)]


def test_rounds_add_seeds_only_outside_a_grid_with_its_own_seeds(tmp_path: Path) -> None:
    study = parse_study(own_seeds())
    console = Console(record=True, width=250)
    outcome = run_sequential(study, tmp_path / "out", console=console, decide=planted_by_width, workers=1)
    assert outcome.seeds == {"reverse: add, d=16": 4, "reverse: concat_split, d=16": 4,
                             "reverse: add, d=24": 6, "reverse: concat_split, d=24": 6}  # fmt: skip
    text = console.export_text()
    assert "round 1: 2 comparison(s) still open (listed in sequential.json)" in text
    opened = [r.get("open", []) for r in read_record(tmp_path / "out")["rounds"]]
    assert opened[0] == ["C6 add vs concat_split at 3 seeds",
                         "C6 add vs concat_split at 6 seeds (its grid's own seeds: read as they stand)"]  # fmt: skip
    round_1 = "round 1 (sequential seeds, cap 5): 3 seeds for 2 arm(s), 6 seeds for 2 arm(s)\n  2 of those arms keep "
    assert round_1 in text
    assert "round 2: 1 comparison(s) still open (listed in sequential.json)" in text
    assert "round 2: every comparison that rounds can grow is decided" in text
    assert outcome.still_open == ["C6 add vs concat_split at 6 seeds (its grid's own seeds: read as they stand)"]
    trained = {(c["model"]["d"], c["seed"]) for c in map(json.loads, _configs(tmp_path / "out"))}
    assert trained == {(16, s) for s in range(4)} | {(24, s) for s in range(10, 16)}


def _configs(out: Path) -> list[str]:
    with sqlite3.connect(out / DB_NAME) as conn:
        return [r[0] for r in conn.execute("SELECT config FROM runs WHERE status = 'done'")]


def test_a_look_that_cannot_read_its_measures_stops_the_study_with_its_line(tmp_path: Path) -> None:
    """Only "nothing finished yet" ends the rounds quietly; any other error of a look (a run whose weights are gone
    and whose measures were never kept, a database that cannot be read) stops the study with its own line, never
    as "no verdict can be read" and a study that goes on as if decided."""
    from pelab.errors import NothingFinished

    study = parse_study(tiny(["add", "concat_split", "concat_wide"]))

    def fails(error: PelabError) -> Any:
        def decide(out: Path, only: Sequence[str] = ()) -> list[ClaimResult]:
            raise error

        return decide

    gone = PelabError("report: run r's weights are gone and its 'overlap' was never kept")
    with pytest.raises(PelabError, match="weights are gone"):
        run_sequential(study, tmp_path / "a", console=Console(quiet=True), decide=fails(gone), workers=1)
    console = Console(record=True, width=200)
    outcome = run_sequential(
        study, tmp_path / "b", console=console, decide=fails(NothingFinished("out: no finished runs")), workers=1
    )
    assert "round 1: no verdict can be read" in console.export_text() and len(outcome.rounds) == 1


def test_full_round_lines_stay_under_100_characters() -> None:
    """full's first round, counted as run_sequential counts it: its arms on their grid's own seeds once made the line
    123 characters long (issue 38: the log stays readable)."""
    from pelab.cli.app import preset_path
    from pelab.study.grid import load_study

    study = load_study(preset_path("full"))
    counts = {arm: len(study.fixed.get(arm, study.seeds)) for arm in arm_names(study)}
    text = _round_line(1, counts, study)
    lines = text.splitlines()
    assert len(lines) == 2 and max(map(len, lines)) <= 100, lines
    assert lines[1] == f"  {len(study.fixed)} of those arms keep their grid's own seeds (no round adds to them)"
    assert len(study.fixed) > 100  # the case that made the long line
