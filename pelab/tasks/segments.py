"""Two-segment tasks, BERT-style: a segment (token-type) id marks each half.

same    a SEP b, where b is a or a with two positions swapped: are they equal?
        Order inside each segment matters (a swap keeps the multiset), and the
        segment id says which half a token belongs to.
"""

from __future__ import annotations

import torch

from pelab.tasks import register
from pelab.tasks.base import Batch, Task, random_symbols


@register
class SameSegments(Task):
    name = "same"
    order = "whether two tokens of the second segment were swapped"
    claims = ("C13",)
    description = "two segments: is the second equal to the first, or the first with two tokens swapped?"
    kind = "classify"

    def seq_len(self, n: int) -> int:
        return 2 * n + 1

    def model_fields(self) -> dict[str, object]:
        return dict(kind="encoder", vocab_size=self.cfg.vocab + 1, n_outputs=2, head="pool", n_segments=2)

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        n = n or self.n
        a = random_symbols(size, n, self.cfg.vocab, generator)  # (B, n)
        b = a.clone()
        swap = torch.rand(size, generator=generator) < 0.5
        i = torch.randint(0, n, (size,), generator=generator)
        j = (i + torch.randint(1, n, (size,), generator=generator)) % n  # j != i
        rows = torch.arange(size)
        b[rows[swap], i[swap]], b[rows[swap], j[swap]] = a[rows[swap], j[swap]], a[rows[swap], i[swap]]
        label = (a != b).any(dim=1).long()  # 1 = differs (a swap of two equal symbols is no change)
        sep = torch.full((size, 1), self.cfg.vocab)
        inputs = torch.cat([a, sep, b], dim=1)  # (B, 2n+1)
        segments = torch.cat([torch.zeros(size, n + 1, dtype=torch.long), torch.ones(size, n, dtype=torch.long)], 1)
        return Batch(inputs, label, torch.ones(size, dtype=torch.bool), segments)
