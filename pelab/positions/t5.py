"""T5 relative position bias (Raffel et al. 2020), as in the released T5 code.

Offsets k - q fall into ``buckets`` buckets: exact for small distances, logarithmic
up to ``max_distance``, one bucket beyond. Bidirectional (half the buckets per
direction) for encoders, past-only for causal decoders. One learned scalar per
bucket and head, shared by all layers, as in T5.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field
from torch import Tensor, nn

from pelab.errors import PelabError
from pelab.frozen import MAX_COUNT, Frozen
from pelab.positions import register
from pelab.positions.base import PositionScheme, SchemeContext, relative_offsets


def relative_bucket(offset: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """T5's ``_relative_position_bucket`` for offset = key position - query position."""
    bucket = torch.zeros_like(offset)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (offset > 0).long() * num_buckets
        n = offset.abs()
    else:
        n = -torch.clamp(offset, max=0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = (
        max_exact
        + (
            torch.log(n.float().clamp(min=1) / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).long()
    )
    large = torch.clamp(large, max=num_buckets - 1)
    return bucket + torch.where(is_small, n, large)


@register
class T5Bias(PositionScheme):
    name = "t5"
    description = "learned bias per bucketed relative offset and head, shared by layers (T5)"
    hooks = ("attention: bias",)

    class Options(Frozen):
        t5_buckets: int = Field(32, ge=4, le=2**16, description="T5 relative-position buckets")
        t5_max_distance: int = Field(
            128, ge=2, le=MAX_COUNT, description="T5: offsets beyond this share the last bucket"
        )

    @classmethod
    def check(cls, ctx: SchemeContext, opts: Frozen) -> None:
        buckets, distance = opts.t5_buckets, opts.t5_max_distance  # type: ignore[attr-defined]
        if distance <= buckets // 4:
            raise PelabError(
                f"t5_buckets: need at least 4 buckets and max_distance > buckets/4 (got {buckets}, {distance})"
            )

    def __init__(self, ctx: SchemeContext, **options: object) -> None:
        super().__init__(ctx, **options)
        t5_buckets = self.opts.t5_buckets
        self.buckets, self.max_distance = t5_buckets, self.opts.t5_max_distance
        self.weight = nn.Parameter(torch.randn(t5_buckets, ctx.n_heads) * 0.02)

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        b = relative_bucket(
            relative_offsets(q_positions, k_positions), not self.ctx.causal, self.buckets, self.max_distance
        )
        return self.weight[b].permute(2, 0, 1)  # (H, Tq, Tk)
