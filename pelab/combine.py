"""Ways to combine token embeddings with position (and segment) vectors.

A combiner decides the widths: how wide the token embedding is (d_token), how
wide each side signal must be, and how wide the residual stream becomes
(d_model). The model is sized from ``Combiner.widths`` and never by hand, so
``concat_split`` really keeps d and ``concat_wide`` really grows it.

Side signals are named: ``position`` (the scheme's input table) and ``segment``
(token-type embeddings). Every combiner treats all sides alike, except ``none``,
which by definition drops the position signal and adds any segment, and
``matrix``, which carries position in its own per-position maps instead of a
table (so it too has no position side) and adds any segment as ``none`` does.

``forward`` also receives the positions of the T rows (0..T-1 unless the model is
given others). Only ``matrix`` reads them; ``positions=None`` asks for the token
part alone (position switched off, as analyses that split the input into token
and position parts do by zeroing the position side).

Dimension letters: B batch, T sequence, D widths.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from pelab.errors import PelabError
from pelab.registry import Registry


@dataclass(frozen=True)
class Widths:
    """The widths a combiner implies for a base width d."""

    token: int
    sides: Mapping[str, int]
    model: int


class Combiner(nn.Module):
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: Concat-style combiners give each side its own requested width; add-style ones the full d.
    concatenates: ClassVar[bool] = False
    #: Whether the position table is used at all.
    uses_position: ClassVar[bool] = True
    #: Whether it serves positions past the model's ``max_len``; one that cannot (its own per-position
    #: parameters) says False and refuses them with a PelabError from ``check_length`` (``pelab check``).
    extrapolates: ClassVar[bool] = True

    def __init__(self, widths: Widths, **_: object) -> None:
        """``widths`` from ``compute_widths``; options (``max_len``, ``rank``) are read by those that use them."""
        super().__init__()
        self.widths = widths

    @classmethod
    def compute_widths(cls, d: int, requested: Mapping[str, int]) -> Widths:
        """``requested``: the width each present side asks for when concatenated (d_position, d_segment)."""
        sides = {name: (w if cls.concatenates else d) for name, w in requested.items()}
        return Widths(token=d, sides=sides, model=d)

    def token_init_std(self) -> float:
        """Token embeddings start at unit scale, like sinusoidal and learned positions."""
        return 1.0

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        """x (B, T, d_token), sides {name: (B, T, width)}, positions (T,) or None -> (B, T, d_model)."""
        raise NotImplementedError

    def check_length(self, length: int) -> None:
        """Combiners with their own per-position parameters refuse positions past them."""

    def flops_per_token(self) -> int:
        return 0


COMBINERS: Registry[Combiner] = Registry("combine")
register = COMBINERS.register
combiner_class = COMBINERS.lookup


@register
class Add(Combiner):
    name = "add"
    description = "x + p (+ s): the Transformer / BERT default, width d"

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        return x + sum(sides.values())


@register
class ScaledAdd(Combiner):
    name = "scaled_add"
    description = "sqrt(d)·x + p (+ s): the original paper's embedding scaling, width d"

    def token_init_std(self) -> float:
        # The paper's embeddings start at N(0, 1/d), so sqrt(d)·x starts at unit scale like p.
        return 1.0 / math.sqrt(self.widths.token)

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        return math.sqrt(self.widths.token) * x + sum(sides.values())


@register
class ConcatSplit(Combiner):
    name = "concat_split"
    description = "[x ; p (; s)] with d_token = d - d_position (- d_segment): same model width d"
    concatenates = True

    @classmethod
    def compute_widths(cls, d: int, requested: Mapping[str, int]) -> Widths:
        token = d - sum(requested.values())
        if token < 1:
            parts = " + ".join(f"d_{k}={v}" for k, v in requested.items())
            raise PelabError(f"d_position: concat_split needs {parts} < d={d} to leave room for the token")
        return Widths(token=token, sides=dict(requested), model=d)

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        return torch.cat([x, *sides.values()], dim=-1)


@register
class ConcatWide(Combiner):
    name = "concat_wide"
    description = "[x ; p (; s)] with d_token = d: width grows to d + d_position, every layer bigger"
    concatenates = True

    @classmethod
    def compute_widths(cls, d: int, requested: Mapping[str, int]) -> Widths:
        return Widths(token=d, sides=dict(requested), model=d + sum(requested.values()))

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        return torch.cat([x, *sides.values()], dim=-1)


@register
class ConcatProject(Combiner):
    name = "concat_project"
    description = "W[x ; p (; s)]: concatenate, then a learned projection back to width d"
    concatenates = True

    def __init__(self, widths: Widths, **_: object) -> None:
        super().__init__(widths)
        self.proj = nn.Linear(widths.token + sum(widths.sides.values()), widths.model, bias=False)

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        return self.proj(torch.cat([x, *sides.values()], dim=-1))

    def flops_per_token(self) -> int:
        return 2 * self.proj.in_features * self.proj.out_features


@register
class Gated(Combiner):
    name = "gated"
    description = "x + g ⊙ p (+ g_s ⊙ s), g learned per dimension (starts at 1): a soft split"

    def __init__(self, widths: Widths, **_: object) -> None:
        super().__init__(widths)
        self.gates = nn.ParameterDict({k: nn.Parameter(torch.ones(w)) for k, w in widths.sides.items()})

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        return x + sum(self.gates[k] * v for k, v in sides.items())


@register
class NoCombine(Combiner):
    name = "none"
    description = "x alone: no position at the input (NoPE, or position only inside attention); segments added"
    uses_position = False

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        return x + sum(sides.values())


@register
class Multiply(Combiner):
    """h = x ⊙ (1 + p) (⊙ (1 + s)): position scales each token channel instead of shifting it.

    Every side multiplies, as every side adds under ``add``; with p = 0 (and no segments) it
    is ``none``. No parameters beyond the side tables; its work is elementwise, so it adds
    no counted FLOPs (as ``gated`` adds none).
    """

    name = "multiply"
    description = "x ⊙ (1 + p) (⊙ (1 + s)): position scales each token channel, no new parameters, width d"

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        for v in sides.values():
            x = x * (1 + v)
        return x


#: At initialisation A_pos x has about this rms, relative to x's (see ``Matrix``).
MATRIX_INIT_SCALE = 0.25


@register
class Matrix(Combiner):
    """h = (I + A_pos) x (+ s): one learned linear map per position, A_pos = U_pos V_posᵀ of rank r.

    U, V have shape (max_len, d, r): 2·max_len·d·r parameters and 4·d·r FLOPs per token
    (Vᵀx, then U(Vᵀx)). At r = d the map is stored as one full matrix A_pos per position
    instead, max_len·d² parameters and 2·d² FLOPs per token, since a factorisation would
    spend 2·d² numbers on a map d² describe. r = 0 has no parameters and is ``none``.

    Its own table, not the scheme's: position enters only through these maps, so it goes with
    position=none or an attention-level scheme (rotary, alibi, t5, untied), and a config that
    gives it an input table (sinusoidal, learned, sincos2d) is rejected rather than the table
    silently dropped. Like ``learned`` it cannot serve positions past max_len. Segments are
    added after the map, as ``none`` adds them, so r = 0 is ``none`` with segments too.

    Init: V ~ N(0, 1/d), so Vᵀx has unit-scale entries, and U ~ N(0, α²/r) (the full A ~ N(0, α²/d)),
    α = ``MATRIX_INIT_SCALE``: A_pos x has rms α·rms(x) at every rank, so every rank starts with
    the same size of position signal, a quarter of the token's (``add`` starts with p as big as
    x). Scaling U by 1/sqrt(d) instead left low ranks a signal of α·sqrt(r/d), and rank 1 stalled
    on reverse where this init learns it. Small enough that I + A_pos is well conditioned at
    full rank (smallest singular value above 0.5); a rank-1 map I + u vᵀ is singular only if
    vᵀu = -1, a 4σ event per position. U = 0 (LoRA's start) would make the model exactly
    ``none`` at init: an encoder permutation-equivariant, and no gradient for V at step one.
    """

    name = "matrix"
    description = "(I + U_pos V_posᵀ) x: a learned rank-r map per position (r = d: full matrix), width d"
    uses_position = False  # no scheme table: the per-position maps are the position signal
    extrapolates = False  # one map per position, up to max_len

    def __init__(self, widths: Widths, *, max_len: int = 1, rank: int | None = None, **_: object) -> None:
        super().__init__(widths)
        d = widths.token
        self.max_len = max_len
        self.rank = d if rank is None else rank
        if not 0 <= self.rank <= d:
            raise PelabError(f"matrix_rank: {self.rank} is not in 0..d={d}")
        self.full = self.rank == d
        if self.full:
            self.a = nn.Parameter(torch.randn(max_len, d, d) * MATRIX_INIT_SCALE / math.sqrt(d))  # A_pos[out, in]
        elif self.rank:
            self.v = nn.Parameter(torch.randn(max_len, d, self.rank) / math.sqrt(d))
            self.u = nn.Parameter(torch.randn(max_len, d, self.rank) * MATRIX_INIT_SCALE / math.sqrt(self.rank))

    def check_length(self, length: int) -> None:
        if self.rank and length > self.max_len:
            raise PelabError(
                f"length: {length} exceeds combine=matrix's per-position maps (max_len={self.max_len}); "
                "raise max_len or use a combiner that extrapolates"
            )

    def forward(self, x: Tensor, sides: Mapping[str, Tensor], positions: Tensor | None = None) -> Tensor:
        h = x
        if positions is not None and self.rank:
            if positions.device.type == "cpu":  # the model checked already; on CUDA this would sync
                self.check_length(int(positions.max()) + 1 if positions.numel() else 0)
            if self.full:
                h = h + torch.einsum("tij,btj->bti", self.a[positions], x)  # (B, T, d)
            else:
                z = torch.einsum("tjr,btj->btr", self.v[positions], x)  # (B, T, r)
                h = h + torch.einsum("tir,btr->bti", self.u[positions], z)  # (B, T, d)
        return h + sum(sides.values())

    def flops_per_token(self) -> int:
        d = self.widths.token
        return 2 * d * d if self.full else 4 * d * self.rank
