"""Which cell is marked? A 2-D task whose answer tells row from column (claim C19).

cell2d   an s x s grid of patch vectors (s = task.length), read row-major as s*s
         patches of PATCH_DIM numbers: every background pixel is uniform in
         [0, 1/2), the one marked cell's pixels uniform in [1/2, 1], so the mark
         is brighter than anything else in every channel. The marked cell (r, c) is
         uniform over the grid; the label is its index r*s + c (s*s classes).

Background patches are interchangeable, so only the position code says where the
mark is. Why the cell index, not a bare "is r < c": it needs the mark found and
both coordinates read, which a scheme that tells every cell apart allows, and it
separates (r, c) from (c, r) whenever they differ, so the one thing an arm that
cannot tell a cell from its transpose loses is half of the off-diagonal cells
(``transpose_blind_accuracy``). An encoder with mean pooling is
permutation-equivariant apart from its position codes, so when (r, c) and (c, r)
share a code (sincos2d with grid_combine=add) it gives an input and its transpose
(equally likely) the same answer, and is right on at most one of them.

Every split draws from the same distribution; the generator tells them apart.
task.length is the side, not the number of cells: TaskConfig's shared default (16)
makes a 16 x 16 grid of 256 classes, so a study names a small side (4 learns in
seconds on a CPU).
"""

from __future__ import annotations

import torch

from pelab.errors import PelabError
from pelab.tasks import register
from pelab.tasks.base import Batch, Task

#: Numbers per patch.
PATCH_DIM = 4


def transpose_blind_accuracy(side: int) -> float:
    """The best accuracy on cell2d when (r, c) and (c, r) look alike: each of the s diagonal cells is
    answered right, and one of each off-diagonal pair, s(s-1)/2 of them, out of s*s equally likely
    cells: (s + s(s-1)/2) / s^2 = (s + 1) / (2s)."""
    return (side + 1) / (2 * side)


@register
class Cell2D(Task):
    name = "cell2d"
    order = "row against column: (r, c) and (c, r) are different answers"
    claims = ("C19",)
    description = "vision: the one bright patch of an s x s grid (s = length); which cell, r*s+c? (C19)"
    kind = "classify"
    extrapolates = False

    def validate(self) -> None:
        if self.cfg.length < 2:
            raise PelabError(f"task.length: cell2d needs a grid side of at least 2 (got {self.cfg.length})")

    def seq_len(self, n: int) -> int:
        return n * n

    def model_fields(self) -> dict[str, object]:
        s = self.cfg.length
        return dict(kind="encoder", vocab_size=None, patch_dim=PATCH_DIM, n_outputs=s * s, head="pool", grid=(s, s))

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        s = self.cfg.length
        cells = torch.randint(0, s * s, (size,), generator=generator)  # (B,) the label r*s + c
        x = torch.rand(size, s * s, PATCH_DIM, generator=generator) / 2  # (B, T, P) background in [0, 1/2)
        x[torch.arange(size), cells] += 0.5  # the marked cell in [1/2, 1)
        return Batch(x, cells, torch.ones(size, dtype=torch.bool))
