"""The three schemes from the length-extrapolation literature (randomized positions, xPos, KERPLE) against their
reference code or their paper's closed form, written out here independently of pelab: x-transformers' xPos (run
itself, when installed), KERPLE's two kernels by hand, and the randomized encoding's table as the DeepMind code
builds it (a numpy port of ``sinusoid_position_encoding`` read at the drawn indexes, as
``noisy_fixed_positional_encodings`` does)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pelab.config import ModelConfig, PositionConfig
from pelab.model import Transformer
from pelab.positions import SchemeContext
from pelab.positions.kerple import Kerple
from pelab.positions.randomized import Randomized
from pelab.positions.xpos import XPos


def ctx(head_dim: int = 8, n_heads: int = 2, width: int = 16, max_len: int = 32, causal: bool = False):
    return SchemeContext(width=width, model_width=head_dim * n_heads, reference_width=width, n_heads=n_heads,
                         head_dim=head_dim, max_len=max_len, causal=causal)  # fmt: skip


# --- xPos -------------------------------------------------------------------------------------------------------


def half_order(e: int) -> list[int]:
    """x-transformers pairs channels (2j, 2j+1); pelab, as GPT-NeoX, (j, j + E/2): this maps one onto the other."""
    return list(range(0, e, 2)) + list(range(1, e, 2))


def xpos64(head_dim: int, n_heads: int) -> XPos:
    """Built in float64 throughout (its buffers too), so comparisons can be tight."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return XPos(ctx(head_dim=head_dim, n_heads=n_heads))
    finally:
        torch.set_default_dtype(old)


@pytest.mark.parametrize("positions", [torch.arange(24), torch.arange(40, 64), torch.arange(0, 300, 13)])
def test_xpos_matches_x_transformers(positions: torch.Tensor) -> None:
    xt = pytest.importorskip("x_transformers.x_transformers", reason="x-transformers: pip install '.[bench]'")
    E, H = 16, 2
    rot = xt.RotaryEmbedding(E, use_xpos=True, scale_base=512).double()
    # its buffers, by its own expressions, in float64 (it computes them in float32, which alone moves q by 1e-7)
    rot.inv_freq = 1.0 / (10000 ** (torch.arange(0, E, 2, dtype=torch.float64) / E))
    rot.scale = (torch.arange(0, E, 2, dtype=torch.float64) + 0.4 * E) / (1.4 * E)
    freqs, scale = rot(positions)
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, H, len(positions), E, generator=g, dtype=torch.float64) for _ in range(2))
    want_q = xt.apply_rotary_pos_emb(q, freqs, scale)
    want_k = xt.apply_rotary_pos_emb(k, freqs, scale**-1.0)
    scheme = xpos64(E, H)
    idx = half_order(E)
    got_q, got_k = scheme.rotate(q[..., idx], k[..., idx], positions)
    gap_q = (got_q - want_q[..., idx]).abs().max().item()
    gap_k = (got_k - want_k[..., idx]).abs().max().item()
    scores = (got_q @ got_k.transpose(-1, -2) - want_q @ want_k.transpose(-1, -2)).abs().max().item()
    print(
        f"xpos vs x-transformers ({positions[0]}..{positions[-1]}): q {gap_q:.1e}, k {gap_k:.1e}, scores {scores:.1e}"
    )
    assert max(gap_q, gap_k, scores) < 1e-12


