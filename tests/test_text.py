"""Real-text tasks (charlm, mlm) and their corpus splits, each against an independent computation."""

from __future__ import annotations

import builtins
import hashlib
import random
from pathlib import Path

import pytest
import torch
from scipy.stats import binom

from pelab.config import RunConfig, TaskConfig
from pelab.errors import PelabError
from pelab.tasks import make_task
from pelab.tasks import text as T
from pelab.train import train_run

#: Chance a correct implementation fails one binomial check (deterministic seeds: it either passes or not).
ALPHA = 1e-6


def letters(n: int, seed: int) -> str:
    """Random lowercase text: any window of 12+ bytes of it occurs once, so a window tells where it came from."""
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(n))


def within(count: int, trials: int, p: float) -> bool:
    lo, hi = binom.interval(1 - ALPHA, trials, p)
    return lo <= count <= hi


def as_bytes(t: torch.Tensor) -> bytes:
    return bytes(t.tolist())


def expected_split(rel: str) -> str:
    bucket = int(hashlib.sha1(rel.encode()).hexdigest(), 16) % 10
    return "val" if bucket == 0 else "test" if bucket == 1 else "train"


def make_folder(root: Path, count: int = 60) -> dict[str, str]:
    """Files of unique random text in nested folders; returns relative POSIX path -> text."""
    out = {}
    for i in range(count):
        rel = f"pkg{i % 3}/sub{i % 2}/file{i}.txt"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        out[rel] = letters(300 + 37 * i, seed=i)
        (root / rel).write_text(out[rel])
    return out


# --- splits ----------------------------------------------------------------------------


def test_folder_split_by_file_hash(tmp_path: Path) -> None:
    files = make_folder(tmp_path)
    for skipped in ("site-packages/x.txt", ".git/y.txt", "notes.bin"):  # not entered / not text
        (tmp_path / skipped).parent.mkdir(exist_ok=True)
        (tmp_path / skipped).write_text(letters(500, seed=999))
    corpus = T.load_corpus(str(tmp_path))
    splits = {s: as_bytes(getattr(corpus, s)).decode() for s in ("train", "val", "test")}
    for rel, text in files.items():
        home = expected_split(rel)
        for s, data in splits.items():
            assert (text in data) == (s == home), (rel, s, home)
    assert letters(500, seed=999) not in "".join(splits.values())
    for s, data in splits.items():  # each split is exactly its files, joined by newlines
        mine = [t for r, t in files.items() if expected_split(r) == s]
        assert len(data) == sum(map(len, mine)) + len(mine) - 1


def test_default_corpus_is_the_stdlib_split_by_hash() -> None:
    corpus = T.load_corpus(None)
    sizes = {s: len(getattr(corpus, s)) for s in ("train", "val", "test")}
    assert sum(sizes.values()) <= T.MAX_BYTES
    assert sizes["train"] > 1_000_000 and sizes["val"] >= 100_000 and sizes["test"] >= 100_000
    files = T.text_files(T.default_corpus(), {".py"})
    assert len(files) > 500 and not any("site-packages" in f or "__pycache__" in f for f in files)
    for rel in files:
        assert T.split_of(rel) == expected_split(rel)
    assert sum(expected_split(r) == "train" for r in files) / len(files) > 0.7  # about 80%


def test_single_file_by_position(tmp_path: Path) -> None:
    f = tmp_path / "book.txt"
    data = letters(12_345, seed=1).encode()
    f.write_bytes(data)
    corpus = T.load_corpus(str(f))
    a, b = 12_345 * 8 // 10, 12_345 * 9 // 10  # first 80%, next 10%, last 10%
    assert as_bytes(corpus.train) == data[:a]
    assert as_bytes(corpus.val) == data[a:b]
    assert as_bytes(corpus.test) == data[b:]


class ReadSpy:
    """Wraps open(): records every read's size and what it returned."""

    def __init__(self) -> None:
        self.asked: list[int] = []
        self.got = 0

    def __call__(self, *args: object, **kw: object):
        f = builtins.open(*args, **kw)
        read = f.read

        def spy_read(size: int = -1) -> bytes:
            self.asked.append(size)
            out = read(size)
            self.got += len(out)
            return out

        f.read = spy_read
        return f


