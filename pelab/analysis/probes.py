"""Decodability of position and token (claims C8, C10): linear probes and nearest-neighbour collisions.

Probe protocol (``classify`` / ``regress``):
* samples are tokens, features their hidden vectors, groups the sequence each token
  came from; the sequences are fresh held-out draws from the run's task;
* outer cross-validation by sequence (GroupKFold, ``FOLDS`` folds): a probe never sees
  any token of a sequence it is scored on;
* capacity is fixed: every probe is linear in the features. For classes (position,
  token) two linear families are candidates, because neither dominates: a ridge
  classifier (least squares on +-1 one-vs-rest targets, standardised features, penalty
  in ``ALPHAS``; what scikit-learn's RidgeClassifier computes) and linear discriminant
  analysis with Ledoit-Wolf shrinkage. On a sinusoidal table plus token noise ridge reads
  position at 0.72 where LDA reads 0.95; in an untrained causal decoder without
  positions, where position shows in how spread the states are rather than where they
  sit, LDA reads 0.10 where ridge reads 0.13 (chance 0.083); logistic regression fell in
  between on both at many times the cost. Inside each training fold a grouped 3-fold
  search picks the family and penalty; the held-out fold only scores. Position as a
  number is read by ridge regression, penalty chosen the same way;
* chance is the majority class of the training fold scored on the test fold (1/T for
  positions), or for regression the mean absolute error of predicting the training
  fold's mean; it is always reported beside the score;
* a control with the labels shuffled across tokens must land at chance.

Collisions (C10): every (token a, position i) pair of the layer-1 input h(a, i) (the token
at that position through the model's own combiner, ``geometry.layer1_grid``: x_a + p_i
under add, [x_a; p_i] under concat, x_a ⊙ (1 + p_i) under multiply, (I + A_i) x_a under
matrix) is compared with all others. A *token collision* at (a, i): the nearest point of another token at another
position is at least as close as the nearest point of the same token at another position
(so nearest-neighbour decoding across positions gets the token wrong). A *position
collision*: the nearest point of another position (and another token) is at least as close
as the nearest point of the same position (and another token). Concatenation makes both
impossible (||[x_a - x_b; p_i - p_j]|| >= ||p_i - p_j||); addition does not. The grid
takes the task's commonest tokens (at most ``MAX_GRID``) and its first ``MAX_GRID``
positions; segment embeddings are left out. Nothing here presumes an additive input, so the
probes and the collisions apply to every combiner, the multiplicative ones included.

``run`` returns (and writes to probes.json) these stable keys:
    source, sequences, length,
    position [{layer, accuracy, std, chance, probe, r2, mae, mae_chance, alpha}]
        (layer 0 = the layer-1 input, layer l = after block l; probe: the family chosen
        most often; alpha: the regression's penalty),
    token {accuracy, std, chance, probe} or null (patch inputs have no token identity),
    shuffled {accuracy, chance},
    collisions {points, tokens, positions, token_collisions, position_collisions,
        token_fraction, position_fraction} or null,
    protocol, summary, files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.model_selection import GroupKFold

from pelab.analysis.inputs import AnalysisInput, one_blas_thread, write_json

ALPHAS = (1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)
FOLDS = 5
INNER_FOLDS = 3
SEQUENCES = 200
MAX_GRID = 64  # tokens and positions in the collision grid
PROTOCOL = (
    "Linear probes on held-out sequences: samples are tokens, groups their sequences; outer GroupKFold "
    f"({FOLDS} folds, a sequence is never split). Classes (position, token): inside each training fold a grouped "
    f"{INNER_FOLDS}-fold search picks between a ridge classifier (standardised features, penalty in {list(ALPHAS)}) "
    "and shrinkage LDA (Ledoit-Wolf); the held-out fold only scores. Position as a number: ridge regression, "
    "penalty chosen the same way. Chance: the training fold's majority class scored on the test fold "
    "(regression: MAE of predicting the training mean). Shuffled: position labels permuted across tokens, same "
    "protocol. Collisions: in the grid of layer-1 inputs h(a, i) over tokens a and positions i, a token collision "
    "is a point whose nearest other-token-other-position point is at least as close as its nearest same-token-"
    "other-position point; a position collision likewise with the roles of token and position swapped."
)

Score = Callable[[np.ndarray, np.ndarray], float]


def standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scale both by the training features' mean and std (constant features keep scale 1), as StandardScaler."""
    mean, std = train.mean(axis=0), train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (train - mean) / std, (test - mean) / std


