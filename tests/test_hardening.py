"""Hostile input (issue 15): every bad study file or command line ends as one line and exit 2, before
anything is written; user text prints as text; a study folder sheds the temporary files of interrupted
writes; the folder lock covers the whole `pelab study` command, report included.

The CLI runs in-process (``pelab.cli.main`` with ``sys.argv`` set), and no test trains: the study
backend is replaced by one that stores what the test says.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from pelab.cli import main
from pelab.errors import PelabError
from pelab.records import ENGINE, RunResult
from pelab.study.grid import MAX_RUNS, parse_study
from pelab.study.store import Store, StudyLock

#: A stub backend's runs name the current computation, as real ones do (else a resume trains them again).
STUB_VERSIONS = {"engine": ENGINE}


BASE = {"task": {"name": '"reverse"', "length": "4"}, "model": {"d": "16"}, "train": {"steps": "1"}}


def tiny(section: str = "", line: str = "") -> str:
    """A one-step study, with ``line`` (TOML, ``key = value``) set in ``[section]``."""
    tables = {k: dict(v) for k, v in BASE.items()}
    if line:
        key, value = (x.strip() for x in line.split("=", 1))
        tables.setdefault(section, {})[key] = value
    return "".join(f"[{t}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) for t, kv in tables.items())


TINY = tiny()


@dataclass
class Result:
    rc: int
    out: str
    err: str


def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.setattr(sys, "argv", ["pelab", *args])
    with pytest.raises(SystemExit) as e:
        main()
    captured = capsys.readouterr()
    return Result(int(e.value.code or 0), captured.out, captured.err)


def one_line(r: Result, *mentions: str) -> str:
    """Exit 2, one line on stderr that names what it must, no traceback."""
    assert r.rc == 2, (r.rc, r.err, r.out[-500:])
    assert "Traceback" not in r.err + r.out
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith("pelab: error: ") and len(lines[0]) > len("pelab: error: ") + 5, lines[0]
    for m in mentions:
        assert m in lines[0], (m, lines[0])
    return lines[0]


@pytest.fixture
def study_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """`pelab study FILE --out OUT` on a file of the given bytes; checks nothing was written on refusal."""

    def go(data: bytes | str, *extra: str, written: bool = False) -> Result:
        path = tmp_path / "study.toml"
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        out = tmp_path / "out"
        r = cli(capsys, monkeypatch, "study", str(path), "--out", str(out), "--no-report", *extra)
        if r.rc == 2:
            assert not out.exists(), "a refused study wrote its folder"
        return r

    return go


# --- 1. study files ---------------------------------------------------------------------------------------
def test_study_file_not_utf8(study_cli) -> None:
    one_line(study_cli(b"name = '\xff\xfe'\n"), "study:", "not UTF-8", "0xff")


def test_study_file_that_is_a_directory(tmp_path: Path, capsys, monkeypatch) -> None:
    line = one_line(cli(capsys, monkeypatch, "study", str(tmp_path), "--out", str(tmp_path / "o")), "directory")
    assert "no such file" not in line and not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "text, key",
    [
        ("grid = 5\n", "grid"),
        ("axes = 5\n", "axes"),
        ("grid = [5]\n", "grid"),
        ('[[grid]]\nname = "g"\nset = 5\n', "set"),
        ('[[grid]]\nname = "g"\naxes = [1]\n', "axes"),
        ("[[grid]]\nname = 5\n", "name"),
        ("seeds = [true]\n", "seeds"),
        ("seeds = [0, 0]\n", "seeds"),
        (f"seeds = [{2**63 - 1}]\n", "seeds"),
        ("name = 5\n", "name"),
        (f'name = "{"x" * 100_000}"\n', "name"),
        ("[report]\nfloor = true\n", "report.floor"),
        ("", "study file"),
        ("# only a comment\n", "study file"),
    ],
)
def test_study_structure_of_the_wrong_type(study_cli, text: str, key: str) -> None:
    one_line(study_cli(text + ("" if not text.strip() or text.startswith("#") else TINY)), key)


@pytest.mark.parametrize(
    "text",
    ["x = " + "[" * 5000 + "]" * 5000, "a = " + "{b = " * 600 + "1" + "}" * 600, "[" + ".".join(["t"] * 40) + "]"],
)
def test_deep_nesting(study_cli, text: str) -> None:
    one_line(study_cli(text + "\n"), "deep")


@pytest.mark.parametrize(
    "setting, key",
    [
        (("task", f"length = {2**62}"), "task.length"),
        (("task", "eval_multipliers = [1e308]"), "task.eval_multipliers"),
        (("task", "eval_multipliers = [2.0]"), "must include 1"),
        (("model", f"d = {2**31}"), "model.d"),
        (("model", "d = {}"), "model.d"),
        (("model", "n_layers = true"), "model.n_layers"),
        (("train", "lr = inf"), "train.lr"),
        (("train", "lr = nan"), "train.lr"),
        (("train", "grad_clip = inf"), "train.grad_clip"),
        (("train", "warmup = nan"), "train.warmup"),
        (("model.position", "base = inf"), "model.position.base"),
        (("model", "dropout = -inf"), "model.dropout"),
    ],
)
def test_bad_values_name_their_key_before_anything_is_built(study_cli, setting: tuple[str, str], key: str) -> None:
    section, line = setting
    start = time.perf_counter()
    one_line(study_cli(tiny(section, line)), key)
    assert time.perf_counter() - start < 10  # model.d = 2**31 once allocated 8 GB just to validate


def test_grad_clip_inf_is_refused_with_the_way_to_switch_it_off() -> None:
    """inf is not a setting (JSON cannot carry it to a worker); a bound above any gradient norm is 'off'."""
    from pelab.config import TrainConfig

    assert "1e9" in (TrainConfig.model_fields["grad_clip"].description or "")
    with pytest.raises(PelabError, match="grad_clip"):
        parse_study(tiny("train", "grad_clip = inf"))
    assert parse_study(tiny("train", "grad_clip = 1e9")).runs[0].train.grad_clip == 1e9


@pytest.mark.parametrize(
    "section, line, key",
    [
        ("model", "d = 100000", "model.d"),
        ("train", "batch_size = 1000000000", "train.batch_size"),
        ("task", "vocab = 1000000000", "task.vocab"),
        ("model", "n_layers = 10000000", "model.n_layers"),
    ],
)
def test_absurd_sizes_refused_with_the_estimate(study_cli, section: str, line: str, key: str) -> None:
    start = time.perf_counter()
    msg = one_line(study_cli(tiny(section, line)), key, "GiB", "parameters", f"lower {key}")
    assert "more memory than this machine" in msg
    assert time.perf_counter() - start < 10


def test_n_heads_too_many_for_rotary_blames_n_heads(study_cli) -> None:
    text = tiny("model", "n_heads = 16") + '[model.position]\nscheme = "rotary"\n'
    line = one_line(study_cli(text.replace("[model]\n", '[model]\ncombine = "none"\n')), "n_heads", "at most 8 heads")
    assert "rotary_fraction" not in line


def test_huge_grid_refused_from_its_size_before_expanding(study_cli) -> None:
    values = ", ".join(str(i) for i in range(1, 101))
    text = TINY + f'[axes]\n"train.steps" = [{values}]\n"train.eval_batches" = [{values}]\n'
    text += f'"train.curve_points" = [{values}]\n'
    start = time.perf_counter()
    one_line(study_cli(text), "grid:", "3,000,000 runs", "100 x 100 x 100 points x 3 seeds", f"{MAX_RUNS:,}")
    assert time.perf_counter() - start < 2


def test_pelab_without_arguments_shows_the_help(capsys, monkeypatch) -> None:
    r = cli(capsys, monkeypatch)
    assert r.rc == 2 and "Usage" in r.out + r.err and "pelab: error:" not in r.err


@pytest.mark.parametrize(
    "args, key",
    [
        (["show", "sinusoidal", "--d", str(10**12)], "d"),
        (["show", "sinusoidal", "--length", "0"], "length"),
        (["show", "sinusoidal", "--png", "t.xyz"], "png"),
        (["analyze", "spectrum", "--d", "0"], "d"),
        (["params", "--d", "100000"], "d"),
        (["run", "--threads", "0", "--steps", "1"], "threads"),
        (["run", "--length", "100000", "--steps", "1"], "task.length"),
        (["run", "--batch", str(10**9), "--steps", "1"], "train.batch_size"),
    ],
)
def test_bad_command_lines(tmp_path: Path, capsys, monkeypatch, args: list[str], key: str) -> None:
    monkeypatch.chdir(tmp_path)
    one_line(cli(capsys, monkeypatch, *args), f"{key}:")
    assert list(tmp_path.iterdir()) == []


def test_out_that_is_a_file(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "s.toml").write_text(TINY)
    (tmp_path / "taken").write_text("a file")
    one_line(cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "taken")), "taken")


# --- results databases and checkpoints ------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["garbage", "foreign", "empty-tables"])
def test_damaged_or_foreign_database_is_one_line(tmp_path: Path, capsys, monkeypatch, damage: str) -> None:
    db = tmp_path / "results.sqlite"
    if damage == "garbage":
        db.write_bytes(b"not a database at all" * 100)
    else:
        with sqlite3.connect(db) as conn:
            conn.execute(
                "CREATE TABLE runs (id INTEGER, payload TEXT)" if damage == "foreign" else "CREATE TABLE x (a)"
            )
        if damage == "empty-tables":  # a pelab store with no runs: not damaged, just empty
            Store(tmp_path).close()
    for command in (["results", str(tmp_path)], ["report", str(tmp_path)]):
        line = one_line(cli(capsys, monkeypatch, *command), "out:")
        if damage != "empty-tables":
            assert "results.sqlite" in line


def test_checkpoint_that_is_not_safetensors(tmp_path: Path) -> None:
    from pelab.checkpoint import load

    bad = tmp_path / "x.safetensors"
    bad.write_bytes(b"PK\x03\x04 a zip, say")
    with pytest.raises(PelabError, match="checkpoint: .* is not a safetensors file"):
        load(bad)
    link = tmp_path / "y.safetensors"
    link.symlink_to(bad)
    with pytest.raises(PelabError, match="symbolic link"):
        load(link)


# --- 2. Rich renders user text as text ----------------------------------------------------------------------
@contextmanager
def stub_backend(statuses: list[str], reason: str = "boom") -> Iterator[None]:
    """Replace the study backend: each pending run 'finishes' with the next status, without training."""
    import pelab.study.driver as driver

    @contextmanager
    def fake(*args: object, **kwargs: object):
        def execute(groups, on_result) -> None:  # groups of one arm's seeds, as driver._backend's execute
            runs = [cfg for g in groups for cfg in g]
            for cfg, status in zip(runs, statuses * len(runs), strict=False):
                on_result(
                    cfg,
                    RunResult(
                        run_id=cfg.run_id,
                        status=status,
                        reason=None if status == "done" else reason,
                        versions=STUB_VERSIONS,
                    ),
                )

        yield "a stub", execute, 1

    original = driver._backend
    driver._backend = fake
    try:
        yield
    finally:
        driver._backend = original


@pytest.mark.parametrize("name", ["[bold red]x", "[/]", "scratch [/tmp/runs]", "[link=file:///etc]y[/link]"])
def test_user_text_prints_as_text(tmp_path: Path, name: str) -> None:
    from pelab.study.driver import run_study

    study = parse_study(f"name = {name!r}\n".replace("'", '"') + TINY)
    buf = StringIO()
    console = Console(file=buf, width=300, force_terminal=False)
    with stub_backend(["failed"], reason=f"ValueError: {name}"):
        run_study(study, tmp_path / "o", console=console)
    text = buf.getvalue()
    assert f"study {name}\n" in text  # the name, literally, on a line of its own
    assert f"failed {study.runs[0].run_id}: ValueError: {name}" in text  # a failure's reason, literally


# --- 3. leftovers, and the lock over the whole command --------------------------------------------------------
def test_leftover_temp_files_are_removed_when_a_study_starts(tmp_path: Path) -> None:
    from pelab.study.driver import run_study

    out = tmp_path / "o"
    (out / "checkpoints").mkdir(parents=True)
    (out / "figures").mkdir()
    leftovers = [
        out / "checkpoints" / ".tmpa1b2c3",
        out / "checkpoints" / "0123456789abcdef.safetensors.tmp4242",
        out / "checkpoints" / "0123456789abcdef.safetensors.part",
        out / ".report.html.x1y2.tmp",
        out / "figures" / ".curves.png.k3j4.tmp",
    ]
    kept = [out / "checkpoints" / "0123456789abcdef.safetensors", out / "figures" / "curves.png"]
    for p in leftovers + kept:
        p.write_bytes(b"x")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".tmpkeep").write_bytes(b"not the study's")
    (out / "linked").symlink_to(elsewhere)  # a link in the folder is not followed
    buf = StringIO()
    with stub_backend(["done"]):
        run_study(parse_study(TINY), out, console=Console(file=buf, width=200))
    assert not any(p.exists() for p in leftovers)
    assert all(p.exists() for p in kept) and (elsewhere / ".tmpkeep").exists()
    assert "removed 5 temporary file(s)" in buf.getvalue()


def test_the_lock_covers_the_report_phase(tmp_path: Path, capsys, monkeypatch) -> None:
    import pelab.cli.report as cli_module

    (tmp_path / "s.toml").write_text(TINY)
    out = tmp_path / "o"
    seen = []

    def report(folder: Path) -> None:  # while the report is written, a second driver is refused
        with pytest.raises(PelabError, match="another pelab study"):
            StudyLock(folder).__enter__()
        seen.append(folder)

    monkeypatch.setattr(cli_module, "_report", report)
    with stub_backend(["done"]):
        r = cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(out))
    assert r.rc == 0, r.err and seen == [out]
    with StudyLock(out):  # released when the command ends
        pass


def test_report_refuses_a_folder_in_use_and_writes_nothing_where_there_is_no_study(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    out = tmp_path / "o"
    Store(out).close()
    with StudyLock(out):
        one_line(cli(capsys, monkeypatch, "report", str(out)), "out:", "another pelab study")
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line(cli(capsys, monkeypatch, "report", str(empty)), "out:", "no pelab study")
    assert list(empty.iterdir()) == []


def test_a_study_whose_runs_all_failed_says_so(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "s.toml").write_text(TINY)
    with stub_backend(["failed"], reason="RuntimeError: planted\nsecond line"):
        r = cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--no-report")
    assert r.rc == 1 and "Traceback" not in r.err
    assert r.err.strip().splitlines() == ["pelab: error: study: all 3 runs failed; the first: RuntimeError: planted"]


# --- errors of the machine, not of the input -------------------------------------------------------------------
@pytest.mark.parametrize(
    "code, words", [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "make it writable"), (errno.EACCES, "writable")]
)
def test_environment_errors_are_one_line(tmp_path: Path, capsys, monkeypatch, code: int, words: str) -> None:
    monkeypatch.chdir(tmp_path)

    def fail(values: object, path: Path, title: str) -> None:
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr("pelab.plots.heatmap", fail)
    one_line(cli(capsys, monkeypatch, "show", "sinusoidal", "--png", "t.png"), "t.png", words)


def test_a_full_disk_while_storing_a_run_is_one_line(tmp_path: Path, monkeypatch) -> None:
    from pelab.config import RunConfig

    cfg = RunConfig()
    with Store(tmp_path) as store:

        def full(*args: object) -> None:
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(store, "_write", full)
        with pytest.raises(PelabError, match="out: the disk holding .*results.sqlite is full; free some space"):
            store.write(cfg, RunResult(run_id=cfg.run_id, status="done"))


def test_study_without_a_report_prints_a_table_only_when_it_is_short(capsys, monkeypatch, tmp_path) -> None:
    """``--no-report``: a few arms' table, or, past ``MAX_TABLE_ARMS``, one line naming the commands that show
    the numbers (the retired paper preset's 207 arms made a wall hundreds of lines long in a log)."""
    import pelab.cli.study

    (tmp_path / "s.toml").write_text(
        'seeds = [0]\n[task]\nname = "reverse"\nlength = 4\n[model]\nd = 8\nn_heads = 2\n[train]\nsteps = 2\n'
        '[axes]\n"model.combine" = ["add", "concat_split"]\n'
    )
    args = ("study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--no-report", "--workers", "1")
    short = cli(capsys, monkeypatch, *args)
    assert short.rc == 0 and "concat_split" in short.out and "pelab results" not in short.out
    monkeypatch.setattr(pelab.cli.study, "MAX_TABLE_ARMS", 1)
    long = cli(capsys, monkeypatch, *args)
    assert long.rc == 0 and "concat_split" not in long.out
    last = long.out.strip().splitlines()[-1]
    assert last.startswith("2 arms: `pelab results ") and "`pelab report " in last
