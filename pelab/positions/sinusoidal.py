"""Fixed sinusoidal positions (Vaswani et al., 2017, "Attention is all you need", §3.5).

Two layouts of the same idea:

* ``paper``: PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)),
  sines and cosines interleaved, frequencies falling from 1 to 1/base.
* ``tensor2tensor``: exactly ``get_timing_signal_1d`` of tensor2tensor (and the
  released Transformer code): all sines, then all cosines, with
  inv_timescale_i = 1/min_timescale * exp(-i * log(max/min) / (K - 1)), K = d // 2,
  and a zero channel padded when d is odd.

When a concat combiner gives positions only ``width`` < d channels, ``keep`` says
which frequencies of the d-wide encoding survive: ``fastest`` (default: they carry
the most position signal over short sequences), ``slowest``, or ``spread`` (a
native ``width``-wide encoding whose frequencies span the whole range).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field
from torch import Tensor

from pelab.errors import PelabError
from pelab.frozen import Frozen
from pelab.positions import register
from pelab.positions.base import BASE, PositionScheme, SchemeContext

LAYOUTS = ("paper", "tensor2tensor")
KEEPS = ("fastest", "slowest", "spread")


def inv_frequencies(layout: str, d: int, base: float, min_timescale: float, max_timescale: float) -> Tensor:
    """Angular frequencies (float64) of a d-wide encoding, fastest first."""
    if layout == "paper":
        i = torch.arange(0, (d + 1) // 2, dtype=torch.float64)
        return base ** (-2.0 * i / d)
    k = d // 2
    increment = math.log(max_timescale / min_timescale) / max(k - 1, 1)
    return torch.exp(torch.arange(k, dtype=torch.float64) * -increment) / min_timescale


def lay_out(layout: str, positions: Tensor, inv_freq: Tensor, width: int) -> Tensor:
    """Sin/cos of positions x frequencies arranged as ``layout`` into ``width`` channels."""
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # (T, K)
    if layout == "paper":
        out = torch.empty(positions.shape[0], 2 * inv_freq.shape[0], dtype=torch.float64)
        out[:, 0::2] = torch.sin(angles)
        out[:, 1::2] = torch.cos(angles)
        return out[:, :width]
    out = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if out.shape[1] < width:  # odd width: tensor2tensor pads one zero channel
        out = torch.nn.functional.pad(out, (0, width - out.shape[1]))
    return out


def sinusoid_table(
    positions: Tensor,
    width: int,
    *,
    layout: str = "paper",
    reference_width: int | None = None,
    keep: str = "fastest",
    base: float = 10000.0,
    min_timescale: float = 1.0,
    max_timescale: float = 1.0e4,
) -> Tensor:
    """(T,) positions -> (T, width) float64 table; a pure function the analyses reuse."""
    if layout not in LAYOUTS:
        raise PelabError(f"layout: unknown value {layout!r}; allowed: {', '.join(LAYOUTS)}")
    if keep not in KEEPS:
        raise PelabError(f"keep: unknown value {keep!r}; allowed: {', '.join(KEEPS)}")
    if width < 2:
        raise PelabError(f"d_position: sinusoidal needs a width of at least 2 (got {width})")
    d = reference_width or width
    if keep == "spread" or d == width:
        d = width
    n = (width + 1) // 2 if layout == "paper" else width // 2
    freqs = inv_frequencies(layout, d, base, min_timescale, max_timescale)
    freqs = freqs[:n] if keep == "fastest" else freqs[len(freqs) - n :]
    return lay_out(layout, positions.cpu(), freqs, width)


@register
class Sinusoidal(PositionScheme):
    name = "sinusoidal"
    description = "fixed sin/cos table added at the input (Vaswani et al. 2017); layouts paper | tensor2tensor"
    has_table = True
    hooks = ("input",)

    class Options(Frozen):
        layout: Literal["paper", "tensor2tensor"] = Field("paper", description="sinusoidal channel layout")
        keep: Literal["fastest", "slowest", "spread"] = Field(
            "fastest", description="sinusoidal frequencies kept when positions get fewer than d channels"
        )
        base: float = BASE
        min_timescale: float = Field(1.0, gt=0, description="tensor2tensor layout: shortest timescale")
        max_timescale: float = Field(1.0e4, gt=0, description="tensor2tensor layout: longest timescale")

    @classmethod
    def check(cls, ctx: SchemeContext, opts: Frozen) -> None:
        sinusoid_table(torch.arange(1), ctx.width, reference_width=ctx.reference_width, **opts.model_dump())

    def __init__(self, ctx: SchemeContext, **options: object) -> None:
        super().__init__(ctx, **options)
        # The table is a pure function of the options. Keep it exactly (float64, CPU) for the
        # longest length used so far, and a copy in the model's device and dtype as a
        # non-persistent buffer (checkpoints stay parameter-only). The copy is remade from
        # the exact table whenever the model changes dtype, so .double() gets full precision.
        self.table_options = self.opts.model_dump()
        self._exact = sinusoid_table(
            torch.arange(1), ctx.width, reference_width=ctx.reference_width, **self.table_options
        )
        self.register_buffer("_cache", torch.empty(0, ctx.width), persistent=False)
        self._cache_dtype = self._cache.dtype

    def table(self, positions: Tensor) -> Tensor:
        need = int(positions.max()) + 1 if positions.numel() else 0
        if self._exact.shape[0] < need:
            self._exact = sinusoid_table(
                torch.arange(max(need, 2 * self._exact.shape[0])),
                self.ctx.width,
                reference_width=self.ctx.reference_width,
                **self.table_options,
            )
        if self._cache.shape[0] != self._exact.shape[0] or self._cache.dtype != self._cache_dtype:
            self._cache = self._exact.to(self._cache.device, self._cache.dtype)
            self._cache_dtype = self._cache.dtype
        return self._cache[positions]
