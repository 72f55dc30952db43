"""One battery over every valid (scheme, combiner) pair, for encoders and decoders.

Valid means what ``ModelConfig`` accepts: schemes with an input table take every
combiner but ``none`` and ``matrix``; attention-level schemes take ``none`` and
``matrix`` (whose per-position maps are its own table); a few pairs also carry
segment embeddings (n_segments=2), where any combiner has something to combine.
Each case checks shapes, seeded determinism, a safetensors round trip, gradients
reaching every parameter, causality (decoders) or its absence (encoders), and
permutation equivariance exactly when nothing carries position.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from pelab import checkpoint
from pelab.combine import COMBINERS
from pelab.config import ModelConfig, PositionConfig
from pelab.model import Transformer
from pelab.positions import SCHEMES

D, HEADS, LAYERS, VOCAB, OUT, T, B, MAX_LEN, PATCH = 16, 2, 2, 11, 7, 16, 3, 32, 12
TABLE_SCHEMES = [
    ("sinusoidal", "paper"), ("sinusoidal", "tensor2tensor"), ("learned", "paper"), ("sincos2d", "paper"),
    ("randomized", "paper"),
]  # fmt: skip
ATTENTION_SCHEMES = ["none", "rotary", "alibi", "t5", "untied", "xpos", "kerple"]
INPUT_COMBINERS = ["add", "scaled_add", "concat_split", "concat_wide", "concat_project", "gated", "multiply"]


@dataclass(frozen=True)
class Case:
    scheme: str
    combine: str
    layout: str = "paper"
    n_segments: int = 0
    patches: bool = False
    rank: int | None = None  # matrix_rank

    @property
    def id(self) -> str:
        combine = self.combine if self.rank is None else f"{self.combine}-r{self.rank}"
        parts = [self.scheme if self.layout == "paper" else f"{self.scheme}-{self.layout}", combine]
        if self.n_segments:
            parts.append("seg")
        if self.patches:
            parts.append("patches")
        return "/".join(parts)

    def config(self, kind: str) -> ModelConfig:
        return ModelConfig(
            kind=kind,
            d=D,
            n_heads=HEADS,
            n_layers=LAYERS,
            vocab_size=None if self.patches else VOCAB,
            patch_dim=PATCH if self.patches else None,
            n_outputs=OUT,
            max_len=MAX_LEN,
            n_segments=self.n_segments,
            grid=(4, 4) if self.scheme == "sincos2d" else None,
            position=PositionConfig(scheme=self.scheme, layout=self.layout),
            combine=self.combine,
            matrix_rank=self.rank,
        )

    def model_width(self) -> int:
        """Written out by hand: only concat_wide grows, by d_position (d/4) and d_segment (d/8)."""
        if self.combine != "concat_wide":
            return D
        has_table = self.scheme in ("sinusoidal", "learned", "sincos2d", "randomized")
        return D + (D // 4 if has_table else 0) + (D // 8 if self.n_segments else 0)


CASES = (
    [Case(s, c, layout) for s, layout in TABLE_SCHEMES for c in INPUT_COMBINERS]
    + [Case(s, "none") for s in ATTENTION_SCHEMES]
    + [Case(s, "matrix") for s in ATTENTION_SCHEMES]
    + [Case("none", "matrix", rank=3), Case("rotary", "matrix", rank=0)]
    + [
        Case("sinusoidal", "add", n_segments=2),
        Case("sinusoidal", "scaled_add", n_segments=2),
        Case("learned", "concat_split", n_segments=2),
        Case("sinusoidal", "concat_wide", n_segments=2),
        Case("sinusoidal", "concat_project", n_segments=2),
        Case("sinusoidal", "gated", n_segments=2),
        Case("rotary", "concat_split", n_segments=2),
        Case("alibi", "add", n_segments=2),
        Case("t5", "gated", n_segments=2),
        Case("none", "none", n_segments=2),
        Case("sincos2d", "add", patches=True),
        Case("sincos2d", "concat_split", patches=True),
        Case("sinusoidal", "multiply", n_segments=2),
        Case("t5", "multiply", n_segments=2),  # no input table: segments are all it multiplies by
        Case("none", "matrix", n_segments=2),
        Case("sincos2d", "multiply", patches=True),
        Case("none", "matrix", rank=5, patches=True),
    ]
)
KINDS = ["encoder", "decoder"]


def battery(f):
    f = pytest.mark.parametrize("kind", KINDS)(f)
    return pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])(f)


def make_inputs(case: Case, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor | None]:
    g = torch.Generator().manual_seed(seed)
    if case.patches:
        x = torch.randn(B, T, PATCH, generator=g)
    else:
        x = torch.randint(0, VOCAB, (B, T), generator=g)
    segments = (torch.arange(T) >= T // 2).long().expand(B, T).clone() if case.n_segments else None
    return x, segments


def build(case: Case, kind: str, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(case.config(kind))


def test_battery_covers_every_registered_scheme_and_combiner() -> None:
    """A newly registered scheme or combiner must be added to the battery."""
    assert {c.scheme for c in CASES} == set(SCHEMES)
    assert {c.combine for c in CASES} == set(COMBINERS)
    assert {c.combine for c in CASES if c.scheme in ("sinusoidal", "learned", "sincos2d", "randomized")} == set(
        INPUT_COMBINERS
    )


@battery
def test_shapes(case: Case, kind: str) -> None:
    model = build(case, kind)
    x, seg = make_inputs(case)
    out = model(x, seg, return_hidden=True, return_parts=True, return_qk=True)
    C = case.model_width()
    assert out.logits.shape == (B, T, OUT)
    assert out.parts is not None and out.parts.combined.shape == (B, T, C)
    assert len(out.hidden) == LAYERS + 1
    assert all(h.shape == (B, T, C) for h in out.hidden)
    assert out.q is not None and out.q.shape == (B, HEADS, T, C // HEADS)
    assert out.k is not None and out.k.shape == (B, HEADS, T, C // HEADS)
    assert torch.isfinite(out.logits).all()


@battery
def test_seeded_construction_is_deterministic(case: Case, kind: str) -> None:
    x, seg = make_inputs(case)
    a = build(case, kind, seed=3)(x, seg).logits
    b = build(case, kind, seed=3)(x, seg).logits
    c = build(case, kind, seed=4)(x, seg).logits
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)  # the seed really drives the initialisation


@battery
def test_safetensors_round_trip(case: Case, kind: str, tmp_path) -> None:
    model = build(case, kind, seed=1)
    x, seg = make_inputs(case)
    path = tmp_path / "model.safetensors"
    checkpoint.save(model, path)
    torch.manual_seed(99)  # a different RNG state must not matter once weights are loaded
    loaded = checkpoint.load(path)
    assert loaded.cfg == model.cfg
    assert loaded.state_dict().keys() == model.state_dict().keys()
    with torch.no_grad():
        assert torch.equal(loaded(x, seg).logits, model(x, seg).logits)


@battery
def test_every_parameter_gets_a_gradient(case: Case, kind: str) -> None:
    model = build(case, kind)
    x, seg = make_inputs(case)
    targets = torch.randint(0, OUT, (B * T,), generator=torch.Generator().manual_seed(1))
    F.cross_entropy(model(x, seg).logits.reshape(-1, OUT), targets).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert p.grad.abs().sum() > 0, name


@battery
def test_causality(case: Case, kind: str) -> None:
    """Decoders: changing token j leaves outputs before j bit-identical. Encoders: it does not."""
    model = build(case, kind)
    x, seg = make_inputs(case)
    j = 9
    x2 = x.clone()
    if case.patches:
        x2[:, j] = torch.randn(B, PATCH, generator=torch.Generator().manual_seed(5))
    else:
        x2[:, j] = (x2[:, j] + 1) % VOCAB
    with torch.no_grad():  # eval mode before each call: randomized positions are then the same draw for both
        y, y2 = model.eval()(x, seg).logits, model.eval()(x2, seg).logits
    assert not torch.allclose(y[:, j], y2[:, j])  # the change is visible where it happens
    if kind == "decoder":
        assert torch.equal(y[:, :j], y2[:, :j])
    else:
        assert (y[:, :j] - y2[:, :j]).abs().max() > 1e-6


@pytest.mark.parametrize("case", [c for c in CASES if c.n_segments], ids=lambda c: c.id)
def test_decoder_causality_in_segment_ids(case: Case) -> None:
    model = build(case, "decoder")
    x, seg = make_inputs(case)
    assert seg is not None
    seg2 = seg.clone()
    seg2[:, -1] = 1 - seg2[:, -1]
    with torch.no_grad():
        y, y2 = model(x, seg).logits, model(x, seg2).logits
    assert torch.equal(y[:, :-1], y2[:, :-1])
    assert not torch.allclose(y[:, -1], y2[:, -1])


def carries_position(case: Case, kind: str) -> bool:
    """Whether anything in the model can tell positions apart: a scheme, matrix's maps, or the causal mask."""
    return kind == "decoder" or case.scheme != "none" or (case.combine == "matrix" and case.rank != 0)


@battery
def test_permutation_equivariance_only_without_position(case: Case, kind: str) -> None:
    """f(x[π]) = f(x)[π] to round-off exactly when nothing carries position (claim C8): every scheme, every
    combiner that meets a table (multiply too), matrix's maps and the causal mask break it."""
    model = build(case, kind).double()
    x, seg = make_inputs(case)
    x = x.double() if case.patches else x
    perm = torch.randperm(T, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        y = model(x, seg).logits
        yp = model(x[:, perm], seg[:, perm] if seg is not None else None).logits
    gap = (yp - y[:, perm]).abs().max().item()
    if carries_position(case, kind):
        assert gap > 1e-3
    else:
        assert gap < 1e-10
