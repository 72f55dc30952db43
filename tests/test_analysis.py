"""Analyses, each against an independent computation: closed forms, scipy / scikit-learn,
brute force, and the model's own numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg
import torch
import torch.nn.functional as F

from pelab.analysis import geometry, linearity, probes, spectrum, symmetry
from pelab.analysis.attention import four_terms, layer_norm_parts, variance_shares
from pelab.analysis.inputs import AnalysisInput, load_trained, read_table
from pelab.config import ModelConfig, PositionConfig, RunConfig
from pelab.errors import PelabError
from pelab.model import Transformer
from pelab.positions.sinusoidal import sinusoid_table
from pelab.tables import scheme_table


def sinusoid(length: int, d: int) -> np.ndarray:
    """The paper's formula, written out element by element."""
    out = np.empty((length, d))
    for t in range(length):
        for j in range(d):
            angle = t / 10000 ** (2 * (j // 2) / d)
            out[t, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return out


def make(seed: int = 0, **kw) -> Transformer:
    cfg = dict(d=16, n_heads=2, n_layers=2, vocab_size=11, n_outputs=11, max_len=12)
    cfg.update(kw)
    torch.manual_seed(seed)
    return Transformer(ModelConfig(**cfg)).double().eval()


# --- spectrum (C1, C15) ------------------------------------------------------------------------------


def test_spectrum_of_sinusoidal_matches_the_formula() -> None:
    d, L = 64, 32
    table = scheme_table(PositionConfig(scheme="sinusoidal"), d, L).numpy()
    ref = sinusoid(L, d)
    np.testing.assert_allclose(table, ref, rtol=0, atol=1e-12)
    s = spectrum.spectrum(table, threshold=0.1)
    np.testing.assert_allclose(s["range"], [ref[:, j].max() - ref[:, j].min() for j in range(d)], atol=1e-12)
    np.testing.assert_allclose(s["variance"], [np.var(ref[:, j]) for j in range(d)], atol=1e-12)
    assert s["varying"] == sum(ref[:, j].max() - ref[:, j].min() > 0.1 for j in range(d))
    assert s["varying_at"]["0.1"] == s["varying"] and s["varying_at"]["0.01"] >= s["varying"] >= s["varying_at"]["1.0"]
    for v in s["values"]:
        angle = v["position"] / 10000 ** (2 * (v["dimension"] // 2) / d)
        want = math.sin(angle) if v["dimension"] % 2 == 0 else math.cos(angle)
        assert v["value"] == pytest.approx(want, abs=1e-12)
    assert {0, d - 1} <= set(s["dimensions"]) and {0, L - 1} <= set(s["positions"])


def test_c1_default_size_count_matches_the_formula() -> None:
    """At the claim's default (d=512, L=128) the count is what the formula gives (whatever the verdict)."""
    table = scheme_table(PositionConfig(scheme="sinusoidal"), 512, 128).numpy()
    freqs = 10000.0 ** (-2 * (np.arange(512) // 2) / 512)
    t = np.arange(128)[:, None]
    ref = np.where(np.arange(512) % 2 == 0, np.sin(t * freqs), np.cos(t * freqs))
    count = int(((ref.max(0) - ref.min(0)) > 0.1).sum())
    assert spectrum.count_varying(table, 0.1) == count
    assert spectrum.dimension_range(table)[-1] < 1e-3  # the slowest cosine hardly moves


# --- geometry (C2, C3) --------------------------------------------------------------------------------


def rotation(d: int, seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q


def test_principal_angles_of_subspaces_with_known_angles() -> None:
    d, angles = 8, np.array([1e-7, 0.3, 1.1, math.pi / 2])
    e = np.eye(d)
    a = e[:, :4]
    b = np.stack([math.cos(t) * e[:, i] + math.sin(t) * e[:, 4 + i] for i, t in enumerate(angles)], 1)
    q = rotation(d, 0)
    mix_a, mix_b = np.random.default_rng(1).standard_normal((2, 4, 4))  # any basis of the same spans
    got = geometry.principal_angles(q @ a @ mix_a, q @ b @ mix_b)
    np.testing.assert_allclose(got, angles, rtol=1e-6, atol=1e-12)  # the smallest angle through the sine branch
    assert geometry.overlap_score(a, b) == pytest.approx(np.mean(np.cos(angles) ** 2), abs=1e-12)


@pytest.mark.parametrize("ka, kb", [(3, 3), (2, 5), (6, 4)])
def test_principal_angles_agree_with_scipy(ka: int, kb: int) -> None:
    rng = np.random.default_rng(ka * 10 + kb)
    a, b = rng.standard_normal((12, ka)), rng.standard_normal((12, kb))
    np.testing.assert_allclose(geometry.principal_angles(a, b), np.sort(scipy.linalg.subspace_angles(a, b)), atol=1e-10)


def test_overlap_of_random_subspaces_is_its_expectation() -> None:
    rng = np.random.default_rng(0)
    d, ka, kb = 40, 3, 8
    scores = [geometry.overlap_score(rng.standard_normal((d, ka)), rng.standard_normal((d, kb))) for _ in range(400)]
    expected = geometry.random_overlap(ka, kb, d)
    assert abs(np.mean(scores) - expected) < 4 * np.std(scores) / math.sqrt(len(scores))
    e = np.eye(d)
    assert geometry.overlap_score(e[:, :3], e[:, 3:6]) == 0.0
    assert geometry.overlap_score(e[:, :3], e[:, :8]) == pytest.approx(1.0)


def test_random_cosines_follow_the_law_within_sampling_error() -> None:
    assert geometry.cosine_exact(2) == pytest.approx(2 / math.pi) and geometry.cosine_exact(3) == pytest.approx(0.5)
    for c in geometry.cosine_curve(widths=(4, 64, 256, 1024), pairs=4000, seed=3):
        assert abs(c["mean_abs_cos"] - c["exact"]) < 4 * c["stderr"], c
        # The law is the large-d limit: within sampling error plus its own O(1/d) bias.
        assert abs(c["mean_abs_cos"] - c["law"]) < 4 * c["stderr"] + abs(c["law"] - c["exact"]), c
    assert abs(geometry.cosine_law(1024) - geometry.cosine_exact(1024)) / geometry.cosine_exact(1024) < 1e-3


def test_layer1_parts_concat_is_orthogonal_add_is_not() -> None:
    split = make(position=PositionConfig(scheme="learned"), combine="concat_split", d_position=6)
    tokens, positions = geometry.layer1_parts(split, 10)
    assert tokens.shape == (11, 16) and positions.shape == (10, 16)
    assert np.all(tokens[:, 10:] == 0) and np.all(positions[:, :10] == 0)
    assert geometry.subspace_report(tokens, positions)["overlap"] < 1e-20
    add = make(position=PositionConfig(scheme="learned"), combine="add")
    tokens, positions = geometry.layer1_parts(add, 10)
    np.testing.assert_array_equal(tokens, add.embed.token.weight.detach().numpy())
    np.testing.assert_array_equal(positions, add.scheme.weight[:10].detach().numpy())
    assert geometry.subspace_report(tokens, positions)["overlap"] > 0.05


# --- the four terms of attention (C4) -----------------------------------------------------------------


def test_layer_norm_split_adds_up_to_layer_norm() -> None:
    g = torch.Generator().manual_seed(0)
    x, p = torch.randn(3, 5, 8, generator=g, dtype=torch.float64), torch.randn(5, 8, generator=g, dtype=torch.float64)
    w, b = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    parts = layer_norm_parts({"token": x, "position": p.expand_as(x)}, w, b, 1e-5)
    torch.testing.assert_close(sum(parts.values()), F.layer_norm(x + p, (8,), w, b, 1e-5), rtol=0, atol=1e-12)
    torch.testing.assert_close(parts["bias"], b.expand_as(x))


def perturb_norms(model: Transformer, seed: int = 0) -> Transformer:
    """Move LayerNorm off its (1, 0) initialisation so the gain and bias are really exercised."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1 + 0.5 * torch.randn(m.weight.shape, generator=g, dtype=m.weight.dtype))
                m.bias.copy_(0.5 * torch.randn(m.bias.shape, generator=g, dtype=m.bias.dtype))
    return model


@pytest.mark.parametrize(
    "kind, scheme, combine, n_segments",
    [
        ("encoder", "sinusoidal", "add", 0),
        ("encoder", "learned", "scaled_add", 0),
        ("encoder", "learned", "concat_split", 0),
        ("encoder", "sinusoidal", "concat_wide", 0),
        ("encoder", "learned", "concat_project", 0),
        ("encoder", "learned", "gated", 2),
        ("decoder", "learned", "add", 0),
    ],
)
def test_four_terms_sum_to_the_models_own_logits(kind: str, scheme: str, combine: str, n_segments: int) -> None:
    model = make(kind=kind, position=PositionConfig(scheme=scheme), combine=combine, n_segments=n_segments)
    model = perturb_norms(model)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 11, (3, 10), generator=g)
    seg = torch.randint(0, 2, (3, 10), generator=g) if n_segments else None
    split = four_terms(model, x, seg)
    assert list(split.terms) == ["tt", "tp", "pt", "pp", "bias"]
    assert split.max_abs_diff < 1e-12 * (1 + float(split.logits.abs().max()))
    assert float(split.logits.abs().max()) > 0.1  # a real check, not zeros against zeros
    assert all(float(t.abs().max()) > 1e-6 for t in split.terms.values())
    assert split.allowed.all() if kind == "encoder" else torch.equal(split.allowed, split.allowed.tril())


def test_four_terms_refuse_models_without_an_input_table() -> None:
    model = make(position=PositionConfig(scheme="rotary"), combine="none")
    with pytest.raises(PelabError, match="attention: position=rotary"):
        four_terms(model, torch.zeros(1, 4, dtype=torch.long))


def test_variance_shares_against_numpy() -> None:
    g = torch.Generator().manual_seed(0)
    terms = {n: torch.randn(2, 2, 5, 5, generator=g, dtype=torch.float64) * s for n, s in (("a", 1.0), ("b", 3.0))}
    terms["row"] = torch.randn(2, 2, 5, 1, generator=g, dtype=torch.float64).expand(2, 2, 5, 5)  # constant per query
    allowed = torch.ones(5, 5, dtype=torch.bool).tril()
    shares = variance_shares(terms, allowed)
    for h in range(2):
        vals = {n: t[:, h][:, allowed].numpy().ravel() for n, t in terms.items()}
        var = {n: v.var() for n, v in vals.items()}
        total = sum(vals.values())
        for n in terms:
            assert shares[h]["variance"][n] == pytest.approx(var[n] / sum(var.values()), rel=1e-10)
            cov = np.mean((vals[n] - vals[n].mean()) * (total - total.mean()))
            assert shares[h]["covariance"][n] == pytest.approx(cov / total.var(), rel=1e-10)
        assert sum(shares[h]["covariance"].values()) == pytest.approx(1.0)
        assert shares[h]["variance_within_query"]["row"] == pytest.approx(0.0, abs=1e-12)  # the softmax cannot see it


# --- probes and collisions (C8, C10) ------------------------------------------------------------------


def test_ridge_probes_are_what_scikit_learn_computes() -> None:
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    x, xt = rng.standard_normal((200, 6)) * [1, 2, 3, 4, 5, 0], rng.standard_normal((50, 6))
    y = x @ rng.standard_normal(6) + rng.standard_normal(200)
    labels = rng.integers(0, 4, 200) + 3 * (x[:, 0] > 0)
    xs, xts = probes.standardise(x, xt)
    paths = probes.ridge_paths(xs, y[:, None], xts, probes.ALPHAS)
    candidates = probes.candidate_predictions(x, labels, xt)
    for alpha, ours in zip(probes.ALPHAS, paths, strict=True):
        theirs = make_pipeline(StandardScaler(), Ridge(alpha=alpha)).fit(x, y).predict(xt)
        np.testing.assert_allclose(ours[:, 0], theirs, atol=1e-9)
        clf = make_pipeline(StandardScaler(), RidgeClassifier(alpha=alpha)).fit(x, labels)
        np.testing.assert_array_equal(candidates[f"ridge(alpha={alpha:g})"], clf.predict(xt))


def test_shrinkage_lda_is_what_scikit_learn_computes() -> None:
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    rng = np.random.default_rng(0)
    for n, p, k in ((300, 8, 5), (60, 40, 3), (200, 6, 2)):
        labels = rng.integers(0, k, n)
        x = rng.standard_normal((n, p)) * rng.uniform(0.1, 3, p) + labels[:, None] * rng.standard_normal(p)
        x[:, 0] = 2.0  # a constant channel, as a NoPE input or a saturated unit gives
        xt = rng.standard_normal((80, p)) * 2
        x_lda = LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto").fit(x, labels)
        np.testing.assert_array_equal(probes.lda_predict(x, labels, xt), x_lda.predict(xt))
        np.testing.assert_allclose(probes.ledoit_wolf(x[labels == 0]), _sk_cov(x[labels == 0]), atol=1e-10)


def _sk_cov(x: np.ndarray) -> np.ndarray:
    from sklearn.covariance import ledoit_wolf
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(x)
    return sc.scale_[:, None] * ledoit_wolf(sc.transform(x))[0] * sc.scale_[None, :]


def test_classifier_probe_holds_out_whole_sequences() -> None:
    """Each sequence is its own class here: a probe that saw the sequence would score 1, held out it scores 0."""
    rng = np.random.default_rng(0)
    centres = 5 * rng.standard_normal((30, 4))
    feats = np.repeat(centres, 8, axis=0) + 0.01 * rng.standard_normal((240, 4))
    groups = np.repeat(np.arange(30), 8)
    assert probes.classify(feats, groups, groups)["accuracy"] == 0.0


def sequences_of(table: np.ndarray, n: int, token_scale: float, seed: int = 0) -> tuple[np.ndarray, ...]:
    """n sequences whose token vectors are table[t] + token noise; labels = positions; groups = sequences."""
    L, d = table.shape
    rng = np.random.default_rng(seed)
    feats = (table[None] + token_scale * rng.standard_normal((n, L, d))).reshape(n * L, d)
    return feats, np.tile(np.arange(L), n), np.repeat(np.arange(n), L)


def test_probe_is_near_perfect_on_a_sinusoidal_table_and_at_chance_when_shuffled() -> None:
    table = sinusoid_table(torch.arange(16), 32).numpy()
    feats, pos, groups = sequences_of(table, 60, token_scale=0.1)
    real = probes.classify(feats, pos, groups)
    assert real["chance"] == pytest.approx(1 / 16)
    assert real["accuracy"] > 0.95, f"sinusoidal table: position should be read off almost perfectly, got {real}"
    shuffled = probes.classify(feats, np.random.default_rng(1).permutation(pos), groups)
    assert abs(shuffled["accuracy"] - shuffled["chance"]) < 0.04, f"shuffled labels should sit at chance: {shuffled}"
    reg = probes.regress(feats, pos, groups)
    assert reg["r2"] > 0.9 and reg["mae"] < reg["mae_chance"] / 3


def test_position_probe_encoder_without_position_at_chance_causal_decoder_above() -> None:
    """C8's mechanism at initialisation: equivariance hides position; the causal mask reveals it."""
    x = torch.randint(0, 11, (120, 12), generator=torch.Generator().manual_seed(1))
    groups, pos = np.repeat(np.arange(120), 12), np.tile(np.arange(12), 120)
    best = {}
    for kind in ("encoder", "decoder"):
        model = make(kind=kind, position=PositionConfig(scheme="none"), combine="none", d=32, n_layers=1).float()
        with torch.no_grad():
            hidden = model(x, return_hidden=True).hidden
        best[kind] = [probes.classify(h.reshape(-1, 32).numpy(), pos, groups)["accuracy"] for h in hidden]
    assert all(abs(a - 1 / 12) < 0.03 for a in best["encoder"]), best
    assert abs(best["decoder"][0] - 1 / 12) < 0.03 and max(best["decoder"][1:]) > 1 / 12 + 0.04, best


def brute_collisions(points: np.ndarray) -> tuple[int, int]:
    V, T, _ = points.shape
    cells = [(b, j) for b in range(V) for j in range(T)]
    n_tok = n_pos = 0
    for a, i in cells:
        dist = {(b, j): np.linalg.norm(points[a, i] - points[b, j]) for b, j in cells}
        other = min((v for (b, j), v in dist.items() if b != a and j != i), default=math.inf)
        same_token = min((v for (b, j), v in dist.items() if b == a and j != i), default=math.inf)
        same_position = min((v for (b, j), v in dist.items() if b != a and j == i), default=math.inf)
        n_tok += other <= same_token
        n_pos += other <= same_position
    return n_tok, n_pos


def test_collisions_against_brute_force_and_concat_has_none() -> None:
    rng = np.random.default_rng(0)
    x, p = rng.standard_normal((5, 3)), 2 * rng.standard_normal((6, 3))
    added = x[:, None] + p[None]
    got = probes.collisions(added, chunk=7)
    assert (got["token_collisions"], got["position_collisions"]) == brute_collisions(added)
    assert got["points"] == 30 and got["token_collisions"] > 0  # small d, large p: tokens collide
    concat = np.concatenate([np.broadcast_to(x[:, None], (5, 6, 3)), np.broadcast_to(p[None], (5, 6, 3))], axis=2)
    got = probes.collisions(concat)
    assert got["token_collisions"] == got["position_collisions"] == 0


def test_the_collisions_measure_counts_as_the_probes_analysis_and_as_brute_force(tmp_path) -> None:
    """C10's collision table reads the ``collisions`` measure over seeds on the report's workers; the probes
    analysis of a displayed run counts the same grid, and both match a brute-force count of token + position
    vectors built here from the model's own tables (the commonest held-out tokens at the first positions)."""
    from pelab.analysis import measures

    inputs = analysis_input("learned", "add", None)
    got = measures.MEASURES["collisions"](inputs)
    assert got == probes.run(inputs, tmp_path)["collisions"]
    held = inputs.held_out(probes.SEQUENCES, offset=1).inputs.numpy()
    ids, counts = np.unique(held, return_counts=True)
    ids = ids[np.argsort(-counts, kind="stable")][: probes.MAX_GRID]
    length = min(held.shape[1], probes.MAX_GRID)
    model, _ = inputs.require_model("test")
    with torch.no_grad():
        e = model.embed.token.weight[torch.as_tensor(ids)]
        grid = (e[:, None] + model.scheme.table(torch.arange(length))[None]).double().numpy()
    assert got["points"] == len(ids) * length and got["tokens"] == len(ids)
    assert (got["token_collisions"], got["position_collisions"]) == brute_collisions(grid)


# --- symmetry (C8) ----------------------------------------------------------------------------------


def test_only_none_is_permutation_equivariant() -> None:
    gaps = symmetry.scheme_gaps()
    assert set(gaps) == {"sinusoidal", "learned", "none", "rotary", "alibi", "t5", "untied", "sincos2d", "randomized",
                         "xpos", "kerple"}  # fmt: skip
    assert [n for n, r in gaps.items() if r["equivariant"]] == ["none"]
    assert gaps["none"]["max_abs_diff"] < 1e-12
    assert all(r["max_abs_diff"] > 1e-4 for n, r in gaps.items() if n != "none"), gaps


def test_pooled_head_is_tested_for_invariance() -> None:
    model = make(position=PositionConfig(scheme="none"), combine="none", head="pool")
    x = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(0))
    gap, scale = symmetry.permutation_gap(model, x, symmetry.permutation(9))
    assert gap < 1e-12 < scale


# --- linearity (C11) --------------------------------------------------------------------------------


def shift_rotation(d: int, k: int) -> np.ndarray:
    """The exact map PE(pos) -> PE(pos + k) of the paper layout: a rotation of each (sin, cos) pair."""
    w = np.zeros((d, d))
    for i in range(d // 2):
        theta = k / 10000 ** (2 * i / d)
        c, s = math.cos(theta), math.sin(theta)
        # [sin(a + t), cos(a + t)] = [sin a, cos a] @ [[c, -s], [s, c]]
        w[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, -s], [s, c]]
    return w


def test_sinusoidal_shift_is_linear_to_round_off() -> None:
    table = sinusoid_table(torch.arange(128), 64).numpy()
    for k in (1, 5):
        exact = shift_rotation(64, k)
        assert linearity.relative_residual(table[:-k], table[k:], exact) < 1e-13  # the closed form itself
        fit = linearity.shift_fit(table, k)
        assert fit["determined"] and fit["heldout_spanned"], fit
        assert fit["residual"] < 1e-12 and fit["heldout_residual"] < 1e-10, fit


def test_random_tables_are_not_linear_unless_too_short_to_tell() -> None:
    rng = np.random.default_rng(0)
    long = linearity.shift_fit(rng.standard_normal((128, 16)), 1)
    assert long["determined"] and long["residual"] > 0.5 and long["heldout_residual"] > 0.5
    short = linearity.shift_fit(rng.standard_normal((16, 64)), 1)
    assert not short["determined"] and short["residual"] < 1e-12  # any table fits: the flag says so
    assert short["heldout_residual"] > 0.5


def test_a_users_table_round_trips_from_show_csv(tmp_path: Path) -> None:
    table = scheme_table(PositionConfig(scheme="sinusoidal"), 12, 20).numpy()
    np.savetxt(tmp_path / "t.csv", table, delimiter=",", fmt="%.17g")  # exactly what `pelab show --csv` writes
    np.testing.assert_array_equal(read_table(tmp_path / "t.csv"), table)
    res = linearity.run(AnalysisInput.for_table(read_table(tmp_path / "t.csv"), "t.csv"), tmp_path / "out")
    assert res["subject"] == "table t.csv" and res["tables"]["table t.csv"][0]["residual"] < 1e-12
    (tmp_path / "bad.csv").write_text("1,2\nx,y\n")
    with pytest.raises(PelabError, match="table: cannot read"):
        read_table(tmp_path / "bad.csv")


# --- multiplicative combiners: what applies to x ⊙ (1 + p) and (I + A_pos) x, and what does not ------------

ADDITIVE = [
    ("sinusoidal", "add", None),
    ("learned", "scaled_add", None),
    ("learned", "concat_split", None),
    ("sinusoidal", "concat_wide", None),
    ("learned", "concat_project", None),
    ("learned", "gated", None),
    ("rotary", "none", None),
    ("none", "matrix", 0),  # rank 0 is none
]
MULTIPLICATIVE = [
    ("learned", "multiply", None),
    ("sinusoidal", "multiply", None),
    ("none", "matrix", 2),
    ("rotary", "matrix", None),  # full rank
]


def make_comb(scheme: str, combine: str, rank: int | None, seed: int = 0, **kw) -> Transformer:
    return make(seed, position=PositionConfig(scheme=scheme), combine=combine, matrix_rank=rank, **kw)


def analysis_input(scheme: str, combine: str, rank: int | None, seed: int = 0) -> AnalysisInput:
    """A freshly initialised model of a tiny reverse task, as an analysis receives a trained one."""
    extra = {} if rank is None else {"matrix_rank": rank}
    model = {"d": 16, "n_heads": 2, "position": {"scheme": scheme}, "combine": combine, **extra}
    run = RunConfig(task={"name": "reverse", "length": 6, "vocab": 8}, model=model, seed=seed)
    torch.manual_seed(seed)
    return AnalysisInput.for_model(Transformer(run.model), run)


@pytest.mark.parametrize("scheme, combine, rank", ADDITIVE + MULTIPLICATIVE)
def test_additive_gap_tells_additive_combiners_from_multiplicative_ones(scheme, combine, rank) -> None:
    from pelab.analysis import additive

    model = make_comb(scheme, combine, rank)
    gap = additive.additive_gap(model.embed.combiner)
    why = additive.reason(model, "geometry", "compare as subspaces")
    if (scheme, combine, rank) in ADDITIVE:
        assert gap < 1e-12 and why is None, gap
    else:
        form = additive.FORMS[combine][0]
        assert gap > 0.01, gap
        assert why is not None and why.startswith(f"geometry: does not apply to combine={combine}") and form in why


@pytest.mark.parametrize(
    "scheme, combine, rank",
    [("sinusoidal", "add", None), ("learned", "concat_split", None), *MULTIPLICATIVE],
)
def test_layer1_grid_is_the_models_own_input(scheme, combine, rank) -> None:
    """Every (token, position) cell of the grid against the model's own layer-1 input, and the closed form."""
    model = make_comb(scheme, combine, rank)
    x = torch.randint(0, 11, (4, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        h0 = model(x, return_hidden=True).hidden[0].numpy()  # (B, T, C)
    grid = geometry.layer1_grid(model, np.arange(11), 10)  # (V, T, C)
    for b in range(4):
        for i in range(10):
            np.testing.assert_allclose(grid[x[b, i], i], h0[b, i], rtol=0, atol=1e-12)
    e = model.embed.token.weight.detach().numpy()  # (V, d)
    comb = model.embed.combiner
    if combine == "multiply":
        p = model.scheme.table(torch.arange(10)).detach().numpy()
        want = e[:, None, :] * (1 + p[None])
    elif combine == "matrix" and rank:
        u, v = comb.u.detach().numpy()[:10], comb.v.detach().numpy()[:10]  # (T, d, r)
        want = np.stack([[e[a] + u[i] @ (v[i].T @ e[a]) for i in range(10)] for a in range(11)])
    elif combine == "matrix":
        a_pos = comb.a.detach().numpy()[:10]  # (T, d, d)
        want = np.stack([[e[a] + a_pos[i] @ e[a] for i in range(10)] for a in range(11)])
    else:
        return
    np.testing.assert_allclose(grid, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("scheme, combine, rank", MULTIPLICATIVE)
def test_overlap_and_four_terms_do_not_apply_to_a_multiplicative_combiner(scheme, combine, rank, tmp_path) -> None:
    """Each says so, with the reason; no 0 for a split that does not exist, no crash where a report asks."""
    from pelab.analysis import measures, run_analyses

    model = make_comb(scheme, combine, rank)
    with pytest.raises(PelabError, match=f"attention: does not apply to combine={combine}, a multiplicative"):
        four_terms(model, torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(PelabError, match=f"geometry: does not apply to combine={combine}"):
        geometry.layer1_parts(model, 10)
    inputs = analysis_input(scheme, combine, rank)
    for name in ("overlap", "cross_share"):
        got = measures.MEASURES[name](inputs)
        assert list(got) == ["not_applicable"] and f"combine={combine}" in got["not_applicable"], got
    g = geometry.run(inputs, tmp_path)
    assert g["overlap"] == {} and "multiplicative" in g["not_applicable"]
    assert "does not apply to combine=" in g["summary"] and "geometry_subspaces.png" not in g["files"]
    assert len(g["random_cosines"]) == len(geometry.COSINE_WIDTHS)  # what does apply is still there
    with pytest.raises(PelabError, match="multiplicative"):
        run_analyses("attention", inputs, tmp_path)


@pytest.mark.parametrize("scheme, combine, rank", MULTIPLICATIVE)
def test_input_probes_read_token_and_position_through_a_multiplicative_combiner(scheme, combine, rank) -> None:
    """At initialisation already: the token is read almost perfectly, position well above chance (1/6)."""
    from pelab.analysis import measures

    got = measures.MEASURES["input_probes"](analysis_input(scheme, combine, rank))
    assert got["token"] > 0.9 and got["position"] > 1 / 6 + 0.2, got


def test_spectrum_and_linearity_name_matrix_maps_as_no_table(tmp_path) -> None:
    inputs = analysis_input("none", "matrix", 2)
    for name, mod in (("spectrum", spectrum), ("linearity", linearity)):
        with pytest.raises(PelabError, match=f"{name}: combine=matrix carries position in its own per-position maps"):
            mod.run(inputs, tmp_path)
    s = spectrum.run(analysis_input("learned", "multiply", None), tmp_path)  # multiply's table is a table
    assert s["d"] == 16 and s["length"] == 6


# --- loading a study's run ----------------------------------------------------------------------------


def test_load_trained_names_the_missing_flag(tmp_path: Path) -> None:
    from pelab.records import RunResult
    from pelab.study.store import Store

    cfg = RunConfig(task={"name": "reverse", "length": 4, "vocab": 6}, model={"d": 8, "n_heads": 2})
    store = Store(tmp_path)
    store.write(cfg, RunResult(run_id=cfg.run_id, status="done", metrics={"loss": 1.0, "acc": 0.5}))
    store.close()
    with pytest.raises(PelabError, match="--checkpoints"):
        load_trained(tmp_path, cfg.run_id[:6])
    with pytest.raises(PelabError, match="no run 'zzz'"):
        load_trained(tmp_path, "zzz")
    with pytest.raises(PelabError, match="holds no pelab study"):
        load_trained(tmp_path / "elsewhere", "x")
