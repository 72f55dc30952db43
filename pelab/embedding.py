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

import torch
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
            rows = None
            if cfg.token_rows is not None:  # a cut vocabulary: the pieces the corpus's training split uses most
                from pelab.tasks.wordlm import kept_pieces

                assert cfg.vocab_size is not None
                rows = kept_pieces(cfg.token_rows, cfg.vocab_size)
            self.token: nn.Module = FrozenEmbedding(w.token, combiner.token_init_std(), rows)
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
    """MiniLM's word vectors as a fixed lookup table (``pelab.weights.word_table``): all 30522 rows, or the
    ``rows`` of a cut vocabulary. A non-persistent buffer: never trained, not counted among the parameters, not
    written to checkpoints (it is rebuilt from the package on load). The rows of a cut vocabulary are written
    (``rows``, int64): on load the table is rebuilt from the rows the model was trained with, whatever the
    corpus now gives."""

    def __init__(self, width: int, rms: float, rows: tuple[int, ...] | None = None) -> None:
        super().__init__()
        from pelab.weights import word_table

        self.width, self.rms = width, rms
        self.register_buffer("weight", word_table(width, rms, rows).clone(), persistent=False)
        if rows is not None:
            self.register_buffer("rows", torch.tensor(rows, dtype=torch.long))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # type: ignore[no-untyped-def]
        # torch's hook for a module's own entries: the stored rows, where they differ from the ones the corpus
        # gave at construction, rebuild the table (out-of-range rows end as word_table's PelabError)
        stored = state_dict.get(prefix + "rows")
        rows = getattr(self, "rows", None)
        if rows is not None and isinstance(stored, Tensor) and stored.shape == rows.shape:
            if not torch.equal(stored.long().cpu(), rows.cpu()):
                from pelab.weights import word_table

                table = word_table(self.width, self.rms, tuple(stored.long().tolist()))
                self.weight = table.clone().to(self.weight.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, ids: Tensor) -> Tensor:
        return F.embedding(ids, self.weight)  # (B, T, d_token)
