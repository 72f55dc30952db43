"""A scheme's input table on its own, outside any model: for `pelab show` and the analyses."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from pelab.config import ModelConfig, PositionConfig, build
from pelab.errors import PelabError
from pelab.model import Transformer
from pelab.positions import scheme_class


def square_grid(length: int) -> tuple[int, int]:
    side = math.isqrt(length)
    if side * side != length:
        raise PelabError(f"length: sincos2d needs a grid; {length} is not a square, so pass --grid ROWSxCOLS")
    return side, side


def scheme_table(
    position: PositionConfig,
    d: int,
    length: int,
    grid: tuple[int, int] | None = None,
    seed: int = 0,
    max_len: int = 512,
) -> Tensor | None:
    """The (length, d) table a model with ``add`` would see, or None for schemes without one.

    Built through the model itself, so `show` draws exactly what training uses
    (a learned table is shown at its seeded initialisation). The model is then
    converted to float64, so a fixed table is its formula to full precision (what
    `show --csv` promises with 17 digits) rather than its float32 rounding; a learned
    table's float32 initial values are unchanged by the conversion.
    """
    if position.scheme == "sincos2d" and grid is None:
        grid = square_grid(length)
    has_table = scheme_class(position.scheme).has_table
    cfg = build(
        ModelConfig,
        d=d,
        n_heads=1,
        n_layers=1,
        max_len=max_len,
        position=position,
        combine="add" if has_table else "none",
        grid=grid,
    )
    torch.manual_seed(seed)
    model = Transformer(cfg).double().eval()  # eval: a stochastic table (randomized) shows its evaluation draw
    if not has_table:
        return None
    positions = torch.arange(length)
    model.scheme.check_length(length)
    with torch.no_grad():
        return model.scheme.table(positions).detach().to(torch.float64).cpu()