def test_max_bytes_respected_and_large_file_not_read_whole(tmp_path: Path, monkeypatch) -> None:
    spy = ReadSpy()
    monkeypatch.setattr(T, "open", spy, raising=False)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (T.MAX_BYTES + 1_000_000))
    corpus = T.load_corpus(str(big))
    assert sum(map(len, corpus)) == T.MAX_BYTES and spy.got == T.MAX_BYTES
    assert all(size is not None and 0 <= size <= T.MAX_BYTES for size in spy.asked)
    # a folder: small files and one larger than the whole budget, in every split's turn
    monkeypatch.setattr(T, "MAX_BYTES", 20_000)
    spy.asked.clear()
    spy.got = 0
    folder = tmp_path / "folder"
    files = make_folder(folder, count=40)
    for rel in [r for r in files if expected_split(r) == "train"][:1] + [
        r for r in files if expected_split(r) == "val"
    ][:1]:
        (folder / rel).write_bytes(b"y" * 1_000_000)
    corpus = T.load_corpus(str(folder))
    assert spy.got <= 20_000 and all(0 <= size <= 20_000 for size in spy.asked)
    assert len(corpus.train) <= 16_000 and len(corpus.val) <= 2_000 and len(corpus.test) <= 2_000


def test_missing_or_small_corpus_is_one_line_error(tmp_path: Path) -> None:
    cases = [tmp_path / "missing.txt", tmp_path / "small.txt", tmp_path / "few"]
    (tmp_path / "small.txt").write_text(letters(500, seed=2))  # val and test get 50 bytes each
    (tmp_path / "few").mkdir()
    for i in range(2):
        (tmp_path / "few" / f"{i}.txt").write_text(letters(5000, seed=i))
    (tmp_path / "empty").mkdir()
    cases.append(tmp_path / "empty")
    for path in cases:
        for name in ("charlm", "mlm"):
            task = make_task(TaskConfig(name=name, corpus=str(path)))  # making a task reads no data
            with pytest.raises(PelabError, match="task.corpus") as e:
                task.check_data()
            assert "\n" not in str(e.value)


def test_length_longer_than_a_split_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "book.txt"
    f.write_text(letters(2000, seed=3))  # val and test: 200 bytes
    make_task(TaskConfig(name="mlm", corpus=str(f), length=200)).check_data()
    for name, length in (("charlm", 200), ("mlm", 201)):
        with pytest.raises(PelabError, match="task.length"):
            make_task(TaskConfig(name=name, corpus=str(f), length=length)).check_data()


def test_configs_validate_without_reading_data_and_the_study_preflight_reads_it_once(
    tmp_path: Path, monkeypatch
) -> None:
    """Validating a RunConfig (which makes the task to learn the model's fields) reads no corpus; the study's
    pre-flight checks the data once per distinct task and refuses a bad one in one line, before the folder
    is touched."""
    from pelab.config import RunConfig
    from pelab.preflight import check_data
    from pelab.study.driver import check_study
    from pelab.study.grid import parse_study

    reads: list[str | None] = []
    real = T.load_corpus.__wrapped__
    monkeypatch.setattr(T, "load_corpus", lambda path: reads.append(path) or real(path))
    short = tmp_path / "short.txt"
    short.write_text(letters(2000, seed=3))  # test split: 200 bytes
    cfg = RunConfig(task={"name": "charlm", "corpus": str(short), "length": 500})
    assert reads == [] and cfg.model.max_len == 500
    text = f"""
seeds = [0, 1, 2]
[task]
name = "charlm"
corpus = "{short}"
length = 500
[axes]
"model.d" = [32, 64]
"""
    study = parse_study(text)
    assert len(study.runs) == 6 and reads == []
    with pytest.raises(PelabError, match=r"^task\.length: 500 needs 501 bytes") as e:
        check_study(study)
    assert "\n" not in str(e.value) and reads == [str(short)]
    ok = parse_study(text.replace("length = 500", "length = 64"))
    reads.clear()
    check_data(ok.runs)
    assert reads == [str(short)]  # six runs, one task: read once


# --- batches ---------------------------------------------------------------------------


@pytest.fixture
def book(tmp_path: Path) -> Path:
    f = tmp_path / "book.txt"
    f.write_text(letters(50_000, seed=7))
    return f


def test_charlm_windows_come_from_their_split_and_shift_by_one(book: Path) -> None:
    task = make_task(TaskConfig(name="charlm", corpus=str(book), length=24))
    corpus = T.load_corpus(str(book))
    parts = {s: as_bytes(getattr(corpus, s)) for s in ("train", "val", "test")}
    for split in ("train", "val", "test"):
        b = task.batch(split, 50, torch.Generator().manual_seed(0))
        assert b.inputs.shape == b.targets.shape == b.mask.shape == (50, 24) and bool(b.mask.all())
        assert torch.equal(b.inputs[:, 1:], b.targets[:, :-1])
        for x, y in zip(b.inputs, b.targets, strict=True):
            window = as_bytes(x) + as_bytes(y[-1:])
            assert [window in data for data in parts.values()] == [s == split for s in parts]


