"""The size of every combiner at the same settings, counted by the model itself.

One function serves `pelab params` and claim C5, so the CLI and the report can
never disagree about what concatenation costs.
"""

from __future__ import annotations

from dataclasses import dataclass

from pelab.combine import COMBINERS
from pelab.config import ModelConfig, build
from pelab.model import Transformer
from pelab.positions import scheme_class


@dataclass(frozen=True)
class CombinerSize:
    combine: str
    position: str
    d_token: int
    d_position: int
    d_model: int
    params: int
    flops_per_token: int
    params_vs_add: float
    flops_vs_add: float


def combiner_sizes(model: ModelConfig, seq_len: int, fallback: str = "sinusoidal") -> list[CombinerSize]:
    """Every combiner with ``model``'s other settings. Combiners that need an input table use
    ``model``'s scheme when it has one (else ``fallback``); ``none`` keeps an attention-level
    scheme (rotary, ALiBi, ...) and otherwise uses position=none, and so does ``matrix``, whose
    per-position maps are sized by ``model.max_len`` and ``model.matrix_rank``."""
    own = model.position.scheme
    tabled = scheme_class(own).has_table
    rows: list[CombinerSize] = []
    for name, cls in COMBINERS.items():
        if cls.uses_position:
            scheme = own if tabled else fallback
        else:
            scheme = "none" if tabled else own  # an attention-level scheme goes with combine=none
        position = model.position.with_scheme(scheme)
        data = {**model.model_dump(), "combine": name, "position": position.model_dump()}
        if name != "matrix":
            data.pop("matrix_rank", None)  # only matrix has a rank; its row keeps ``model``'s (default d)
        cfg = build(ModelConfig, **data)
        m = Transformer(cfg)
        n, f = m.num_parameters(), m.flops_per_token(seq_len)
        base = rows[0] if rows else None
        w = cfg.widths()
        rows.append(
            CombinerSize(
                combine=name,
                position=position.scheme,
                d_token=w.token,
                d_position=w.sides.get("position", 0),
                d_model=w.model,
                params=n,
                flops_per_token=f,
                params_vs_add=n / base.params if base else 1.0,
                flops_vs_add=f / base.flops_per_token if base else 1.0,
            )
        )
    return rows
