"""What a pretrained model's position table encodes, for any model ``hf.load`` reads, side by side.

Every number is ``pelab.pretrained.positions``'s (so MiniLM's row here is the number its own
report prints), measured on the rows a model actually reads (``hf.Model.position``):

* sequence models: C16 (ridge probe of the absolute position, logistic probe of the order
  of two unseen positions, each beside shuffled rows), C11 (``linearity_rows``; where the
  table has no more rows than width, L - k <= D, a free map fits anything, so only the fit
  inside the top ``positions.LINEARITY_RANK`` directions is reported), norms of word,
  position and token-type vectors, and the overlap of the word and position subspaces;
* patch grids (ViT, ViT-MAE): the same probes on a patch's row and column, left/right and
  above/below order, C11 as the map PE(r, c) -> PE(r, c + k) (and r + k), and the patch
  against patch similarity the ViT and MAE papers draw; the [CLS] row and the patch
  projection's directions stand where a text model has token-type and word vectors;
* ``closed_form``: how far the table is from the closed form of its size (the 1-D
  sinusoid, paper layout; for a grid, MAE's 2-D sin-cos), so a fixed table is recognised
  as such whatever its config says.

Beside each model, a reference of its size (sinusoidal L x D, or 2-D sin-cos H x W x D),
measured once per size. Dimension letters: L positions, D width, H x W patch grid.
"""

from __future__ import annotations

import numpy as np
import torch

from pelab.analysis import linearity
from pelab.analysis.inputs import one_blas_thread
from pelab.analysis.probes import regress
from pelab.pretrained import positions as pa
from pelab.weights.hf import Model

#: A stored table within this of the closed form (float32 round-off ~1e-7, float16 ~5e-4) is that closed form.
CLOSED_FORM_TOLERANCE = 1e-3
GRID_OFFSETS = (1, 2, 4, 8)


def ranks_for(*tables: np.ndarray) -> tuple[int, ...]:
    """``positions.SUBSPACE_RANKS`` that fit every table (fewer directions than rows and than width)."""
    limit = min(min(t.shape) for t in tables)
    return tuple(r for r in pa.SUBSPACE_RANKS if r < limit) or (1,)


