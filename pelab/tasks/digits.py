"""Image classification on scikit-learn's bundled 8x8 digits (no download).

Each image is cut into p x p patches, read row-major, so a 2-D position scheme
knows each patch's row and column while 1-D schemes see a flat sequence. The
train/test split is a fixed shuffle (seed 0, 20% test), the same for every run;
evaluation uses the whole test split.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import torch

from pelab.errors import PelabError
from pelab.tasks import register
from pelab.tasks.base import Batch, Task


@functools.lru_cache(maxsize=1)
def digits_split() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    from sklearn.datasets import load_digits

    data = load_digits()
    images = torch.tensor(data.images, dtype=torch.float32) / 16.0  # (N, 8, 8) in [0, 1]
    labels = torch.tensor(data.target, dtype=torch.long)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    n_test = len(labels) // 5
    n_val = len(labels) // 10  # carved from what trained before, so the test set stays the same images
    test, val, train = order[:n_test], order[n_test : n_test + n_val], order[n_test + n_val :]
    return {k: (images[i], labels[i]) for k, i in (("train", train), ("val", val), ("test", test))}


def patchify(images: torch.Tensor, p: int) -> torch.Tensor:
    """(B, H, W) -> (B, H/p * W/p, p*p), patches in row-major order."""
    B, H, W = images.shape
    x = images.reshape(B, H // p, p, W // p, p).permute(0, 1, 3, 2, 4)  # (B, rows, cols, p, p)
    return x.reshape(B, (H // p) * (W // p), p * p)


@register
class Digits(Task):
    name = "digits"
    order = "where each patch sits in the image"
    claims = ("C14", "C19")
    description = "vision: 8x8 digits cut into patches, classified by an encoder (1-D or 2-D positions)"
    kind = "classify"
    extrapolates = False

    def validate(self) -> None:
        if self.cfg.patch not in (1, 2, 4):
            raise PelabError(f"task.patch: unknown value {self.cfg.patch}; allowed: 1, 2, 4")

    @property
    def n(self) -> int:
        return (8 // self.cfg.patch) ** 2

    def model_fields(self) -> dict[str, object]:
        side = 8 // self.cfg.patch
        return dict(
            kind="encoder", vocab_size=None, patch_dim=self.cfg.patch**2, n_outputs=10, head="pool", grid=(side, side)
        )

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        images, labels = digits_split()[split]
        idx = torch.randint(0, len(labels), (size,), generator=generator)
        return Batch(patchify(images[idx], self.cfg.patch), labels[idx], torch.ones(size, dtype=torch.bool))

    def eval_batches(
        self, n: int, batch_size: int, count: int, generator: torch.Generator, split: str = "test"
    ) -> Iterator[Batch]:
        """Every image of the split, once (``count`` and ``generator`` are not needed)."""
        images, labels = digits_split()[split]
        for start in range(0, len(labels), batch_size):
            sl = slice(start, start + batch_size)
            yield Batch(patchify(images[sl], self.cfg.patch), labels[sl], torch.ones(len(labels[sl]), dtype=torch.bool))
