"""The layer-1 input: token (+ segment) (+ position) vectors, combined.

The parts are kept separately in ``EmbeddingParts`` so analyses can look at x, p
and s on their own (subspace overlap, the four attention terms, probes).
With ``token_table`` set, the token embedding is a frozen pretrained table
(``FrozenEmbedding``): never trained, so adding positions to it cannot be undone
by moving the word vectors (claim C9).
Dimension letters: B batch, T sequence, D widths.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from pelab.combine import Combiner
from pelab.config import ModelConfig


@dataclass
class EmbeddingParts:
    token: Tensor  # (B, T, d_token)
    position: Tensor | None  # (T, d_position) as given to the combiner, or None
    segment: Tensor | None  # (B, T, d_segment) or None
    combined: Tensor  # (B, T, d_model)


class InputEmbedding(nn.Module):
    def __init__(self, cfg: ModelConfig, combiner: Combiner) -> None:
        super().__init__()
        w = combiner.widths
        self.combiner = combiner
        if cfg.token_table is not None:
            from pelab.weights import word_table

            self.token: nn.Module = FrozenEmbedding(word_table(w.token, rms=combiner.token_init_std()))
        elif cfg.vocab_size is not None:
            self.token = nn.Embedding(cfg.vocab_size, w.token)
            nn.init.normal_(self.token.weight, std=combiner.token_init_std())
        else:
            assert cfg.patch_dim is not None
            self.token = nn.Linear(cfg.patch_dim, w.token, bias=False)
        self.segment = nn.Embedding(cfg.n_segments, w.sides["segment"]) if "segment" in w.sides else None

    def forward(
        self, inputs: Tensor, table: Tensor | None, segments: Tensor | None = None, positions: Tensor | None = None
    ) -> EmbeddingParts:
        """inputs (B, T) ids or (B, T, patch_dim) vectors; table (T, d_position) or None; positions (T,),
        for combiners with their own per-position parameters (``matrix``)."""
        x = self.token(inputs)  # (B, T, d_token)
        sides: dict[str, Tensor] = {}
        if table is not None and "position" in self.combiner.widths.sides:
            sides["position"] = table.to(x.dtype).expand(x.shape[0], -1, -1)  # (B, T, d_position)
        s = None
        if self.segment is not None:
            if segments is None:
                raise ValueError("segments: this model has segment embeddings; pass segment ids")
            s = self.segment(segments)  # (B, T, d_segment)
            sides["segment"] = s
        h = self.combiner(x, sides, positions)  # (B, T, d_model)
        return EmbeddingParts(token=x, position=table if "position" in sides else None, segment=s, combined=h)

    def flops_per_token(self) -> int:
        extra = 2 * self.token.in_features * self.token.out_features if isinstance(self.token, nn.Linear) else 0
        return extra + self.combiner.flops_per_token()


class FrozenEmbedding(nn.Module):
    """A fixed lookup table. A non-persistent buffer: never trained, not counted among the
    parameters, not written to checkpoints (it is rebuilt from its source on load)."""

    def __init__(self, table: Tensor) -> None:
        super().__init__()
        self.register_buffer("weight", table.clone(), persistent=False)

    def forward(self, ids: Tensor) -> Tensor:
        return F.embedding(ids, self.weight)  # (B, T, d_token)
