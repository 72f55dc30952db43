"""Analyses: look inside the embeddings and the attention, one claim at a time.

Each module holds small pure functions over tensors (the science, tested against
formulas and independent computations) and one entry point
``run(inputs: AnalysisInput, out: Path) -> dict`` that computes, writes ``<name>.json``
and at least one PNG into ``out``, and returns the dict (stable keys, listed in the
module's docstring; every result has ``analysis``, ``source``, ``summary`` and ``files``).

| name      | claims   | needs a trained model |
|-----------|----------|-----------------------|
| spectrum  | C1, C15  | no (a scheme, or a trained model's table) |
| geometry  | C2, C3   | no (scheme: table vs random tokens; model: init vs trained) |
| attention | C4       | yes |
| probes    | C8, C10  | yes |
| symmetry  | C8       | no (every scheme on fresh encoders; plus the model if given) |
| linearity | C11      | no (a scheme, a user's table, or a trained model's table) |

Multiplicative combiners (multiply: x ⊙ (1 + p); matrix: (I + A_pos) x) have no token part
plus position part at the layer-1 input, so what presumes one (geometry's overlap, the four
attention terms) says it does not apply and why (``additive.reason``); the probes, the
symmetry test and, for multiply's table, spectrum and linearity apply as to any model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from pelab.analysis import attention, geometry, linearity, probes, spectrum, symmetry
from pelab.analysis.inputs import AnalysisInput, load_trained, read_table
from pelab.errors import PelabError, unknown


class Analysis(NamedTuple):
    needs_model: bool
    run: Callable[[AnalysisInput, Path], dict[str, Any]]
    claims: str


ANALYSES: dict[str, Analysis] = {
    "spectrum": Analysis(False, spectrum.run, "C1, C15"),
    "geometry": Analysis(False, geometry.run, "C2, C3"),
    "attention": Analysis(True, attention.run, "C4"),
    "probes": Analysis(True, probes.run, "C8, C10"),
    "symmetry": Analysis(False, symmetry.run, "C8"),
    "linearity": Analysis(False, linearity.run, "C11"),
}


def analysis(name: str) -> Analysis:
    try:
        return ANALYSES[name]
    except KeyError:
        raise unknown("analysis", name, [*ANALYSES, "all"]) from None


def run_analyses(what: str, inputs: AnalysisInput, out: Path) -> dict[str, dict[str, Any] | str]:
    """One analysis by name, or ``all``: name -> its result, or for ``all`` the reason it was skipped.

    A single named analysis that cannot run raises its PelabError; ``all`` runs every analysis
    that applies (a scheme alone skips those needing a model; a model without an input table
    skips those needing one; a multiplicative combiner skips the four attention terms) and says
    why it skipped the rest.
    """
    if what != "all":
        return {what: analysis(what).run(inputs, out)}
    done: dict[str, dict[str, Any] | str] = {}
    for name, entry in ANALYSES.items():
        if entry.needs_model and inputs.model is None:
            done[name] = "needs a trained model (--run RUN_ID --db STUDY_DIR)"
            continue
        try:
            done[name] = entry.run(inputs, out)
        except PelabError as e:
            done[name] = str(e).removeprefix(f"{name}: ")
    return done


__all__ = ["ANALYSES", "Analysis", "AnalysisInput", "analysis", "load_trained", "read_table", "run_analyses"]
