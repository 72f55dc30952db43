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
CONCAT = {"concat_split", "concat_wide", "concat_project"}


def paper_pe(length: int, d: int) -> np.ndarray:
    pos = np.arange(length)[:, None]
    i = np.arange(d)[None, :] // 2
    angle = pos / 10000 ** (2 * i / d)
    return np.where(np.arange(d)[None, :] % 2 == 0, np.sin(angle), np.cos(angle))


def hand_widths(combine: str, scheme: str, d: int, n_segments: int = 0, d_position=None, d_segment=None):
    """(d_token, side widths, d_model) as the study's table of combiners defines them."""
    concat = combine in CONCAT
    sides = []
    if scheme in TABLE_SCHEMES and combine != "none":
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
    per_layer = 3 * C * C + C * C + C * ff + ff * C + 2 * 2 * C  # qkv, out, mlp up, mlp down, 2 LayerNorms
    return n + layers * per_layer + 2 * C + C * outputs  # + final LayerNorm + head


COMBINERS = ["add", "scaled_add", "concat_split", "concat_wide", "concat_project", "gated"]
PARAM_CASES = (
    [(c, s, {}) for c in COMBINERS for s in ("sinusoidal", "learned")]
    + [(c, "sinusoidal", {"d_position": 6}) for c in CONCAT]
    + [(c, "learned", {"n_segments": 3}) for c in COMBINERS]
    + [(c, "sincos2d", {"patch_dim": 12, "grid": (4, 4)}) for c in COMBINERS]
    + [("none", s, {}) for s in ("none", "rotary", "alibi", "t5", "untied")]
    + [("none", "t5", {"n_segments": 2}), ("gated", "rotary", {"n_segments": 2})]
    + [("concat_split", "rotary", {"n_segments": 2, "d_segment": 5})]
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
