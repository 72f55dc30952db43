"""Models named in a study file (``[pretrained] models``): C16 of the study's report compares them side by side.

Two tiny random models (GPT-2 and BERT, built with ``transformers`` as tests/test_pretrained_hf.py builds
them) named in a tiny study: the report's C16 has a row per model in its side-by-side table and the
compare_*.png figures, cached in the study folder and measured again when the list changes; a bad
folder fails in one line before any run; the table changes no run id.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from test_pretrained_hf import builders, run_in_process

from pelab.errors import PelabError
from pelab.report.pretrained import side_folder
from pelab.study.grid import load_study, parse_study

STUDY = """
name = "tiny pretrained"
seeds = [0]
[task]
name = "reverse"
length = 5
vocab = 8
[model]
d = 16
n_heads = 2
[train]
steps = 5
eval_batches = 1
[axes]
"model.position.scheme" = ["sinusoidal", "learned"]
"""


def with_models(paths: list[str]) -> str:
    return STUDY + "\n[pretrained]\nmodels = " + json.dumps(paths) + "\n"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf")
    out = {}
    made = builders()
    for name in ("gpt2", "bert"):
        config, cls = made[name]
        torch.manual_seed(0)
        cls(config).save_pretrained(root / name, safe_serialization=True)
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def reported(folders, tmp_path_factory) -> tuple[Path, dict]:
    """The tiny study run and reported, MiniLM's measurement left out (as where it is not installed)."""
    import functools

    from pelab.report import build
    from pelab.report.context import report_pool
    from pelab.study.driver import run_study

    out = tmp_path_factory.mktemp("study") / "out"
    f = out.parent / "tiny.toml"
    f.write_text(with_models([str(folders["gpt2"]), str(folders["bert"])]))
    run_study(load_study(f), out, workers=1, quiet=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("pelab.pretrained.report.load_or_measure", lambda folder: None)
        mp.setattr(build, "report_pool", functools.partial(report_pool, 1))  # in this process, where it is patched
        _, _, claims = build.build_report(out)
    return out, {c.id: c for c in claims}


def test_the_table_changes_no_run_id(folders) -> None:
    plain = parse_study(STUDY)
    named = parse_study(with_models(["mini-lm", str(folders["gpt2"])]))
    assert named.pretrained_models == ["mini-lm", str(folders["gpt2"])] and plain.pretrained_models == []
    assert [r.run_id for r in named.runs] == [r.run_id for r in plain.runs]
    assert named.membership == plain.membership


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ("[pretrained]\nsteps = 300", "C9's runs are ordinary [[grid]]s"),
        ("[pretrained]\nmodels = []", "non-empty list"),
        ("[pretrained]\nmodels = [3]", "non-empty list"),
        ('[pretrained]\nmodels = "gpt2"', "non-empty list"),
        ('[pretrained]\nmodels = ["a", "a"]', "listed twice"),
        ('[pretrained]\nmodels = ["a"]\ncolour = 1', "unknown key 'colour'"),
        ("pretrained = 3", "must be a table"),
    ],
)
def test_malformed_pretrained_table(table: str, needle: str) -> None:
    with pytest.raises(PelabError, match=re.escape(needle)) as e:
        parse_study(STUDY + "\n" + table + "\n" if table.startswith("[") else table + "\n" + STUDY)  # a key: on top
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("bad", "words"), [("missing", "does not exist"), ("pickle", "save_pretrained")])
def test_a_bad_folder_fails_in_one_line_before_any_run(folders, tmp_path, monkeypatch, capsys, bad, words) -> None:
    folder = tmp_path / "nowhere"
    if bad == "pickle":
        folder = tmp_path / "pickle"
        folder.mkdir()
        (folder / "config.json").write_text((folders["bert"] / "config.json").read_text())
        (folder / "pytorch_model.bin").write_bytes(b"not loaded")
    f = tmp_path / "study.toml"
    f.write_text(with_models([str(folders["gpt2"]), str(folder)]))
    out = tmp_path / "out"
    rc, _, stderr = run_in_process(["study", str(f), "--out", str(out), "--workers", "1"], monkeypatch, capsys)
    assert rc == 2, stderr
    assert stderr.startswith("pelab: error: model:") and stderr.strip().count("\n") == 0, stderr
    assert words in stderr
    assert not out.exists()


def test_c16_compares_the_named_models_side_by_side(reported) -> None:
    out, claims = reported
    c16 = claims["C16"]
    assert c16.verdict == "reported"
    side = next(t for t in c16.tables if t.title.startswith("Side by side: the sequence models"))
    assert side.columns[:4] == ["model", "positions x width (first row)", "table", "R² of position"]
    labels = [row[0] for row in side.rows]
    assert labels == ["gpt2", "sinusoidal 64x32", "bert"]  # the sinusoid of their shared size once
    assert all(len(row) == len(side.columns) and all(isinstance(c, str) for c in row) for row in side.rows)
    read = next(t for t in c16.tables if t.title.startswith("What was read"))
    assert [row[0] for row in read.rows] == ["gpt2", "bert"] and read.rows[1][1] == "bert"
    names = {f.path.name for f in c16.figures}
    assert names == {"compare_pca.png", "compare_similarity.png", "compare_probes.png"}
    for f in c16.figures:
        assert f.path.parent == side_folder(out) and f.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "gpt2: position R²" in c16.key and "bert" in c16.key
    assert any("MiniLM is not installed" in c for c in c16.caveats)  # the named models are reported without it
    md = (out / "report.md").read_text()
    assert "| gpt2 | 64 x 32 (row 0) | learned |" in md
    assert "## Side by side" in (side_folder(out) / "pretrained.md").read_text()


def test_side_by_side_is_cached_and_measured_again_when_the_list_changes(reported, folders, monkeypatch) -> None:
    from pelab.pretrained import sidebyside
    from pelab.report.pretrained import run_side_by_side

    out, _ = reported
    cached = json.loads((side_folder(out) / sidebyside.STUDY_JSON).read_text())
    assert cached["models"] == [str(folders["gpt2"]), str(folders["bert"])]

    def no_loading(paths):
        raise AssertionError("measured again")

    monkeypatch.setattr("pelab.weights.hf.load_all", no_loading)
    assert run_side_by_side(out, cached["models"]) == cached  # the same list: read back, nothing loaded
    monkeypatch.undo()
    again = run_side_by_side(out, [str(folders["bert"])])
    assert list(again["side_by_side"]["models"]) == ["bert"] and again["models"] == [str(folders["bert"])]
    assert json.loads((side_folder(out) / sidebyside.STUDY_JSON).read_text()) == again
