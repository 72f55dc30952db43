"""Randomized positional encodings (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
Generalization of Transformers", ACL; code: google-deepmind/randomized_positional_encodings).

A sequence of T tokens does not get positions 0..T-1: it gets T positions drawn without replacement from a larger
range [0, L) and sorted, and an ordinary encoding is read at them,

    p_t = PE(s_t),  s_0 < s_1 < ... < s_{T-1} drawn uniformly from {0, ..., L-1},

so that training at length n already shows the model positions up to L, and a longer input at test time uses
positions it has seen, in the order it has seen them. PE is the reference code's sin/cos
(``sinusoid_position_encoding``: all sines, then all cosines, at frequencies 10000^(-2i/D)), or a learned table
of L rows (``randomized_base = "learned"``, their NOISY_LEARNT). L is ``randomized_range``, by default four times
the longest sequence the model is evaluated at (the paper trains at 40 with L = 2048 and tests up to 500: about
four times its longest test).

At evaluation the reference code draws positions the same way (its evaluation passes a random key to the same
function; nothing switches on training), so by default so does this scheme (``randomized_eval = "sample"``); the
alternative, positions 0..T-1 as an ordinary encoding would have (``"ordered"``), is one option away.

Reproducible runs. The draws come from the scheme's own generators, never the global one: a seed drawn from the
global generator when the model is built (which every run seeds with its own seed, so each seed of a stacked
arm draws its own positions, whatever shares its stack), kept with the weights (a buffer, so a checkpoint draws
what the model drew). Training advances one generator; evaluation uses another, reset whenever the model is put
in eval mode, so each evaluation, and each analysis of a stored model, sees the same positions. Given positions
p other than 0..T-1, the scheme draws max(p) + 1 sorted positions and reads the draw at p.

Written as a plugin would be: only the public interface (``pelab.positions``, ``pelab.frozen``, ``pelab.errors``).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import Tensor, nn

from pelab.errors import PelabError
from pelab.frozen import MAX_COUNT, MAX_TABLE_CELLS, Frozen
from pelab.positions import register
from pelab.positions.base import PositionScheme, SchemeContext

#: L, as a multiple of the longest sequence the model serves, when ``randomized_range`` is not given.
RANGE_FACTOR = 4


def reference_sinusoid(positions: Tensor, width: int, max_timescale: float = 1e4) -> Tensor:
    """(T,) positions -> (T, width) float64: [sin(p·w_i) | cos(p·w_i)], w_i = max_timescale^(-2i/width)."""
    inv = max_timescale ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    angles = positions.to(torch.float64)[:, None] * inv[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


def sorted_draw(n: int, span: int, generator: torch.Generator) -> Tensor:
    """n distinct positions of 0..span-1, uniformly at random, in increasing order."""
    return torch.randperm(span, generator=generator)[:n].sort().values


@register
class Randomized(PositionScheme):
    name = "randomized"
    description = "an input table read at sorted random positions from a longer range (Ruoss et al. 2023)"
    has_table = True
    hooks = ("input",)

    class Options(Frozen):
        randomized_base: Literal["sinusoidal", "learned"] | None = Field(
            None, description="randomized: the encoding read at the drawn positions (default sinusoidal)"
        )
        randomized_range: int | None = Field(
            None, ge=1, le=MAX_COUNT, description="randomized: positions are drawn from 0..L-1 (default 4 x max_len)"
        )
        randomized_eval: Literal["sample", "ordered"] | None = Field(
            None, description="randomized: at evaluation, draw positions as in training (sample, the default) or 0..T-1"
        )

    @staticmethod
    def span(ctx: SchemeContext, opts: Frozen) -> int:
        return opts.randomized_range or RANGE_FACTOR * ctx.max_len  # type: ignore[attr-defined]

    @classmethod
    def check(cls, ctx: SchemeContext, opts: Frozen) -> None:
        span = cls.span(ctx, opts)
        if span < ctx.max_len:
            raise PelabError(f"randomized_range: {span} is shorter than the longest sequence served ({ctx.max_len})")
        learned = opts.randomized_base == "learned"  # type: ignore[attr-defined]
        if not learned and ctx.width % 2:
            raise PelabError(f"d_position: randomized sin/cos needs an even width (got {ctx.width})")
        if learned and span * ctx.width > MAX_TABLE_CELLS:
            raise PelabError(
                f"randomized_range: {span} rows x {ctx.width} is past pelab's bound of {MAX_TABLE_CELLS:,}"
            )

    def __init__(self, ctx: SchemeContext, **options: object) -> None:
        super().__init__(ctx, **options)
        self.range = self.span(ctx, self.opts)
        self.ordered_eval = self.opts.randomized_eval == "ordered"
        # The run's seed reaches the draws through the global generator, seeded per run before the model is built.
        self.register_buffer("sample_seed", torch.randint(0, 2**62, (1,)))
        self.learned = self.opts.randomized_base == "learned"
        if self.learned:
            self.weight = nn.Parameter(torch.randn(self.range, ctx.width))
        else:
            self._exact = reference_sinusoid(torch.arange(self.range), ctx.width)
        self.register_buffer("_dtype", torch.empty(0), persistent=False)  # follows .double(), as a fixed table must
        self._generators: dict[str, tuple[int, torch.Generator]] = {}

    def train(self, mode: bool = True) -> Randomized:
        if not mode:  # every evaluation starts from the same draws
            self._generators.pop("eval", None)
        return super().train(mode)

    def _generator(self, which: str) -> torch.Generator:
        seed = int(self.sample_seed) + (1 if which == "eval" else 0)
        have = self._generators.get(which)
        if have is None or have[0] != seed:  # first use, or weights (and their seed) loaded since
            have = (seed, torch.Generator().manual_seed(seed))
            self._generators[which] = have
        return have[1]

    def check_length(self, length: int) -> None:
        if length > self.range:
            raise PelabError(f"length: {length} positions do not fit randomized's range of {self.range}")

    def draw(self, n: int) -> Tensor:
        """The n sorted positions the next call reads (0..n-1 at evaluation when ``randomized_eval`` is ordered)."""
        if not self.training and self.ordered_eval:
            return torch.arange(n)
        return sorted_draw(n, self.range, self._generator("train" if self.training else "eval"))

    def table(self, positions: Tensor) -> Tensor:
        n = int(positions.max()) + 1 if positions.numel() else 0
        self.check_length(n)
        drawn = self.draw(n)[positions.cpu()]  # (T,) sorted random positions, read at the ones asked for
        if self.learned:
            return self.weight[drawn.to(self.weight.device)]
        return self._exact[drawn].to(positions.device, self._dtype.dtype)
