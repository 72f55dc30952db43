"""Training through the public API: learns what it should, fails what it must, repeats itself exactly."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from pelab.config import RunConfig
from pelab.tasks import make_task
from pelab.train import train_run


def cfg(task: str, position: str, combine: str, steps: int = 200, **task_kw: object) -> RunConfig:
    return RunConfig(
        task={"name": task, **task_kw},
        model={"d": 32, "n_heads": 2, "position": {"scheme": position}, "combine": combine},
        train={"steps": steps, "lr": 3e-3, "eval_batches": 4},
    )


def test_copy_task_reaches_99_percent() -> None:
    r = train_run(cfg("copy", "learned", "add", steps=150, length=6, vocab=8), threads=1)
    assert r.status == "done"
    assert r.metrics["acc"] >= 0.99
    assert r.curve[-1]["loss"] < r.curve[0]["loss"] / 10


def mode_baseline(length: int, vocab: int) -> float:
    """Accuracy of the best position-blind answer for reverse: the sequence's most common symbol."""
    task = make_task(cfg("reverse", "none", "none", length=length, vocab=vocab).task)
    b = task.batch("test", 4096, torch.Generator().manual_seed(123))
    hits = sum(Counter(row).most_common(1)[0][1] for row in b.inputs.tolist())
    return hits / b.inputs.numel()


def test_reverse_needs_position_information() -> None:
    length, vocab = 8, 16
    nope = train_run(cfg("reverse", "none", "none", length=length, vocab=vocab), threads=1)
    sinus = train_run(cfg("reverse", "sinusoidal", "add", length=length, vocab=vocab), threads=1)
    floor = mode_baseline(length, vocab)
    assert 1 / vocab < floor < 0.3
    # Permutation-equivariant: no better than guessing the commonest symbol.
    assert nope.metrics["acc"] <= floor + 0.05, (nope.metrics, floor)
    assert sinus.metrics["acc"] >= 0.97, sinus.metrics


def test_same_config_same_numbers() -> None:
    c = cfg("sort", "learned", "concat_split", steps=40, length=6, vocab=8)
    a, b = train_run(c, threads=1), train_run(c, threads=1)
    assert a.metrics == b.metrics and a.curve == b.curve and a.evals == b.evals
    other = train_run(c.model_copy(update={"seed": 1}), threads=1)
    assert other.metrics != a.metrics


def test_divergence_is_a_status_not_a_crash() -> None:
    c = cfg("reverse", "learned", "add", steps=30, length=6, vocab=8)
    c = c.model_copy(update={"train": c.train.model_copy(update={"lr": 1e15, "grad_clip": 1e30})})
    r = train_run(c, threads=1)
    assert r.status == "diverged" and "non-finite" in (r.reason or "")


def test_failure_is_a_status_not_a_crash() -> None:
    r = train_run(
        cfg("copy", "learned", "add", steps=5, length=6, vocab=8),
        device="cuda:7" if not torch.cuda.is_available() else "bogus",
        threads=1,
    )
    assert r.status == "failed" and r.reason


def test_result_carries_size_and_speed() -> None:
    r = train_run(cfg("lookup", "sinusoidal", "add", steps=5, length=4, vocab=8), threads=1)
    assert r.params > 0 and r.flops_per_token > 0 and r.tokens_per_s > 0 and r.seconds > 0
    assert set(r.evals) == {"4", "6", "8"} and "acc_at_6" in r.metrics and "acc_at_8" in r.metrics
    assert r.versions["torch"] == torch.__version__


def test_validation_is_measured_apart_from_test() -> None:
    """val_* come from other batches than the reported test metrics (a learning rate is chosen on them)."""
    cfg = RunConfig.model_validate(
        {"task": {"name": "reverse", "length": 6, "vocab": 8}, "model": {"d": 16, "n_layers": 1, "n_heads": 2},
         "train": {"steps": 20, "eval_batches": 2}}
    )  # fmt: skip
    m = train_run(cfg, device="cpu").metrics
    assert {"val_loss", "val_acc", "val_exact"} <= set(m)
    assert m["val_loss"] != m["loss"]
    task = make_task(cfg.task)
    gen = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    val = next(task.eval_batches(6, 4, 1, gen(), split="val"))
    test = next(task.eval_batches(6, 4, 1, gen(), split="test"))
    assert torch.equal(val.inputs, test.inputs)  # a generated task: the generator, not the split, tells them apart


