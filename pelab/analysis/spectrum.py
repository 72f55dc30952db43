"""Spectrum of an encoding (claims C1, C15): which dimensions a position table actually uses.

For a table P (positions 0..L-1 down, dimensions across):

* range_j = max_t P[t, j] - min_t P[t, j] and variance_j = Var_t P[t, j] (population
  variance over the L positions), per dimension j;
* the number of dimensions whose range exceeds a threshold (C1: "sinusoidal disturbs
  the first dimensions a lot and the last ones hardly at all");
* the heatmap of P, curves of chosen dimensions against position, and the values at
  chosen (position, dimension) pairs (C15: "what the encoding looks like").

``run`` returns (and writes to spectrum.json) these stable keys:
    source, scheme, d, length, threshold, varying (count at threshold),
    varying_at {threshold: count}, range [d], variance [d], dimensions (chosen),
    positions (chosen), values [{position, dimension, value}], definition, summary, files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pelab.analysis.inputs import AnalysisInput, one_blas_thread, write_json
from pelab.errors import PelabError
from pelab.positions import with_tables

THRESHOLD = 0.1
THRESHOLDS = (0.01, 0.1, 0.5, 1.0)


def dimension_range(table: np.ndarray) -> np.ndarray:
    """(L, D) -> (D,) max minus min over positions."""
    return table.max(axis=0) - table.min(axis=0)


def dimension_variance(table: np.ndarray) -> np.ndarray:
    """(L, D) -> (D,) population variance over positions."""
    return table.var(axis=0)


def count_varying(table: np.ndarray, threshold: float) -> int:
    """How many dimensions change by more than ``threshold`` over the positions."""
    return int((dimension_range(table) > threshold).sum())


def chosen_dimensions(d: int) -> list[int]:
    """First, a few spread through the middle, last: the curves C1's figure needs."""
    return sorted({j for j in (0, 1, d // 8, d // 4, d // 2, d - 2, d - 1) if 0 <= j < d})


def chosen_positions(length: int) -> list[int]:
    return sorted({t for t in (0, 1, length // 2, length - 1) if 0 <= t < length})


def values_at(table: np.ndarray, pairs: list[tuple[int, int]]) -> list[dict[str, float]]:
    """The table's value at each (position, dimension) pair."""
    return [{"position": t, "dimension": j, "value": float(table[t, j])} for t, j in pairs]


def spectrum(table: np.ndarray, threshold: float = THRESHOLD) -> dict[str, Any]:
    """Every number of the spectrum analysis for one table."""
    L, d = table.shape
    dims, positions = chosen_dimensions(d), chosen_positions(L)
    return {
        "d": d,
        "length": L,
        "threshold": threshold,
        "varying": count_varying(table, threshold),
        "varying_at": {str(th): count_varying(table, th) for th in sorted({*THRESHOLDS, threshold})},
        "range": dimension_range(table),
        "variance": dimension_variance(table),
        "dimensions": dims,
        "positions": positions,
        "values": values_at(table, [(t, j) for t in positions for j in dims]),
    }


@one_blas_thread
def run(inputs: AnalysisInput, out: Path) -> dict[str, Any]:
    from pelab import plots

    table = inputs.position_table()
    if table is None and inputs.model is not None:
        from pelab.analysis.additive import no_table_reason

        why = no_table_reason(inputs.model, "spectrum")
        if why is not None:
            raise PelabError(why)
    if table is None:
        raise PelabError(
            f"spectrum: position={inputs.scheme} has no input table (it acts inside attention, or the combiner "
            f"drops it); schemes with one: {with_tables()}"
        )
    result: dict[str, Any] = {
        "analysis": "spectrum",
        "source": inputs.label,
        "scheme": inputs.scheme,
        **spectrum(table),
        "definition": (
            "range_j = max_t P[t,j] - min_t P[t,j], variance_j = population variance of P[t,j] over t = 0..L-1; "
            "varying = number of dimensions j with range_j > threshold. For a trained model P is the scheme's "
            "raw table at the training length (before a combiner's gate or projection)."
        ),
    }
    L, d = table.shape
    stem = out / "spectrum"
    files = [
        plots.heatmap(table, f"{stem}_heatmap.png", f"{inputs.label}: positions x dimensions"),
        plots.lines(
            f"{stem}_curves.png",
            np.arange(L),
            {f"dim {j}": table[:, j] for j in result["dimensions"]},
            f"{inputs.label}: chosen dimensions against position",
            "position",
            "value",
        ),
        plots.lines(
            f"{stem}_range.png",
            np.arange(d),
            {"range over positions": result["range"], "std over positions": np.sqrt(result["variance"])},
            f"{inputs.label}: {result['varying']} of {d} dimensions vary by more than {THRESHOLD}",
            "dimension",
            "spread over positions",
            hlines={f"threshold {THRESHOLD}": THRESHOLD},
            styles={"range over positions": "-", "std over positions": "-"},
        ),
    ]
    result["summary"] = f"{result['varying']} of {d} dimensions vary by more than {THRESHOLD} over {L} positions"
    result["files"] = [p.name for p in [*files, out / "spectrum.json"]]
    write_json(out, "spectrum", result)
    return result
