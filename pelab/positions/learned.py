"""Learned absolute positions (Gehring et al. 2017; BERT, GPT-2): a trainable table.

Initialised like the token embedding (N(0, 1)) so neither part dominates the sum at
the start; its size ``max_len`` bounds the length it can serve, and asking for more
is an error rather than a silent wrap-around.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pelab.errors import PelabError
from pelab.positions import register
from pelab.positions.base import PositionScheme, SchemeContext


@register
class Learned(PositionScheme):
    name = "learned"
    description = "trainable absolute position table (BERT/GPT-2); cannot go past max_len"
    has_table = True
    hooks = ("input",)
    extrapolates = False  # one row per position: past max_len, a clean error

    def __init__(self, ctx: SchemeContext) -> None:
        super().__init__(ctx)
        self.weight = nn.Parameter(torch.randn(ctx.max_len, ctx.width))

    def check_length(self, length: int) -> None:
        if length > self.ctx.max_len:
            raise PelabError(
                f"length: {length} exceeds the learned position table (max_len={self.ctx.max_len}); "
                "raise max_len or use a scheme that extrapolates"
            )

    def table(self, positions: Tensor) -> Tensor:
        if positions.device.type == "cpu":  # the model checked already; on CUDA this would sync
            self.check_length(int(positions.max()) + 1 if positions.numel() else 0)
        return self.weight[positions]
