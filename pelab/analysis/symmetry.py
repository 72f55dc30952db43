"""Permutation symmetry (claim C8): the exact test that an encoder without position is equivariant.

For a permutation pi of the T positions, an encoder f is permutation-equivariant when
f(x[pi]) = f(x)[pi] (token head) and invariant when f(x[pi]) = f(x) (pooled head). The
test runs the model on x and on x[pi] in float64 and reports max |f(x[pi]) - f(x)[pi]|
(pooled: max |f(x[pi]) - f(x)|). Without any position signal this is float round-off
(~1e-15 of the output scale); any position scheme, at the input or inside attention,
breaks it. A causal mask breaks it too, so a NoPE decoder is not equivariant.

Every registered scheme is tested on a freshly initialised small encoder (``D`` wide,
``LENGTH`` tokens, 2 layers), with add for schemes that have an input table and none for
those acting inside attention; a trained model, when given, is tested as well on its
held-out data.

``run`` returns (and writes to symmetry.json) these stable keys:
    source, tolerance, schemes {name: {combine, max_abs_diff, max_abs_output, equivariant}},
    equivariant_schemes [names], position_free_schemes [names: those that say they carry no position, which
    should be exactly the equivariant ones], trained {run_id, scheme, combine, kind, head,
    max_abs_diff, max_abs_output, equivariant} or null, settings, definition, summary, files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pelab.analysis.inputs import AnalysisInput, float64_copy, one_blas_thread, write_json
from pelab.config import ModelConfig, PositionConfig
from pelab.model import Transformer
from pelab.positions import SCHEMES

D, LENGTH, GRID, VOCAB, BATCH = 32, 12, (3, 4), 13, 4
#: A gap below this fraction of the output scale is round-off: the model is equivariant.
TOLERANCE = 1e-10


def permutation(length: int, seed: int = 0) -> Tensor:
    """A seeded permutation of 0..length-1 that is not the identity."""
    gen = torch.Generator().manual_seed(seed)
    while True:
        perm = torch.randperm(length, generator=gen)
        if length < 2 or not torch.equal(perm, torch.arange(length)):
            return perm


@torch.no_grad()
def permutation_gap(
    model: Transformer, inputs: Tensor, perm: Tensor, segments: Tensor | None = None
) -> tuple[float, float]:
    """(max |f(x[pi]) - f(x)[pi]|, max |f(x)|); for a pooled head the comparison is with f(x) itself."""
    y = model(inputs, segments).logits  # (B, T, V) or (B, V)
    yp = model(inputs[:, perm], None if segments is None else segments[:, perm]).logits
    expected = y if model.cfg.head == "pool" else y[:, perm]
    return float((yp - expected).abs().max()), float(y.abs().max())


def fresh_encoder(scheme: str, seed: int = 0) -> Transformer:
    cls = SCHEMES[scheme]
    cfg = ModelConfig(
        d=D,
        n_heads=4,
        n_layers=2,
        vocab_size=VOCAB,
        n_outputs=VOCAB,
        max_len=LENGTH,
        grid=GRID,
        position=PositionConfig(scheme=scheme),
        combine="add" if cls.has_table else "none",
    )
    torch.manual_seed(seed)
    return Transformer(cfg).double().eval()


def verdict(gap: float, scale: float) -> bool:
    return gap <= TOLERANCE * max(1.0, scale)


def scheme_gaps(seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every registered scheme on a fresh float64 encoder."""
    x = torch.randint(0, VOCAB, (BATCH, LENGTH), generator=torch.Generator().manual_seed(seed))
    perm = permutation(LENGTH, seed)
    out = {}
    for name in SCHEMES:
        model = fresh_encoder(name, seed)
        gap, scale = permutation_gap(model, x, perm)
        out[name] = {"combine": model.cfg.combine, "max_abs_diff": gap, "max_abs_output": scale,
                     "equivariant": verdict(gap, scale)}  # fmt: skip
    return out


def trained_gap(inputs: AnalysisInput) -> dict[str, Any]:
    model, run = inputs.require_model("symmetry")
    batch = inputs.held_out(BATCH, offset=2)
    x = batch.inputs.double() if batch.inputs.is_floating_point() else batch.inputs
    gap, scale = permutation_gap(float64_copy(model), x, permutation(x.shape[1], inputs.seed), batch.segments)
    m = model.cfg
    return {
        "run_id": run.run_id,
        "scheme": m.position.scheme,
        "combine": m.combine,
        "kind": m.kind,
        "head": m.head,
        "max_abs_diff": gap,
        "max_abs_output": scale,
        "equivariant": verdict(gap, scale),
    }


@one_blas_thread
def run(inputs: AnalysisInput, out: Path) -> dict[str, Any]:
    from pelab import plots

    schemes = scheme_gaps(inputs.seed)
    trained = trained_gap(inputs) if inputs.model is not None else None
    equivariant = [n for n, r in schemes.items() if r["equivariant"]]
    result: dict[str, Any] = {
        "analysis": "symmetry",
        "source": inputs.label,
        "tolerance": TOLERANCE,
        "schemes": schemes,
        "equivariant_schemes": equivariant,
        "position_free_schemes": [n for n, c in SCHEMES.items() if c.position_free],  # the ones that should be
        "trained": trained,
        "settings": {"d": D, "length": LENGTH, "grid": list(GRID), "layers": 2, "heads": 4, "dtype": "float64"},
        "definition": (
            "max |f(x[pi]) - f(x)[pi]| over a batch (pooled head: max |f(x[pi]) - f(x)|), float64, pi a seeded "
            f"non-identity permutation; equivariant when below {TOLERANCE:g} x max(1, max |f(x)|). Fresh encoders: "
            "add for schemes with an input table, none for attention-level schemes."
        ),
    }
    bars = {n: r["max_abs_diff"] for n, r in schemes.items()}
    if trained is not None:
        bars[f"trained ({trained['scheme']})"] = trained["max_abs_diff"]
    files = [
        plots.bars(
            out / "symmetry.png",
            list(bars),
            {"max |f(x[pi]) - f(x)[pi]|": np.maximum(list(bars.values()), 1e-18)},
            "permutation test, float64 (only a position-free encoder stays at round-off)",
            "max abs difference",
            logy=True,
            hlines={f"tolerance {TOLERANCE:g}": TOLERANCE},
        )
    ]
    result["summary"] = (
        "equivariant: "
        + (", ".join(f"position={n}" for n in equivariant) or "no scheme")
        + (
            f"; trained model {'is' if trained['equivariant'] else 'is not'} (gap {trained['max_abs_diff']:.1e})"
            if trained
            else ""
        )
    )
    result["files"] = [p.name for p in [*files, out / "symmetry.json"]]
    write_json(out, "symmetry", result)
    return result
