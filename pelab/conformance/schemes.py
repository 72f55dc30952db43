"""Conformance checks of a position scheme (``pelab.conformance``)."""

from __future__ import annotations

import torch

from pelab.conformance.core import (
    HEADS,
    ROW,
    UNSEEDED,
    Check,
    D,
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
from pelab.frozen import Frozen
from pelab.positions import SCHEMES


def _scheme_combine(name: str) -> str:
    return "add" if SCHEMES[name].has_table else "none"


def scheme_declaration(name: str) -> str:
    cls = SCHEMES[name]
    _declaration(cls, {"name": str, "description": str, "has_table": bool, "hooks": tuple, "extrapolates": bool,
                       "position_free": bool})  # fmt: skip
    if not (isinstance(cls.Options, type) and issubclass(cls.Options, Frozen)):
        raise Fail("Options must subclass pelab.frozen.Frozen")
    try:
        cfg = _config("encoder", name, _scheme_combine(name))
    except (ValueError, PelabError) as e:
        raise Fail(
            f"a tiny model with its default options does not validate: {' '.join(str(e).split())[:160]}"
        ) from None
    return f"{cls.__module__}.{cls.__qualname__}; options: {', '.join(cfg.position.options()) or 'none'}"


def scheme_hooks_follow_positions(name: str) -> str:
    cfg = _config("encoder", name, _scheme_combine(name))
    model = _build(cfg).double()
    s, p, perm = _fresh(model).scheme, torch.arange(T), _perm()
    seen = []
    table = _fresh(s).table(p)
    if table is not None:
        if not _close(_fresh(s).table(p[perm]), table[perm]):
            raise Fail("table(positions[perm]) is not table(positions)[perm]: the table ignores the positions given")
        if _close(table[:1].expand_as(table), table):
            raise Fail("the table gives every position the same vector")
        seen.append("table")
    bias = _fresh(s).bias(p, p)
    if bias is not None:
        if not _close(_fresh(s).bias(p[perm], p[perm]), bias[:, perm][:, :, perm]):
            raise Fail("bias(positions[perm]) is not bias(positions) permuted: the bias ignores the positions given")
        seen.append("bias")
    q, k = torch.randn(1, HEADS, T, D // HEADS, dtype=torch.float64), torch.randn(1, HEADS, T, D // HEADS).double()
    rq, rk = _fresh(s).rotate(q, k, p)
    if rq is not q or rk is not k:
        pq, pk = _fresh(s).rotate(q[:, :, perm], k[:, :, perm], p[perm])
        if not (_close(pq, rq[:, :, perm]) and _close(pk, rk[:, :, perm])):
            raise Fail("rotate(q[perm], k[perm], positions[perm]) is not rotate(q, k, positions)[perm]")
        q2, k2 = _row_redrawn(q, k, dim=2)
        cq, ck = _fresh(s).rotate(q2, k2, p)
        if not (_close(_without_row(cq, 2), _without_row(rq, 2)) and _close(_without_row(ck, 2), _without_row(rk, 2))):
            raise Fail(f"changing row {ROW} of q and k changes rotate's other rows: rows mix")
        pairs = ((q, k), (q2, k2))
        trained = _twice_in_training(
            lambda: _build(cfg).double().scheme, lambda r, i: torch.stack(r.rotate(*pairs[i], p))
        )
        if trained is None:
            seen.append(f"rotation{UNSEEDED}")
        elif not _close(_without_row(trained[1], 3), _without_row(trained[0], 3)):
            raise Fail(f"in training mode, changing row {ROW} of q and k changes rotate's other rows: rows mix")
        else:
            seen.append("rotation (in training too)")
    if not seen:
        raise NotApplicable("no hook acts (nothing to follow)")
    return f"{', '.join(seen)}: permuting the positions permutes them alike"


def scheme_position_information(name: str) -> str:
    gap, scale = _equivariance_gap(name, _scheme_combine(name))
    if SCHEMES[name].position_free:
        if gap > 1e-10 * max(1.0, scale):
            raise Fail(f"position_free is True, but permuting an encoder's input changes its outputs by {gap:.3g}")
        return f"encoder permutation-equivariant (max gap {gap:.1e}, float64)"
    if gap < 1e-6 * max(1.0, scale):
        raise Fail(f"an encoder with it is permutation-equivariant (gap {gap:.1e}): no position reaches the output")
    return f"positions reach an encoder's output (permutation gap {gap:.2g})"


def scheme_stacked(name: str) -> str:
    combine = _scheme_combine(name)
    found = []
    for tasks in ([{"name": "reverse", "length": 6, "vocab": 8}, {"name": "cell2d"}],
                  [{"name": "copy", "length": 4, "vocab": 8}]):  # fmt: skip
        makers = [lambda s, t=t: _train_cfg(s, t, {"position": {"scheme": name}, "combine": combine}) for t in tasks]
        try:
            make = _first_valid(makers)
        except Fail:
            continue
        found.append(f"{make(0).task.name}: " + stacked_identity(make))
    if not found:
        raise Fail("no tiny task it can serve (reverse, cell2d, copy)")
    return "; ".join(found)


def check_scheme(name: str) -> list[Check]:
    combine = _scheme_combine(name) if name in SCHEMES else "none"
    cls = SCHEMES.get(name)
    says = bool(getattr(cls, "extrapolates", True))
    return _run("position", name, [
        ("declaration", lambda: scheme_declaration(name), ()),
        ("shapes and dtypes", lambda: _shapes(name, combine), ("declaration",)),
        ("hooks follow positions", lambda: scheme_hooks_follow_positions(name), ("shapes and dtypes",)),
        ("gradients", lambda: _gradients(name, combine), ("shapes and dtypes",)),
        ("save and load", lambda: _save_and_load(name, combine), ("shapes and dtypes",)),
        ("stacked seeds", lambda: scheme_stacked(name), ("shapes and dtypes", "gradients")),
        ("longer inputs", lambda: _longer(name, combine, says, "the scheme's"), ("shapes and dtypes",)),
        ("position information", lambda: scheme_position_information(name), ("shapes and dtypes",)),
        ("causality", lambda: _causality(name, combine), ("shapes and dtypes",)),
    ])  # fmt: skip
