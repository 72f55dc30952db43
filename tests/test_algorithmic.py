"""The causal algorithmic tasks (addition, dsort, dreverse) against direct Python computations; every decoder
scheme trains on them and is evaluated at 1.5n and 2n; T5 and ALiBi in their causal forms."""

from __future__ import annotations

import math

import pytest
import torch

from pelab.config import RunConfig, TaskConfig
from pelab.positions.alibi import alibi_slopes
from pelab.positions.base import SchemeContext
from pelab.positions.t5 import T5Bias, relative_bucket
from pelab.tasks import make_task
from pelab.tasks.algorithmic import add_digits
from pelab.tasks.base import SPLITS, Batch

NEW = ("addition", "dsort", "dreverse")
DECODER_SCHEMES = [
    ("none", "none"),
    ("learned", "add"),
    ("sinusoidal", "add"),
    ("rotary", "none"),
    ("alibi", "none"),
    ("t5", "none"),
]


def make(name: str, length: int = 5, vocab: int = 8):
    return make_task(TaskConfig(name=name, length=length, vocab=vocab))


def draw(name: str, size: int = 64, seed: int = 0, n: int | None = None, **kw: int) -> Batch:
    return make(name, **kw).batch("train", size, torch.Generator().manual_seed(seed), n)


def sequences(b: Batch) -> list[list[int]]:
    """The whole sequence each row was cut from: the inputs, then the last target."""
    return [x + [y[-1]] for x, y in zip(b.inputs.tolist(), b.targets.tolist(), strict=True)]


def scored(b: Batch) -> list[list[int]]:
    rows = zip(b.targets.tolist(), b.mask.tolist(), strict=True)
    return [[t for t, m in zip(y, ms, strict=True) if m] for y, ms in rows]


# --- addition ------------------------------------------------------------------------------------


def from_lsd(digits: list[int]) -> int:
    """Digits least significant first -> the integer."""
    return int("".join(str(d) for d in reversed(digits)))


@pytest.mark.parametrize("n", [1, 3, 6])
def test_addition_answers_are_the_sums_least_significant_digit_first(n: int) -> None:
    b = draw("addition", size=512, n=n, length=n)
    carries = 0
    for seq, answer in zip(sequences(b), scored(b), strict=True):
        assert len(seq) == 3 * n + 3
        a_digits, plus, b_digits, equals = seq[:n], seq[n], seq[n + 1 : 2 * n + 1], seq[2 * n + 1]
        assert (plus, equals) == (10, 11) and all(0 <= d <= 9 for d in a_digits + b_digits)
        a, c = from_lsd(a_digits), from_lsd(b_digits)
        assert answer == seq[2 * n + 2 :]
        assert answer == [int(ch) for ch in reversed(str(a + c).zfill(n + 1))]
        carries += a + c >= 10**n
    assert 0.3 < carries / 512 < 0.7  # about half the sums carry into the extra digit


@pytest.mark.parametrize("a, c", [(0, 0), (9, 1), (999, 1), (999, 999), (500, 500), (123, 877), (1, 998), (456, 321)])
def test_add_digits_on_hand_picked_carry_chains(a: int, c: int) -> None:
    lsd = lambda v: torch.tensor([[int(ch) for ch in reversed(str(v).zfill(3))]])  # noqa: E731
    assert add_digits(lsd(a), lsd(c))[0].tolist() == [int(ch) for ch in reversed(str(a + c).zfill(4))]


def test_addition_ignores_vocab() -> None:
    assert make("addition", vocab=8).model_fields() == make("addition", vocab=50).model_fields()
    assert make("addition").model_fields()["vocab_size"] == 12


# --- dsort, dreverse -------------------------------------------------------------------------------


@pytest.mark.parametrize("name, f", [("dsort", sorted), ("dreverse", lambda x: x[::-1])])
def test_answer_after_separator(name: str, f) -> None:
    b = draw(name, n=7, length=7, vocab=5)
    repeats = 0
    for seq, answer in zip(sequences(b), scored(b), strict=True):
        x = seq[:7]
        assert seq[7] == 5 and all(0 <= s < 5 for s in x)  # SEP is the token after the symbols
        assert answer == seq[8:] == f(x)
        repeats += len(set(x)) < 7
    assert repeats > 0  # symbols are drawn with replacement, so sorting keeps repeats


# --- every new task: shape, mask, shift, determinism, sizes -----------------------------------------


@pytest.mark.parametrize("name", NEW)
def test_mask_covers_exactly_the_answer_and_targets_are_shifted_inputs(name: str) -> None:
    task = make(name, length=4)
    for n in (4, 6, 8):
        b = task.batch("train", 16, torch.Generator().manual_seed(n), n)
        T = task.seq_len(n)
        assert b.inputs.shape == b.targets.shape == b.mask.shape == (16, T)
        assert torch.equal(b.inputs[:, 1:], b.targets[:, :-1])
        answer = n + 1 if name == "addition" else n
        expected = torch.zeros(T, dtype=torch.bool)
        expected[T - answer :] = True
        assert torch.equal(b.mask, expected.expand(16, T))
        assert int(b.inputs.max()) < task.vocab_total and int(b.targets.max()) < task.vocab_total


