"""Causal algorithmic tasks for length generalisation, after Kazemnejad et al. 2023 ("The Impact of
Positional Encoding on Length Generalization in Transformers"): train at size n, test at 1.5n and 2n.

Decoder (causal, next-token targets, scored only on the answer):
    addition  a_0..a_{n-1} + b_0..b_{n-1} = s_0..s_n     digits least significant first
    dsort     x_1..x_n SEP sorted(x)                     ascending, with repeats
    dreverse  x_1..x_n SEP x_n..x_1

Every split draws from the same distribution; the generator tells them apart.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pelab.tasks import register
from pelab.tasks.base import Batch, random_symbols
from pelab.tasks.synthetic import DecoderTask


def add_digits(a: Tensor, b: Tensor) -> Tensor:
    """(B, n), (B, n) digits least significant first -> (B, n+1) digits of a + b, least significant first.
    The last digit is the final carry (0 or 1), so every answer has the same length."""
    out = torch.empty(a.shape[0], a.shape[1] + 1, dtype=torch.long)
    carry = torch.zeros(a.shape[0], dtype=torch.long)
    for i in range(a.shape[1]):
        total = a[:, i] + b[:, i] + carry
        out[:, i], carry = total % 10, total // 10
    out[:, -1] = carry
    return out


def answer_after_prompt(prompt: Tensor, answer: Tensor) -> Batch:
    """Next-token batch over ``prompt answer``: inputs drop the last token, targets the first, and the mask
    scores exactly the targets that are answer tokens (the first is predicted from the prompt's last)."""
    seq = torch.cat([prompt, answer], dim=1)  # (B, P + A)
    mask = torch.zeros(seq.shape[0], seq.shape[1] - 1, dtype=torch.bool)
    mask[:, prompt.shape[1] - 1 :] = True
    return Batch(seq[:, :-1], seq[:, 1:], mask)


@register
class Addition(DecoderTask):
    """Two n-digit numbers and their sum, every number written least significant digit first.

    Why that order: generating left to right, answer digit i then depends only on operand digits i (already
    in the prompt) and the carry out of digit i - 1 (just written), so each step is a local, causal
    computation whose inputs sit at fixed relative offsets. Written most significant digit first, the first
    answer digit would already depend on the carry chain through every lower digit. Reversed operands and
    answers are the usual format in length-generalisation studies of addition.

    Digits are uniform on 0..9 (so a number may have leading zeros); the answer always has n + 1 digits, the
    last being the final carry. The vocabulary is fixed (digits 0..9, PLUS = 10, EQUALS = 11): ``task.vocab``
    is ignored.
    """

    name = "addition"
    order = "digit significance: carries run from least to most significant"
    claims = ("C17",)
    description = "decoder: a + b = sum, n-digit operands, digits least significant first; scored on the sum"
    PLUS, EQUALS = 10, 11

    @property
    def vocab_total(self) -> int:
        return 12

    def seq_len(self, n: int) -> int:
        return 3 * n + 2  # n + 1 + n + 1 + (n + 1) tokens, less the last as input

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        n = n or self.n
        a = random_symbols(size, n, 10, generator)  # (B, n)
        b = random_symbols(size, n, 10, generator)  # (B, n)
        plus, equals = torch.full((size, 1), self.PLUS), torch.full((size, 1), self.EQUALS)
        return answer_after_prompt(torch.cat([a, plus, b, equals], dim=1), add_digits(a, b))


class AfterSeparator(DecoderTask):
    """``x SEP f(x)`` over ``task.vocab`` symbols plus SEP, scored on f(x), like copy."""

    @property
    def vocab_total(self) -> int:
        return self.cfg.vocab + 1  # symbols + SEP

    def seq_len(self, n: int) -> int:
        return 2 * n

    def answer(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        x = random_symbols(size, n or self.n, self.cfg.vocab, generator)  # (B, n)
        sep = torch.full((size, 1), self.cfg.vocab)
        return answer_after_prompt(torch.cat([x, sep], dim=1), self.answer(x))


@register
class DecoderSort(AfterSeparator):
    name = "dsort"
    order = "ranks written out in order after the separator"
    claims = ("C17",)
    description = "decoder: x SEP, then x sorted ascending (repeats kept); scored on the sorted part"

    def answer(self, x: Tensor) -> Tensor:
        return x.sort(dim=1).values


@register
class DecoderReverse(AfterSeparator):
    name = "dreverse"
    order = "output j pairs with input n−1−j"
    claims = ("C17",)
    description = "decoder: x SEP, then x reversed; scored on the reversal"

    def answer(self, x: Tensor) -> Tensor:
        return x.flip(1)
