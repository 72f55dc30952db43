"""2-D sin-cos positions for a grid of image patches (ViT/MAE; He et al. 2022).

As MAE's ``get_2d_sincos_pos_embed``: half the channels encode the column, half
the row, each half a 1-D encoding [sin(x w_i), cos(x w_i)] with
w_i = 10000^(-i / (D/4)), i < D/4. Flat position t is patch (t // W, t % W) of an
H x W grid, row-major, so a sequence of patches needs no other bookkeeping.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pelab.errors import PelabError
from pelab.positions import register
from pelab.positions.base import PositionScheme, SchemeContext


def sincos_1d(coord: Tensor, width: int) -> Tensor:
    omega = 1.0 / 10000 ** (torch.arange(width // 2, dtype=torch.float64) / (width / 2.0))
    angles = coord.to(torch.float64)[:, None] * omega[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


def sincos_2d_table(positions: Tensor, width: int, grid: tuple[int, int]) -> Tensor:
    """(T,) flat patch indices -> (T, width) float64 table (MAE's layout: column half, then row half)."""
    if width % 4:
        raise PelabError(f"d_position: sincos2d needs a width divisible by 4 (got {width})")
    rows, cols = positions // grid[1], positions % grid[1]
    return torch.cat([sincos_1d(cols, width // 2), sincos_1d(rows, width // 2)], dim=1)


@register
class SinCos2D(PositionScheme):
    name = "sincos2d"
    description = "fixed 2-D sin-cos table over a patch grid (ViT/MAE); needs the task's grid"
    has_table = True
    hooks = ("input",)

    def __init__(self, ctx: SchemeContext, **_: object) -> None:
        super().__init__(ctx)
        if ctx.grid is None:
            raise PelabError("grid: position=sincos2d needs a patch grid (use an image task, or --grid HxW)")
        if ctx.width % 4:
            # Name the setting the user chose: a full-width table (add-style combiners) is d wide.
            field = "d" if ctx.width == ctx.reference_width else "d_position"
            raise PelabError(f"{field}: sincos2d needs a width divisible by 4 (got {ctx.width})")
        # Empty, but it follows .to() / .double(), so the table comes out in the model's dtype
        # (the default dtype would round a float64 model's table to float32).
        self.register_buffer("_dtype", torch.empty(0), persistent=False)

    def check_length(self, length: int) -> None:
        rows, cols = self.ctx.grid or (0, 0)
        if length > rows * cols:
            raise PelabError(f"length: {length} positions do not fit the {rows}x{cols} patch grid of sincos2d")

    def table(self, positions: Tensor) -> Tensor:
        return sincos_2d_table(positions.cpu(), self.ctx.width, self.ctx.grid).to(positions.device, self._dtype.dtype)
