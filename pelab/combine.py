"""Ways to combine token embeddings with position (and segment) vectors.

A combiner decides the widths: how wide the token embedding is (d_token), how
wide each side signal must be, and how wide the residual stream becomes
(d_model). The model is sized from ``Combiner.widths`` and never by hand, so
``concat_split`` really keeps d and ``concat_wide`` really grows it.

Side signals are named: ``position`` (the scheme's input table) and ``segment``
(token-type embeddings). Every combiner treats all sides alike, except ``none``,
which by definition drops the position signal and adds any segment.

Dimension letters: B batch, T sequence, D widths.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from pelab.errors import PelabError, unknown


@dataclass(frozen=True)
class Widths:
    """The widths a combiner implies for a base width d."""

    token: int
    sides: Mapping[str, int]
    model: int


class Combiner(nn.Module):
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: Concat-style combiners give each side its own requested width; add-style ones the full d.
    concatenates: ClassVar[bool] = False
    #: Whether the position table is used at all.
    uses_position: ClassVar[bool] = True

    def __init__(self, widths: Widths) -> None:
        super().__init__()
        self.widths = widths

    @classmethod
    def compute_widths(cls, d: int, requested: Mapping[str, int]) -> Widths:
        """``requested``: the width each present side asks for when concatenated (d_position, d_segment)."""
        sides = {name: (w if cls.concatenates else d) for name, w in requested.items()}
        return Widths(token=d, sides=sides, model=d)

    def token_init_std(self) -> float:
        """Token embeddings start at unit scale, like sinusoidal and learned positions."""
        return 1.0

    def forward(self, x: Tensor, sides: Mapping[str, Tensor]) -> Tensor:
        raise NotImplementedError

    def flops_per_token(self) -> int:
        return 0


COMBINERS: dict[str, type[Combiner]] = {}


def register(cls: type[Combiner]) -> type[Combiner]:
    COMBINERS[cls.name] = cls
    return cls


def combiner_class(name: str, field: str = "combine") -> type[Combiner]:
    try:
        return COMBINERS[name]
    except KeyError:
        raise unknown(field, name, COMBINERS) from None


@register
class Add(Combiner):
    name = "add"
    description = "x + p (+ s): the Transformer / BERT default, width d"

    def forward(self, x: Tensor, sides: Mapping[str, Tensor]) -> Tensor:
        return x + sum(sides.values())


@register
class ScaledAdd(Combiner):
    name = "scaled_add"
    description = "sqrt(d)·x + p (+ s): the original paper's embedding scaling, width d"

    def token_init_std(self) -> float:
        # The paper's embeddings start at N(0, 1/d), so sqrt(d)·x starts at unit scale like p.
        return 1.0 / math.sqrt(self.widths.token)

    def forward(self, x: Tensor, sides: Mapping[str, Tensor]) -> Tensor:
        return math.sqrt(self.widths.token) * x + sum(sides.values())


@register
class ConcatSplit(Combiner):
    name = "concat_split"
    description = "[x ; p (; s)] with d_token = d - d_position (- d_segment): same model width d"
    concatenates = True

    @classmethod
    def compute_widths(cls, d: int, requested: Mapping[str, int]) -> Widths:
        token = d - sum(requested.values())
        if token < 1:
            parts = " + ".join(f"d_{k}={v}" for k, v in requested.items())
            raise PelabError(f"d_position: concat_split needs {parts} < d={d} to leave room for the token")
        return Widths(token=token, sides=dict(requested), model=d)

    def forward(self, x: Tensor, sides: Mapping[str, Tensor]) -> Tensor:
        return torch.cat([x, *sides.values()], dim=-1)


@register
class ConcatWide(Combiner):
    name = "concat_wide"
    description = "[x ; p (; s)] with d_token = d: width grows to d + d_position, every layer bigger"
    concatenates = True

    @classmethod
    def compute_widths(cls, d: int, requested: Mapping[str, int]) -> Widths:
        return Widths(token=d, sides=dict(requested), model=d + sum(requested.values()))

    def forward(self, x: Tensor, sides: Mapping[str, Tensor]) -> Tensor:
        return torch.cat([x, *sides.values()], dim=-1)


@register
class ConcatProject(Combiner):
    name = "concat_project"
    description = "W[x ; p (; s)]: concatenate, then a learned projection back to width d"
    concatenates = True

    def __init__(self, widths: Widths) -> None:
        super().__init__(widths)
        self.proj = nn.Linear(widths.token + sum(widths.sides.values()), widths.model, bias=False)

    def forward(self, x: Tensor, sides: Mapping[str, Tensor]) -> Tensor:
        return self.proj(torch.cat([x, *sides.values()], dim=-1))

    def flops_per_token(self) -> int:
        return 2 * self.proj.in_features * self.proj.out_features


@register
class Gated(Combiner):
    name = "gated"
    description = "x + g ⊙ p (+ g_s ⊙ s), g learned per dimension (starts at 1): a soft split"

    def __init__(self, widths: Widths) -> None:
        super().__init__(widths)
        self.gates = nn.ParameterDict({k: nn.Parameter(torch.ones(w)) for k, w in widths.sides.items()})

    def forward(self, x: Tensor, sides: Mapping[str, Tensor]) -> Tensor:
        return x + sum(self.gates[k] * v for k, v in sides.items())


@register
class NoCombine(Combiner):
    name = "none"
    description = "x alone: no position at the input (NoPE, or position only inside attention); segments added"
    uses_position = False

    def forward(self, x: Tensor, sides: Mapping[str, Tensor]) -> Tensor:
        return x + sum(sides.values())
