"""What a table of position vectors encodes: small functions over a (L, D) table.

In the spirit of Wang & Chen (EMNLP 2020, "What do position embeddings learn?"),
run on MiniLM's learned positions and, side by side, on a sinusoidal table of the
same size (claims C16, C11, C1), plus the geometry of the word, position and
token-type tables together (C2/C3 on a real model). The generic measurements are
``pelab.analysis``'s, so a number here means what it means everywhere in pelab:

* absolute position: ``probes.regress`` (ridge, penalty chosen by inner CV, scored on
  held-out positions, chance = MAE of predicting the training mean), on the whole
  vector and, for capacity control, on its top r principal components; the same
  probe on shuffled positions is the control.
* relative order: logistic regression on [p_i ; p_j] -> (i < j), trained on pairs of
  one half of the positions and tested on pairs of the other half (chance 50%).
* relative linearity: ``linearity.shift_fit`` (the best linear map PE(pos) -> PE(pos+k),
  in-sample and held out), beside the same fit on shuffled rows (what capacity alone
  reaches with L - k rows and D unknowns per column) and the fit inside the table's top
  ``LINEARITY_RANK`` directions, where the map has too few values to fit noise.
* per-dimension variation (``spectrum``'s counts, and a scale-free summary), cosine
  similarity by offset, norms, and the overlap of the word and position subspaces
  (``geometry``'s principal angles).

Each public function runs with one BLAS thread (these are small problems; on a busy
machine more threads only fight). Dimension letters: L positions, D width, R subspace rank.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from pelab.analysis import geometry, linearity, probes, spectrum
from pelab.analysis.inputs import one_blas_thread
from pelab.positions.sinusoidal import sinusoid_table

RANKS = (1, 2, 4, 8, 16, 32, 64)
OFFSETS = (1, 2, 4, 8, 16, 32, 64)
SIMILARITY_OFFSETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: MiniLM's top 32 position directions hold ~98% of its variance.
LINEARITY_RANK = 32
SUBSPACE_RANKS = (4, 8, 16, 32)


def sinusoidal_like(table: Tensor | np.ndarray) -> np.ndarray:
    """The sinusoidal table (paper layout) with the same number of positions and width, float64."""
    L, D = table.shape
    return sinusoid_table(torch.arange(L), D).numpy()


def as_array(table: Tensor | np.ndarray) -> np.ndarray:
    return table.double().numpy() if isinstance(table, Tensor) else np.asarray(table, dtype=np.float64)


def shuffled_rows(table: np.ndarray, seed: int = 0) -> np.ndarray:
    """The same vectors at random positions: every probe's control."""
    return table[np.random.default_rng(seed).permutation(len(table))]


def top_directions(table: np.ndarray, rank: int, centre: bool = True) -> np.ndarray:
    """(N, D) -> (D, rank) orthonormal top principal (centred) or singular (uncentred) directions.

    From the eigenvectors of the D x D Gram matrix: the same directions as an SVD of the
    table, and quick for the 30522-row word table.
    """
    x = table - table.mean(0) if centre else table
    _, vecs = np.linalg.eigh(x.T @ x)  # ascending eigenvalues
    return vecs[:, ::-1][:, :rank]


# --- absolute position --------------------------------------------------------------------
@one_blas_thread
def position_regression(table: np.ndarray, rank: int | None = None) -> dict[str, float]:
    """Held-out R², MAE and chance MAE of the ridge probe of position (each position its own group).

    ``rank`` limits the probe to the top principal components; they are found without
    the positions' labels, so the projection leaks nothing about the target.
    """
    x = table if rank is None or rank >= table.shape[1] else table @ top_directions(table, rank)
    L = len(x)
    return probes.regress(x, np.arange(L, dtype=float), np.arange(L))


@one_blas_thread
def regression_by_rank(table: np.ndarray, ranks: tuple[int, ...] = RANKS) -> dict[str, dict[str, float]]:
    """The probe at growing capacity: top-r principal components, then the whole vector ("all")."""
    out = {str(r): position_regression(table, r) for r in ranks if r < table.shape[1]}
    out["all"] = position_regression(table)
    return out


