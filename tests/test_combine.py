"""Combiners: the widths they imply, what they compute, and the parameters they cost.

Widths and parameter counts are derived by hand below from the architecture
(all Linear layers without bias, LayerNorm with weight and bias), not read back
from ``ModelConfig.widths`` or ``Transformer.num_parameters``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pelab.config import ModelConfig, PositionConfig, build
from pelab.errors import PelabError
from pelab.model import Transformer

TABLE_SCHEMES = {"sinusoidal", "learned", "sincos2d"}
CONCAT = ("concat_split", "concat_wide", "concat_project")  # ordered: parametrize ids must not depend on hashing


def paper_pe(length: int, d: int) -> np.ndarray:
    pos = np.arange(length)[:, None]
    i = np.arange(d)[None, :] // 2
    angle = pos / 10000 ** (2 * i / d)
    return np.where(np.arange(d)[None, :] % 2 == 0, np.sin(angle), np.cos(angle))


def hand_widths(combine: str, scheme: str, d: int, n_segments: int = 0, d_position=None, d_segment=None):
    """(d_token, side widths, d_model) as the study's table of combiners defines them."""
    concat = combine in CONCAT
    sides = []
    if scheme in TABLE_SCHEMES and combine not in ("none", "matrix"):
        sides.append((d_position or max(2, d // 4)) if concat else d)
    if n_segments:
        sides.append((d_segment or max(1, d // 8)) if concat else d)
    d_token = d - sum(sides) if combine == "concat_split" else d
    d_model = d + sum(sides) if combine == "concat_wide" else d
    return d_token, sides, d_model


def hand_parameter_count(
    combine: str,
    scheme: str,
    *,
    d: int,
    layers: int,
    heads: int,
    vocab: int | None,
    outputs: int,
    max_len: int,
    n_segments: int = 0,
    d_position: int | None = None,
    d_segment: int | None = None,
    patch_dim: int | None = None,
    t5_buckets: int = 32,
    matrix_rank: int | None = None,
) -> int:
    d_token, sides, C = hand_widths(combine, scheme, d, n_segments, d_position, d_segment)
    ff = 4 * C
    n = (vocab or patch_dim) * d_token  # token embedding, or the patch projection (no bias)
    if n_segments:
        n += n_segments * sides[-1]  # segment embedding
    if scheme == "learned":
        n += max_len * sides[0] if combine != "none" else 0  # the position table
    elif scheme == "t5":
        n += t5_buckets * heads  # one scalar per bucket and head, shared by layers
    elif scheme == "untied":
        n += max_len * C + 2 * C * C + 2 * C  # its table, U_q and U_k, a LayerNorm
    if combine == "concat_project":
        n += (d_token + sum(sides)) * C  # W: [x ; p (; s)] -> d
    if combine == "gated":
        n += sum(sides)  # one gate per channel of each side
    if combine == "matrix":
        r = d if matrix_rank is None else matrix_rank
        n += max_len * d * d if r == d else 2 * max_len * d * r  # one full A per position, or U and V
    per_layer = 3 * C * C + C * C + C * ff + ff * C + 2 * 2 * C  # qkv, out, mlp up, mlp down, 2 LayerNorms
    return n + layers * per_layer + 2 * C + C * outputs  # + final LayerNorm + head


COMBINERS = ["add", "scaled_add", "concat_split", "concat_wide", "concat_project", "gated", "multiply"]
PARAM_CASES = (
    [(c, s, {}) for c in COMBINERS for s in ("sinusoidal", "learned")]
    + [(c, "sinusoidal", {"d_position": 6}) for c in CONCAT]
    + [(c, "learned", {"n_segments": 3}) for c in COMBINERS]
    + [(c, "sincos2d", {"patch_dim": 12, "grid": (4, 4)}) for c in COMBINERS]
    + [("none", s, {}) for s in ("none", "rotary", "alibi", "t5", "untied")]
    + [("none", "t5", {"n_segments": 2}), ("gated", "rotary", {"n_segments": 2})]
    + [("concat_split", "rotary", {"n_segments": 2, "d_segment": 5})]
    + [("matrix", "none", {"matrix_rank": r}) for r in (None, 0, 1, 5, 31, 32)]
    + [("matrix", "rotary", {"n_segments": 2, "matrix_rank": 4}), ("matrix", "t5", {})]
    + [("multiply", "rotary", {"n_segments": 2})]
)


@pytest.mark.parametrize("combine, scheme, extra", PARAM_CASES, ids=[f"{c}-{s}-{e}" for c, s, e in PARAM_CASES])
def test_parameter_count_matches_hand_formula(combine: str, scheme: str, extra: dict) -> None:
    d, layers, heads, vocab, outputs, max_len = 32, 2, 2, 13, 9, 40
    extra = dict(extra)
    patch_dim = extra.pop("patch_dim", None)
    cfg = ModelConfig(
        d=d, n_layers=layers, n_heads=heads, vocab_size=None if patch_dim else vocab, patch_dim=patch_dim,
        n_outputs=outputs, max_len=max_len, position=PositionConfig(scheme=scheme), combine=combine, **extra,
    )  # fmt: skip
    extra.pop("grid", None)
    expected = hand_parameter_count(
        combine, scheme, d=d, layers=layers, heads=heads, vocab=None if patch_dim else vocab, outputs=outputs,
        max_len=max_len, patch_dim=patch_dim, **extra,
    )  # fmt: skip
    model = Transformer(cfg)
    assert model.num_parameters() == expected
    assert sum(p.numel() for p in model.parameters()) == expected


def test_parameter_count_known_value() -> None:
    """d=16, 2 layers, vocab 16, add: 16·16 + 2·(3·256 + 256 + 2·16·64 + 4·16) + 2·16 + 16·16 = 6816."""
    cfg = ModelConfig(d=16, n_layers=2, n_heads=4, vocab_size=16, n_outputs=16, combine="add")
    assert Transformer(cfg).num_parameters() == 6816


def test_all_linear_layers_have_no_bias() -> None:
    cfg = ModelConfig(d=16, n_heads=2, position=PositionConfig(scheme="untied"), combine="none")
    linears = [m for m in Transformer(cfg).modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(m.bias is None for m in linears)


# --- widths --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("combine", COMBINERS)
@pytest.mark.parametrize("d_position", [None, 4, 10])
def test_widths_in_the_built_model(combine: str, d_position: int | None) -> None:
    d = 32
    cfg = ModelConfig(d=d, d_position=d_position, n_heads=2, n_layers=1, combine=combine)
    model = Transformer(cfg)
    dp = (d_position or d // 4) if combine in CONCAT else d
    d_token, d_model = (d - dp if combine == "concat_split" else d), (d + dp if combine == "concat_wide" else d)
    assert model.embed.token.weight.shape == (16, d_token)
    assert model.blocks[0].attn.qkv.in_features == d_model
    assert model.blocks[0].mlp[0].out_features == 4 * d_model
    assert model.head.in_features == d_model
    out = model(torch.zeros(2, 5, dtype=torch.long), return_parts=True)
    assert out.parts.combined.shape == (2, 5, d_model)
    assert out.parts.position.shape == (5, dp)


def test_concat_split_keeps_d_and_concat_wide_grows_by_d_position() -> None:
    split = ModelConfig(d=64, d_position=16, combine="concat_split").widths()
    wide = ModelConfig(d=64, d_position=16, combine="concat_wide").widths()
    assert (split.token, split.model) == (48, 64)
    assert (wide.token, wide.model) == (64, 80)
    with_segments = ModelConfig(d=64, d_position=16, d_segment=8, n_segments=2, combine="concat_split").widths()
    assert (with_segments.token, with_segments.model) == (40, 64)


@pytest.mark.parametrize("d_position", [16, 17])
def test_concat_split_needs_room_for_the_token(d_position: int) -> None:
    with pytest.raises(PelabError, match=r"^d_position: .*d=16"):
        build(ModelConfig, d=16, d_position=d_position, combine="concat_split")


# --- what each combiner computes -------------------------------------------------------------------------


@pytest.mark.parametrize("combine", COMBINERS + ["none"])
@pytest.mark.parametrize("n_segments", [0, 2])
def test_combined_input_matches_formula(combine: str, n_segments: int) -> None:
    d, T = 16, 10
    scheme = "sinusoidal" if combine != "none" else "none"
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(d=d, n_heads=2, n_layers=1, n_segments=n_segments, position=PositionConfig(scheme=scheme),
                    combine=combine)
    )  # fmt: skip
    if combine == "gated":  # start at 1; move them so the product is visible
        for g in model.embed.combiner.gates.values():
            assert torch.equal(g, torch.ones_like(g))
            with torch.no_grad():
                g.uniform_(-2, 2)
    x = torch.randint(0, 16, (3, T), generator=torch.Generator().manual_seed(1))
    seg = torch.randint(0, 2, (3, T), generator=torch.Generator().manual_seed(2)) if n_segments else None
    with torch.no_grad():
        got = model(x, seg, return_parts=True).parts.combined.numpy()
    E = model.embed.token.weight.detach().numpy()[x.numpy()]  # (B, T, d_token)
    S = model.embed.segment.weight.detach().numpy()[seg.numpy()] if n_segments else None
    d_token, sides, _ = hand_widths(combine, scheme, d, n_segments)
    # narrower tables keep the fastest frequencies: the first channels of the d-wide table
    P = paper_pe(T, d)[None, :, : sides[0]].repeat(3, axis=0) if scheme == "sinusoidal" else None
    parts = [p for p in (P, S) if p is not None]
    if combine == "add" or combine == "none":
        expected = E + sum(parts)
    elif combine == "multiply":
        expected = E * (1 + P) * (1 + S) if n_segments else E * (1 + P)
    elif combine == "scaled_add":
        expected = math.sqrt(d) * E + sum(parts)
    elif combine in ("concat_split", "concat_wide"):
        expected = np.concatenate([E, *parts], axis=-1)
    elif combine == "concat_project":
        expected = np.concatenate([E, *parts], axis=-1) @ model.embed.combiner.proj.weight.detach().numpy().T
    else:  # gated
        gates = model.embed.combiner.gates
        expected = E + gates["position"].detach().numpy() * P
        if n_segments:
            expected = expected + gates["segment"].detach().numpy() * S
    assert got.shape == (3, T, d_token + sum(sides) if combine in ("concat_split", "concat_wide") else d)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)


def test_token_init_scale() -> None:
    """Tokens start at unit scale; scaled_add's at 1/sqrt(d), so sqrt(d)·x is unit scale like p."""
    d = 64
    for combine, std in (("add", 1.0), ("scaled_add", 1 / math.sqrt(d)), ("concat_split", 1.0)):
        torch.manual_seed(0)
        w = Transformer(ModelConfig(d=d, vocab_size=1000, combine=combine)).embed.token.weight
        assert w.std().item() == pytest.approx(std, rel=0.03), combine


# --- multiply and matrix: position as a factor ------------------------------------------------------------


def matrix_model(rank: int | None, n_segments: int = 0, d: int = 16, max_len: int = 12, **kw) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(
        d=d, n_heads=2, n_layers=1, n_segments=n_segments, max_len=max_len, position=PositionConfig(scheme="none"),
        combine="matrix", matrix_rank=rank, **kw,
    )  # fmt: skip
    return Transformer(cfg).double()


@pytest.mark.parametrize("rank", [1, 5, 15, 16])
@pytest.mark.parametrize("n_segments", [0, 2])
def test_matrix_input_matches_loops(rank: int, n_segments: int) -> None:
    """h[b, t] = x[b, t] + Σ_k U[p][:, k] (V[p][:, k] · x[b, t]) (+ s[b, t]), p the position of row t,
    or A[p] x[b, t] at rank d; written as explicit loops over rows and rank."""
    d, B, T = 16, 3, 7
    model = matrix_model(rank, n_segments, d)
    x = torch.randint(0, 16, (B, T), generator=torch.Generator().manual_seed(1))
    seg = torch.randint(0, 2, (B, T), generator=torch.Generator().manual_seed(2)) if n_segments else None
    positions = torch.arange(T) + 4  # the maps follow the position, not the row: rows 0..6 use maps 4..10
    with torch.no_grad():
        got = model(x, seg, positions=positions, return_parts=True).parts.combined.numpy()
    E = model.embed.token.weight.detach().numpy()[x.numpy()]  # (B, T, d)
    comb = model.embed.combiner
    expected = E.copy()
    for b in range(B):
        for t in range(T):
            p = int(positions[t])
            if rank == d:
                A = comb.a.detach().numpy()[p]
                expected[b, t] += np.array([sum(A[i, j] * E[b, t, j] for j in range(d)) for i in range(d)])
            else:
                U, V = comb.u.detach().numpy()[p], comb.v.detach().numpy()[p]  # (d, r) each
                for k in range(rank):
                    expected[b, t] += U[:, k] * float(np.dot(V[:, k], E[b, t]))
    if n_segments:
        expected += model.embed.segment.weight.detach().numpy()[seg.numpy()]
    assert not np.allclose(expected, E)  # the maps are far from zero at init
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_multiply_with_segments_only_scales_by_them() -> None:
    """rotary has no input table: multiply then has only segments, h = x ⊙ (1 + s)."""
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(d=16, n_heads=2, n_layers=1, n_segments=2, position=PositionConfig(scheme="rotary"),
                    combine="multiply")
    ).double()  # fmt: skip
    x = torch.randint(0, 16, (2, 9), generator=torch.Generator().manual_seed(1))
    seg = torch.randint(0, 2, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        got = model(x, seg, return_parts=True).parts.combined.numpy()
    E = model.embed.token.weight.detach().numpy()[x.numpy()]
    S = model.embed.segment.weight.detach().numpy()[seg.numpy()]
    np.testing.assert_allclose(got, E * (1 + S), rtol=1e-12, atol=1e-12)


def same_weights_as(model: Transformer, reference: Transformer) -> list[str]:
    """Copy ``reference``'s weights into ``model``; return the keys only ``model`` has."""
    missing, unexpected = model.load_state_dict(reference.state_dict(), strict=False)
    assert unexpected == []
    return missing


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
@pytest.mark.parametrize("n_segments", [0, 2])
def test_matrix_at_rank_zero_is_none(kind: str, n_segments: int) -> None:
    torch.manual_seed(5)
    none = Transformer(
        ModelConfig(kind=kind, d=16, n_heads=2, n_layers=1, n_segments=n_segments,
                    position=PositionConfig(scheme="none"), combine="none")
    )  # fmt: skip
    matrix = matrix_model(0, n_segments, kind=kind).float()
    assert same_weights_as(matrix, none) == []  # rank 0: no parameters of its own
    assert matrix.num_parameters() == none.num_parameters()
    x = torch.randint(0, 16, (3, 10), generator=torch.Generator().manual_seed(1))
    seg = torch.randint(0, 2, (3, 10), generator=torch.Generator().manual_seed(2)) if n_segments else None
    with torch.no_grad():
        assert torch.equal(matrix(x, seg).logits, none(x, seg).logits)
    matrix.embed.combiner.check_length(10_000)  # no maps, no limit: like none


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_multiply_with_zero_position_is_none(kind: str) -> None:
    torch.manual_seed(5)
    none = Transformer(ModelConfig(kind=kind, d=16, n_heads=2, position=PositionConfig(scheme="none"), combine="none"))
    multiply = Transformer(
        ModelConfig(kind=kind, d=16, n_heads=2, position=PositionConfig(scheme="learned"), combine="multiply")
    )
    assert same_weights_as(multiply, none) == ["scheme.weight"]
    x = torch.randint(0, 16, (3, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert not torch.allclose(multiply(x).logits, none(x).logits)
        multiply.scheme.weight.zero_()
        assert torch.equal(multiply(x).logits, none(x).logits)


@pytest.mark.parametrize("rank, extra", [(0, 0), (1, 2 * 40 * 32), (8, 2 * 40 * 32 * 8), (32, 40 * 32 * 32)])
def test_matrix_costs_its_per_position_maps(rank: int, extra: int) -> None:
    """2·max_len·d·r for U and V, max_len·d² at r = d (one full matrix per position); FLOPs 4·d·r or 2·d²."""
    base = dict(d=32, n_heads=2, max_len=40, position=PositionConfig(scheme="none"))
    none = Transformer(ModelConfig(**base, combine="none"))
    matrix = Transformer(ModelConfig(**base, combine="matrix", matrix_rank=rank))
    assert matrix.num_parameters() - none.num_parameters() == extra
    flops = 2 * 32 * 32 if rank == 32 else 4 * 32 * rank
    assert matrix.flops_per_token(16) - none.flops_per_token(16) == flops
    default = Transformer(ModelConfig(**base, combine="matrix"))
    assert default.num_parameters() - none.num_parameters() == 40 * 32 * 32  # the default rank is d


def test_matrix_init_gives_every_rank_the_same_signal() -> None:
    """V ~ N(0, 1/d), U ~ N(0, α²/r) (A ~ N(0, α²/d) at r = d): A_pos x has rms α·rms(x) at every rank,
    and the full map I + A_pos keeps every direction (smallest singular value well above 0)."""
    from pelab.combine import MATRIX_INIT_SCALE

    d = 64
    x = torch.randn(256, d, generator=torch.Generator().manual_seed(3))
    for rank in (1, 4, 16, 63, 64):
        c = matrix_model(rank, d=d, max_len=200).float().embed.combiner
        if rank == d:
            A = c.a.detach()
            assert A.std().item() == pytest.approx(MATRIX_INIT_SCALE / math.sqrt(d), rel=0.05)
            assert torch.linalg.svdvals(torch.eye(d) + A)[:, -1].min() > 0.4
        else:
            assert c.v.std().item() == pytest.approx(1 / math.sqrt(d), rel=0.05)
            assert c.u.std().item() == pytest.approx(MATRIX_INIT_SCALE / math.sqrt(rank), rel=0.05)
            A = c.u.detach() @ c.v.detach().transpose(1, 2)  # (max_len, d, d)
        Ax = torch.einsum("pij,nj->pni", A, x)  # (max_len, 256, d)
        rms = (Ax.pow(2).mean() / x.pow(2).mean()).sqrt().item()
        assert rms == pytest.approx(MATRIX_INIT_SCALE, rel=0.15), rank


@pytest.mark.parametrize("T, positions", [(9, None), (4, [5, 6, 7, 8]), (4, [0, 1, 2, 9])])
def test_matrix_past_max_len_is_one_line_error(T: int, positions: list[int] | None) -> None:
    model = matrix_model(4, max_len=8).float()
    x = torch.zeros(2, T, dtype=torch.long)
    pos = torch.tensor(positions) if positions is not None else None
    longest = max(positions) + 1 if positions is not None else T
    with pytest.raises(PelabError) as e:
        model(x, positions=pos)
    msg = str(e.value)
    assert msg == (
        f"length: {longest} exceeds combine=matrix's per-position maps (max_len=8); "
        "raise max_len or use a combiner that extrapolates"
    )
    model(torch.zeros(2, 8, dtype=torch.long))  # up to max_len is fine


# --- matrix's place among the configs ---------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["sinusoidal", "learned"])
def test_matrix_refuses_an_input_table(scheme: str) -> None:
    with pytest.raises(PelabError) as e:
        build(ModelConfig, position={"scheme": scheme}, combine="matrix")
    assert str(e.value) == (
        f"combine: combine=matrix would discard the {scheme} table; use position=none, "
        "or an attention-level scheme (rotary, alibi, t5, untied)"
    )


@pytest.mark.parametrize(
    "values, message",
    [
        (dict(combine="add", matrix_rank=4), "matrix_rank: only combine=matrix has a rank (combine=add); leave it out"),
        (dict(combine="matrix", matrix_rank=17, position={"scheme": "none"}), "matrix_rank: 17 is not in 0..d=16"),
        (
            dict(combine="matrix", matrix_rank=-1, position={"scheme": "none"}),
            "matrix_rank: Input should be greater than or equal to 0",
        ),
    ],
)
def test_matrix_rank_mistakes_are_one_line(values: dict, message: str) -> None:
    with pytest.raises(PelabError) as e:
        build(ModelConfig, d=16, **values)
    assert str(e.value) == message


def test_rank_is_left_out_of_configs_that_do_not_set_it() -> None:
    """Run ids of configs from before the field existed stay as they were."""
    from pelab.config import RunConfig

    for cfg in (ModelConfig(), ModelConfig(position=PositionConfig(scheme="none"), combine="matrix")):
        assert "matrix_rank" not in cfg.model_dump() and "matrix_rank" not in cfg.canonical_json()
    assert "matrix_rank" not in RunConfig().canonical_json()
    ranked = ModelConfig(position=PositionConfig(scheme="none"), combine="matrix", matrix_rank=4)
    assert ranked.model_dump()["matrix_rank"] == 4
    assert ModelConfig.model_validate_json(ranked.canonical_json()) == ranked


def test_study_files_can_set_combine_and_rank() -> None:
    from pelab.study.grid import parse_study, settable_keys

    assert "model.matrix_rank" in settable_keys()
    study = parse_study(
        """
        name = "c12"
        seeds = [0]
        [task]
        name = "reverse"
        length = 6
        [model]
        d = 16
        n_heads = 2
        [[grid]]
        name = "multiply"
        set = {"model.combine" = "multiply"}
        [[grid]]
        name = "matrix"
        set = {"model.combine" = "matrix", "model.position.scheme" = "none"}
        axes = {"model.matrix_rank" = [2, 16]}
        """
    )
    got = sorted((r.model.combine, r.model.matrix_rank) for r in study.runs)
    assert got == [("matrix", 2), ("matrix", 16), ("multiply", None)]


@pytest.mark.parametrize(
    "task, position, combine, rank",
    [("copy", "learned", "multiply", None), ("copy", "none", "matrix", 4), ("reverse", "none", "matrix", None)],
)
def test_tiny_runs_learn(task: str, position: str, combine: str, rank: int | None) -> None:
    """Two seconds of training each: the loss falls well below its start. For reverse (an encoder) with
    position=none, matrix's maps are the only position signal, so learning it shows they carry position."""
    from pelab.config import RunConfig
    from pelab.train import train_run

    cfg = RunConfig(
        task={"name": task, "length": 6, "vocab": 8},
        model={"d": 32, "n_heads": 2, "position": {"scheme": position}, "combine": combine, "matrix_rank": rank},
        train={"steps": 200, "lr": 3e-3, "eval_batches": 2},
    )
    r = train_run(cfg, threads=1)
    assert r.status == "done", r.reason
    assert r.curve[-1]["loss"] < r.curve[0]["loss"] / 2, r.curve