def test_mlm_targets_are_the_text_and_unchosen_inputs_unchanged(book: Path) -> None:
    task = make_task(TaskConfig(name="mlm", corpus=str(book), length=40))
    assert task.model_fields() == dict(kind="encoder", vocab_size=257, n_outputs=256, head="token")
    corpus = T.load_corpus(str(book))
    parts = {s: as_bytes(getattr(corpus, s)) for s in ("train", "val", "test")}
    for split in ("train", "val", "test"):
        b = task.batch(split, 50, torch.Generator().manual_seed(1))
        assert b.inputs.shape == b.targets.shape == b.mask.shape == (50, 40)
        for y in b.targets:
            assert [as_bytes(y) in data for data in parts.values()] == [s == split for s in parts]
        assert torch.equal(b.inputs[~b.mask], b.targets[~b.mask])
        assert int(b.inputs.max()) <= 256 and int(b.targets.max()) < 256


@pytest.mark.parametrize("n, k", [(1, 1), (7, 1), (20, 3), (40, 6), (64, 10), (128, 19)])
def test_mlm_chooses_15_percent_exactly_per_window(n: int, k: int) -> None:
    task = make_task(TaskConfig(name="mlm", length=n))
    b = task.batch("train", 200, torch.Generator().manual_seed(n))
    assert (b.mask.sum(dim=1) == k).all()  # k = max(1, round(0.15 n)), written out by hand


def test_mlm_masking_rates_are_berts() -> None:
    n, size = 40, 4000
    task = make_task(TaskConfig(name="mlm", length=n))
    b = task.batch("train", size, torch.Generator().manual_seed(11))
    chosen, x, y = b.mask, b.inputs, b.targets
    trials = int(chosen.sum())
    assert trials == size * 6
    for count in chosen.sum(dim=0).tolist():  # every position equally likely to be chosen
        assert within(count, size, 6 / n)
    masked = int((chosen & (x == 256)).sum())
    randomised = int((chosen & (x != 256) & (x != y)).sum())
    same = int((chosen & (x == y)).sum())
    assert masked + randomised + same == trials
    assert within(masked, trials, 0.8)
    assert within(randomised, trials, 0.1 * 255 / 256)  # a random byte is the original 1 time in 256
    assert within(same, trials, 0.1 + 0.1 / 256)
    # the random bytes are uniform over all 256: each of 4 quarters of the byte range gets a quarter
    noise = x[chosen & (x != 256) & (x != y)]
    for q in range(4):
        assert within(int(((noise >= 64 * q) & (noise < 64 * (q + 1))).sum()), len(noise), 0.25)


@pytest.mark.parametrize("name", ["charlm", "mlm"])
def test_batches_and_evaluation_sets_are_deterministic(name: str) -> None:
    task = make_task(TaskConfig(name=name, length=32))
    assert task.extrapolates is False and task.eval_sizes() == [32] and task.reports_perplexity
    for split in ("train", "val", "test"):
        a, b, c = (task.batch(split, 8, torch.Generator().manual_seed(s)) for s in (5, 5, 6))
        assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
        assert torch.equal(a.mask, b.mask) and not torch.equal(a.inputs, c.inputs)
    for split in ("val", "test"):
        one, two = (list(task.eval_batches(32, 8, 3, torch.Generator().manual_seed(9), split=split)) for _ in "12")
        for p, q in zip(one, two, strict=True):
            assert torch.equal(p.inputs, q.inputs) and torch.equal(p.mask, q.mask)
    val = next(task.eval_batches(32, 8, 1, torch.Generator().manual_seed(9), split="val"))
    test = next(task.eval_batches(32, 8, 1, torch.Generator().manual_seed(9), split="test"))
    assert not torch.equal(val.targets, test.targets)  # the same draws, read from different text


def test_user_folder_works(tmp_path: Path) -> None:
    files = make_folder(tmp_path)
    text = "".join(files.values())
    for name in ("charlm", "mlm"):
        task = make_task(TaskConfig(name=name, corpus=str(tmp_path), length=16))
        b = task.batch("train", 4, torch.Generator().manual_seed(0))
        for y in b.targets:  # a window may run across the newline that joins two files
            assert all(piece in text for piece in as_bytes(y).decode().split("\n"))


@pytest.mark.parametrize("name", ["charlm", "mlm"])
def test_tiny_training_run_completes(name: str) -> None:
    cfg = RunConfig.model_validate(
        {
            "task": {"name": name, "length": 32},
            "model": {"d": 16, "n_heads": 2, "n_layers": 1, "position": {"scheme": "sinusoidal"}},
            "train": {"steps": 3, "batch_size": 4, "eval_batches": 1, "eval_batch_size": 4, "curve_points": 1},
        }
    )
    r = train_run(cfg, threads=1)
    assert r.status == "done", r.reason
    assert list(r.evals) == ["32"] and r.metrics["ppl"] > 1
