"""Untied positional attention in the style of TUPE (Ke et al. 2021, "Rethinking
positional encoding in language pre-training").

Nothing is added at the input. Position enters only as a position-position term
(p_i U_q)(p_j U_k)^T / sqrt(2E) on the logits, from a learned table p and its own
projections, computed once and shared by every layer as in TUPE. The cross terms
token-position and position-token of additive schemes are thereby dropped, which
is what claim C4 needs to compare against.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from pelab.errors import PelabError
from pelab.positions import register
from pelab.positions.base import PositionScheme, SchemeContext


@register
class Untied(PositionScheme):
    name = "untied"
    description = "TUPE-style: position-position logit term from its own table and projections, no cross terms"
    hooks = ("attention: bias",)
    extrapolates = False  # one row per position: past max_len, a clean error

    def __init__(self, ctx: SchemeContext) -> None:
        super().__init__(ctx)
        d = ctx.model_width
        self.weight = nn.Parameter(torch.randn(ctx.max_len, d))
        self.proj_q = nn.Linear(d, d, bias=False)
        self.proj_k = nn.Linear(d, d, bias=False)
        self.norm = nn.LayerNorm(d)

    def check_length(self, length: int) -> None:
        if length > self.ctx.max_len:
            raise PelabError(f"length: {length} exceeds the untied position table (max_len={self.ctx.max_len})")

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        if q_positions.device.type == "cpu":  # the model checked already; on CUDA this would sync
            self.check_length(int(max(q_positions.max(), k_positions.max())) + 1)
        h, e = self.ctx.n_heads, self.ctx.head_dim
        pq = self.proj_q(self.norm(self.weight[q_positions])).view(-1, h, e).transpose(0, 1)  # (H, Tq, E)
        pk = self.proj_k(self.norm(self.weight[k_positions])).view(-1, h, e).transpose(0, 1)  # (H, Tk, E)
        return pq @ pk.transpose(1, 2) / math.sqrt(2 * e)  # (H, Tq, Tk)

    def flops_per_token(self, seq_len: int) -> int:
        d = self.ctx.model_width
        return 2 * 2 * d * d + 2 * seq_len * d  # two projections per position + the T x T product
