"""Whole-model properties: permutation equivariance without position, FLOPs against
torch's own counter, pooling, and configuration errors."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from pelab.config import ModelConfig, PositionConfig, build
from pelab.errors import PelabError
from pelab.model import Transformer

SCHEME_NAMES = "alibi, kerple, learned, none, randomized, rotary, sincos2d, sinusoidal, t5, untied, xpos"
COMBINER_NAMES = "add, concat_project, concat_split, concat_wide, gated, matrix, multiply, none, scaled_add"


def make(**kw) -> Transformer:
    defaults = dict(d=32, n_heads=4, n_layers=2, vocab_size=13, n_outputs=7, max_len=64)
    defaults.update(kw)
    torch.manual_seed(0)
    return Transformer(ModelConfig(**defaults))


# --- permutation equivariance (claim C8) -----------------------------------------------------------------


def permuted_gap(model: Transformer, dtype: torch.dtype, n_segments: int = 0) -> float:
    """max |f(x[perm]) - f(x)[perm]| over a batch of sequences."""
    model = model.to(dtype)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 13, (4, 20), generator=g)
    seg = torch.randint(0, n_segments, (4, 20), generator=g) if n_segments else None
    perm = torch.randperm(20, generator=g)
    assert not torch.equal(perm, torch.arange(20))
    with torch.no_grad():
        y = model(x, seg).logits
        yp = model(x[:, perm], seg[:, perm] if seg is not None else None).logits
    return (yp - y[:, perm]).abs().max().item()


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("n_segments", [0, 2])
def test_nope_encoder_is_permutation_equivariant(dtype: torch.dtype, tol: float, n_segments: int) -> None:
    model = make(position=PositionConfig(scheme="none"), combine="none", n_segments=n_segments)
    assert permuted_gap(model, dtype, n_segments) <= tol


def test_nope_encoder_with_pooling_is_permutation_invariant() -> None:
    model = make(position=PositionConfig(scheme="none"), combine="none", head="pool").double()
    x = torch.randint(0, 13, (4, 20), generator=torch.Generator().manual_seed(0))
    perm = torch.randperm(20, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(x[:, perm]).logits, model(x).logits, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "kind, scheme, combine",
    [
        ("encoder", "sinusoidal", "add"),
        ("encoder", "sinusoidal", "concat_split"),
        ("encoder", "learned", "add"),
        ("encoder", "rotary", "none"),
        ("encoder", "alibi", "none"),
        ("encoder", "t5", "none"),
        ("encoder", "untied", "none"),
        ("encoder", "sinusoidal", "multiply"),
        ("encoder", "learned", "multiply"),
        ("encoder", "none", "matrix"),  # its per-position maps are the only position signal
        ("decoder", "none", "none"),  # the causal mask alone breaks the symmetry
    ],
)
def test_position_information_breaks_equivariance(kind: str, scheme: str, combine: str) -> None:
    model = make(kind=kind, position=PositionConfig(scheme=scheme), combine=combine)
    assert permuted_gap(model, torch.float64) > 1e-3


# --- FLOPs per token vs torch.utils.flop_counter ---------------------------------------------------------


def hand_flops_per_token(cfg: ModelConfig, T: int) -> tuple[int, int]:
    """(matmul FLOPs outside attention, attention FLOPs) per token, 2 per multiply-add, written out.

    Matmuls: qkv (C -> 3C), out (C -> C), MLP (C -> 4C -> C), head (C -> V), plus
    concat_project's W, a patch projection, and untied's two position projections.
    Attention: q·k^T and softmax·v, each T·C multiply-adds per token and layer, over all
    T keys (SDPA computes the full square even under a causal mask), plus untied's
    position-position product (T·C per token, once for all layers).
    """
    d, L, V = cfg.d, cfg.n_layers, cfg.n_outputs
    concat = cfg.combine in ("concat_split", "concat_wide", "concat_project")
    has_table = cfg.position.scheme in ("sinusoidal", "learned", "sincos2d") and cfg.combine != "none"
    dp = (cfg.d_position or d // 4) if concat else d
    sides = dp if has_table else 0
    C = d + sides if cfg.combine == "concat_wide" else d
    d_token = d - sides if cfg.combine == "concat_split" else d
    F = 4 * C
    matmul = L * (2 * C * 3 * C + 2 * C * C + 2 * C * F + 2 * F * C)
    matmul += 2 * C * V if cfg.head == "token" else 0
    if cfg.combine == "concat_project":
        matmul += 2 * (d + dp) * d
    if cfg.patch_dim:
        matmul += 2 * cfg.patch_dim * d_token
    attention = L * (2 * T * C + 2 * T * C)
    if cfg.position.scheme == "untied":
        matmul += 2 * 2 * C * C
        attention += 2 * T * C
    return matmul, attention


FLOP_CASES = [
    dict(position=PositionConfig(scheme="sinusoidal"), combine="add"),
    dict(position=PositionConfig(scheme="sinusoidal"), combine="concat_split"),
    dict(position=PositionConfig(scheme="sinusoidal"), combine="concat_wide"),
    dict(position=PositionConfig(scheme="learned"), combine="concat_project"),
    dict(position=PositionConfig(scheme="learned"), combine="gated"),
    dict(position=PositionConfig(scheme="learned"), combine="multiply"),  # elementwise: no FLOPs counted
    dict(position=PositionConfig(scheme="none"), combine="none"),
    dict(position=PositionConfig(scheme="rotary"), combine="none"),
    dict(position=PositionConfig(scheme="alibi"), combine="none"),
    dict(position=PositionConfig(scheme="t5"), combine="none"),
    dict(position=PositionConfig(scheme="untied"), combine="none"),
    dict(position=PositionConfig(scheme="sincos2d"), combine="concat_project", grid=(4, 4), patch_dim=12,
         vocab_size=None),
]  # fmt: skip


def count(model: Transformer, x: torch.Tensor, math_backend: bool) -> dict[str, int]:
    with torch.no_grad():
        if math_backend:
            with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
                model(x)
        else:
            with FlopCounterMode(display=False) as fc:
                model(x)
    return {str(op): n for op, n in fc.get_flop_counts()["Global"].items()}


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
@pytest.mark.parametrize("case", FLOP_CASES, ids=lambda c: f"{c['position'].scheme}-{c['combine']}")
def test_flops_per_token_match_flop_counter(case: dict, kind: str) -> None:
    """Two honest comparisons. On CPU, torch's flash-attention kernel has no FLOP formula
    (FlopCounterMode counts 0 for it), so: (1) the linear-layer matmuls (aten.mm) under the
    default backend against the hand formula without attention; (2) everything under the
    MATH backend, which spells attention out as bmm, against the full hand formula.
    Batch 1, so the untied position term (computed once per forward) is per token too."""
    T = 16
    model = make(kind=kind, **case)
    x = torch.randn(1, T, 12) if model.cfg.patch_dim else torch.randint(0, 13, (1, T))
    matmul, attention = hand_flops_per_token(model.cfg, T)

    default = count(model, x, math_backend=False)
    assert sum(n for op, n in default.items() if op in ("aten.mm", "aten.addmm")) == matmul * T

    full = count(model, x, math_backend=True)
    assert sum(full.values()) == (matmul + attention) * T
    assert model.flops_per_token(T) == matmul + attention


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
@pytest.mark.parametrize("scheme, rank", [("none", 4), ("none", None), ("alibi", 7)])
def test_matrix_flops_match_flop_counter(scheme: str, rank: int | None, kind: str) -> None:
    """matrix's per-position maps are batched products (aten.bmm), beside the linear layers' aten.mm:
    Vᵀx and U(Vᵀx) are 2·d·r FLOPs each per token, a full A_pos x (rank d) 2·d². Under the default
    backend the mm count is the linear layers alone; under MATH, everything, attention included."""
    T, d = 16, 32
    model = make(kind=kind, position=PositionConfig(scheme=scheme), combine="matrix", matrix_rank=rank)
    x = torch.randint(0, 13, (1, T))
    matmul, attention = hand_flops_per_token(model.cfg, T)
    maps = 2 * d * d if rank is None else 2 * 2 * d * rank

    default = count(model, x, math_backend=False)
    assert sum(n for op, n in default.items() if op in ("aten.mm", "aten.addmm")) == matmul * T

    full = count(model, x, math_backend=True)
    assert sum(full.values()) == (matmul + attention + maps) * T
    assert model.flops_per_token(T) == matmul + attention + maps


def test_flops_with_pooled_head() -> None:
    """The head runs once per sequence; per token it is 2·C·V / T (here exact: 2·32·8 / 16)."""
    T = 16
    model = make(head="pool", n_outputs=8, position=PositionConfig(scheme="sinusoidal"), combine="add")
    matmul, attention = hand_flops_per_token(model.cfg, T)
    head = 2 * 32 * 8
    full = count(model, torch.randint(0, 13, (1, T)), math_backend=True)
    assert sum(full.values()) == (matmul + attention) * T + head
    assert model.flops_per_token(T) == matmul + attention + head // T


def test_flops_grow_with_length_only_through_attention() -> None:
    model = make(position=PositionConfig(scheme="sinusoidal"), combine="add")
    C, L = 32, 2
    assert model.flops_per_token(64) - model.flops_per_token(32) == L * 2 * 2 * 32 * C


# --- outputs and configs ------------------------------------------------------------------------------


def test_pooled_head_shape() -> None:
    model = make(head="pool", n_outputs=5)
    assert model(torch.zeros(3, 9, dtype=torch.long)).logits.shape == (3, 5)


def test_hidden_and_qk_are_returned_on_request() -> None:
    model = make()
    x = torch.zeros(2, 6, dtype=torch.long)
    plain = model(x)
    assert plain.hidden == [] and plain.q is None and plain.parts is None
    rich = model(x, return_hidden=True, return_qk=True, return_parts=True)
    assert len(rich.hidden) == 3 and rich.q.shape == (2, 4, 6, 8)
    assert torch.equal(rich.hidden[0], rich.parts.combined)


def test_config_json_round_trip_and_digest() -> None:
    cfg = ModelConfig(d=32, grid=(4, 4), position=PositionConfig(scheme="sincos2d", keep="slowest"), combine="gated")
    again = ModelConfig.model_validate_json(cfg.canonical_json())
    assert again == cfg and again.digest() == cfg.digest()
    assert ModelConfig(d=16).digest() != cfg.digest()


def test_unknown_combiner_names_field_and_allowed_values() -> None:
    with pytest.raises(PelabError) as e:
        build(ModelConfig, combine="sum")
    assert str(e.value) == f"combine: unknown value 'sum'; allowed: {COMBINER_NAMES}"


def test_unknown_scheme_names_field_and_allowed_values() -> None:
    with pytest.raises(PelabError) as e:
        build(ModelConfig, position={"scheme": "fourier"})
    assert str(e.value) == f"position: unknown value 'fourier'; allowed: {SCHEME_NAMES}"


@pytest.mark.parametrize(
    "scheme, combine, message",
    [
        ("sinusoidal", "none", r"^combine: combine=none would discard the sinusoidal table"),
        ("rotary", "add", r"^combine: position=rotary has no input table"),
        ("alibi", "concat_split", r"^combine: position=alibi has no input table"),
        ("rotary", "multiply", r"^combine: position=rotary has no input table"),
        ("sinusoidal", "matrix", r"^combine: combine=matrix would discard the sinusoidal table"),
        ("sincos2d", "matrix", r"^combine: combine=matrix would discard the sincos2d table"),
    ],
)
def test_pairs_that_cannot_combine_are_rejected(scheme: str, combine: str, message: str) -> None:
    with pytest.raises(PelabError, match=message):
        build(ModelConfig, position={"scheme": scheme}, combine=combine)


def test_heads_must_divide_the_model_width() -> None:
    with pytest.raises(PelabError, match=r"^n_heads: model width 40 \(concat_wide with d=32\)"):
        build(ModelConfig, d=32, n_heads=3, combine="concat_wide")