def ridge_paths(x: np.ndarray, y: np.ndarray, x_eval: np.ndarray, alphas: tuple[float, ...] = ALPHAS) -> np.ndarray:
    """Predictions on x_eval of ridge regressions (with intercept) of y (n, m) on x, one per alpha.

    One eigendecomposition of the centred Gram matrix Xᵀ X = V diag(λ) Vᵀ serves every alpha:
    W = V diag(1 / (λ + alpha)) Vᵀ Xᵀ (y − mean y). Returns (A, n_eval, m). The Gram matrix is p × p (p = the
    width, n ≫ p samples), so this costs n·p² once where an SVD of the n × p matrix cost ~10× more: it was
    most of the report's probe time on language models (12,800 samples per probe). Every alpha here is ≥ 1e-2
    on standardised features, so squaring the condition number costs no accuracy (agrees with the SVD to 1e-15).
    """
    xm, ym = x.mean(axis=0), y.mean(axis=0)
    xc = x - xm
    lam, v = np.linalg.eigh(xc.T @ xc)
    vty = v.T @ (xc.T @ (y - ym))  # (p, m)
    xe = (x_eval - xm) @ v  # (n_eval, p)
    return np.stack([xe @ (vty / (lam + a)[:, None]) + ym for a in alphas])


def one_hot(labels: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """+1 for the label's class, -1 elsewhere: the targets of a ridge classifier."""
    return np.where(labels[:, None] == classes[None, :], 1.0, -1.0)


def ledoit_wolf(x: np.ndarray) -> np.ndarray:
    """Ledoit-Wolf shrunk covariance of x (n, p), computed on standardised features and scaled back.

    (1 - s) * S + s * mean(diag S) * I with the closed-form s of Ledoit & Wolf (2004), as
    scikit-learn's LinearDiscriminantAnalysis(shrinkage="auto") shrinks each class.
    """
    n, p = x.shape
    scale = x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (x - x.mean(axis=0)) / scale
    emp = z.T @ z / n
    mu = np.trace(emp) / p
    if p == 1:
        shrunk = emp
    else:
        z2 = z**2
        beta = ((z2.T @ z2).sum() / n - (emp**2).sum()) / (p * n)
        delta = ((emp - mu * np.eye(p)) ** 2).sum() / p
        s = 0.0 if delta == 0 else min(beta, delta) / delta
        shrunk = (1 - s) * emp + s * mu * np.eye(p)
    return scale[:, None] * shrunk * scale[None, :]


def lda_predict(x: np.ndarray, labels: np.ndarray, x_eval: np.ndarray) -> np.ndarray:
    """Shrinkage LDA (each class's covariance shrunk by Ledoit-Wolf, pooled by the class priors): a linear rule
    whose regularisation is set in closed form. What scikit-learn's LinearDiscriminantAnalysis(solver="lsqr",
    shrinkage="auto") predicts, without its per-call overhead (it dominated the probes' time)."""
    classes, inverse = np.unique(labels, return_inverse=True)
    priors = np.bincount(inverse) / len(labels)
    means = np.stack([x[inverse == c].mean(axis=0) for c in range(len(classes))])  # (K, p)
    cov = sum(pr * ledoit_wolf(x[inverse == c]) for c, pr in enumerate(priors))
    coef = np.linalg.lstsq(cov, means.T, rcond=None)[0].T  # (K, p)
    intercept = -0.5 * (means * coef).sum(axis=1) + np.log(priors)
    return classes[(x_eval @ coef.T + intercept).argmax(axis=1)]


def candidate_predictions(x: np.ndarray, labels: np.ndarray, x_eval: np.ndarray) -> dict[str, np.ndarray]:
    """Predicted labels on x_eval of every candidate probe trained on (x, labels)."""
    classes = np.unique(labels)
    xs, xe = standardise(x, x_eval)
    scores = ridge_paths(xs, one_hot(labels, classes), xe)  # (A, n_eval, classes)
    out = {f"ridge(alpha={a:g})": classes[sc.argmax(axis=1)] for a, sc in zip(ALPHAS, scores, strict=True)}
    out["lda"] = lda_predict(x, labels, x_eval)
    return out


def _inner_folds(groups: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    n = min(INNER_FOLDS, len(np.unique(groups)))
    return list(GroupKFold(n_splits=n).split(groups, groups, groups)) if n >= 2 else []


@one_blas_thread
def classify(features: np.ndarray, labels: np.ndarray, groups: np.ndarray, folds: int = FOLDS) -> dict[str, Any]:
    """Held-out accuracy of the linear probe chosen on training data only, with chance beside it."""
    accs, chances, chosen = [], [], []
    for train, test in GroupKFold(n_splits=folds).split(features, labels, groups):
        x, y = features[train], labels[train]
        values, counts = np.unique(y, return_counts=True)
        majority = values[counts.argmax()]
        chances.append(float((labels[test] == majority).mean()))
        if len(values) < 2:  # one class: the probe can only guess it
            accs.append(chances[-1])
            chosen.append("majority")
            continue
        totals: Counter[str] = Counter()
        for tr, va in _inner_folds(groups[train]):
            if len(np.unique(y[tr])) < 2:
                continue
            for name, pred in candidate_predictions(x[tr], y[tr], x[va]).items():
                totals[name] += float((pred == y[va]).mean())
        best = max(totals, key=lambda k: totals[k]) if totals else "lda"  # first best: ridge before lda
        pred = candidate_predictions(x, y, features[test])[best]
        accs.append(float((pred == labels[test]).mean()))
        chosen.append(best)
    return {
        "accuracy": float(np.mean(accs)),
        "std": float(np.std(accs)),
        "chance": float(np.mean(chances)),
        "probe": Counter(chosen).most_common(1)[0][0],
    }


@one_blas_thread
def regress(features: np.ndarray, targets: np.ndarray, groups: np.ndarray, folds: int = FOLDS) -> dict[str, float]:
    """Held-out R^2 and mean absolute error of a ridge regression probe, and the MAE of the mean."""
    y = targets.astype(float)[:, None]
    r2, mae, mae0, alphas = [], [], [], []
    for train, test in GroupKFold(n_splits=folds).split(features, y, groups):
        x, yt = features[train], y[train]
        sse = np.zeros(len(ALPHAS))
        for tr, va in _inner_folds(groups[train]):
            xs, xv = standardise(x[tr], x[va])
            sse += ((ridge_paths(xs, yt[tr], xv) - yt[va][None]) ** 2).sum(axis=(1, 2))
        alpha = ALPHAS[int(np.argmin(sse))]
        alphas.append(alpha)
        xs, xt = standardise(x, features[test])
        pred = ridge_paths(xs, yt, xt, (alpha,))[0][:, 0]
        t = y[test, 0]
        r2.append(1.0 - ((pred - t) ** 2).sum() / max(((t - t.mean()) ** 2).sum(), 1e-300))
        mae.append(np.abs(pred - t).mean())
        mae0.append(np.abs(yt.mean() - t).mean())
    return {
        "r2": float(np.mean(r2)),
        "mae": float(np.mean(mae)),
        "mae_chance": float(np.mean(mae0)),
        "alpha": float(np.median(alphas)),
    }


def collisions(points: np.ndarray, chunk: int = 512) -> dict[str, float]:
    """points (V, T, D): the layer-1 input of token a at position i. Counts as in the module docstring."""
    V, T, D = points.shape
    flat = torch.as_tensor(points.reshape(V * T, D), dtype=torch.float64)
    tok = torch.arange(V).repeat_interleave(T)
    pos = torch.arange(T).repeat(V)
    inf = torch.tensor(float("inf"), dtype=torch.float64)
    n_tok = n_pos = 0
    for start in range(0, V * T, chunk):
        rows = slice(start, start + chunk)
        dist = torch.cdist(flat[rows], flat)  # (c, N)
        same_tok = tok[rows, None] == tok[None, :]
        same_pos = pos[rows, None] == pos[None, :]
        both_differ = torch.where(~same_tok & ~same_pos, dist, inf).min(1).values
        same_tok_only = torch.where(same_tok & ~same_pos, dist, inf).min(1).values
        same_pos_only = torch.where(same_pos & ~same_tok, dist, inf).min(1).values
        n_tok += int((both_differ <= same_tok_only).sum())
        n_pos += int((both_differ <= same_pos_only).sum())
    n = V * T
    return {
        "points": n,
        "tokens": V,
        "positions": T,
        "token_collisions": n_tok,
        "position_collisions": n_pos,
        "token_fraction": n_tok / n,
        "position_fraction": n_pos / n,
    }


def collision_grid(model: Any, inputs: torch.Tensor) -> dict[str, float] | None:
    """``collisions`` of the layer-1 input over the commonest tokens of ``inputs`` (held-out ids, (B, T)) at the first
    positions (at most ``MAX_GRID`` of each); None for vector inputs, which have no token ids, or too small a grid.
    The probes analysis and the ``collisions`` measure both call this, so the table a report shows over seeds and
    the displayed run's analysis count alike."""
    from pelab.analysis.geometry import layer1_grid

    if inputs.is_floating_point():
        return None
    T = inputs.shape[1]
    ids, counts = np.unique(inputs.numpy(), return_counts=True)
    ids = ids[np.argsort(-counts, kind="stable")][:MAX_GRID]  # the commonest tokens of the task
    if len(ids) < 2 or min(T, MAX_GRID) < 2:
        return None
    return collisions(layer1_grid(model, ids, min(T, MAX_GRID)))


@one_blas_thread
def run(inputs: AnalysisInput, out: Path) -> dict[str, Any]:
    from pelab import plots

    model, _ = inputs.require_model("probes")
    batch = inputs.held_out(SEQUENCES, offset=1)
    with torch.no_grad():
        hidden = model(batch.inputs, batch.segments, return_hidden=True).hidden  # [(B, T, C)] * (layers + 1)
    B, T = batch.inputs.shape[:2]
    groups = np.repeat(np.arange(B), T)
    positions = np.tile(np.arange(T), B)
    layers = []
    for layer, h in enumerate(hidden):
        feats = h.reshape(B * T, -1).double().numpy()
        layers.append({"layer": layer, **classify(feats, positions, groups), **regress(feats, positions, groups)})
    first = hidden[0].reshape(B * T, -1).double().numpy()
    shuffled_labels = np.random.default_rng(inputs.seed).permutation(positions)
    shuffled = classify(first, shuffled_labels, groups)
    token = None
    if not batch.inputs.is_floating_point():
        token = classify(first, batch.inputs.reshape(-1).numpy(), groups)
    grid = collision_grid(model, batch.inputs)
    result: dict[str, Any] = {
        "analysis": "probes",
        "source": inputs.label,
        "sequences": B,
        "length": T,
        "position": layers,
        "token": token,
        "shuffled": {"accuracy": shuffled["accuracy"], "chance": shuffled["chance"]},
        "collisions": grid,
        "protocol": PROTOCOL,
    }
    stem = out / "probes"
    xs = [r["layer"] for r in layers]
    files = [
        plots.lines(
            f"{stem}_layers.png",
            xs,
            {
                "position accuracy": [r["accuracy"] for r in layers],
                "position R^2": [r["r2"] for r in layers],
            },
            f"{inputs.label}: position from each layer (0 = layer-1 input)",
            "layer",
            "held-out score",
            errors={"position accuracy": [r["std"] for r in layers]},
            hlines={f"chance {layers[0]['chance']:.3f}": layers[0]["chance"]},
        ),
        plots.bars(
            f"{stem}_input.png",
            ["position", "token", "shuffled position"],
            {
                "probe": [layers[0]["accuracy"], token["accuracy"] if token else np.nan, shuffled["accuracy"]],
                "chance": [layers[0]["chance"], token["chance"] if token else np.nan, shuffled["chance"]],
            },
            "decoding from the layer-1 input",
            "held-out accuracy",
        ),
    ]
    text = ", ".join(f"L{r['layer']} {r['accuracy']:.2f}" for r in layers)
    result["summary"] = f"position accuracy by layer {text} (chance {layers[0]['chance']:.2f})"
    if token:
        result["summary"] += f"; token at input {token['accuracy']:.2f} (chance {token['chance']:.2f})"
    if grid:
        result["summary"] += f"; token collisions {grid['token_collisions']}/{grid['points']}"
    result["files"] = [p.name for p in [*files, out / "probes.json"]]
    write_json(out, "probes", result)
    return result
