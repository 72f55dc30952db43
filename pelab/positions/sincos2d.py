"""2-D sin-cos positions for a grid of image patches (ViT/MAE; He et al. 2022).

As MAE's ``get_2d_sincos_pos_embed``: half the channels encode the column, half
the row, each half a 1-D encoding [sin(x w_i), cos(x w_i)] with
w_i = 10000^(-i / (D/4)), i < D/4. Flat position t is patch (t // W, t % W) of an
H x W grid, row-major, so a sequence of patches needs no other bookkeeping.

``grid_combine`` says how the row and column encodings meet (claim C19):
``concat`` (the default, MAE's and DETR's layout above) or ``add``, each 1-D
encoding at the full width D: p(r, c) = sincos_1d(c, D) + sincos_1d(r, D). Addition
commutes, so under ``add`` cell (r, c) gets exactly the code of (c, r);
``transpose_collisions`` counts such cells for any table.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, field_validator
from torch import Tensor

from pelab.errors import PelabError
from pelab.frozen import Frozen
from pelab.positions import register
from pelab.positions.base import PositionScheme, SchemeContext

GridCombine = Literal["concat", "add"]


def sincos_1d(coord: Tensor, width: int) -> Tensor:
    omega = 1.0 / 10000 ** (torch.arange(width // 2, dtype=torch.float64) / (width / 2.0))
    angles = coord.to(torch.float64)[:, None] * omega[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


def sincos_2d_table(positions: Tensor, width: int, grid: tuple[int, int], combine: GridCombine = "concat") -> Tensor:
    """(T,) flat patch indices -> (T, width) float64 table.

    concat: MAE's layout, column half then row half; add: full-width column code plus full-width row code.
    """
    rows, cols = positions // grid[1], positions % grid[1]
    if combine == "add":
        if width % 2:
            raise PelabError(f"d_position: sincos2d with grid_combine=add needs an even width (got {width})")
        return sincos_1d(cols, width) + sincos_1d(rows, width)
    if width % 4:
        raise PelabError(f"d_position: sincos2d needs a width divisible by 4 (got {width})")
    return torch.cat([sincos_1d(cols, width // 2), sincos_1d(rows, width // 2)], dim=1)


def transpose_collisions(table: Tensor, grid: tuple[int, int], tol: float = 1e-9) -> int:
    """How many cells (r, c), r != c, have the same code as their transpose (c, r).

    ``table`` is (H*W, D), row-major over the grid; codes match when their largest absolute difference is
    below ``tol`` (in float64). Only cells whose transpose lies in the grid count (all off-diagonal ones
    on a square grid).
    """
    rows, cols = grid
    side = min(rows, cols)  # cells whose transpose is also on the grid
    r, c = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    r, c = r[r != c], c[r != c]
    t = table.to(torch.float64)
    gap = (t[r * cols + c] - t[c * cols + r]).abs().amax(dim=-1)  # (side*(side-1),)
    return int((gap < tol).sum())


@register
class SinCos2D(PositionScheme):
    name = "sincos2d"
    description = "fixed 2-D sin-cos table over a patch grid (ViT/MAE); needs the task's grid"
    has_table = True
    hooks = ("input",)
    extrapolates = False  # one code per grid cell: past the grid, a clean error

    class Options(Frozen):
        grid_combine: Literal["concat", "add"] | None = Field(
            None, description="sincos2d: row and column codes concatenated (concat, stored as None: MAE) or added"
        )

        @field_validator("grid_combine", mode="before")
        @classmethod
        def _concat_is_unset(cls, v: object) -> object:
            # concat is MAE's layout, what sincos2d did before the option existed: stored as unset, so the
            # same model gets the same run id whether a study names it or not.
            return None if v == "concat" else v

    @classmethod
    def check(cls, ctx: SchemeContext, opts: Frozen) -> None:
        combine = opts.grid_combine or "concat"  # type: ignore[attr-defined]
        if ctx.grid is None:
            raise PelabError("grid: position=sincos2d needs a patch grid (use an image task, or --grid HxW)")
        if ctx.width % (2 if combine == "add" else 4):
            # Name the setting the user chose: a full-width table (add-style combiners) is d wide.
            field = "d" if ctx.width == ctx.reference_width else "d_position"
            need = "grid_combine=add needs an even width" if combine == "add" else "needs a width divisible by 4"
            raise PelabError(f"{field}: sincos2d {need} (got {ctx.width})")

    def __init__(self, ctx: SchemeContext, **options: object) -> None:
        super().__init__(ctx, **options)
        self.combine: GridCombine = self.opts.grid_combine or "concat"
        # Empty, but it follows .to() / .double(), so the table comes out in the model's dtype
        # (the default dtype would round a float64 model's table to float32).
        self.register_buffer("_dtype", torch.empty(0), persistent=False)

    def check_length(self, length: int) -> None:
        rows, cols = self.ctx.grid or (0, 0)
        if length > rows * cols:
            raise PelabError(f"length: {length} positions do not fit the {rows}x{cols} patch grid of sincos2d")

    def table(self, positions: Tensor) -> Tensor:
        table = sincos_2d_table(positions.cpu(), self.ctx.width, self.ctx.grid, self.combine)
        return table.to(positions.device, self._dtype.dtype)
