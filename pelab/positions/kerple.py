"""KERPLE (Chi et al. 2022, "KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation",
NeurIPS): a learned conditionally positive definite kernel of the distance, as a bias on the attention logits.

Head h adds to the logit of query m and key n, with |m - n| the distance and r1, r2 > 0 learned per head,

    logarithmic (default):  -r1 · log(1 + r2 · |m - n|)
    power:                  -r1 · |m - n|^r2,  0 < r2 ≤ 2

(ALiBi is the power kernel with r2 = 1 and r1 fixed.) As the authors' code (chijames/KERPLE): r1 starts uniform
in (0, 2) and r2 in (0, 1) for the logarithmic kernel; for the power kernel the exponent starts uniform in
(0, 2) and the scale in (0, 1); both are kept at least 0.01 (the exponent at most 2). Their code clamps the stored
values in place at every forward pass; here the clamp is applied to the values used, with the gradient passed
straight through, which gives the same logits without a forward pass that writes its own parameters. The causal
form reads m - n ≥ 0 (the future is masked anyway); the encoder form the symmetric |m - n|, as pelab's ALiBi.
Written as a plugin would be: only the public interface (``pelab.positions``, ``pelab.frozen``).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import Tensor, nn

from pelab.frozen import Frozen
from pelab.positions import register
from pelab.positions.base import PositionScheme, SchemeContext, relative_offsets

#: The authors' lower bound on both parameters (and the power kernel's upper bound on its exponent).
EPS, MAX_POWER = 1e-2, 2.0


def clamped(x: Tensor, low: float, high: float | None = None) -> Tensor:
    """x clamped to [low, high] in value, with the gradient of x itself (straight through)."""
    return x + (x.clamp(low, high) - x).detach()


def kerple_bias(distance: Tensor, r1: Tensor, r2: Tensor, kernel: str) -> Tensor:
    """(T, T) distances, (H,) parameters -> (H, T, T) bias; the closed forms above."""
    d, a, b = distance[None], r1[:, None, None], r2[:, None, None]
    if kernel == "log":
        return -a * torch.log1p(b * d)
    return -a * d.pow(b)


@register
class Kerple(PositionScheme):
    name = "kerple"
    description = "learned log (or power) kernel of the distance on attention logits (KERPLE; Chi et al. 2022)"
    hooks = ("attention: bias",)

    class Options(Frozen):
        kerple_kernel: Literal["log", "power"] | None = Field(
            None, description="kerple: -r1·log(1 + r2·|m-n|) (log, the default) or -r1·|m-n|^r2 (power)"
        )

    def __init__(self, ctx: SchemeContext, **options: object) -> None:
        super().__init__(ctx, **options)
        self.kernel = self.opts.kerple_kernel or "log"
        scale_1, scale_2 = (2.0, 1.0) if self.kernel == "log" else (1.0, 2.0)
        self.r1 = nn.Parameter(torch.rand(ctx.n_heads) * scale_1)
        self.r2 = nn.Parameter(torch.rand(ctx.n_heads) * scale_2)

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        distance = relative_offsets(q_positions, k_positions).abs().to(self.r1.dtype)  # (Tq, Tk)
        r2 = clamped(self.r2, EPS, MAX_POWER if self.kernel == "power" else None)
        return kerple_bias(distance, clamped(self.r1, EPS), r2, self.kernel)  # (H, Tq, Tk)
