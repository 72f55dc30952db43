"""Conformance checks of a combiner (``pelab.conformance``)."""

from __future__ import annotations

import torch

from pelab.combine import COMBINERS
from pelab.conformance.core import (
    ROW,
    UNSEEDED,
    B,
    Check,
    Fail,
    NotApplicable,
    T,
    _build,
    _causality,
    _close,
    _config,
    _declaration,
    _equivariance_gap,
    _first_valid,
    _fresh,
    _gradients,
    _longer,
    _perm,
    _row_redrawn,
    _run,
    _save_and_load,
    _shapes,
    _train_cfg,
    _twice_in_training,
    _without_row,
    stacked_identity,
)
from pelab.errors import PelabError


def _combiner_scheme(name: str) -> str:
    """A built-in scheme to pair with: sinusoidal's table for a combiner that takes one, else no position."""
    return "sinusoidal" if COMBINERS[name].uses_position else "none"


def combiner_declaration(name: str) -> str:
    cls = COMBINERS[name]
    _declaration(cls, {"name": str, "description": str, "concatenates": bool, "uses_position": bool,
                       "extrapolates": bool})  # fmt: skip
    try:
        _config("encoder", _combiner_scheme(name), name)
    except (ValueError, PelabError) as e:
        raise Fail(f"a tiny model with it does not validate: {' '.join(str(e).split())[:160]}") from None
    return f"{cls.__module__}.{cls.__qualname__}"


def combiner_rows_in_place(name: str) -> str:
    """Permuting the rows permutes the output, and redrawing one row leaves the others' outputs (a symmetric mix,
    a mean over the sequence, passes the first); the second in training mode too."""
    cfg = _config("encoder", _combiner_scheme(name), name)
    model = _fresh(_build(cfg).double())
    comb, p, perm = model.embed.combiner, torch.arange(T), _perm()
    w = comb.widths
    g = torch.Generator().manual_seed(3)
    x = torch.randn(B, T, w.token, generator=g, dtype=torch.float64)
    sides = {k: torch.randn(B, T, v, generator=g, dtype=torch.float64) for k, v in w.sides.items()}
    y = comb(x, sides, p)
    yp = comb(x[:, perm], {k: v[:, perm] for k, v in sides.items()}, p[perm])
    if not _close(yp, y[:, perm]):
        raise Fail("permuting the rows (token, sides and positions alike) does not permute the output: rows mix")
    (x2, *s2), j = _row_redrawn(x, *sides.values()), ROW
    y2 = comb(x2, dict(zip(sides, s2, strict=True)), p)
    if not _close(_without_row(y2), _without_row(y)):
        raise Fail(f"changing row {j}'s token and sides changes other rows' outputs: rows mix")
    inputs = ((x, sides), (x2, dict(zip(sides, s2, strict=True))))
    trained = _twice_in_training(lambda: _build(cfg).double().embed.combiner, lambda c, i: c(*inputs[i], p))
    if trained is None:
        return f"each row's output reads that row's token, sides and position alone{UNSEEDED}"
    if not _close(_without_row(trained[1]), _without_row(trained[0])):
        raise Fail(f"in training mode, changing row {j}'s token and sides changes other rows' outputs: rows mix")
    return "each row's output reads that row's token, sides and position alone, in evaluation and in training"


def combiner_position_information(name: str) -> str:
    if not COMBINERS[name].uses_position:
        raise NotApplicable("takes no position table (uses_position is False)")
    gap, scale = _equivariance_gap("sinusoidal", name)
    if gap < 1e-6 * max(1.0, scale):
        raise Fail(
            f"with sinusoidal positions an encoder stays permutation-equivariant (gap {gap:.1e}): the table is lost"
        )
    return f"sinusoidal positions reach an encoder's output (permutation gap {gap:.2g})"


def combiner_stacked(name: str) -> str:
    scheme = _combiner_scheme(name)
    make = _first_valid([lambda s: _train_cfg(s, {"name": "reverse", "length": 6, "vocab": 8},
                                              {"position": {"scheme": scheme}, "combine": name})])  # fmt: skip
    return "reverse: " + stacked_identity(make)


def check_combiner(name: str) -> list[Check]:
    scheme = _combiner_scheme(name) if name in COMBINERS else "none"
    says = bool(getattr(COMBINERS.get(name), "extrapolates", True))
    return _run("combine", name, [
        ("declaration", lambda: combiner_declaration(name), ()),
        ("shapes and dtypes", lambda: _shapes(scheme, name), ("declaration",)),
        ("hooks follow positions", lambda: combiner_rows_in_place(name), ("shapes and dtypes",)),
        ("gradients", lambda: _gradients(scheme, name), ("shapes and dtypes",)),
        ("save and load", lambda: _save_and_load(scheme, name), ("shapes and dtypes",)),
        ("stacked seeds", lambda: combiner_stacked(name), ("shapes and dtypes", "gradients")),
        ("longer inputs", lambda: _longer(scheme, name, says, "the combiner's"), ("shapes and dtypes",)),
        ("position information", lambda: combiner_position_information(name), ("shapes and dtypes",)),
        ("causality", lambda: _causality(scheme, name), ("shapes and dtypes",)),
    ])  # fmt: skip
