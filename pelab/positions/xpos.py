"""xPos (Sun et al. 2023, "A Length-Extrapolatable Transformer", ACL): rotary with an exponential decay.

Queries and keys turn as in rotary (channel pairs (j, j + E/2) by angle n·θ_j, θ_j = base^(-2j/E)), and each
pair is also scaled: the query at position n by ζ_j^(n/γ), the key by ζ_j^(-n/γ), with
ζ_j = (2j/E + 0.4) / 1.4 in (0, 1) and γ = ``xpos_scale_base`` (512). A query at m and a key at n then meet as

    q_m·k_n = Σ_j ζ_j^((m - n)/γ) · (rotary's term of pair j),

a function of m - n alone, whose slow pairs (ζ_j near 1) keep long-range terms and fast pairs (ζ_j near 0.3)
fade with distance: the decay is what the paper credits for extrapolation. As in x-transformers' and torchscale's
code, the exponent is centred on the middle position of the call (n - ⌊(max n + 1)/2⌋), which the product cancels
and which keeps ζ^(±n/γ) from overflowing on long inputs. Everything else (E, base, the pairing) is pelab's
rotary, so the two differ by the decay alone. Written as a plugin would be: only the public interface
(``pelab.positions``, ``pelab.frozen``, ``pelab.errors``, rotary's ``rotate_half``).
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import Tensor

from pelab.errors import PelabError
from pelab.frozen import Frozen
from pelab.positions import register
from pelab.positions.base import BASE, PositionScheme, SchemeContext
from pelab.positions.rotary import rotate_half

#: The paper's γ: how many positions it takes the fastest-decaying pair to fall by a factor ζ_0.
SCALE_BASE = 512.0


def xpos_scale(head_dim: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """ζ_j = (2j/E + 0.4) / 1.4 for the E/2 channel pairs of a head."""
    return (torch.arange(0, head_dim, 2, dtype=dtype) + 0.4 * head_dim) / (1.4 * head_dim)


@register
class XPos(PositionScheme):
    name = "xpos"
    description = "rotary with a per-pair exponential decay in the offset (xPos; Sun et al. 2023)"
    hooks = ("attention: rotate q, k",)

    class Options(Frozen):
        base: float = BASE
        xpos_scale_base: float | None = Field(
            None, gt=0, description="xpos: the decay's length scale γ (default 512, the paper's)"
        )

    @classmethod
    def check(cls, ctx: SchemeContext, opts: Frozen) -> None:
        if ctx.head_dim < 2 or ctx.head_dim % 2:
            raise PelabError(f"n_heads: xpos turns channel pairs; a head of {ctx.head_dim} channels has none to spare")

    def __init__(self, ctx: SchemeContext, **options: object) -> None:
        super().__init__(ctx, **options)
        E = ctx.head_dim
        self.scale_base = self.opts.xpos_scale_base or SCALE_BASE
        inv = self.opts.base ** (-torch.arange(0, E, 2, dtype=torch.float64) / E)
        self.register_buffer("inv_freq", inv.to(torch.get_default_dtype()), persistent=False)
        self.register_buffer("zeta", xpos_scale(E).to(torch.get_default_dtype()), persistent=False)

    def rotate(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        pos = positions.to(self.inv_freq.dtype)
        angles = pos[:, None] * self.inv_freq[None, :]  # (T, E/2)
        angles = torch.cat([angles, angles], dim=-1)  # (T, E): pairs (j, j + E/2)
        centre = torch.div(positions.max() + 1, 2, rounding_mode="floor") if positions.numel() else 0  # no sync
        power = (pos - centre) / self.scale_base  # (T,)
        scale = self.zeta[None, :] ** power[:, None]  # (T, E/2)
        scale = torch.cat([scale, scale], dim=-1)  # (T, E)
        cos, sin = angles.cos().to(q.dtype), angles.sin().to(q.dtype)
        up, down = scale.to(q.dtype), (1.0 / scale).to(q.dtype)
        return (q * cos + rotate_half(q) * sin) * up, (k * cos + rotate_half(k) * sin) * down
