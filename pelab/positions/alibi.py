"""ALiBi (Press et al. 2022, "Train short, test long"): a linear distance penalty.

Head h adds -m_h * |i - j| to its logits, with the geometric slopes of the paper
(2^(-8h/H) for H a power of two, interleaved otherwise). For an encoder we use the
symmetric |i - j|, the common bidirectional variant; under a causal mask it equals
the paper's i - j.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from pelab.positions import register
from pelab.positions.base import PositionScheme, SchemeContext, relative_offsets


def alibi_slopes(n_heads: int) -> Tensor:
    """The paper's slopes, including its recipe for head counts that are not powers of two."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return torch.tensor(power_of_two(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    extra = power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(power_of_two(closest) + extra)


@register
class ALiBi(PositionScheme):
    name = "alibi"
    description = "per-head linear distance penalty on attention logits (Press et al. 2022)"
    hooks = ("attention: bias",)

    def __init__(self, ctx: SchemeContext) -> None:
        super().__init__(ctx)
        self.register_buffer("slopes", alibi_slopes(ctx.n_heads).to(torch.get_default_dtype()), persistent=False)

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        distance = relative_offsets(q_positions, k_positions).abs().to(self.slopes.dtype)  # (Tq, Tk)
        return -self.slopes[:, None, None] * distance[None]  # (H, Tq, Tk)
