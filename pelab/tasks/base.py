"""The one interface every task implements.

A task generates batches from a ``torch.Generator``, so the same seed gives the
same batches in the same order to every arm of a study, whatever the model.
``n`` is the *problem size* (symbols to reverse, pairs to recall, characters of
context); the sequence the model sees may be longer (separators, queries), and
``seq_len(n)`` says how long. Evaluation at larger ``n`` measures extrapolation.

Dimension letters: B batch, T sequence, P patch width.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from pydantic import Field, field_validator, model_validator
from torch import Tensor

from pelab.frozen import MAX_COUNT, MAX_LENGTH, MAX_MULTIPLIER, Frozen
from pelab.registry import Registry

#: Where a batch comes from: training, validation (choosing among learning rates), test (reported).
SPLITS = ("train", "val", "test")


@dataclass
class Batch:
    inputs: Tensor  # (B, T) long token ids, or (B, T, P) float vectors
    targets: Tensor  # (B, T) long per token, or (B,) long per sequence
    mask: Tensor  # bool, same shape as targets: which targets are scored
    segments: Tensor | None = None  # (B, T) long segment ids, or None

    def to(self, device: torch.device | str) -> Batch:
        move = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        return Batch(move(self.inputs), move(self.targets), move(self.mask), move(self.segments))


class Task:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: encoder (bidirectional, a target per token), decoder (causal), classify (one label per sequence)
    kind: ClassVar[Literal["encoder", "decoder", "classify"]] = "encoder"
    #: Whether evaluating at a larger problem size makes sense.
    extrapolates: ClassVar[bool] = True
    #: What order matters for in this task, in a few words (``pelab list``).
    order: ClassVar[str] = ""
    #: The claims of SCIENCE.md whose evidence this task carries in a preset (``pelab list``).
    claims: ClassVar[tuple[str, ...]] = ()
    #: Language modelling reports perplexity; the rest accuracy.
    reports_perplexity: ClassVar[bool] = False
    #: The corpus a task reads when ``task.corpus`` is not given (None: the task reads no corpus, or decides
    #: itself what an unset one means). Written into the config, so it enters the run id.
    default_corpus: ClassVar[str | None] = None

    def __init__(self, cfg: TaskConfig) -> None:
        self.cfg = cfg
        self.validate()

    def validate(self) -> None:
        """Raise a PelabError when the config alone cannot make this task. Cheap and reads no data: it runs
        whenever a task is made, so whenever a RunConfig validates."""

    def check_data(self) -> None:
        """Raise a PelabError when the data this config reads cannot serve it (a corpus too short, too few
        paragraphs). It reads the data, so it runs where the data is about to be used: once per distinct task
        in a study's or ``pelab run``'s pre-flight (``pelab.preflight.check_data``), and in the worker before
        it trains; never while a config validates."""

    # --- sizes ---------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.cfg.length

    def eval_sizes(self) -> list[int]:
        if not self.extrapolates:
            return [self.n]
        return sorted({max(1, round(self.n * m)) for m in self.cfg.eval_multipliers})

    @property
    def max_n(self) -> int:
        return max(self.eval_sizes())

    def seq_len(self, n: int) -> int:
        return n

    # --- what the model must look like ------------------------------------------------
    def model_fields(self) -> dict[str, object]:
        """Fields of ModelConfig that the task, not the user, decides."""
        raise NotImplementedError

    def context_free_loss(self) -> float | None:
        """Held-out loss (nats per scored target) of the best predictor that ignores the input, for tasks whose
        accuracy has no ceiling to judge "learned" by (language models); None elsewhere."""
        return None

    def bytes_per_target(self, split: str) -> float:
        """Bytes of text one scored target stands for in ``split``, so that a language model's bits per target
        over this is bits per byte: 1 where targets are bytes; a word piece stands for several."""
        return 1.0

    # --- data -----------------------------------------------------------------------
    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        """``split`` is one of SPLITS. Generated tasks draw every split from the same distribution (the
        generator tells them apart); tasks over a fixed dataset keep the three apart."""
        raise NotImplementedError

    def seen_targets(self, batch: Batch, n_train: int) -> Tensor:
        """Which scored targets of ``batch`` (drawn at any size) a model could answer from what training at size
        ``n_train`` showed it: its answer reads only positions (and tokens) that occur at that size. C17 sets the
        accuracy of a model right exactly there, and elsewhere as good as a guess that uses no position, beside
        each arm at longer lengths, so an arm that only solves what it has seen is not mistaken for one that
        extrapolates.

        Seen means more than "reads nothing past the training length": the answer at that place must be the
        one training put there (the same output position reading the same source). The default says so only
        at the training size itself: a causal decoder's prompt grows with n, so where each answer sits and
        what it reads both move (copy's source lies n back, the i-th sorted symbol is another order
        statistic, the sum digits shift). Tasks whose map does not depend on n (offset, rotate past k, lookup
        by the index it names) say more."""
        return batch.mask & (batch.mask.shape[1] == self.seq_len(n_train))

    def eval_batches(
        self, n: int, batch_size: int, count: int, generator: torch.Generator, split: str = "test"
    ) -> Iterator[Batch]:
        """An evaluation set at size n (``count`` fresh batches by default). Validation picks a learning
        rate when a study gives several; test, never chosen on, is what the report scores."""
        for _ in range(count):
            yield self.batch(split, batch_size, generator, n)


def random_symbols(size: int, n: int, vocab: int, generator: torch.Generator) -> Tensor:
    return torch.randint(0, vocab, (size, n), generator=generator)


def distinct_symbols(size: int, n: int, vocab: int, generator: torch.Generator) -> Tensor:
    """n distinct symbols per row (a random injection into the vocabulary)."""
    return torch.rand(size, vocab, generator=generator).argsort(dim=1)[:, :n]


#: Every task, by name: each module of this package registers its own when ``pelab.tasks`` imports it.
TASKS: Registry[Task] = Registry("task")
register = TASKS.register
task_class = TASKS.lookup


class TaskConfig(Frozen):
    """A task and its size; every arm of a study sees the same one."""

    name: str = Field("reverse", description="registered task (see `pelab list`)")
    length: int = Field(16, ge=1, le=MAX_LENGTH, description="problem size at training (symbols, pairs, characters)")
    vocab: int = Field(16, ge=2, le=MAX_COUNT, description="number of distinct symbols")
    k: int = Field(2, ge=1, le=MAX_COUNT, description="rotate / offset distance")
    eval_multipliers: tuple[float, ...] = Field(
        (1.0, 1.5, 2.0), description="evaluate at these multiples of length (C17 reads 1.5n and 2n)"
    )
    corpus: str | None = Field(
        None,
        description="text for charlm and mlm: prose (English, their default), code (Python's stdlib), or a text "
        "file or folder",
    )
    patch: int = Field(2, ge=1, le=MAX_COUNT, description="digits: patch side in pixels (1, 2 or 4)")

    @field_validator("name")
    @classmethod
    def _known_task(cls, v: str) -> str:
        TASKS.lookup(v)  # one line naming the field and the allowed names
        return v

    @model_validator(mode="before")
    @classmethod
    def _task_corpus(cls, data: object) -> object:
        """A task that reads a corpus gets its default written into its config (charlm and mlm: prose), so the run
        id says which text trained it; every other task keeps an unset corpus, and its run ids do not change."""
        if isinstance(data, dict) and data.get("corpus") is None:
            task = TASKS.get(data.get("name", "reverse")) if isinstance(data.get("name", "reverse"), str) else None
            if task is not None and task.default_corpus is not None:
                return {**data, "corpus": task.default_corpus}
        return data

    @field_validator("eval_multipliers")
    @classmethod
    def _positive(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not v or any(m <= 0 or m > MAX_MULTIPLIER for m in v):
            raise ValueError(
                f"task.eval_multipliers: give one or more multiples of length in (0, {MAX_MULTIPLIER:g}], e.g. [1, 2] "
                f"(got {list(v)})"
            )
        if 1.0 not in v:  # a run's headline metrics are read at the training length
            raise ValueError(f"task.eval_multipliers: must include 1, the training length (got {list(v)})")
        return v
