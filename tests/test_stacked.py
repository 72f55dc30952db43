"""Stacked training (``pelab.stacked``, ``pelab.train.train_group``): a seed's numbers do not depend on which
seeds share its stack, bit for bit, for every scheme, combiner, task kind and precision; a diverged seed
leaves the stack without touching its neighbours; and the stacked computation agrees with the per-run path
it replaced (``bench/reference_train.py``) within a stated tolerance."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import pelab.train as train
from pelab.config import RunConfig
from pelab.train import bf16_supported, train_group

ROOT = Path(__file__).resolve().parents[1]


def _cfg(seed: int, task: dict, model: dict, steps: int = 12, **train_kw: object) -> RunConfig:
    return RunConfig.model_validate(
        {"task": task, "model": {"d": 16, "n_layers": 2, "n_heads": 2, **model},
         "train": {"steps": steps, "batch_size": 8, "lr": 3e-3, "eval_batches": 1, "eval_batch_size": 16,
                   "curve_points": 4, **train_kw}, "seed": seed}
    )  # fmt: skip


def _same(a, b) -> None:  # noqa: ANN001
    assert a.status == b.status == "done", (a.reason, b.reason)
    assert a.metrics == b.metrics
    assert a.curve == b.curve
    assert a.evals == b.evals


REVERSE = {"name": "reverse", "length": 6, "vocab": 8}
CASES = {
    **{f"{s}+{c}": (REVERSE, {"position": {"scheme": s}, "combine": c})
       for s in ("sinusoidal", "learned") for c in ("add", "scaled_add", "concat_split", "concat_wide",
                                                    "concat_project", "gated", "multiply")},
    **{f"{s}+none": (REVERSE, {"position": {"scheme": s}, "combine": "none"})
       for s in ("none", "rotary", "alibi", "t5", "untied", "xpos", "kerple")},
    "randomized+add": (REVERSE, {"position": {"scheme": "randomized"}, "combine": "add"}),
    "randomized learned+concat_split": (
        REVERSE, {"position": {"scheme": "randomized", "randomized_base": "learned"}, "combine": "concat_split"}
    ),
    "decoder randomized": ({"name": "copy", "length": 4, "vocab": 8}, {"position": {"scheme": "randomized"}}),
    "decoder kerple power": (
        {"name": "dsort", "length": 4, "vocab": 8},
        {"position": {"scheme": "kerple", "kerple_kernel": "power"}, "combine": "none"},
    ),
    "matrix": (REVERSE, {"position": {"scheme": "none"}, "combine": "matrix", "matrix_rank": 2}),
    "decoder copy": ({"name": "copy", "length": 4, "vocab": 8}, {"position": {"scheme": "learned"}}),
    "decoder alibi": ({"name": "dsort", "length": 4, "vocab": 8}, {"position": {"scheme": "alibi"}, "combine": "none"}),
    "charlm": ({"name": "charlm", "length": 16}, {"position": {"scheme": "rotary"}, "combine": "none"}),
    "mlm": ({"name": "mlm", "length": 16}, {"position": {"scheme": "learned"}}),
    "segments": (
        {"name": "same", "length": 4, "vocab": 8}, {"position": {"scheme": "rotary"}, "combine": "concat_split"}
    ),
    "digits 2-D": ({"name": "digits"}, {"position": {"scheme": "sincos2d"}}),
    "frozen MiniLM": ({"name": "wordorder", "length": 8, "eval_multipliers": [1.0]}, {"combine": "concat_split"}),
    "frozen MiniLM, cut vocabulary": ({"name": "wordlm", "length": 8}, {"combine": "concat_split"}),
    "cell2d": ({"name": "cell2d"}, {"position": {"scheme": "sincos2d", "grid_combine": "add"}}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_seed_is_the_same_alone_and_in_stacks_of_three_and_five(case: str) -> None:
    task, model = CASES[case]
    alone = train_group([_cfg(3, task, model)])[0]
    in3 = train_group([_cfg(s, task, model) for s in (1, 3, 2)])[1]
    in5 = train_group([_cfg(s, task, model) for s in (0, 1, 2, 3, 4)])[3]
    _same(alone, in3)
    _same(alone, in5)
    assert alone.versions["stack"] == "1" and in5.versions["stack"] == "5"


@pytest.mark.skipif(not bf16_supported(torch.device("cpu")), reason="this CPU has no bf16 kernels")
def test_bf16_stacks_are_seed_independent_too() -> None:
    task, model = CASES["learned+add"]
    alone = train_group([_cfg(3, task, model, precision="bf16")])[0]
    in3 = train_group([_cfg(s, task, model, precision="bf16") for s in (3, 4, 5)])[0]
    _same(alone, in3)


def test_checkpoints_of_a_stack_are_each_seeds_own_weights(tmp_path: Path) -> None:
    task, model = CASES["learned+concat_split"]
    paths = [tmp_path / f"{s}.safetensors" for s in range(3)]
    train_group([_cfg(s, task, model) for s in range(3)], checkpoints=paths)
    alone = tmp_path / "alone.safetensors"
    train_group([_cfg(2, task, model)], checkpoints=[alone])
    a, b = load_file(str(paths[2])), load_file(str(alone))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(load_file(str(paths[0]))["head.weight"], a["head.weight"])


#: A plugin's rotation with parameters of its own: rotary with learned log-frequencies, drawn per seed.
LEARNED_ROPE = """
    import torch
    from torch import nn
    from pelab.positions import PositionScheme, register
    from pelab.positions.rotary import rotate_half

    @register
    class LearnedRope(PositionScheme):
        name = "learned_rope"
        description = "rotary with learned log-frequencies, each seed's own"
        hooks = ("attention: rotate q, k",)

        def __init__(self, ctx, **options):
            super().__init__(ctx, **options)
            E = ctx.head_dim
            start = -torch.arange(0, E, 2, dtype=torch.get_default_dtype()) / E * 9.21
            self.log_inv = nn.Parameter(start + 0.1 * torch.randn(E // 2))

        def rotate(self, q, k, positions):
            a = positions.to(self.log_inv.dtype)[:, None] * self.log_inv.exp()
            a = torch.cat([a, a], -1)
            c, s = a.cos().to(q.dtype), a.sin().to(q.dtype)
            return q * c + rotate_half(q) * s, k * c + rotate_half(k) * s
"""


def test_a_rotation_with_parameters_is_each_seeds_own_in_a_stack(load_plugin, tmp_path: Path) -> None:
    """A scheme whose ``rotate`` reads parameters rotates each seed by its own: once through the first seed's
    scheme, seed 0 trained on every seed's gradient and the others' frequencies never moved (a plugin's
    learned-frequency RoPE, found in review). pelab's own rotations still run once for the whole stack."""
    from pelab.model import Transformer
    from pelab.stacked import rotates_per_seed

    load_plugin("learned_rope_plugin", LEARNED_ROPE)
    task, model = REVERSE, {"position": {"scheme": "learned_rope"}, "combine": "none"}
    paths = [tmp_path / f"{s}.safetensors" for s in (1, 3, 2)]
    in3 = train_group([_cfg(s, task, model) for s in (1, 3, 2)], checkpoints=paths)
    alone = train_group([_cfg(3, task, model)])[0]
    _same(alone, in3[1])
    for s, path in zip((1, 3, 2), paths, strict=True):
        torch.manual_seed(s)  # the seed's start, as train_group draws it
        start = Transformer(_cfg(s, task, model).model).scheme.log_inv
        assert not torch.equal(load_file(str(path))["scheme.log_inv"], start.detach()), f"seed {s} never trained"
    for scheme in ("rotary", "xpos", "learned_rope", "t5"):
        models = []
        for s in (0, 1):
            torch.manual_seed(s)
            models.append(Transformer(_cfg(s, task, {"position": {"scheme": scheme}, "combine": "none"}).model))
        assert rotates_per_seed(models) == (scheme == "learned_rope"), scheme


def test_a_diverged_seed_leaves_the_stack_and_its_neighbours_train_on_as_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task, model = CASES["learned+add"]
    made = []
    real = train.Transformer

    def poisoned(cfg):  # noqa: ANN001, ANN202 - the second model of the stack starts with a NaN weight
        m = real(cfg)
        made.append(m)
        if len(made) == 2:
            with torch.no_grad():
                m.head.weight[0, 0] = math.nan
        return m

    monkeypatch.setattr(train, "Transformer", poisoned)
    out = train_group([_cfg(s, task, model) for s in (0, 1, 2)])
    monkeypatch.setattr(train, "Transformer", real)
    assert [r.status for r in out] == ["done", "diverged", "done"]
    assert "non-finite" in (out[1].reason or "")
    clean = train_group([_cfg(s, task, model) for s in (0, 2)])
    _same(out[0], clean[0])
    _same(out[2], clean[1])


def test_a_group_holds_one_arm() -> None:
    task, model = CASES["learned+add"]
    other = dict(model, combine="concat_split")
    out = train_group([_cfg(0, task, model), _cfg(1, task, other)])
    assert {r.status for r in out} == {"failed"} and "differ only in seed" in (out[0].reason or "")
    out = train_group([_cfg(0, task, model), _cfg(0, task, model)])
    assert {r.status for r in out} == {"failed"} and "each seed once" in (out[0].reason or "")


def _reference():  # noqa: ANN202 - the per-run path as it was before stacking
    spec = importlib.util.spec_from_file_location("reference_train", ROOT / "bench" / "reference_train.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_stacked_computation_agrees_with_the_per_run_path_it_replaced() -> None:
    """The two are different computations (batched matrix products, an unfused LayerNorm affine, fused AdamW,
    a per-seed loss reduction), equal up to float round-off per operation; over training the round-off grows,
    so runs are compared on what a study reads. Stated tolerance: after 150 steps on reverse (d=32), the mean
    over 4 seeds of the final test loss agrees within 5% relative and accuracy within 2 percentage points,
    and every seed's first-step training loss (before any update) within 1e-5 relative."""
    ref = _reference()
    task = {"name": "reverse", "length": 8, "vocab": 12}
    model = {"d": 32, "n_heads": 4, "position": {"scheme": "learned"}}
    cfgs = [_cfg(s, task, model, steps=150, curve_points=150, eval_batches=4, eval_batch_size=64) for s in range(4)]
    new = train_group(cfgs)
    old = [ref.train_run(c) for c in cfgs]
    for a, b in zip(new, old, strict=True):
        assert a.curve[0]["loss"] == pytest.approx(b.curve[0]["loss"], rel=1e-5)
    mean = lambda rs, k: sum(r.metrics[k] for r in rs) / len(rs)  # noqa: E731
    assert mean(new, "loss") == pytest.approx(mean(old, "loss"), rel=0.05)
    assert abs(mean(new, "acc") - mean(old, "acc")) < 0.02


def test_a_resumed_group_trains_only_its_missing_seeds_and_they_match_a_whole_stack(tmp_path: Path) -> None:
    from pelab.study.driver import run_study
    from pelab.study.grid import parse_study
    from pelab.study.store import Store

    toml = """
seeds = {seeds}
[task]
name = "reverse"
length = 5
vocab = 8
[model]
d = 16
n_layers = 1
n_heads = 2
[train]
steps = 15
eval_batches = 1
"""
    first = run_study(parse_study(toml.format(seeds=[0, 1])), tmp_path, workers=1, quiet=True)
    again = run_study(parse_study(toml.format(seeds=[0, 1, 2])), tmp_path, workers=1, quiet=True)
    assert (first.ran, again.skipped, again.ran) == (2, 2, 1)
    with Store(tmp_path) as store:
        stored = {r["config"]["seed"]: r for r in store.rows()}
    whole = train_group(parse_study(toml.format(seeds=[0, 1, 2])).runs)
    for seed in (0, 1, 2):
        assert stored[seed]["metrics"] == whole[seed].metrics
