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
