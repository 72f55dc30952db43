"""The few numbers a verdict needs from every seed of an arm, without an analysis's figures.

The full analyses (``geometry``, ``attention``, ``probes``) draw figures and write JSON for
one run a reader looks at; a verdict "over seeds" needs the same number from every seed,
and at seconds per analysis that would dominate the report. Each function here computes
exactly the number its analysis computes (the same functions, the same held-out data), so
the figure of the displayed run and the verdict's per-seed values agree.

``overlap`` and ``cross_share`` presume an additive layer-1 input (x + p, [x ; p], ...). On a
multiplicative combiner (multiply, matrix) they return ``{"not_applicable": reason}`` and no
numbers: a sentence the report can show, never a 0 for a split that does not exist. The
probes apply to every combiner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from pelab.analysis.inputs import AnalysisInput, float64_copy, one_blas_thread


def overlap(inputs: AnalysisInput) -> dict[str, Any]:
    """Token/position subspace overlap at initialisation and after training (``geometry``'s numbers)."""
    from pelab.analysis.additive import reason
    from pelab.analysis.geometry import model_overlap

    model, _ = inputs.require_model("overlap")
    why = reason(model, "overlap", "compare as subspaces")
    if why is not None:
        return {"not_applicable": why}
    trained = model_overlap(model, inputs.length)
    init = model_overlap(inputs.initial_model(), inputs.length)
    if trained is None or init is None:
        return {}
    return {"init": init["overlap"], "trained": trained["overlap"], "random": trained["random_baseline"]}


def cross_share(inputs: AnalysisInput) -> dict[str, Any]:
    """Share of layer-1 within-query logit variance from the token–position and position–token terms
    (``attention``'s numbers, mean over heads)."""
    from pelab.analysis.additive import reason
    from pelab.analysis.attention import SEQUENCES, four_terms, mean_shares, variance_shares

    model, _ = inputs.require_model("cross share")
    why = reason(model, "cross share", "split the layer-1 logits into four terms by")
    if why is not None:
        return {"not_applicable": why}
    batch = inputs.held_out(SEQUENCES)
    x = batch.inputs.double() if batch.inputs.is_floating_point() else batch.inputs
    split = four_terms(float64_copy(model), x, batch.segments)
    shares = mean_shares(variance_shares(split.terms, split.allowed))["variance_within_query"]
    return {k: float(v) for k, v in shares.items()} | {"cross": float(shares.get("tp", 0) + shares.get("pt", 0))}


def _hidden(inputs: AnalysisInput) -> tuple[list[torch.Tensor], Any]:
    from pelab.analysis.probes import SEQUENCES

    model, _ = inputs.require_model("probes")
    batch = inputs.held_out(SEQUENCES, offset=1)
    with torch.no_grad():
        hidden = model(batch.inputs, batch.segments, return_hidden=True).hidden  # [(B, T, C)] * (layers + 1)
    return hidden, batch


def input_probes(inputs: AnalysisInput) -> dict[str, float]:
    """Held-out decodability of token id and of position from the layer-1 input (``probes``' protocol)."""
    from pelab.analysis.probes import classify

    hidden, batch = _hidden(inputs)
    B, T = batch.inputs.shape[:2]
    groups = np.repeat(np.arange(B), T)
    first = hidden[0].reshape(B * T, -1).double().numpy()
    out = {"position": classify(first, np.tile(np.arange(T), B), groups)["accuracy"]}
    if not batch.inputs.is_floating_point():
        out["token"] = classify(first, batch.inputs.reshape(-1).numpy(), groups)["accuracy"]
    return out


def layer_probes(inputs: AnalysisInput) -> dict[str, Any]:
    """Held-out position probe accuracy at every layer (0 = the layer-1 input) and chance."""
    from pelab.analysis.probes import classify

    hidden, batch = _hidden(inputs)
    B, T = batch.inputs.shape[:2]
    groups, positions = np.repeat(np.arange(B), T), np.tile(np.arange(T), B)
    layers = [classify(h.reshape(B * T, -1).double().numpy(), positions, groups) for h in hidden]
    return {"accuracy": [x["accuracy"] for x in layers], "chance": layers[0]["chance"]}


def input_collisions(inputs: AnalysisInput) -> dict[str, float]:
    """Nearest-neighbour collisions in the layer-1 input (``probes``' counts, on its held-out batch); {} where there
    is no grid (vector inputs). What C10 reports beside its rule, for each arm's shown seed, without the probes that
    the full analysis runs first."""
    from pelab.analysis.probes import SEQUENCES, collision_grid

    model, _ = inputs.require_model("collisions")
    return collision_grid(model, inputs.held_out(SEQUENCES, offset=1).inputs) or {}


MEASURES: dict[str, Callable[[AnalysisInput], dict[str, Any]]] = {
    name: one_blas_thread(fn)
    for name, fn in (
        ("overlap", overlap),
        ("cross_share", cross_share),
        ("input_probes", input_probes),
        ("layer_probes", layer_probes),
        ("collisions", input_collisions),
    )
}