def grid_table(table: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """Patch rows (H*W, D), row-major -> (H, W, D)."""
    return table.reshape(grid[0], grid[1], -1)


def coordinates(grid: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Each patch's row and column (row-major flat order)."""
    t = np.arange(grid[0] * grid[1])
    return t // grid[1], t % grid[1]


# --- closed forms ---------------------------------------------------------------------------
def reference_table(shape: tuple[int, int], grid: tuple[int, int] | None) -> np.ndarray | None:
    """The closed form of a table's size: the 1-D sinusoid (paper layout), or MAE's 2-D sin-cos on a grid
    (None when the width is not a multiple of 4)."""
    L, D = shape
    if grid is None:
        return pa.sinusoidal_like(np.zeros(shape))
    if D % 4:
        return None
    from pelab.positions.sincos2d import sincos_2d_table

    return sincos_2d_table(torch.arange(L), D, grid).numpy()


def closed_form(model: Model) -> dict[str, object]:
    """Distance of the table from the closed form of its size; ``matches`` within CLOSED_FORM_TOLERANCE."""
    table = pa.as_array(model.position)
    name = "sinusoidal" if model.grid is None else "sincos2d"
    ref = reference_table(table.shape, model.grid)
    if ref is None:
        return {"name": name, "max_abs_error": None, "matches": False, "config": model.fixed}
    err = float(np.abs(table - ref).max())
    if model.cls_position is not None:  # MAE's [CLS] row is zero
        err = max(err, float(model.cls_position.abs().max()))
    return {"name": name, "max_abs_error": err, "matches": err < CLOSED_FORM_TOLERANCE, "config": model.fixed}


# --- C11 where the full fit is undetermined -----------------------------------------------
@one_blas_thread
def linearity_any(table: np.ndarray, offsets: tuple[int, ...] = pa.OFFSETS, seed: int = 0) -> list[dict]:
    """``positions.linearity_rows`` where L - k > D; elsewhere only the fit in the top LINEARITY_RANK directions
    (``residual`` None), which has fewer unknowns than rows as long as L - k > that rank."""
    L, D = table.shape
    full = {r["k"]: r for r in pa.linearity_rows(table, tuple(k for k in offsets if L - k > D), seed)}
    control = pa.shuffled_rows(table, seed)
    rank = min(pa.LINEARITY_RANK, D)
    rows = []
    for k in offsets:
        if k in full:
            rows.append(full[k])
        elif L - k > rank:
            rows.append({"k": k, "pairs": L - k, "determined": False, "residual": None, "shuffled_residual": None,
                         "rank": pa.LINEARITY_RANK, "rank_residual": pa.rank_limited_residual(table, k),
                         "rank_shuffled_residual": pa.rank_limited_residual(control, k)})  # fmt: skip
    return rows


def pair_residual(a: np.ndarray, b: np.ndarray) -> float:
    """Relative residual of the least-squares W with a W ~ b (``linearity``'s definition)."""
    w, *_ = np.linalg.lstsq(a, b, rcond=None)
    return linearity.relative_residual(a, b, w)


@one_blas_thread
def grid_linearity(table: np.ndarray, grid: tuple[int, int], seed: int = 0) -> dict[str, list[dict]]:
    """C11 on a grid: the best linear map PE(r, c) -> PE(r, c + k) ("columns") and PE(r + k, c) ("rows"),
    over the whole width (when there are more pairs than width) and inside the top LINEARITY_RANK
    directions, beside the same fits on shuffled patches."""
    D = table.shape[1]
    basis = pa.top_directions(table, min(pa.LINEARITY_RANK, D), centre=False)
    control = pa.shuffled_rows(table, seed)
    cbasis = pa.top_directions(control, min(pa.LINEARITY_RANK, D), centre=False)
    g, cg = grid_table(table, grid), grid_table(control, grid)
    out: dict[str, list[dict]] = {"columns": [], "rows": []}
    for axis, name in ((1, "columns"), (0, "rows")):
        for k in GRID_OFFSETS:
            if k >= grid[axis]:
                continue

            def pairs(x: np.ndarray, k: int = k, axis: int = axis) -> tuple[np.ndarray, np.ndarray]:
                a = x[:, :-k] if axis == 1 else x[:-k]
                b = x[:, k:] if axis == 1 else x[k:]
                return a.reshape(-1, x.shape[-1]), b.reshape(-1, x.shape[-1])

            (a, b), (ca, cb) = pairs(g), pairs(cg)
            rank = basis.shape[1]
            if len(a) <= rank:
                continue
            determined = len(a) > D
            out[name].append({
                "k": k, "pairs": len(a), "determined": determined,
                "residual": pair_residual(a, b) if determined else None,
                "shuffled_residual": pair_residual(ca, cb) if determined else None,
                "rank": pa.LINEARITY_RANK,
                "rank_residual": pair_residual(a @ basis, b @ basis),
                "rank_shuffled_residual": pair_residual(ca @ cbasis, cb @ cbasis),
            })  # fmt: skip
    return out


# --- C16 on a grid ----------------------------------------------------------------------------
@one_blas_thread
def grid_probes(table: np.ndarray, grid: tuple[int, int], seed: int = 0) -> dict[str, object]:
    """A patch's row and column from its vector (ridge, held-out patches), and which of two unseen patches
    lies left of / above the other; each beside shuffled patches."""
    rows, cols = coordinates(grid)
    control = pa.shuffled_rows(table, seed)
    groups = np.arange(len(table))
    out: dict[str, object] = {}
    for name, coord in (("row", rows), ("column", cols)):
        out[name] = regress(table, coord.astype(float), groups)
        out[f"{name}_shuffled"] = regress(control, coord.astype(float), groups)
    for name, coord in (("left_right", cols), ("above_below", rows)):
        out[name] = pa.relative_order(table, seed=seed, coord=coord)
        out[f"{name}_shuffled"] = pa.relative_order(control, seed=seed, coord=coord)
    return out


def grid_similarity(table: np.ndarray, grid: tuple[int, int]) -> dict[str, float]:
    """Mean cosine similarity of a patch's vector with the one k columns right ("c+k") or k rows down ("r+k")."""
    g = grid_table(table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-300), grid)
    out = {}
    for k in GRID_OFFSETS:
        if k < grid[1]:
            out[f"c+{k}"] = float((g[:, :-k] * g[:, k:]).sum(-1).mean())
        if k < grid[0]:
            out[f"r+{k}"] = float((g[:-k] * g[k:]).sum(-1).mean())
    return out


# --- per model ----------------------------------------------------------------------------
def source(model: Model) -> dict[str, object]:
    return {
        "name": model.name,
        "path": str(model.path),
        "model_type": model.family,
        "tensors": model.keys,
        "table_shape": list(model.table_shape),
        "offset": model.offset,
        "positions": list(model.position.shape) if model.grid is None else [*model.grid, model.position.shape[1]],
        "word_rows_analysed": None if model.words is None else int(model.words.shape[0]),
        "word_rows_filtered": model.word_keep is not None,
    }


def share_inside(vectors: np.ndarray, basis: np.ndarray) -> float:
    """Share of the vectors' squared norm inside the span of ``basis`` (orthonormal columns)."""
    total = float((vectors**2).sum())
    return float(((vectors @ basis) ** 2).sum() / total) if total > 0 else 0.0


@one_blas_thread
def geometry(model: Model) -> dict[str, object]:
    """Norms of every input table, and how the position subspace sits against the word (text) or patch
    projection (ViT) subspace; token-type vectors' share in each top-r subspace, beside r / D."""
    position = pa.as_array(model.position)
    D = position.shape[1]
    norms = {"position": pa.norm_summary(position)}
    other = None
    if model.words is not None:
        other = pa.as_array(model.words)
        norms["word"] = pa.norm_summary(other)
    if model.patch_directions is not None:
        other = pa.as_array(model.patch_directions)
        norms["patch_directions"] = pa.norm_summary(other)
    for name in ("token_type", "cls_position", "cls_token"):
        t = getattr(model, name)
        if t is not None:
            norms[name] = pa.norm_summary(pa.as_array(t.reshape(-1, D)))
    out: dict[str, object] = {"norms": norms}
    if other is not None:
        out["subspace"] = pa.subspace_overlap(other, position, ranks_for(other, position))
    if model.token_type is not None and other is not None:
        r = max(ranks_for(other, position))
        tt = pa.as_array(model.token_type)
        out["token_type"] = {
            "rank": r,
            "share_in_word": share_inside(tt, pa.top_directions(other, r)),
            "share_in_position": share_inside(tt, pa.top_directions(position, r)),
            "random_baseline": r / D,
            "difference_norm": float(np.linalg.norm(tt[0] - tt[-1])),
        }
    return out


def analyse_sequence(table: np.ndarray, seed: int = 0) -> dict[str, object]:
    return {"positions": pa.analyse_table(table, seed), "linearity": linearity_any(table, seed=seed)}


def analyse_grid(table: np.ndarray, grid: tuple[int, int], seed: int = 0) -> dict[str, object]:
    return {
        "shape": [*grid, table.shape[1]],
        "probes": grid_probes(table, grid, seed),
        "linearity": grid_linearity(table, grid, seed),
        "similarity_by_offset": grid_similarity(table, grid),
        "dimensions": pa.dimension_variation(table),
    }


def reference_key(model: Model) -> str:
    L, D = model.position.shape
    return f"sinusoidal {L}x{D}" if model.grid is None else f"sincos2d {model.grid[0]}x{model.grid[1]}x{D}"


def analyse(model: Model, seed: int = 0, minilm: dict | None = None) -> dict[str, object]:
    """Every number about one model. ``minilm`` (``report.measure``'s numbers) supplies MiniLM's probes
    already measured, the same functions on the same table."""
    table = pa.as_array(model.position)
    out: dict[str, object] = {
        "source": source(model),
        "closed_form": closed_form(model),
        "reference": reference_key(model),
    }
    if model.grid is not None:
        out.update(analyse_grid(table, model.grid, seed))
    elif minilm is not None:
        out.update(positions=minilm["positions"]["minilm"], linearity=minilm["linearity"]["minilm"])
    else:
        out.update(analyse_sequence(table, seed))
    out.update(geometry(model))
    return out


def analyse_reference(model: Model, seed: int = 0, minilm: dict | None = None) -> dict[str, object] | None:
    """The reference of the model's size (see ``reference_key``), measured as the model is."""
    ref = reference_table(tuple(model.position.shape), model.grid)
    if ref is None:
        return None
    norms = {"norms": {"position": pa.norm_summary(ref)}}
    if model.grid is not None:
        return {**analyse_grid(ref, model.grid, seed), **norms}
    if minilm is not None and minilm["positions"]["sinusoidal"]["shape"] == list(ref.shape):
        return {"positions": minilm["positions"]["sinusoidal"], "linearity": minilm["linearity"]["sinusoidal"], **norms}
    return {**analyse_sequence(ref, seed), **norms}


def side_by_side(models: list[Model], seed: int = 0, minilm: dict | None = None) -> dict[str, object]:
    """{"models": {name: analyse(...)}, "references": {reference_key: ...}}, each reference measured once."""
    out: dict[str, dict] = {"models": {}, "references": {}}
    for m in models:
        mini = minilm if m.name == "mini-lm" else None
        out["models"][m.name] = analyse(m, seed, mini)
        key = reference_key(m)
        if key not in out["references"]:
            out["references"][key] = analyse_reference(m, seed, mini)
    return out
