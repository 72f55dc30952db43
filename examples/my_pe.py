"""An example plugin: the position-position term of an added sinusoid, kept alone, as an attention bias.

When positions are *added* (x + p), one of the four terms of every attention logit is p_m·p_n (claim C4 of
pelab's SCIENCE.md). For the sinusoid at frequencies ω_k,

    p_m·p_n = Σ_k [sin(m ω_k) sin(n ω_k) + cos(m ω_k) cos(n ω_k)] = Σ_k cos((m - n) ω_k),

a function of the offset alone. This scheme keeps that term and nothing else: head h adds

    bias_h(m, n) = λ_h · (Σ_k cos((m - n) ω_k) - K),   ω_k = 10000^(-2k/W),  k < K = W/2,

to its logits, zero at distance 0 and negative elsewhere, with one learned scale λ_h ≥ 0 per head (a softplus,
starting at 1/K). It is the idea of Sandwich (Chi et al. 2023, "Dissecting Transformer Length Extrapolation via
the Lens of Receptive Field Analysis"), which keeps the sinusoid's inner product as a relative bias, here with a
learned per-head scale: the question "add or concatenate?" turned around (keep only what adding contributes to
attention, and drop the token-position cross terms). W is the scheme's own option ``sandwich_width``.

Check it with `pelab check examples/my_pe.py`; run it with `pelab study examples/my_study.toml --plugin
examples/my_pe.py` (docs/plugins.md).
"""

from __future__ import annotations

import math

import torch
from pydantic import Field
from torch import Tensor, nn

from pelab.errors import PelabError
from pelab.frozen import Frozen
from pelab.positions import PositionScheme, SchemeContext, register, relative_offsets

__version__ = "0.1"


@register
class Sandwich(PositionScheme):
    name = "sandwich"
    description = "the added sinusoid's position-position term p_m·p_n alone, as a learned-scale logit bias"
    hooks = ("attention: bias",)
    extrapolates = True  # a function of the offset: defined at any length

    class Options(Frozen):
        sandwich_width: int = Field(32, ge=2, le=4096, description="sandwich: width W of the sinusoid (even)")

    @classmethod
    def check(cls, ctx: SchemeContext, opts: Frozen) -> None:
        width = opts.sandwich_width  # type: ignore[attr-defined]
        if width % 2:
            raise PelabError(f"position.sandwich_width: must be even (got {width})")

    def __init__(self, ctx: SchemeContext, **options: object) -> None:
        super().__init__(ctx, **options)
        K = self.opts.sandwich_width // 2
        omega = 10000.0 ** (-2.0 * torch.arange(K, dtype=torch.float64) / self.opts.sandwich_width)
        self.register_buffer("omega", omega.to(torch.get_default_dtype()), persistent=False)
        start = math.log(math.expm1(1.0 / K))  # softplus(start) = 1/K: the bias starts about one logit deep
        self.raw_scale = nn.Parameter(torch.full((ctx.n_heads,), start))

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        offset = relative_offsets(q_positions, k_positions).to(self.omega.dtype)  # (Tq, Tk)
        inner = torch.cos(offset[..., None] * self.omega).sum(-1)  # (Tq, Tk): p_m·p_n
        scale = nn.functional.softplus(self.raw_scale)  # (H,)
        return scale[:, None, None] * (inner - self.omega.numel())[None]  # (H, Tq, Tk)
