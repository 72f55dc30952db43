"""Each position scheme against its paper's formula or reference code, written out here.

Every expected value is computed independently in this file (numpy closed forms,
ports of tensor2tensor's ``get_timing_signal_1d``, MAE's
``get_2d_sincos_pos_embed`` and T5's ``_relative_position_bucket``, or numbers
worked out by hand), never taken from pelab itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from pelab.config import ModelConfig, PositionConfig, build
from pelab.errors import PelabError
from pelab.model import Transformer
from pelab.positions import SchemeContext
from pelab.positions.alibi import alibi_slopes
from pelab.positions.rotary import Rotary
from pelab.positions.sincos2d import sincos_2d_table
from pelab.positions.sinusoidal import inv_frequencies, sinusoid_table
from pelab.positions.t5 import relative_bucket

# --- independent references -------------------------------------------------------------


def paper_pe(length: int, d: int, base: float = 10000.0) -> np.ndarray:
    """Vaswani et al. §3.5: PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d))."""
    pe = np.zeros((length, d))
    for pos in range(length):
        for c in range(d):
            i = c // 2
            angle = pos / base ** (2 * i / d)
            pe[pos, c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return pe


def t2t_inv_timescales(channels: int, min_timescale: float = 1.0, max_timescale: float = 1.0e4) -> np.ndarray:
    """tensor2tensor's frequency grid, as its code computes it (``min_timescale * exp(...)``)."""
    num_timescales = channels // 2
    log_timescale_increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
    return min_timescale * np.exp(np.arange(num_timescales, dtype=np.float64) * -log_timescale_increment)


def get_timing_signal_1d(length: int, channels: int, min_timescale: float = 1.0, max_timescale: float = 1.0e4):
    """numpy port of tensor2tensor.layers.common_attention.get_timing_signal_1d (start_index=0)."""
    position = np.arange(length, dtype=np.float64)
    inv_timescales = t2t_inv_timescales(channels, min_timescale, max_timescale)
    scaled_time = position[:, None] * inv_timescales[None, :]
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    return np.pad(signal, [[0, 0], [0, channels % 2]])


