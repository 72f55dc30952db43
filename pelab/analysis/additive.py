"""Does the layer-1 input split into a token part plus a position part?

Several analyses presume it does: the token/position subspace overlap (C2) compares the
two parts as sets of vectors, and the four attention terms (C4) split the logits by them.
That holds for every combiner that is linear in its sides (add, scaled_add, the concats,
gated, none): h(x, p) = h(x, 0) + h(0, p). It fails for the multiplicative ones:

* ``multiply``: h = x ⊙ (1 + p) = x + x ⊙ p;
* ``matrix``:   h = (I + A_pos) x = x + A_pos x.

Their position signal (x ⊙ p, A_pos x) is a product of token and position, neither a
token part nor a position part, so those analyses do not apply; they say so with
``reason`` instead of returning a number for a split that does not exist. Decoding token
id and position from the layer-1 input (``probes``) presumes nothing about the form and
applies to every combiner.

The test is numerical, on the model's own combiner: random x and p (not the model's
table, so a small trained p cannot pass for additivity), and the gap
max |h(x, p) - h(x, 0) - h(0, p)| relative to max |h|. ``matrix`` reads positions
for its maps; ``positions=None`` asks it for the token part alone (see ``pelab.combine``).
"""

from __future__ import annotations

import torch

from pelab.combine import Combiner
from pelab.model import Transformer

#: A gap above this fraction of the input's scale is not round-off: the combiner is not additive.
TOLERANCE = 1e-5
#: The multiplicative forms, as a reason names them: (the input, its position signal).
FORMS = {
    "multiply": ("x ⊙ (1 + p) = x + x ⊙ p", "x ⊙ p"),
    "matrix": ("(I + A_pos) x = x + A_pos x", "A_pos x, one learned map per position"),
}


@torch.no_grad()
def additive_gap(combiner: Combiner, length: int = 4, seed: int = 0) -> float:
    """max |h(x, p) - h(x, 0) - h(0, p)| / (1 + max |h(x, p)|) on random x, p of the combiner's widths.

    Segments, where the combiner has them, are held at zero: they go with the token part.
    """
    w = combiner.widths
    T = max(1, min(length, getattr(combiner, "max_len", length)))
    param = next(combiner.parameters(), None)
    dtype = torch.float64 if param is None else param.dtype  # a parameter-free combiner in float64: exact
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, T, w.token, generator=gen, dtype=torch.float64).to(dtype)  # (B, T, d_token)
    positions = torch.arange(T)

    def sides(with_p: bool) -> dict[str, torch.Tensor]:
        out = {k: torch.zeros(2, T, v, dtype=dtype) for k, v in w.sides.items()}
        if with_p and "position" in out:
            out["position"] = torch.randn(2, T, w.sides["position"], generator=gen, dtype=torch.float64).to(dtype)
        return out

    both = sides(True)
    h = combiner(x, both, positions)  # (B, T, d_model)
    token = combiner(x, sides(False), None)
    position = combiner(torch.zeros_like(x), both, positions)
    return float((h - token - position).abs().max() / (1.0 + h.abs().max()))


def reason(model: Transformer, analysis: str, purpose: str) -> str | None:
    """Why ``analysis`` does not apply to ``model``'s layer-1 input, or None when the input is additive.

    ``purpose``: what the analysis does with the two parts ("compare as subspaces", ...).
    """
    combiner = model.embed.combiner
    if additive_gap(combiner) <= TOLERANCE:
        return None
    name = model.cfg.combine
    form, signal = FORMS.get(name, (combiner.description, "not a vector of its own"))
    return (
        f"{analysis}: does not apply to combine={name}, a multiplicative combiner: the layer-1 input is {form}, "
        f"so position enters as {signal}, a product of token and position, and there is no token part and "
        f"position part to {purpose} ({analysis} presumes an additive input such as x + p or [x ; p]); decoding "
        "token and position from the layer-1 input (probes) applies to every combiner"
    )


def no_table_reason(model: Transformer, analysis: str) -> str | None:
    """For a model whose position signal is not a table (``matrix``'s per-position maps): why ``analysis``,
    which reads a position table, has nothing to read. None when the combiner is not such a one."""
    combiner = model.embed.combiner
    if "position" in combiner.widths.sides or additive_gap(combiner) <= TOLERANCE:
        return None
    return (
        f"{analysis}: combine={model.cfg.combine} carries position in its own per-position maps "
        f"({FORMS.get(model.cfg.combine, ('', 'its maps'))[1]}), not in a table of position vectors, so there is "
        f"no table for {analysis} to read"
    )
