"""Geometry of the sum (claims C2, C3): are token and position vectors out of each other's way?

* Random vectors (C3): the mean |cos| between independent random directions in R^d,
  measured, beside the law sqrt(2/(pi d)) and the exact value
  E|cos| = Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)), for d = 2 .. 1024.
* Subspaces (C2): the token vectors (one per vocabulary entry) and the position vectors
  (one per position), each as they arrive at layer 1, i.e. mapped through the combiner
  alone: add gives x and p, scaled_add sqrt(d) x and p, concat_split [x; 0] and [0; p].
  Each set is centred (its mean is a shared offset, not information) and reduced to the
  principal subspace holding ``ENERGY`` of its variance. Between the two subspaces:
  principal angles, and overlap = ||Qa^T Qb||_F^2 / min(ka, kb) = mean cos^2 of the
  angles, 0 when orthogonal and 1 when one contains the other. Beside it, the overlap
  expected of random subspaces of the same dimensions, max(ka, kb) / d.
  For a trained model: at initialisation (same seed, same construction) and after
  training, so one sees whether training pulls them apart. For a scheme alone: its
  table against a random N(0, 1) token table, at the given d and across d = 16..256.
  A multiplicative combiner (multiply, matrix) has no position part to compare (its
  position signal x ⊙ p or A_pos x is a product of token and position; see
  ``pelab.analysis.additive``): the overlap is left out and ``not_applicable`` says why.

``run`` returns (and writes to geometry.json) these stable keys:
    source, random_cosines [{d, mean_abs_cos, stderr, law, exact, pairs}],
    overlap {init, trained} (model) or {table} (scheme), each
        {angles_deg, dims [ka, kb], overlap, random_baseline, width}
        (empty when position does not enter at the input, or the combiner is multiplicative),
    not_applicable (why the overlap does not apply to the model's combiner, or null),
    overlap_by_d [{d, overlap, random_baseline, dims}] (scheme with a formula),
    energy, definition, summary, files (geometry_cosines.png, geometry_subspaces.png, geometry.json).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pelab.analysis import additive
from pelab.analysis.inputs import AnalysisInput, one_blas_thread, write_json
from pelab.embedding import FrozenEmbedding
from pelab.errors import PelabError
from pelab.model import Transformer

ENERGY = 0.9
COSINE_WIDTHS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
OVERLAP_WIDTHS = (16, 32, 64, 128, 256)


# --- random vectors -----------------------------------------------------------------------


def cosine_law(d: int | np.ndarray) -> np.ndarray:
    """The large-d law for the mean |cos| of two random directions: sqrt(2 / (pi d))."""
    return np.sqrt(2.0 / (np.pi * np.asarray(d, dtype=float)))


def cosine_exact(d: int) -> float:
    """E|cos| for two independent uniform directions in R^d: Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2))."""
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


def random_abs_cosines(d: int, pairs: int, rng: np.random.Generator) -> np.ndarray:
    """|cos| of ``pairs`` independent pairs of Gaussian (hence uniformly directed) vectors in R^d."""
    a, b = rng.standard_normal((pairs, d)), rng.standard_normal((pairs, d))
    return np.abs((a * b).sum(1)) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def cosine_curve(widths: tuple[int, ...] = COSINE_WIDTHS, pairs: int = 4000, seed: int = 0) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for d in widths:
        c = random_abs_cosines(d, pairs, rng)
        out.append(
            {
                "d": d,
                "mean_abs_cos": float(c.mean()),
                "stderr": float(c.std(ddof=1) / math.sqrt(pairs)),
                "law": float(cosine_law(d)),
                "exact": cosine_exact(d),
                "pairs": pairs,
            }
        )
    return out


# --- subspaces ------------------------------------------------------------------------------


def orthonormal_basis(a: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """(D, k) columns -> (D, r) orthonormal basis of their span (r = numerical rank)."""
    u, s, _ = np.linalg.svd(a, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return u[:, :0]
    return u[:, s > rtol * s[0]]


@one_blas_thread
def principal_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Principal angles (radians, ascending) between the column spans of a (D, ka) and b (D, kb).

    Björck & Golub: the cosines are the singular values of Qa^T Qb; small angles are
    taken from the sines (singular values of (I - Qa Qa^T) Qb), which keeps them
    accurate where arccos is not.
    """
    qa, qb = orthonormal_basis(a), orthonormal_basis(b)
    if qa.shape[1] < qb.shape[1]:
        qa, qb = qb, qa
    k = qb.shape[1]
    cos = np.clip(np.linalg.svd(qa.T @ qb, compute_uv=False), 0.0, 1.0)[:k]  # descending
    sin = np.clip(np.linalg.svd(qb - qa @ (qa.T @ qb), compute_uv=False), 0.0, 1.0)  # descending
    sin = np.sort(np.concatenate([sin, np.zeros(max(0, k - sin.size))]))[:k]  # ascending, pairs with cos
    angles = np.where(cos**2 > 0.5, np.arcsin(sin), np.arccos(cos))
    return np.sort(angles)


