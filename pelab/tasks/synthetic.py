"""Synthetic sequence tasks where order is the whole point.

Encoder (a target per position, bidirectional attention):
    reverse   y_i = x_{n-1-i}
    rotate    y_i = x_{(i-k) mod n}           (absolute: wrap-around needs the length)
    offset    y_i = x_{i-k} for i >= k        ("the token k to the left": relative)
    sort      y_i = i-th smallest of x
    lookup    symbols, then index queries j_t; y at query t = x_{j_t}

Decoder (causal, next-token targets, scored where the answer is determined):
    copy      x_1..x_n SEP x_1..x_n           scored on the copy
    recall    k_1 v_1 .. k_n v_n  q_1 a_1 .. q_n a_n   scored on every a_t
"""

from __future__ import annotations

import torch

from pelab.errors import PelabError
from pelab.tasks import register
from pelab.tasks.base import Batch, Task, distinct_symbols, random_symbols


class TokenEncoderTask(Task):
    kind = "encoder"

    @property
    def n_outputs(self) -> int:
        return self.cfg.vocab

    @property
    def input_vocab(self) -> int:
        return self.cfg.vocab

    def model_fields(self) -> dict[str, object]:
        return dict(kind="encoder", vocab_size=self.input_vocab, n_outputs=self.n_outputs, head="token")

    def targets(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        x = random_symbols(size, n or self.n, self.cfg.vocab, generator)  # (B, n)
        y, mask = self.targets(x)
        return Batch(x, y, mask)

    def sources(self, n: int) -> torch.Tensor | None:
        """The input position each output i copies at size n; None where an output reads every position."""
        return torch.arange(n)

    def seen_targets(self, batch: Batch, n_train: int) -> torch.Tensor:
        """Output i is answerable from training when training had an output i reading the same position:
        i < ``n_train`` and the source of i at this size equals its source at ``n_train`` (offset always;
        rotate past its wrap-around; reverse never, its source moves with n)."""
        n = batch.mask.shape[1]
        src = self.sources(n)
        if src is None:  # reads every position: only at the size training showed
            return batch.mask & (n == n_train)
        m = min(n, n_train)
        same = torch.zeros(n, dtype=torch.bool)
        same[:m] = src[:m] == self.sources(n_train)[:m]
        return batch.mask & same[None, :]


@register
class Reverse(TokenEncoderTask):
    name = "reverse"
    order = "output i is input n−1−i: set by absolute position alone"
    claims = ("C4", "C6", "C7", "C12", "C17")
    description = "encoder: output the input reversed"

    def targets(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.flip(1), torch.ones_like(x, dtype=torch.bool)

    def sources(self, n: int) -> torch.Tensor:
        return n - 1 - torch.arange(n)


@register
class Rotate(TokenEncoderTask):
    name = "rotate"
    order = "output i is input i−k, wrapping: a fixed relative shift"
    claims = ("C4", "C6", "C7", "C12", "C17")
    description = "encoder: output the input rotated right by k (wrapping around)"

    def validate(self) -> None:
        if not 0 < self.cfg.k < self.cfg.length:
            raise PelabError(f"task.k: rotate needs 0 < k < length (got k={self.cfg.k}, length={self.cfg.length})")

    def targets(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.roll(self.cfg.k, dims=1), torch.ones_like(x, dtype=torch.bool)

    def sources(self, n: int) -> torch.Tensor:
        return (torch.arange(n) - self.cfg.k) % n


@register
class Offset(TokenEncoderTask):
    name = "offset"
    order = "output i is the token k to its left: relative position"
    claims = ("C4", "C6", "C7", "C12", "C17")
    description = "encoder: at each position output the token k to the left (relative offset)"

    def validate(self) -> None:
        if not 0 < self.cfg.k < self.cfg.length:
            raise PelabError(f"task.k: offset needs 0 < k < length (got k={self.cfg.k}, length={self.cfg.length})")

    def targets(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.cfg.k
        y = torch.zeros_like(x)
        y[:, k:] = x[:, :-k]
        mask = torch.zeros_like(x, dtype=torch.bool)
        mask[:, k:] = True
        return y, mask

    def sources(self, n: int) -> torch.Tensor:
        return torch.arange(n) - self.cfg.k  # negative where unscored


@register
class Sort(TokenEncoderTask):
    name = "sort"
    order = "where each rank goes: output i is the i-th smallest"
    claims = ("C2", "C3", "C6", "C7", "C10", "C12", "C17")
    description = "encoder: output i is the i-th smallest input symbol"

    def targets(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.sort(dim=1).values, torch.ones_like(x, dtype=torch.bool)

    def sources(self, n: int) -> None:
        return None  # the i-th smallest depends on every symbol


@register
class Lookup(TokenEncoderTask):
    name = "lookup"
    order = "an absolute index: each query names the position to read"
    claims = ("C3", "C6", "C7", "C12", "C17")
    description = "encoder: n symbols, then n index queries; answer each with the symbol at that index"

    @property
    def input_vocab(self) -> int:
        return self.cfg.vocab + self.max_n  # symbols, then one token per index

    def seq_len(self, n: int) -> int:
        return 2 * n

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        n = n or self.n
        x = random_symbols(size, n, self.cfg.vocab, generator)  # (B, n)
        j = torch.randint(0, n, (size, n), generator=generator)  # (B, n) queried indices
        inputs = torch.cat([x, self.cfg.vocab + j], dim=1)  # (B, 2n)
        y = torch.cat([torch.zeros_like(x), x.gather(1, j)], dim=1)
        mask = torch.zeros_like(inputs, dtype=torch.bool)
        mask[:, n:] = True
        return Batch(inputs, y, mask)

    def seen_targets(self, batch: Batch, n_train: int) -> torch.Tensor:
        """A query reads the symbol at the index it names, through an index token: one training showed only
        for indices below ``n_train``. Where the query itself sits does not matter (attention is bidirectional
        and the answer is the same wherever it is asked), so half the queries at 2n are answerable from
        training alone, not none."""
        n = batch.mask.shape[1] // 2
        index = batch.inputs - self.cfg.vocab  # the queried index at query positions
        queries = torch.arange(2 * n)[None, :] >= n
        return batch.mask & queries & (index < n_train)


class DecoderTask(Task):
    kind = "decoder"

    def model_fields(self) -> dict[str, object]:
        return dict(kind="decoder", vocab_size=self.vocab_total, n_outputs=self.vocab_total, head="token")

    @property
    def vocab_total(self) -> int:
        raise NotImplementedError


@register
class Copy(DecoderTask):
    name = "copy"
    order = "the copy follows the input's order, from a causal decoder"
    claims = ("C8",)
    description = "decoder: x SEP, then reproduce x; scored on the copy"

    @property
    def vocab_total(self) -> int:
        return self.cfg.vocab + 1  # symbols + SEP

    def seq_len(self, n: int) -> int:
        return 2 * n

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        n = n or self.n
        x = random_symbols(size, n, self.cfg.vocab, generator)
        sep = torch.full((size, 1), self.cfg.vocab)
        seq = torch.cat([x, sep, x], dim=1)  # (B, 2n+1)
        mask = torch.zeros(size, 2 * n, dtype=torch.bool)
        mask[:, n:] = True  # from SEP on, the next token is a copied one
        return Batch(seq[:, :-1], seq[:, 1:], mask)


@register
class Recall(DecoderTask):
    name = "recall"
    order = "which value followed which key"
    claims = ("C17",)
    description = "decoder: key-value pairs, then the keys again in a new order; recall each value"

    def validate(self) -> None:
        if self.max_n > self.cfg.vocab:
            raise PelabError(
                f"task.length: recall needs distinct keys for every size evaluated: "
                f"{self.max_n} pairs > vocab={self.cfg.vocab}; raise task.vocab or lower task.length"
            )

    @property
    def vocab_total(self) -> int:
        return 2 * self.cfg.vocab  # keys, then values

    def seq_len(self, n: int) -> int:
        return 4 * n - 1

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        n = n or self.n
        V = self.cfg.vocab
        keys = distinct_symbols(size, n, V, generator)  # (B, n)
        values = V + random_symbols(size, n, V, generator)  # (B, n)
        order = torch.rand(size, n, generator=generator).argsort(dim=1)  # (B, n)
        pairs = torch.stack([keys, values], dim=2).reshape(size, 2 * n)
        queries = torch.stack([keys.gather(1, order), values.gather(1, order)], dim=2).reshape(size, 2 * n)
        seq = torch.cat([pairs, queries], dim=1)  # (B, 4n)
        mask = torch.zeros(size, 4 * n - 1, dtype=torch.bool)
        mask[:, 2 * n :: 2] = True  # input is a query key, target its value
        return Batch(seq[:, :-1], seq[:, 1:], mask)
