"""Relative linearity (claim C11): is PE(pos + k) a linear function of PE(pos)?

For a table P (L positions x D dimensions) and a shift k, the best linear map is the
least-squares W minimising ||P[k:] - P[:-k] W||_F (numpy lstsq, minimum norm), and

    residual = ||P[:-k] W - P[k:]||_F / ||P[k:]||_F.

For sinusoidal tables an exact W exists (a rotation of each sin/cos pair by k times its
frequency), so the residual is float round-off. Two caveats are reported with it:

* the fit only tests anything when there are more shifted pairs (L - k) than the rank of
  P[:-k]; otherwise *any* table, even random, fits exactly (``determined`` says which);
* so a held-out residual is reported too: W fitted on the pairs starting at even
  positions, scored on those starting at odd ones. A table with one linear shift map
  (sinusoidal) keeps it small; a table that is fitted only by having enough freedom
  (random, or learned without structure) does not. This too needs enough positions:
  only when the fitting rows span all the others (``heldout_spanned``) does a linear
  table score round-off; otherwise even sinusoidal misses the unseen directions.

``run`` returns (and writes to linearity.json) these stable keys:
    source, subject (the name in ``tables`` of the table under test; the others are
    references: sinusoidal of the same shape, a random N(0,1) table, the initial table),
    shifts, tables {name: [{k, pairs, rank, determined, residual, heldout_residual,
    heldout_spanned}]},
    definition, summary, files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from pelab.analysis.inputs import AnalysisInput, one_blas_thread, write_json
from pelab.errors import PelabError
from pelab.positions import with_tables

SHIFTS = (1, 2, 4, 8)


def relative_residual(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> float:
    norm = np.linalg.norm(b)
    return float(np.linalg.norm(a @ w - b) / norm) if norm > 0 else 0.0


def best_shift_map(table: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """The least-squares W with P[:-k] W ~ P[k:], and its relative residual."""
    a, b = table[:-k], table[k:]
    w, *_ = np.linalg.lstsq(a, b, rcond=None)
    return w, relative_residual(a, b, w)


def shift_fit(table: np.ndarray, k: int) -> dict[str, Any]:
    """In-sample and held-out residuals of the best linear map PE(pos) -> PE(pos + k)."""
    a, b = table[:-k], table[k:]
    _, residual = best_shift_map(table, k)
    rank = int(np.linalg.matrix_rank(a))
    even = np.arange(len(a)) % 2 == 0
    heldout, spanned = float("nan"), False
    if even.sum() and (~even).sum():
        w, *_ = np.linalg.lstsq(a[even], b[even], rcond=None)
        heldout = relative_residual(a[~even], b[~even], w)
        spanned = int(np.linalg.matrix_rank(a[even])) == rank
    return {
        "k": k,
        "pairs": len(a),
        "rank": rank,
        "determined": len(a) > rank,
        "residual": residual,
        "heldout_residual": heldout,
        "heldout_spanned": spanned,
    }


def shifts_for(length: int) -> list[int]:
    return [k for k in SHIFTS if length - k >= 2]


def tables_to_test(inputs: AnalysisInput) -> dict[str, np.ndarray]:
    """The input's table, plus references: sinusoidal of the same shape and a random table (or the initial one)."""
    from pelab.positions.sinusoidal import sinusoid_table

    table = inputs.position_table()
    if table is None and inputs.model is not None:
        from pelab.analysis.additive import no_table_reason

        why = no_table_reason(inputs.model, "linearity")
        if why is not None:
            raise PelabError(why)
    if table is None:
        raise PelabError(
            f"linearity: position={inputs.scheme} has no input table to test; schemes with one: "
            f"{with_tables()} (or give a table with --table)"
        )
    L, D = table.shape
    if inputs.model is not None:
        tables = {"trained": table}
        init = AnalysisInput.for_model(inputs.initial_model(), inputs.run).position_table()  # type: ignore[arg-type]
        if init is not None and not np.array_equal(init, table):  # fixed tables do not train
            tables["initial"] = init
    else:
        name = f"table {inputs.table_name}" if inputs.table is not None else str(inputs.scheme)
        tables = {name: table}
    if D >= 2 and inputs.scheme != "sinusoidal":
        tables["sinusoidal (reference)"] = sinusoid_table(torch.arange(L), D).numpy()
    if inputs.model is None:
        tables["random N(0,1) (reference)"] = np.random.default_rng(inputs.seed).standard_normal((L, D))
    return tables


@one_blas_thread
def run(inputs: AnalysisInput, out: Path) -> dict[str, Any]:
    from pelab import plots

    tables = tables_to_test(inputs)
    L = next(iter(tables.values())).shape[0]
    shifts = shifts_for(L)
    if not shifts:
        raise PelabError(f"linearity: needs at least 3 positions (got {L})")
    fits = {name: [shift_fit(t, k) for k in shifts] for name, t in tables.items()}
    result: dict[str, Any] = {
        "analysis": "linearity",
        "source": inputs.label,
        "subject": next(iter(fits)),
        "shifts": shifts,
        "tables": fits,
        "definition": (
            "residual = ||P[:-k] W - P[k:]||_F / ||P[k:]||_F for the least-squares W (numpy lstsq); "
            "determined: more shifted pairs than rank(P[:-k]), else any table fits exactly; heldout_residual: W "
            "fitted on pairs starting at even positions, scored on those starting at odd ones; heldout_spanned: "
            "the fitting rows span the scored ones (else even an exactly linear table misses there)."
        ),
    }
    series = {}
    for name, rows in fits.items():
        series[f"{name}: in-sample"] = [max(r["residual"], 1e-17) for r in rows]
        series[f"{name}: held-out"] = [max(r["heldout_residual"], 1e-17) for r in rows]
    styles = {n: ("o-" if n.endswith("in-sample") else "x--") for n in series}
    files = [
        plots.lines(
            out / "linearity.png",
            shifts,
            series,
            f"{inputs.label}: best linear map PE(pos) -> PE(pos+k)",
            "shift k",
            "relative residual",
            logy=True,
            styles=styles,
        )
    ]
    result["summary"] = "; ".join(_summary(name, rows[0]) for name, rows in fits.items())
    result["files"] = [p.name for p in [*files, out / "linearity.json"]]
    write_json(out, "linearity", result)
    return result


def _summary(name: str, r: dict[str, Any]) -> str:
    text = f"{name} k={r['k']}: residual {r['residual']:.1e}"
    if not r["determined"]:
        text += f" (trivial: {r['pairs']} pairs <= rank {r['rank']})"
    text += f", held-out {r['heldout_residual']:.1e}"
    return text + ("" if r["heldout_spanned"] else " (fit rows do not span)")