@pytest.mark.parametrize("name", NEW)
def test_same_generator_same_batch_in_every_split(name: str) -> None:
    task = make(name)
    for split in SPLITS:
        a, b = (task.batch(split, 8, torch.Generator().manual_seed(3)) for _ in range(2))
        assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets) and torch.equal(a.mask, b.mask)
    other = task.batch("train", 8, torch.Generator().manual_seed(4))
    assert not torch.equal(a.inputs, other.inputs)


@pytest.mark.parametrize("name", NEW)
def test_sizes_evaluated_and_the_table_they_need(name: str) -> None:
    c = RunConfig.model_validate({"task": {"name": name, "length": 6}, "model": {"position": {"scheme": "learned"}}})
    task = make_task(c.task)
    assert task.kind == "decoder" and task.eval_sizes() == [6, 9, 12]
    assert c.model.kind == "decoder" and c.model.max_len == task.seq_len(12)
    assert c.model.vocab_size == c.model.n_outputs == task.vocab_total


# --- training: every decoder scheme runs and is evaluated at 1.5n and 2n --------------------------------


def run_config(
    name: str, scheme: str, combine: str, steps: int, length: int, layers: int = 1, **train: object
) -> RunConfig:
    return RunConfig.model_validate(
        {
            "task": {"name": name, "length": length, "vocab": 8},
            "model": {"d": 32, "n_heads": 2, "n_layers": layers, "position": {"scheme": scheme}, "combine": combine},
            "train": {"steps": steps, "lr": 3e-3, **train},
        }
    )


@pytest.mark.parametrize("scheme, combine", DECODER_SCHEMES)
@pytest.mark.parametrize("name", NEW)
def test_every_decoder_scheme_trains_and_extrapolates(name: str, scheme: str, combine: str) -> None:
    from pelab.train import train_run

    c = run_config(name, scheme, combine, 5, 4, batch_size=8, eval_batches=1, eval_batch_size=8)
    r = train_run(c, threads=1)
    assert r.status == "done", r.reason
    assert set(r.evals) == {"4", "6", "8"}
    assert all(0.0 <= r.metrics[f"acc_at_{n}"] <= 1.0 for n in (4, 6, 8))


def test_dsort_is_learned_with_learned_positions() -> None:
    """A quick sanity check (a few seconds): sorting 5 symbols out of 8 reaches 0.99 on seeds 0-4; the best
    guess from the output position alone (the commonest i-th smallest symbol) gets 0.34."""
    from pelab.train import train_run

    r = train_run(run_config("dsort", "learned", "add", 200, 5, layers=2, eval_batches=2), threads=1)
    assert r.status == "done" and r.metrics["acc"] >= 0.9, r.metrics


# --- T5 and ALiBi in their causal forms ----------------------------------------------------------------


def t5_bucket(relative_position: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """T5's ``_relative_position_bucket`` (mesh-tensorflow / Hugging Face), one offset at a time in plain
    Python; ``relative_position`` = memory (key) position - query position."""
    ret = 0
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += num_buckets if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(val, num_buckets - 1)


@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (16, 64), (8, 20), (64, 256)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_match_an_independent_implementation(bidirectional: bool, num_buckets: int, max_distance: int):
    offsets = list(range(-600, 601))
    got = relative_bucket(torch.tensor(offsets), bidirectional, num_buckets, max_distance).tolist()
    want = [t5_bucket(o, bidirectional, num_buckets, max_distance) for o in offsets]
    assert got == want


def context(causal: bool, n_heads: int = 4) -> SchemeContext:
    return SchemeContext(
        width=16, model_width=16, reference_width=16, n_heads=n_heads, head_dim=4, max_len=64, causal=causal
    )


def test_t5_decoder_buckets_only_the_past_and_the_encoder_both_directions() -> None:
    p = torch.arange(40)
    offsets = p[None, :] - p[:, None]  # (Tq, Tk) key - query
    for causal in (False, True):
        scheme = T5Bias(context(causal))
        bias = scheme.bias(p, p)
        want = scheme.weight[relative_bucket(offsets, not causal, 32, 128)].permute(2, 0, 1)
        assert torch.equal(bias, want)
    decoder = T5Bias(context(True))
    visible = decoder.bias(p, p)[:, offsets <= 0]  # what the causal mask lets through
    expected = torch.tensor([t5_bucket(int(o), False, 32, 128) for o in offsets[offsets <= 0]])
    assert torch.equal(visible, decoder.weight[expected].T)


def test_alibi_under_a_causal_mask_is_the_papers_i_minus_j() -> None:
    from pelab.positions.alibi import ALiBi

    p = torch.arange(30)
    bias = ALiBi(context(True, n_heads=8)).bias(p, p)  # (H, Tq, Tk)
    slopes = alibi_slopes(8)
    for i in range(30):
        for j in range(i + 1):
            torch.testing.assert_close(bias[:, i, j], -slopes * (i - j), rtol=0, atol=0)
