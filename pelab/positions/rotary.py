"""Rotary position embedding (RoPE; Su et al. 2021, "RoFormer").

Position acts as a rotation of query and key: channel pairs (j, j + R/2) of the
first R = fraction x E channels of each head turn by angle pos * base^(-2j/R)
(the GPT-NeoX "rotate half" pairing). Because rotations compose,
q(m)·k(n) depends on m - n only; this is the "multiply instead of add" idea.
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import Tensor

from pelab.errors import PelabError
from pelab.frozen import Frozen
from pelab.positions import register
from pelab.positions.base import BASE, PositionScheme, SchemeContext


def rotate_half(x: Tensor) -> Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


@register
class Rotary(PositionScheme):
    name = "rotary"
    description = "rotates q and k by position (RoPE); scores depend on relative offset only"
    hooks = ("attention: rotate q, k",)

    class Options(Frozen):
        rotary_fraction: float = Field(1.0, gt=0, le=1, description="share of each head's channels that rotary turns")
        base: float = BASE

    @staticmethod
    def rotated_channels(ctx: SchemeContext, rotary_fraction: float) -> int:
        return 2 * int(rotary_fraction * ctx.head_dim / 2)

    @classmethod
    def check(cls, ctx: SchemeContext, opts: Frozen) -> None:
        fraction = opts.rotary_fraction  # type: ignore[attr-defined]
        if cls.rotated_channels(ctx, fraction) < 2:
            raise PelabError(
                f"rotary_fraction: {fraction} of head width {ctx.head_dim} leaves no channel pair to rotate"
            )

    def __init__(self, ctx: SchemeContext, **options: object) -> None:
        super().__init__(ctx, **options)
        base = self.opts.base
        self.rot_dim = self.rotated_channels(ctx, self.opts.rotary_fraction)
        inv = base ** (-torch.arange(0, self.rot_dim, 2, dtype=torch.float64) / self.rot_dim)
        self.register_buffer("inv_freq", inv.to(torch.get_default_dtype()), persistent=False)

    def rotate(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        angles = positions.to(self.inv_freq.dtype)[:, None] * self.inv_freq[None, :]  # (T, R/2)
        angles = torch.cat([angles, angles], dim=-1)  # (T, R)
        cos, sin = angles.cos().to(q.dtype), angles.sin().to(q.dtype)

        def turn(x: Tensor) -> Tensor:
            r, rest = x[..., : self.rot_dim], x[..., self.rot_dim :]
            return torch.cat([r * cos + rotate_half(r) * sin, rest], dim=-1)

        return turn(q), turn(k)