def test_digits_splits_are_disjoint_and_test_is_unchanged() -> None:
    """Recomputed from scikit-learn: test is the first fifth of a fixed permutation (as before validation
    existed), validation the next tenth, train the rest; no image index is in two splits."""
    from sklearn.datasets import load_digits

    from pelab.tasks.digits import digits_split

    data = load_digits()
    order = torch.randperm(len(data.target), generator=torch.Generator().manual_seed(0)).tolist()
    n_test, n_val = len(order) // 5, len(order) // 10
    expect = {"test": order[:n_test], "val": order[n_test : n_test + n_val], "train": order[n_test + n_val :]}
    assert sum(map(len, expect.values())) == len(set().union(*map(set, expect.values()))) == len(order)
    for split, (images, labels) in digits_split().items():
        idx = expect[split]
        assert torch.equal(labels, torch.tensor(data.target[idx]))
        assert torch.allclose(images, torch.tensor(data.images[idx], dtype=torch.float32) / 16.0)


def test_language_models_report_bits_per_byte_and_their_context_free_baseline(tmp_path) -> None:
    """bpb is the mean loss in nats over ln 2; the baseline is the test bytes' cross-entropy under the training
    bytes' add-one-smoothed frequencies, recomputed here with Counter on a file split 80/10/10 by position."""
    import math
    from collections import Counter

    text = ("abracadabra " * 50 + "the quick brown fox jumps over the lazy dog " * 40).encode()
    f = tmp_path / "t.txt"
    f.write_bytes(text)
    cut1, cut2 = int(len(text) * 0.8), int(len(text) * 0.9)
    train, test = text[:cut1], text[cut2:]
    counts = Counter(train)
    total = len(train) + 256
    expect = -sum(math.log((counts.get(b, 0) + 1) / total) for b in test) / len(test)
    cfg = RunConfig.model_validate(
        {"task": {"name": "charlm", "length": 16, "corpus": str(f)}, "model": {"d": 16, "n_layers": 1, "n_heads": 2},
         "train": {"steps": 5, "eval_batches": 2}}
    )  # fmt: skip
    m = train_run(cfg, device="cpu").metrics
    assert math.isclose(m["baseline_loss"], expect, rel_tol=1e-9)
    assert math.isclose(m["bpb"], m["loss"] / math.log(2), rel_tol=1e-12)
    assert math.isclose(m["ppl"], math.exp(m["loss"]), rel_tol=1e-9)
    assert {"val_bpb", "val_loss"} <= set(m)


def test_a_run_trains_with_subnormals_flushed_and_leaves_the_process_as_it_was() -> None:
    """Engine stacked-2 (train.flushed_subnormals): while a run trains and evaluates a subnormal computes as zero
    (an encoder's attention made them, at microcode speed); before and after it, the process's arithmetic is as
    it was: IEEE's, as SciPy's statistics expect, or flushed where the caller had set that."""
    from pelab.records import ENGINE
    from pelab.train import flushed_subnormals, flushing_subnormals

    assert float(torch.tensor([1e-40])) > 0.0  # the probe's number is a subnormal that IEEE arithmetic keeps
    with flushed_subnormals() as took:
        if not took:
            pytest.skip("this CPU has no flush-to-zero mode that torch can set")
        assert flushing_subnormals()
    assert not flushing_subnormals()
    seen: list[bool] = []
    run = cfg("copy", "learned", "add", steps=3)
    r = train_run(run, device="cpu", on_step=lambda i, n: seen.append(flushing_subnormals()))
    assert r.status == "done" and r.versions["engine"] == ENGINE == "stacked-2"
    assert seen and all(seen)  # every step of the run computed with subnormals flushed
    assert not flushing_subnormals()  # and the process got IEEE arithmetic back
    torch.set_flush_denormal(True)  # a caller that flushes keeps flushing after a run
    try:
        assert train_run(run, device="cpu").status == "done" and flushing_subnormals()
    finally:
        torch.set_flush_denormal(False)
