"""Conformance checks of a task (``pelab.conformance``)."""

from __future__ import annotations

from typing import Any

import torch

from pelab.config import RunConfig, TaskConfig
from pelab.conformance.core import (
    Check,
    Fail,
    NotApplicable,
    _declaration,
    _first_valid,
    _run,
    _train_cfg,
    stacked_identity,
)
from pelab.tasks import TASKS, make_task


def _task(name: str) -> Any:
    return make_task(TaskConfig(name=name))


def task_declaration(name: str) -> str:
    cls = TASKS[name]
    _declaration(cls, {"name": str, "description": str, "extrapolates": bool, "order": str})
    if cls.kind not in ("encoder", "decoder", "classify"):
        raise Fail(f"kind must be encoder, decoder or classify (got {cls.kind!r})")
    fields = _task(name).model_fields()
    RunConfig(task={"name": name})  # a run with its defaults validates
    return f"{cls.__module__}.{cls.__qualname__}; decides {', '.join(sorted(fields))}"


def _check_batch(task: Any, name: str, split: str, n: int) -> None:
    fields = task.model_fields()
    batch = task.batch(split, 4, torch.Generator().manual_seed(0), n)
    x, y, m = batch.inputs, batch.targets, batch.mask
    length = task.seq_len(n)
    if x.shape[:2] != (4, length):
        raise Fail(f"{split} inputs at n={n} are {tuple(x.shape)}, but seq_len({n}) = {length}")
    if fields.get("vocab_size") is not None and (
        x.dtype != torch.long or x.min() < 0 or x.max() >= fields["vocab_size"]
    ):
        raise Fail(f"{split} inputs must be token ids in 0..vocab_size-1 = {fields['vocab_size'] - 1} (long)")
    if m.dtype != torch.bool or m.shape != y.shape or not m.any():
        raise Fail(f"{split} mask must be a bool tensor shaped like the targets, scoring something")
    if y.dtype != torch.long or y[m].min() < 0 or y[m].max() >= fields.get("n_outputs", 0):
        raise Fail(f"{split} targets must be class ids in 0..n_outputs-1 (long)")
    expected = (4,) if task.kind == "classify" else (4, length)
    if tuple(y.shape) != expected:
        raise Fail(f"{split} targets are {tuple(y.shape)}, expected {expected} for a {task.kind} task")


def task_batches(name: str) -> str:
    task = _task(name)
    for split in ("train", "val", "test"):
        _check_batch(task, name, split, task.n)
    return f"train, val, test at n={task.n}: shapes, dtypes and ranges"


def task_seeded(name: str) -> str:
    task = _task(name)

    def draw(seed: int) -> Any:
        return task.batch("train", 4, torch.Generator().manual_seed(seed))

    a, b, c = draw(0), draw(0), draw(1)
    if not (torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)):
        raise Fail("two generators with one seed give different batches")
    if torch.equal(a.inputs, c.inputs):
        raise Fail("two seeds give the same batch: the generator is not read")
    return "one seed, one batch; another seed, another batch"


def task_longer(name: str) -> str:
    task = _task(name)
    if not task.extrapolates:
        raise NotApplicable("evaluated at its training size only (extrapolates is False)")
    for n in task.eval_sizes():
        _check_batch(task, name, "test", n)
    return f"test batches at n = {', '.join(map(str, task.eval_sizes()))}"


def task_stacked(name: str) -> str:
    make = _first_valid([lambda s, sc=sc: _train_cfg(s, {"name": name}, {"position": {"scheme": sc}})
                         for sc in ("sinusoidal", "sincos2d")])  # fmt: skip
    return stacked_identity(make)


def check_task(name: str) -> list[Check]:
    return _run("task", name, [
        ("declaration", lambda: task_declaration(name), ()),
        ("batches", lambda: task_batches(name), ("declaration",)),
        ("seeded batches", lambda: task_seeded(name), ("batches",)),
        ("longer inputs", lambda: task_longer(name), ("batches",)),
        ("stacked seeds", lambda: task_stacked(name), ("batches",)),
    ])  # fmt: skip