def overlap_score(a: np.ndarray, b: np.ndarray) -> float:
    """||Qa^T Qb||_F^2 / min(ka, kb): the mean cos^2 of the principal angles, in [0, 1]."""
    qa, qb = orthonormal_basis(a), orthonormal_basis(b)
    k = min(qa.shape[1], qb.shape[1])
    return float(np.linalg.norm(qa.T @ qb) ** 2 / k) if k else 0.0


def random_overlap(ka: int, kb: int, d: int) -> float:
    """Expected overlap_score of uniformly random subspaces of dimensions ka, kb in R^d."""
    return min(1.0, max(ka, kb) / d)


def principal_subspace(vectors: np.ndarray, energy: float = ENERGY) -> np.ndarray:
    """(n, D) vectors -> (D, k) orthonormal basis of the centred set's top principal directions.

    k is the fewest directions holding ``energy`` of the variance (at least 1).
    """
    centred = vectors - vectors.mean(axis=0, keepdims=True)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    var = s**2
    if var.sum() == 0:
        return vt[:0].T
    k = int(np.searchsorted(np.cumsum(var) / var.sum(), energy - 1e-12) + 1)
    return vt[:k].T


def subspace_report(tokens: np.ndarray, positions: np.ndarray, energy: float = ENERGY) -> dict[str, Any]:
    """Principal angles and overlap between the token and position principal subspaces."""
    d = tokens.shape[1]
    qa, qb = principal_subspace(tokens, energy), principal_subspace(positions, energy)
    ka, kb = qa.shape[1], qb.shape[1]
    return {
        "width": d,
        "dims": [ka, kb],
        "angles_deg": np.degrees(principal_angles(qa, qb)) if ka and kb else [],
        "overlap": overlap_score(qa, qb),
        "random_baseline": random_overlap(ka, kb, d),
    }


# --- the layer-1 parts of a model ---------------------------------------------------------------


@torch.no_grad()
def layer1_parts(model: Transformer, length: int, max_tokens: int = 4096) -> tuple[np.ndarray, np.ndarray | None]:
    """Token vectors (one per vocabulary entry, or per input axis of a patch projection) and
    position vectors (one per position), each mapped through the combiner alone.

    Returns ((V, C), (length, C) or None when position does not enter at the input). Only for an
    additive combiner: a multiplicative one has no position vectors of its own (PelabError says why).
    """
    why = additive.reason(model, "geometry", "compare as subspaces")
    if why is not None:
        raise PelabError(why)
    emb = model.embed
    w = emb.combiner.widths
    if isinstance(emb.token, torch.nn.Embedding | FrozenEmbedding):  # a lookup table (MiniLM's frozen one too)
        raw = emb.token.weight[:max_tokens]  # (V, d_token)
    else:
        raw = emb.token(torch.eye(emb.token.in_features, dtype=emb.token.weight.dtype))  # (P, d_token)
    raw = raw[None]  # (1, V, d_token)
    dt = raw.dtype

    def zeros(n: int, k: int) -> torch.Tensor:
        return torch.zeros(1, n, k, dtype=dt)

    sides = {k: zeros(raw.shape[1], v) for k, v in w.sides.items()}
    tokens = emb.combiner(raw, sides)[0]  # (V, C)
    if "position" not in w.sides:
        return tokens.double().numpy(), None
    p = model.scheme.table(torch.arange(length)).to(dt)[None]  # (1, T, d_position)
    sides = {k: (p if k == "position" else zeros(length, v)) for k, v in w.sides.items()}
    positions = emb.combiner(zeros(length, w.token), sides)[0]  # (T, C)
    return tokens.double().numpy(), positions.double().numpy()


@torch.no_grad()
def layer1_grid(model: Transformer, ids: np.ndarray, length: int) -> np.ndarray:
    """(len(ids), length, C): the layer-1 input of each token id at each position 0..length-1 through the
    model's own combiner: x_a + p_i under add, x_a ⊙ (1 + p_i) under multiply, (I + A_i) x_a under matrix.
    Segments are left out (held at zero)."""
    emb = model.embed
    w = emb.combiner.widths
    positions = torch.arange(length)
    x = emb.token(torch.as_tensor(ids, dtype=torch.long))[:, None, :].expand(-1, length, -1)  # (V, T, d_token)
    sides = {k: torch.zeros(len(ids), length, v, dtype=x.dtype) for k, v in w.sides.items()}
    if "position" in sides:
        sides["position"] = model.scheme.table(positions).to(x.dtype)[None].expand(len(ids), -1, -1)  # (V, T, d_p)
    return emb.combiner(x, sides, positions).double().numpy()  # (V, T, C)


def model_overlap(model: Transformer, length: int, energy: float = ENERGY) -> dict[str, Any] | None:
    tokens, positions = layer1_parts(model, length)
    return None if positions is None else subspace_report(tokens, positions, energy)


