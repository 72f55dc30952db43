"""The one interface every position scheme implements.

A scheme can act at three places in a Transformer, and each hook is a no-op by
default, so the model never asks "which scheme is this?":

* ``table(positions)``: vectors combined with the token embeddings at the input
  (sinusoidal, learned, 2-D sin-cos). ``None`` means "nothing at the input".
* ``rotate(q, k, positions)``: a transform of queries and keys (rotary).
* ``bias(q_positions, k_positions)``: an additive bias on attention logits
  (ALiBi, T5 relative buckets, untied position-position term).

Dimension letters: T sequence length, D table width, H heads, E head width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pydantic import Field, ValidationError
from torch import Tensor, nn

from pelab.errors import PelabError
from pelab.frozen import Frozen, validation_message


@dataclass(frozen=True)
class SchemeContext:
    """What a scheme may need to know about the model it serves.

    ``width`` is the width of the input table the combiner asked for (d_position);
    ``model_width`` the width of the residual stream; ``reference_width`` the width
    a full-size table would have (d), which sinusoidal uses to pick frequencies
    when the combiner keeps only part of them.
    """

    width: int
    model_width: int
    reference_width: int
    n_heads: int
    head_dim: int
    max_len: int
    causal: bool
    grid: tuple[int, int] | None = None


class NoOptions(Frozen):
    """A scheme that reads no options."""


#: The wavelength base, read by both sinusoidal and rotary: one declaration, so the two cannot disagree.
BASE = Field(10000.0, gt=1, description="sinusoidal / rotary wavelength base")


class PositionScheme(nn.Module):
    """Base class: all three hooks are no-ops.

    A scheme declares the options it reads in ``Options`` (types, bounds, defaults, help: the one place they
    are written). ``PositionConfig``, what a study file sets, is assembled from every scheme's ``Options``,
    and a scheme is built with its own alone. ``check`` holds the invariants that need the model's widths
    but no tensor, so a config validates without building the scheme.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: True when ``table`` returns vectors, so the input combiner has something to combine.
    has_table: ClassVar[bool] = False
    #: Where the scheme acts, for ``pelab list``.
    hooks: ClassVar[tuple[str, ...]] = ()
    #: Whether the scheme serves sequences longer than the model was sized for (``SchemeContext.max_len``): its
    #: hooks stay defined and finite there. A scheme that cannot (a table with one row per position) says False
    #: and refuses such lengths with a PelabError from ``check_length``. ``pelab check`` holds a scheme to it.
    extrapolates: ClassVar[bool] = True
    #: True for a scheme that carries no position information at all (NoPE): an encoder with it (and no input
    #: combiner) is permutation-equivariant, which ``pelab check`` verifies; every other scheme must break it.
    position_free: ClassVar[bool] = False
    Options: ClassVar[type[Frozen]] = NoOptions

    def __init__(self, ctx: SchemeContext, **options: object) -> None:
        super().__init__()
        self.ctx = ctx
        try:
            self.opts = self.Options(**options)
        except ValidationError as e:
            raise PelabError(validation_message(e)) from None
        self.check(ctx, self.opts)

    @classmethod
    def check(cls, ctx: SchemeContext, opts: Frozen) -> None:
        """Raise a PelabError when these options cannot serve a model of these widths. Builds nothing."""

    def table(self, positions: Tensor) -> Tensor | None:
        """(T,) integer positions -> (T, D) vectors, or None."""
        return None

    def rotate(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """q, k: (B, H, T, E); positions (T,). Identity unless the scheme rotates."""
        return q, k

    def bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor | None:
        """(Tq,), (Tk,) -> (H, Tq, Tk) additive logit bias, or None."""
        return None

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len: int) -> int:
        """Multiply-add FLOPs (x2) this scheme spends per token in one forward pass."""
        return 0

    def check_length(self, length: int) -> None:
        """Raise a PelabError when the scheme cannot serve sequences this long."""


def relative_offsets(q_positions: Tensor, k_positions: Tensor) -> Tensor:
    """(Tq, Tk) matrix of key minus query positions."""
    return k_positions[None, :] - q_positions[:, None]