def test_xpos_scores_are_the_papers_closed_form() -> None:
    """q_m·k_n = Σ_j ζ_j^((m-n)/γ) [rotary's term of pair j], ζ_j = (2j/E + 0.4)/1.4: relative, and decaying."""
    E, m, n = 8, 37, 5
    scheme = xpos64(E, 1)
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(E, generator=g, dtype=torch.float64), torch.randn(E, generator=g, dtype=torch.float64)
    pos = torch.tensor([n, m])
    rq, _ = scheme.rotate(q.expand(1, 1, 2, E), q.expand(1, 1, 2, E), pos)
    _, rk = scheme.rotate(k.expand(1, 1, 2, E), k.expand(1, 1, 2, E), pos)
    got = float(rq[0, 0, 1] @ rk[0, 0, 0])
    want = 0.0
    for j in range(E // 2):
        theta, zeta = 10000 ** (-2 * j / E), (2 * j / E + 0.4) / 1.4
        a, b = (q[j], q[j + E // 2]), (k[j], k[j + E // 2])
        # rotary: <R(mθ) a, R(nθ) b> = aᵀ R((n-m)θ) b = (a·b) cos((m-n)θ) - (a₂b₁ - a₁b₂) sin((m-n)θ)
        dot, cross = a[0] * b[0] + a[1] * b[1], a[1] * b[0] - a[0] * b[1]
        want += zeta ** ((m - n) / 512) * float(dot * math.cos((m - n) * theta) - cross * math.sin((m - n) * theta))
    assert abs(got - want) < 1e-12
    p = torch.arange(10)
    a, b = scheme.rotate(q.expand(1, 1, 10, E), k.expand(1, 1, 10, E), p)
    c, d = scheme.rotate(q.expand(1, 1, 10, E), k.expand(1, 1, 10, E), p + 200)
    torch.testing.assert_close(a @ b.transpose(-1, -2), c @ d.transpose(-1, -2), rtol=0, atol=1e-12)


# --- KERPLE -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["log", "power"])
@pytest.mark.parametrize("causal", [False, True])
def test_kerple_bias_is_the_closed_form(kernel: str, causal: bool) -> None:
    scheme = Kerple(ctx(n_heads=3, causal=causal), kerple_kernel=kernel).double()
    r1, r2 = np.array([0.3, 1.7, 0.01]), np.array([0.9, 0.05, 1.99])
    with torch.no_grad():
        scheme.r1.copy_(torch.tensor(r1))
        scheme.r2.copy_(torch.tensor(r2))
    T = 12
    got = scheme.bias(torch.arange(T), torch.arange(T)).detach().numpy()
    want = np.zeros((3, T, T))
    for h in range(3):
        for i in range(T):
            for j in range(T):
                d = abs(i - j)
                want[h, i, j] = -r1[h] * (math.log(1 + r2[h] * d) if kernel == "log" else d ** r2[h])
    gap = np.abs(got - want).max()
    print(f"kerple {kernel} ({'causal' if causal else 'encoder'}) vs closed form: {gap:.1e}")
    assert gap < 1e-13
    if causal:  # the authors' construction: tril(i - j) (the masked upper triangle aside)
        diff = np.tril(np.arange(T)[:, None] - np.arange(T)[None, :]).astype(float)
        if kernel == "log":
            authors = -r1[:, None, None] * np.log(1 + r2[:, None, None] * diff)
        else:
            authors = -r1[:, None, None] * diff ** r2[:, None, None]
        lower = np.tril(np.ones((T, T), dtype=bool))
        assert np.abs(got - authors)[:, lower].max() < 1e-13


def test_kerple_keeps_its_parameters_in_the_authors_bounds_and_gradients_flow() -> None:
    scheme = Kerple(ctx(n_heads=2), kerple_kernel="power").double()
    with torch.no_grad():
        scheme.r1.copy_(torch.tensor([-1.0, 0.5]))
        scheme.r2.copy_(torch.tensor([0.5, 7.0]))
    b = scheme.bias(torch.arange(4), torch.arange(4))
    assert b[0, 0, 3].item() == pytest.approx(-0.01 * 3**0.5) and b[1, 0, 3].item() == pytest.approx(-0.5 * 9)
    b.sum().backward()
    assert torch.isfinite(scheme.r1.grad).all() and (scheme.r1.grad != 0).all()  # straight through the clamp
    assert torch.isfinite(scheme.r2.grad).all()
    fresh = Kerple(ctx(n_heads=64))
    assert 0 <= fresh.r1.min() and fresh.r1.max() <= 2 and 0 <= fresh.r2.min() and fresh.r2.max() <= 1


# --- randomized positions -----------------------------------------------------------------------------------------


def deepmind_sinusoid(sequence_length: int, hidden_size: int, max_timescale: float = 1e4) -> np.ndarray:
    """numpy port of the reference code's sinusoid_position_encoding (add_negative_side=False)."""
    freqs = np.arange(0, hidden_size, 2)
    inv_freq = max_timescale ** (-freqs / hidden_size)
    pos_seq = np.arange(0, sequence_length)
    sinusoid_inp = np.einsum("i,j->ij", pos_seq, inv_freq)
    return np.concatenate([np.sin(sinusoid_inp), np.cos(sinusoid_inp)], axis=-1)


def randomized(seed: int = 0, **options) -> Randomized:
    torch.manual_seed(seed)
    return Randomized(ctx(width=16, max_len=32), **options).double()


def test_randomized_table_is_the_reference_encoding_at_sorted_drawn_positions() -> None:
    scheme = randomized()
    L = scheme.range
    assert L == 4 * 32
    full = deepmind_sinusoid(L, 16)
    for length in (5, 20, 32):
        scheme.train()
        gen_state = scheme._generator("train").get_state()
        table = scheme.table(torch.arange(length)).numpy()
        scheme._generator("train").set_state(gen_state)
        drawn = scheme.draw(length).numpy()  # the same draw again
        assert np.all(np.diff(drawn) > 0) and drawn.min() >= 0 and drawn.max() < L  # sorted, distinct, in range
        gap = np.abs(table - full[drawn]).max()  # noisy_fixed_positional_encodings: encodings[sorted indexes]
        print(f"randomized vs reference at length {length}: {gap:.1e}")
        assert gap < 1e-12


def test_randomized_draws_are_uniform_over_the_range() -> None:
    scheme = randomized()
    counts = np.zeros(scheme.range)
    draws = 3000
    for _ in range(draws):
        counts[scheme.draw(16).numpy()] += 1
    expected = draws * 16 / scheme.range  # each position is one of the 16 with probability 16/L
    assert np.abs(counts - expected).max() < 0.25 * expected


def test_randomized_evaluation_is_reproducible_and_each_seed_draws_its_own() -> None:
    a, b, other = randomized(3), randomized(3), randomized(4)
    p = torch.arange(20)
    assert torch.equal(a.eval().table(p), b.eval().table(p))  # same seed, same draws
    first = a.eval().table(p)
    assert not torch.equal(first, a.table(p))  # each evaluation batch draws anew (as the reference code)...
    assert torch.equal(first, a.eval().table(p))  # ...from the start again whenever eval mode begins
    assert not torch.equal(other.eval().table(p), first)  # another seed, other positions
    ordered = randomized(3, randomized_eval="ordered").eval()
    np.testing.assert_allclose(ordered.table(p).numpy(), deepmind_sinusoid(20, 16), atol=1e-12)


def test_randomized_learned_reads_its_rows_at_the_drawn_positions() -> None:
    scheme = randomized(randomized_base="learned", randomized_range=50).train()
    assert scheme.weight.shape == (50, 16)
    state = scheme._generator("train").get_state()
    table = scheme.table(torch.arange(10))
    scheme._generator("train").set_state(state)
    assert torch.equal(table, scheme.weight[scheme.draw(10)])


def test_randomized_in_a_model_survives_a_checkpoint(tmp_path) -> None:
    from pelab import checkpoint

    cfg = ModelConfig(d=16, n_heads=2, n_layers=1, vocab_size=11, n_outputs=5, max_len=20,
                      position=PositionConfig(scheme="randomized"), combine="add")  # fmt: skip
    torch.manual_seed(0)
    model = Transformer(cfg)
    checkpoint.save(model, tmp_path / "m.safetensors")
    torch.manual_seed(123)
    loaded = checkpoint.load(tmp_path / "m.safetensors")
    x = torch.randint(0, 11, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model.eval()(x).logits, loaded.eval()(x).logits)