def mae_1d(embed_dim: int, pos: np.ndarray) -> np.ndarray:
    """MAE's get_1d_sincos_pos_embed_from_grid."""
    omega = np.arange(embed_dim // 2, dtype=np.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000**omega
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def mae_2d(embed_dim: int, rows: int, cols: int) -> np.ndarray:
    """MAE's get_2d_sincos_pos_embed (there square; here rows x cols, same meshgrid order)."""
    grid_h = np.arange(rows, dtype=np.float32)
    grid_w = np.arange(cols, dtype=np.float32)
    grid = np.stack(np.meshgrid(grid_w, grid_h), axis=0)  # w goes first, as in MAE
    grid = grid.reshape([2, 1, rows, cols])
    emb_h = mae_1d(embed_dim // 2, grid[0])  # MAE's name; it is the column coordinate
    emb_w = mae_1d(embed_dim // 2, grid[1])
    return np.concatenate([emb_h, emb_w], axis=1)


def model_with(**kw) -> Transformer:
    defaults = dict(d=32, n_heads=2, n_layers=1, vocab_size=11, n_outputs=5, max_len=64)
    defaults.update(kw)
    torch.manual_seed(0)
    return Transformer(ModelConfig(**defaults))


@pytest.fixture
def float64_default() -> Iterator[None]:
    """Build buffers in float64, so comparisons can be tight."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


POS = torch.arange(64)

# --- sinusoidal, paper layout -------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 7, 16, 33, 512])
def test_paper_layout_matches_closed_form(d: int) -> None:
    got = sinusoid_table(POS, d, layout="paper").numpy()
    np.testing.assert_allclose(got, paper_pe(64, d), rtol=0, atol=1e-12)


def test_paper_known_values() -> None:
    t = sinusoid_table(torch.arange(3), 4, layout="paper").numpy()
    # d=4: frequencies 1 and 1/100
    expected = [
        [0.0, 1.0, 0.0, 1.0],
        [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)],
        [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)],
    ]
    np.testing.assert_allclose(t, expected, rtol=0, atol=1e-15)


def test_paper_frequency_grid() -> None:
    d = 10
    expected = [10000 ** (-2 * i / d) for i in range(5)]
    np.testing.assert_allclose(inv_frequencies("paper", d, 10000.0, 1.0, 1e4).numpy(), expected, rtol=1e-15)


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_model_table_is_the_paper_table(kind: str) -> None:
    model = model_with(kind=kind, position=PositionConfig(scheme="sinusoidal"), combine="add")
    out = model(torch.zeros(1, 40, dtype=torch.long), return_parts=True)
    np.testing.assert_allclose(out.parts.position.numpy(), paper_pe(40, 32), rtol=0, atol=1e-6)
    # the cache grows on demand, and a later, longer request is still right
    longer = model.scheme.table(torch.arange(100)).numpy()
    np.testing.assert_allclose(longer, paper_pe(100, 32), rtol=0, atol=1e-6)


# --- sinusoidal, tensor2tensor layout -----------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3, 8, 9, 16, 31, 64])
def test_tensor2tensor_layout_matches_get_timing_signal_1d(d: int) -> None:
    got = sinusoid_table(POS, d, layout="tensor2tensor").numpy()
    np.testing.assert_allclose(got, get_timing_signal_1d(64, d), rtol=0, atol=1e-12)


def test_tensor2tensor_odd_width_pads_one_zero_channel() -> None:
    got = sinusoid_table(POS, 9, layout="tensor2tensor").numpy()
    assert got.shape == (64, 9)
    assert np.all(got[:, -1] == 0.0)
    np.testing.assert_allclose(got[:, :4], np.sin(np.arange(64)[:, None] * t2t_inv_timescales(9)[None]), atol=1e-12)
    np.testing.assert_allclose(got[:, 4:8], np.cos(np.arange(64)[:, None] * t2t_inv_timescales(9)[None]), atol=1e-12)


@pytest.mark.parametrize("d", [2, 8, 9, 64])
def test_tensor2tensor_frequency_grid(d: int) -> None:
    got = inv_frequencies("tensor2tensor", d, 10000.0, 1.0, 1.0e4).numpy()
    np.testing.assert_allclose(got, t2t_inv_timescales(d), rtol=1e-14)
    if d >= 4:  # geometric from 1/min_timescale to 1/max_timescale
        assert got[0] == pytest.approx(1.0) and got[-1] == pytest.approx(1e-4, rel=1e-12)


def test_tensor2tensor_custom_timescales_span_min_to_max() -> None:
    """With min_timescale != 1 pelab follows t2t's documented intent: timescales run from
    min to max, i.e. inv_timescale_i = 1/min * exp(-i log(max/min) / (K-1)). (t2t's code
    multiplies by min instead, which agrees only at min = 1.)"""
    d, lo, hi = 12, 2.0, 500.0
    k = d // 2
    inv = np.array([(1 / lo) * math.exp(-i * math.log(hi / lo) / (k - 1)) for i in range(k)])
    np.testing.assert_allclose(inv_frequencies("tensor2tensor", d, 10000.0, lo, hi).numpy(), inv, rtol=1e-14)
    assert inv[0] == pytest.approx(1 / lo) and inv[-1] == pytest.approx(1 / hi)
    pos = np.arange(64)[:, None]
    expected = np.concatenate([np.sin(pos * inv), np.cos(pos * inv)], axis=1)
    got = sinusoid_table(POS, d, layout="tensor2tensor", min_timescale=lo, max_timescale=hi).numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_model_table_is_the_tensor2tensor_table() -> None:
    model = model_with(position=PositionConfig(scheme="sinusoidal", layout="tensor2tensor"), combine="add")
    np.testing.assert_allclose(model.scheme.table(POS).numpy(), get_timing_signal_1d(64, 32), atol=1e-6)


# --- keep: which frequencies survive in fewer channels --------------------------------------


def test_keep_paper_layout() -> None:
    full = paper_pe(64, 32)
    kw = dict(layout="paper", reference_width=32)
    np.testing.assert_allclose(sinusoid_table(POS, 8, keep="fastest", **kw).numpy(), full[:, :8], atol=1e-12)
    np.testing.assert_allclose(sinusoid_table(POS, 5, keep="fastest", **kw).numpy(), full[:, :5], atol=1e-12)
    np.testing.assert_allclose(sinusoid_table(POS, 8, keep="slowest", **kw).numpy(), full[:, 24:], atol=1e-12)
    np.testing.assert_allclose(sinusoid_table(POS, 8, keep="spread", **kw).numpy(), paper_pe(64, 8), atol=1e-12)


def test_keep_tensor2tensor_layout() -> None:
    inv = t2t_inv_timescales(32)  # 16 frequencies of the 32-wide encoding, fastest first
    pos = np.arange(64)[:, None]

    def sin_cos(f: np.ndarray) -> np.ndarray:
        return np.concatenate([np.sin(pos * f), np.cos(pos * f)], axis=1)

    kw = dict(layout="tensor2tensor", reference_width=32)
    np.testing.assert_allclose(sinusoid_table(POS, 8, keep="fastest", **kw).numpy(), sin_cos(inv[:4]), atol=1e-12)
    np.testing.assert_allclose(sinusoid_table(POS, 8, keep="slowest", **kw).numpy(), sin_cos(inv[-4:]), atol=1e-12)
    np.testing.assert_allclose(
        sinusoid_table(POS, 8, keep="spread", **kw).numpy(), get_timing_signal_1d(64, 8), atol=1e-12
    )


@pytest.mark.parametrize("combine", ["concat_split", "concat_wide", "concat_project"])
@pytest.mark.parametrize("keep", ["fastest", "slowest", "spread", None])
def test_keep_reaches_the_model(combine: str, keep: str | None) -> None:
    position = PositionConfig(scheme="sinusoidal") if keep is None else PositionConfig(scheme="sinusoidal", keep=keep)
    model = model_with(d=32, d_position=8, position=position, combine=combine)
    full = paper_pe(64, 32)
    expected = {None: full[:, :8], "fastest": full[:, :8], "slowest": full[:, 24:], "spread": paper_pe(64, 8)}[keep]
    np.testing.assert_allclose(model.scheme.table(POS).numpy(), expected, rtol=0, atol=1e-6)


# --- PE(pos + k) is a rotation of PE(pos) ------------------------------------------------------


def block_rotation(freqs: np.ndarray, k: int, layout: str) -> np.ndarray:
    """sin(a+b) = sin a cos b + cos a sin b, cos(a+b) = cos a cos b - sin a sin b, per frequency."""
    n = len(freqs)
    m = np.zeros((2 * n, 2 * n))
    for i, w in enumerate(freqs):
        s, c = (2 * i, 2 * i + 1) if layout == "paper" else (i, n + i)
        m[s, s], m[s, c] = math.cos(k * w), math.sin(k * w)
        m[c, s], m[c, c] = -math.sin(k * w), math.cos(k * w)
    return m


@pytest.mark.parametrize("layout", ["paper", "tensor2tensor"])
@pytest.mark.parametrize("k", [1, 5, 37])
def test_shift_is_a_fixed_rotation(layout: str, k: int) -> None:
    d = 16
    freqs = np.array([10000 ** (-2 * i / d) for i in range(d // 2)]) if layout == "paper" else t2t_inv_timescales(d)
    table = sinusoid_table(torch.arange(100 + k), d, layout=layout).numpy()
    m = block_rotation(freqs, k, layout)
    predicted = table[:100] @ m.T  # row vectors: PE(pos + k) = M_k PE(pos)
    np.testing.assert_allclose(predicted, table[k:], rtol=0, atol=1e-12)
    # and the matrix does not fit a different shift
    assert np.abs(table[:100] @ block_rotation(freqs, k + 1, layout).T - table[k:]).max() > 1e-3


# --- rotary ---------------------------------------------------------------------------------------


def rotary_ctx(head_dim: int = 16, n_heads: int = 2) -> SchemeContext:
    d = head_dim * n_heads
    return SchemeContext(
        width=d, model_width=d, reference_width=d, n_heads=n_heads, head_dim=head_dim, max_len=64, causal=False
    )


def rope_reference(x: np.ndarray, positions: np.ndarray, rot: int, base: float = 10000.0) -> np.ndarray:
    """GPT-NeoX pairing: channels (j, j + R/2) turn by pos * base^(-2j/R); channels >= R untouched."""
    out = x.copy()
    half = rot // 2
    for t, pos in enumerate(positions):
        for j in range(half):
            a = pos * base ** (-2 * j / rot)
            x1, x2 = x[..., t, j], x[..., t, j + half]
            out[..., t, j] = x1 * math.cos(a) - x2 * math.sin(a)
            out[..., t, j + half] = x2 * math.cos(a) + x1 * math.sin(a)
    return out


@pytest.mark.parametrize("fraction, rot", [(1.0, 16), (0.5, 8), (0.3, 4)])
def test_rotary_matches_reference(float64_default, fraction: float, rot: int) -> None:
    scheme = Rotary(rotary_ctx(16), rotary_fraction=fraction)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 2, 10, 16, generator=g), torch.randn(2, 2, 10, 16, generator=g)
    positions = torch.arange(10) * 3
    rq, rk = scheme.rotate(q, k, positions)
    np.testing.assert_allclose(rq.numpy(), rope_reference(q.numpy(), positions.numpy(), rot), atol=1e-12)
    np.testing.assert_allclose(rk.numpy(), rope_reference(k.numpy(), positions.numpy(), rot), atol=1e-12)
    # channels beyond the rotated fraction are passed through bit for bit
    assert torch.equal(rq[..., rot:], q[..., rot:]) and torch.equal(rk[..., rot:], k[..., rot:])
    if rot < 16:
        assert not torch.allclose(rq[..., :rot], q[..., :rot])


def test_rotary_scores_depend_on_offset_only(float64_default) -> None:
    scheme = Rotary(rotary_ctx(16))
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 2, 12, 16, generator=g), torch.randn(1, 2, 12, 16, generator=g)
    pos = torch.arange(12)

    def scores(p: torch.Tensor) -> torch.Tensor:
        rq, rk = scheme.rotate(q, k, p)
        return rq @ rk.transpose(-1, -2)

    base = scores(pos)
    for shift in (1, 7, 1000):
        torch.testing.assert_close(scores(pos + shift), base, rtol=0, atol=1e-9)
    assert (scores(2 * pos) - base).abs().max() > 1e-2  # different offsets, different scores


def test_rotary_fraction_that_leaves_nothing_is_an_error() -> None:
    with pytest.raises(PelabError, match="rotary_fraction"):
        Rotary(rotary_ctx(2), rotary_fraction=0.5)


# --- ALiBi -------------------------------------------------------------------------------------


def test_alibi_slopes_for_8_heads_are_the_papers() -> None:
    assert alibi_slopes(8).tolist() == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]


def test_alibi_slopes_for_other_head_counts() -> None:
    # powers of two: 2^(-8h/H)
    np.testing.assert_allclose(alibi_slopes(4).numpy(), [2**-2, 2**-4, 2**-6, 2**-8], rtol=1e-7)
    # 6 heads: the 4-head slopes, then every other slope of the 8-head set (2^-1, 2^-3)
    np.testing.assert_allclose(alibi_slopes(6).numpy(), [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3], rtol=1e-7)
    # 12 heads: the 8-head slopes, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 from the 16-head set
    expected = [2.0**-k for k in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    np.testing.assert_allclose(alibi_slopes(12).numpy(), expected, rtol=1e-7)


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_alibi_bias_in_the_model(kind: str) -> None:
    model = model_with(kind=kind, n_heads=8, position=PositionConfig(scheme="alibi"), combine="none")
    T = 6
    bias = model.attention_bias(torch.arange(T)).numpy()
    slopes = np.array([2.0**-h for h in range(1, 9)])
    for h in range(8):
        for i in range(T):
            for j in range(T):
                if kind == "decoder" and j > i:
                    assert bias[h, i, j] == -np.inf
                else:
                    assert bias[h, i, j] == pytest.approx(-slopes[h] * abs(i - j), abs=1e-7)


def test_alibi_bias_is_shift_invariant() -> None:
    model = model_with(n_heads=8, position=PositionConfig(scheme="alibi"), combine="none")
    p = torch.arange(10)
    assert torch.equal(model.scheme.bias(p + 17, p + 17), model.scheme.bias(p, p))


# --- T5 ----------------------------------------------------------------------------------------

# offset = key position - query position; 32 buckets, max_distance 128, worked out by hand from
# T5's _relative_position_bucket: bidirectional halves the buckets (16 per side, 8 exact), keys
# after the query get +16; beyond 8, bucket = 8 + floor(log(n/8) / log(128/8) * 8), capped at 15.
T5_BIDIRECTIONAL = {
    0: 0, -1: 1, 1: 17, -7: 7, 7: 23, -8: 8, 8: 24, -12: 9, -20: 10,
    -50: 13, 50: 29, -127: 15, -128: 15, -1000: 15, 1000: 31,
}  # fmt: skip
# causal: only the past counts (16 exact buckets), bucket = 16 + floor(log(n/16) / log(8) * 16), cap 31
T5_CAUSAL = {
    0: 0, 5: 0, 1000: 0, -1: 1, -5: 5, -15: 15, -16: 16, -20: 17, -50: 24, -64: 26, -100: 30, -127: 31, -500: 31,
}  # fmt: skip


@pytest.mark.parametrize("bidirectional, table", [(True, T5_BIDIRECTIONAL), (False, T5_CAUSAL)])
def test_t5_buckets_match_hand_computed_values(bidirectional: bool, table: dict[int, int]) -> None:
    offsets = torch.tensor(list(table))
    got = relative_bucket(offsets, bidirectional, 32, 128).tolist()
    assert dict(zip(table, got, strict=True)) == table


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_t5_bias_uses_the_buckets_and_is_shift_invariant(kind: str) -> None:
    model = model_with(kind=kind, max_len=2048, position=PositionConfig(scheme="t5"), combine="none")
    w = model.scheme.weight.detach()  # (buckets, H)
    q_pos, k_pos = torch.tensor([100, 200]), torch.tensor([50, 80, 150, 1200])
    bias = model.scheme.bias(q_pos, k_pos)
    table = T5_BIDIRECTIONAL if kind == "encoder" else T5_CAUSAL
    checked = 0
    for i, q in enumerate(q_pos.tolist()):
        for j, k in enumerate(k_pos.tolist()):
            if k - q in table:
                assert torch.equal(bias[:, i, j], w[table[k - q]])
                checked += 1
    assert checked >= 3  # offsets -50, -20, 50 / 1000 are in the hand-computed tables
    p = torch.arange(20)
    assert torch.equal(model.scheme.bias(p + 300, p + 300), model.scheme.bias(p, p))


# --- shift invariance of whole relative-position models -------------------------------------------


@pytest.mark.parametrize("scheme", ["rotary", "alibi", "t5"])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_relative_schemes_make_the_model_shift_invariant(scheme: str, kind: str) -> None:
    model = model_with(kind=kind, n_layers=2, position=PositionConfig(scheme=scheme), combine="none").double()
    x = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(0))
    p = torch.arange(12)
    with torch.no_grad():
        a, b = model(x, positions=p).logits, model(x, positions=p + 25).logits
    torch.testing.assert_close(a, b, rtol=0, atol=1e-9)


@pytest.mark.parametrize("scheme, combine", [("sinusoidal", "add"), ("learned", "add"), ("untied", "none")])
def test_absolute_schemes_are_not_shift_invariant(scheme: str, combine: str) -> None:
    model = model_with(position=PositionConfig(scheme=scheme), combine=combine).double()
    x = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(0))
    p = torch.arange(12)
    with torch.no_grad():
        a, b = model(x, positions=p).logits, model(x, positions=p + 25).logits
    assert (a - b).abs().max() > 1e-3


# --- 2-D sin-cos ---------------------------------------------------------------------------------


@pytest.mark.parametrize("width, rows, cols", [(16, 4, 4), (32, 8, 8), (8, 3, 5), (12, 2, 6)])
def test_sincos2d_matches_mae(width: int, rows: int, cols: int) -> None:
    got = sincos_2d_table(torch.arange(rows * cols), width, (rows, cols)).numpy()
    np.testing.assert_allclose(got, mae_2d(width, rows, cols), rtol=0, atol=1e-12)


@pytest.mark.parametrize("combine, width", [("add", 32), ("concat_split", 8), ("concat_wide", 8)])
def test_sincos2d_in_the_model(combine: str, width: int) -> None:
    model = model_with(d=32, d_position=8, grid=(4, 4), position=PositionConfig(scheme="sincos2d"), combine=combine)
    np.testing.assert_allclose(model.scheme.table(torch.arange(16)).numpy(), mae_2d(width, 4, 4), atol=1e-6)


@pytest.mark.parametrize("scheme", ["sinusoidal", "sincos2d"])
def test_fixed_tables_follow_the_model_dtype(scheme: str) -> None:
    """A model converted to float64 gets the formula in float64, not its float32 rounding."""
    model = model_with(grid=(4, 4), position=PositionConfig(scheme=scheme), combine="add").double()
    table = model.scheme.table(torch.arange(16))
    assert table.dtype == torch.float64
    expected = paper_pe(16, 32) if scheme == "sinusoidal" else mae_2d(32, 4, 4)
    np.testing.assert_allclose(table.numpy(), expected, rtol=0, atol=1e-12)


def test_sincos2d_rejects_width_not_divisible_by_4() -> None:
    """The message names the field the user set: d when the table is d wide (add), else d_position."""
    position = PositionConfig(scheme="sincos2d")
    with pytest.raises(PelabError, match=r"^d: .*divisible by 4 \(got 6\)"):
        Transformer(build(ModelConfig, d=6, n_heads=2, grid=(4, 4), position=position, combine="add"))
    with pytest.raises(PelabError, match=r"^d_position: .*divisible by 4 \(got 6\)"):
        Transformer(
            build(ModelConfig, d=16, d_position=6, n_heads=2, grid=(4, 4), position=position, combine="concat_wide")
        )


def test_sincos2d_needs_a_grid() -> None:
    with pytest.raises(PelabError, match="^grid:"):
        Transformer(build(ModelConfig, d=16, position=PositionConfig(scheme="sincos2d"), combine="add"))


def test_scheme_table_for_show_is_the_formula_in_float64() -> None:
    """What `pelab show` draws and writes: the fixed tables to full float64 precision."""
    from pelab.tables import scheme_table

    got = scheme_table(PositionConfig(scheme="sinusoidal"), d=12, length=30)
    np.testing.assert_allclose(got.numpy(), paper_pe(30, 12), rtol=0, atol=1e-12)
    got = scheme_table(PositionConfig(scheme="sinusoidal", layout="tensor2tensor"), d=9, length=30)
    np.testing.assert_allclose(got.numpy(), get_timing_signal_1d(30, 9), rtol=0, atol=1e-12)
    got = scheme_table(PositionConfig(scheme="sincos2d"), d=16, length=12, grid=(3, 4))
    np.testing.assert_allclose(got.numpy(), mae_2d(16, 3, 4), rtol=0, atol=1e-12)
    learned = scheme_table(PositionConfig(scheme="learned"), d=8, length=5, seed=3)
    assert learned.shape == (5, 8)
    assert torch.equal(learned, scheme_table(PositionConfig(scheme="learned"), d=8, length=5, seed=3))
    assert torch.equal(learned.float().double(), learned)  # the float32 initial values, unchanged
    assert scheme_table(PositionConfig(scheme="rotary"), d=8, length=5) is None


# --- learned ----------------------------------------------------------------------------------------


def test_learned_table_is_its_weight_and_refuses_long_inputs() -> None:
    model = model_with(max_len=20, position=PositionConfig(scheme="learned"), combine="concat_split", d_position=8)
    assert model.scheme.weight.shape == (20, 8)
    assert torch.equal(model.scheme.table(torch.tensor([3, 0, 19])), model.scheme.weight[[3, 0, 19]])
    model(torch.zeros(1, 20, dtype=torch.long))  # exactly max_len is fine
    with pytest.raises(PelabError, match=r"^length: 21 exceeds"):
        model(torch.zeros(1, 21, dtype=torch.long))


def test_untied_refuses_long_inputs() -> None:
    model = model_with(max_len=10, position=PositionConfig(scheme="untied"), combine="none")
    with pytest.raises(PelabError, match="^length:"):
        model(torch.zeros(1, 11, dtype=torch.long))