# --- relative order -----------------------------------------------------------------------
@one_blas_thread
def relative_order(
    table: np.ndarray, pairs: int = 20_000, seed: int = 0, coord: np.ndarray | None = None
) -> dict[str, float]:
    """Logistic regression on [p_i ; p_j] predicting i < j; tested on positions never seen in training.

    ``coord`` orders rows by another coordinate (a patch's column or row); pairs that tie are left out.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    c = np.arange(len(table)) if coord is None else np.asarray(coord)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(table))
    sets = []
    for half in (order[: len(table) // 2], order[len(table) // 2 :]):
        i, j = rng.choice(half, pairs // 2), rng.choice(half, pairs // 2)
        i, j = i[c[i] != c[j]], j[c[i] != c[j]]
        sets.append((np.concatenate([table[i], table[j]], axis=1), (c[i] < c[j]).astype(int)))
    (xa, ya), (xb, yb) = sets
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    probe.fit(xa, ya)
    return {"accuracy": float(probe.score(xb, yb)), "chance": float(max(yb.mean(), 1 - yb.mean()))}


# --- relative linearity (C11) -------------------------------------------------------------
def rank_limited_residual(table: np.ndarray, k: int, rank: int = LINEARITY_RANK) -> float:
    """``linearity.best_shift_map``'s residual inside the table's top ``rank`` (uncentred) singular directions."""
    return linearity.best_shift_map(table @ top_directions(table, rank, centre=False), k)[1]


@one_blas_thread
def linearity_rows(table: np.ndarray, offsets: tuple[int, ...] = OFFSETS, seed: int = 0) -> list[dict[str, object]]:
    """Per offset k: ``linearity.shift_fit`` plus shuffled and rank-limited residuals (see the module docstring).

    Offsets leaving no more rows than the table's width (L - k <= D) are skipped: any table fits them.
    """
    control = shuffled_rows(table, seed)
    rows = []
    for k in offsets:
        if len(table) - k <= table.shape[1]:
            continue
        row = linearity.shift_fit(table, k)
        row["shuffled_residual"] = linearity.best_shift_map(control, k)[1]
        row["rank"] = LINEARITY_RANK
        row["rank_residual"] = rank_limited_residual(table, k)
        row["rank_shuffled_residual"] = rank_limited_residual(control, k)
        rows.append(row)
    return rows


# --- shape of the table -------------------------------------------------------------------
def cosine_similarity(table: np.ndarray) -> np.ndarray:
    """(L, L) cosine similarity between position vectors."""
    p = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-300)
    return p @ p.T


def similarity_by_offset(table: np.ndarray, offsets: tuple[int, ...] = SIMILARITY_OFFSETS) -> dict[str, float]:
    """Mean cosine similarity of PE(pos) and PE(pos+k), per offset k."""
    sim = cosine_similarity(table)
    return {str(k): float(np.diagonal(sim, k).mean()) for k in offsets if k < len(table)}


def dimension_variation(table: np.ndarray) -> dict[str, object]:
    """How the variation over positions spreads over dimensions (C1 asks it of sinusoidal).

    ``varying_at``: ``spectrum``'s counts of dimensions whose range exceeds each absolute
    threshold (scale-dependent: MiniLM's entries are ~40x smaller than sin/cos);
    scale-free: ``dims_for_90pct`` (fewest dimensions holding 90% of the summed variance),
    ``participation_ratio`` ((sum var)^2 / sum var^2, the effective number of varying
    dimensions) and ``top_tenth_variance`` (share held by the 10% most varying dimensions).
    """
    var = np.sort(spectrum.dimension_variance(table))[::-1]
    share = np.cumsum(var) / var.sum()
    return {
        "dimensions": int(len(var)),
        "varying_at": {str(t): spectrum.count_varying(table, t) for t in spectrum.THRESHOLDS},
        "dims_for_90pct": int((share < 0.9).sum()) + 1,
        "participation_ratio": float(var.sum() ** 2 / (var**2).sum()),
        "top_tenth_variance": float(var[: max(1, math.ceil(0.1 * len(var)))].sum() / var.sum()),
    }


def pca_2d(table: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """(L, 2) coordinates on the first two principal components, and their shares of variance."""
    u, s, _ = np.linalg.svd(table - table.mean(0), full_matrices=False)
    share = (s**2 / (s**2).sum())[:2]
    return u[:, :2] * s[:2], [float(v) for v in share]


@one_blas_thread
def analyse_table(table: np.ndarray, seed: int = 0) -> dict[str, object]:
    """Every number this module measures on one position table (linearity separately: ``linearity_rows``)."""
    control = shuffled_rows(table, seed)
    return {
        "shape": list(table.shape),
        "regression": regression_by_rank(table),
        "regression_shuffled": position_regression(control),
        "relative_order": relative_order(table, seed=seed),
        "relative_order_shuffled": relative_order(control, seed=seed),
        "similarity_by_offset": similarity_by_offset(table),
        "dimensions": dimension_variation(table),
        "pca_2d_variance": pca_2d(table)[1],
    }


# --- the three tables together ------------------------------------------------------------
def norm_summary(table: np.ndarray) -> dict[str, float]:
    n = np.linalg.norm(table, axis=1)
    return {"mean": float(n.mean()), "median": float(np.median(n)), "min": float(n.min()), "max": float(n.max())}


@one_blas_thread
def subspace_overlap(word: np.ndarray, position: np.ndarray, ranks: tuple[int, ...] = SUBSPACE_RANKS) -> dict:
    """How much the word and position subspaces share.

    ``energy``: ``geometry.subspace_report`` (the principal subspaces holding 90% of each
    set's variance; overlap = mean cos² of the principal angles, beside random subspaces).
    ``by_rank``: the same overlap between the top-r subspaces of each, r in ``ranks``
    (random baseline r/D), and the share of the centred position vectors' variance that
    lies in the word table's top-r subspace.
    """
    D = word.shape[1]
    p = position - position.mean(0)
    report = geometry.subspace_report(word, position)
    angles = np.asarray(report.pop("angles_deg"), dtype=float)
    report["smallest_angles_deg"] = [float(a) for a in angles[:5]]
    by_rank = {}
    word_dirs, position_dirs = top_directions(word, max(ranks)), top_directions(position, max(ranks))  # one Gram each
    for r in ranks:
        bw, bp = word_dirs[:, :r], position_dirs[:, :r]
        by_rank[str(r)] = {
            "overlap": geometry.overlap_score(bw, bp),
            "random_baseline": geometry.random_overlap(r, r, D),
            "position_variance_in_word": float(((p @ bw) ** 2).sum() / (p**2).sum()),
        }
    return {"energy": report, "by_rank": by_rank}
