"""train.precision: fp32 stays as it was (same ids, same numbers); bf16 autocasts the forward pass only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

import pelab.train
from pelab.config import RunConfig, build
from pelab.errors import PelabError
from pelab.model import Transformer
from pelab.records import RunResult
from pelab.tasks import make_task
from pelab.train import autocast, batch_loss, bf16_supported, train_run

CPU = torch.device("cpu")
needs_bf16 = pytest.mark.skipif(not bf16_supported(CPU), reason="this CPU has no bf16 kernels")

# RunConfig().run_id computed before train.precision existed: adding the field must not move any id.
DEFAULT_RUN_ID = "73eab388a048b45e"


def copy_cfg(precision: str) -> RunConfig:
    return RunConfig(
        task={"name": "copy", "length": 6, "vocab": 8},
        model={"d": 32, "n_heads": 2, "position": {"scheme": "learned"}, "combine": "add"},
        train={"steps": 150, "lr": 3e-3, "eval_batches": 4, "precision": precision},
    )


def test_default_precision_keeps_run_ids() -> None:
    assert RunConfig().run_id == DEFAULT_RUN_ID
    assert RunConfig(train={"precision": "fp32"}).run_id == DEFAULT_RUN_ID
    assert "precision" not in RunConfig().canonical_json()
    bf16 = RunConfig(train={"precision": "bf16"})
    assert bf16.run_id != DEFAULT_RUN_ID  # part of the config, so part of the id
    assert RunConfig.model_validate_json(bf16.canonical_json()) == bf16


def test_bad_precision_is_one_line_naming_the_field() -> None:
    with pytest.raises(PelabError) as e:
        build(RunConfig, train={"precision": "fp16"})
    assert str(e.value).startswith("train.precision:") and "\n" not in str(e.value)
    cli = subprocess.run(
        [sys.executable, "-m", "pelab", "run", "--precision", "fp16", "--steps", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2
    assert len(cli.stderr.strip().splitlines()) == 1 and "train.precision" in cli.stderr


def test_missing_bf16_is_an_error_not_a_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pelab.train, "bf16_supported", lambda device: False)
    with pytest.raises(PelabError, match=r"^train\.precision: bf16 is not supported"):
        autocast("bf16", CPU)
    r = train_run(copy_cfg("bf16"), threads=1)
    assert r.status == "failed" and "train.precision" in (r.reason or "")


@needs_bf16
def test_forward_in_bf16_loss_in_fp32() -> None:
    cfg = copy_cfg("bf16")
    torch.manual_seed(0)
    model, task = Transformer(cfg.model), make_task(cfg.task)
    batch = task.batch("train", 16, torch.Generator().manual_seed(0))
    seen: list[torch.dtype] = []
    model.head.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    with torch.no_grad():
        loss32, _, _ = batch_loss(model, batch, "fp32")
        loss16, _, _ = batch_loss(model, batch, "bf16")
    assert seen == [torch.float32, torch.bfloat16]  # the output layer's matmul ran in bf16 under autocast
    assert loss16.dtype == torch.float32
    assert loss16 != loss32 and abs(float(loss16) - float(loss32)) < 0.02 * float(loss32)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, RunResult, Path]:
    ckpt = tmp_path_factory.mktemp("bf16") / "model.safetensors"
    return train_run(copy_cfg("fp32"), threads=1), train_run(copy_cfg("bf16"), threads=1, checkpoint=ckpt), ckpt


@needs_bf16
def test_bf16_run_learns_like_fp32(runs: tuple[RunResult, RunResult, Path]) -> None:
    fp32, bf16, _ = runs
    assert fp32.status == bf16.status == "done"
    assert all(torch.isfinite(torch.tensor(v)) for v in bf16.metrics.values())
    assert bf16.metrics != fp32.metrics  # it did run in another precision
    assert bf16.metrics["acc"] >= 0.97 and abs(bf16.metrics["acc"] - fp32.metrics["acc"]) <= 0.03
    assert abs(bf16.curve[-1]["loss"] - fp32.curve[-1]["loss"]) < 0.1


@needs_bf16
def test_weights_and_optimiser_state_stay_fp32(runs: tuple[RunResult, RunResult, Path]) -> None:
    *_, ckpt = runs
    with safe_open(str(ckpt), framework="pt") as f:
        dtypes = {f.get_tensor(k).dtype for k in f.keys() if f.get_tensor(k).is_floating_point()}
    assert dtypes == {torch.float32}
    cfg = copy_cfg("bf16")
    model = Transformer(cfg.model)
    opt = torch.optim.AdamW(model.parameters())
    loss, _, _ = batch_loss(model, make_task(cfg.task).batch("train", 8, torch.Generator().manual_seed(0)), "bf16")
    loss.backward()
    opt.step()
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert {p.grad.dtype for p in model.parameters() if p.grad is not None} == {torch.float32}
    assert {v.dtype for s in opt.state.values() for v in s.values() if v.is_floating_point()} == {torch.float32}


@needs_bf16
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_attention_under_cpu_bf16_autocast_runs_in_fp32(causal: bool, with_bias: bool) -> None:
    """The bf16 flash-attention backward on CPU is slower than fp32's, so under CPU autocast ``attend`` runs
    attention in fp32: its output and gradients equal plain fp32 attention on the same (bf16-rounded) inputs,
    and outside autocast it is exactly PyTorch's attention."""
    from pelab.model import attend

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 8, generator=g, dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    bias = torch.randn(3, 7, 7, generator=g) if with_bias else None
    if bias is not None and causal:
        bias = bias.masked_fill(torch.ones(7, 7, dtype=torch.bool).triu(1), float("-inf"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = attend(q, k, v, bias, causal and bias is None, 0.0)
    y.sum().backward()
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    ref = sdpa(q32, k32, v32, attn_mask=bias, is_causal=causal and bias is None)
    ref.sum().backward()
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
    for t, t32 in ((q, q32), (k, k32), (v, v32)):
        torch.testing.assert_close(t.grad, t32.grad.to(torch.bfloat16), rtol=0, atol=0)
    plain = attend(q32.detach(), k32.detach(), v32.detach(), bias, causal and bias is None, 0.0)
    torch.testing.assert_close(plain, ref.detach(), rtol=0, atol=0)