def scheme_overlap_by_d(inputs: AnalysisInput, widths: tuple[int, ...] = OVERLAP_WIDTHS) -> list[dict[str, Any]]:
    """The scheme's table against a random N(0, 1) token table of ``inputs.vocab`` rows, as d grows."""
    from pelab.tables import scheme_table

    assert inputs.position is not None
    out = []
    for d in widths:
        try:
            t = scheme_table(inputs.position, d, inputs.length, inputs.grid, seed=inputs.seed, max_len=512)
        except PelabError:  # e.g. sincos2d at a width not divisible by 4
            continue
        if t is None:
            return []
        tokens = np.random.default_rng(inputs.seed + d).standard_normal((inputs.vocab, d))
        r = subspace_report(tokens, t.numpy())
        out.append({"d": d, "overlap": r["overlap"], "random_baseline": r["random_baseline"], "dims": r["dims"]})
    return out


@one_blas_thread
def run(inputs: AnalysisInput, out: Path) -> dict[str, Any]:
    from pelab import plots

    curve = cosine_curve(seed=inputs.seed)
    result: dict[str, Any] = {"analysis": "geometry", "source": inputs.label, "random_cosines": curve}
    overlap: dict[str, Any] = {}
    why = None if inputs.model is None else additive.reason(inputs.model, "geometry", "compare as subspaces")
    result["not_applicable"] = None if why is None else why.removeprefix("geometry: ")
    if inputs.model is not None and why is None:
        trained = model_overlap(inputs.model, inputs.length)
        if trained is not None:
            overlap["init"] = model_overlap(inputs.initial_model(), inputs.length)
            overlap["trained"] = trained
    elif inputs.model is None:
        table = inputs.position_table()
        if table is not None:
            tokens = np.random.default_rng(inputs.seed).standard_normal((inputs.vocab, table.shape[1]))
            overlap["table"] = subspace_report(tokens, table)
            if inputs.position is not None:
                result["overlap_by_d"] = scheme_overlap_by_d(inputs)
    result["overlap"] = overlap
    result["energy"] = ENERGY
    result["definition"] = (
        "mean_abs_cos: mean |cos| of independent Gaussian pairs in R^d; law sqrt(2/(pi d)); exact "
        "Gamma(d/2)/(sqrt(pi) Gamma((d+1)/2)). Overlap: token vectors (one per vocabulary entry) and position "
        "vectors (one per position) as they enter layer 1 through the combiner alone, each centred and reduced "
        f"to the principal subspace holding {ENERGY:.0%} of its variance; principal angles between them "
        "(Björck-Golub) and overlap = ||Qa^T Qb||_F^2 / min(ka, kb) (mean cos^2 of the angles; 0 orthogonal, "
        "1 nested), beside random_baseline = max(ka, kb)/d, its expectation for random subspaces. "
        + ("Scheme alone: the table against a random N(0,1) token table." if inputs.model is None else "")
    )
    stem = out / "geometry"
    ds = [c["d"] for c in curve]
    files = [
        plots.lines(
            f"{stem}_cosines.png",
            ds,
            {
                "measured": [c["mean_abs_cos"] for c in curve],
                "sqrt(2/(pi d))": [c["law"] for c in curve],
                "exact": [c["exact"] for c in curve],
            },
            "mean |cos| of random vectors against width",
            "d",
            "mean |cos|",
            logx=True,
            logy=True,
            errors={"measured": [2 * c["stderr"] for c in curve]},
            styles={"measured": "o", "sqrt(2/(pi d))": "--", "exact": "-"},
        )
    ]
    if overlap:
        series = {name: r["angles_deg"] for name, r in overlap.items() if len(r["angles_deg"])}
        k = max((len(v) for v in series.values()), default=0)
        padded = {n: np.pad(np.asarray(v, float), (0, k - len(v)), constant_values=np.nan) for n, v in series.items()}
        title = ", ".join(
            f"{n}: overlap {r['overlap']:.3f} (random {r['random_baseline']:.3f})" for n, r in overlap.items()
        )
        files.append(
            plots.lines(
                f"{stem}_subspaces.png",
                np.arange(1, k + 1),
                padded,
                title,
                "principal angle index",
                "angle between token and position subspaces (degrees)",
                hlines={"orthogonal": 90.0},
            )
        )
    result["summary"] = _summary(curve, overlap)
    if result["not_applicable"]:
        result["summary"] += "; token/position overlap " + result["not_applicable"]
    result["files"] = [p.name for p in [*files, out / "geometry.json"]]
    write_json(out, "geometry", result)
    return result


def _summary(curve: list[dict[str, float]], overlap: dict[str, Any]) -> str:
    c = next((c for c in curve if c["d"] == 512), curve[-1])
    text = f"mean |cos| at d={c['d']}: {c['mean_abs_cos']:.4f} (law {c['law']:.4f})"
    for name, r in overlap.items():
        text += f"; token/position overlap {name} {r['overlap']:.3f} (random {r['random_baseline']:.3f})"
    return text
