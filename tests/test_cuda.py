"""The CUDA path: same numbers as the CPU for every (scheme, combiner), and a whole run on the GPU.

Skipped where torch sees no GPU (CI); run on a GPU machine with ``python -m pytest tests/test_cuda.py``.
"""

from __future__ import annotations

import pytest
import torch
from test_battery import CASES, KINDS, Case, build, make_inputs

from pelab.config import RunConfig
from pelab.config import build as build_config
from pelab.train import train_run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.fixture(autouse=True)
def exact_float32():
    """TF32 would round matmuls to 10 mantissa bits; compare like with like."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cuda_forward_and_gradients_match_cpu(case: Case, kind: str) -> None:
    model = build(case, kind).double()
    x, seg = make_inputs(case)
    if case.patches:
        x = x.double()
    cpu = model(x, seg, return_parts=True)
    cpu.logits.square().sum().backward()
    grads_cpu = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.to("cuda")
    gpu = model(x.cuda(), seg.cuda() if seg is not None else None, return_parts=True)
    gpu.logits.square().sum().backward()
    torch.testing.assert_close(gpu.logits.cpu(), cpu.logits, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(gpu.parts.combined.cpu(), cpu.parts.combined, rtol=1e-9, atol=1e-9)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad.cpu(), grads_cpu[name], rtol=1e-7, atol=1e-9, msg=name)


@pytest.mark.parametrize("task", ["reverse", "copy", "same", "digits"])
def test_a_run_trains_on_cuda_and_learns_like_on_cpu(task: str) -> None:
    cfg = build_config(
        RunConfig,
        task=dict(name=task, length=8 if task != "digits" else 16),
        model=dict(d=32, n_heads=2, position=dict(scheme="learned" if task != "digits" else "sincos2d")),
        train=dict(steps=300, eval_batches=4),
    )
    on_gpu = train_run(cfg, device="cuda")
    on_cpu = train_run(cfg, device="cpu", threads=1)
    assert on_gpu.status == "done" and on_gpu.device.startswith("cuda"), on_gpu.reason
    assert on_gpu.params == on_cpu.params and on_gpu.flops_per_token == on_cpu.flops_per_token
    # Different kernels, same data and seeds: the two should land close, not bit-identical.
    assert abs(on_gpu.metrics["acc"] - on_cpu.metrics["acc"]) < 0.1, (on_gpu.metrics, on_cpu.metrics)


def test_several_runs_per_gpu_give_the_results_of_one_at_a_time(tmp_path) -> None:
    """--runs-per-gpu: 6 runs, 3 sharing the GPU at once, against the same runs one at a time: every run done
    on a GPU, and the same numbers (each run is its own process, seeded alike)."""
    import json
    import sqlite3

    from pelab.study.driver import run_study
    from pelab.study.grid import parse_study

    text = """
seeds = [0, 1, 2]
[task]
name = "reverse"
length = 8
[model]
d = 32
[train]
steps = 60
[axes]
"model.position.scheme" = ["learned", "sinusoidal"]
"""
    study = parse_study(text)
    metrics = {}
    for rpg in (1, 3):
        out = tmp_path / f"rpg{rpg}"
        outcome = run_study(study, out, device="cuda", runs_per_gpu=rpg, quiet=True)
        assert outcome.ran == 6 and outcome.failed == 0
        rows = sqlite3.connect(out / "results.sqlite").execute("select run_id, device, metrics from runs").fetchall()
        assert all(d.startswith("cuda") for _, d, _ in rows)
        metrics[rpg] = {r: json.loads(m) for r, _, m in rows}
    for run_id, m in metrics[1].items():
        assert m["loss"] == pytest.approx(metrics[3][run_id]["loss"], rel=1e-4), run_id


@pytest.mark.parametrize("case", ["learned+add", "sinusoidal+concat_split", "rotary+none", "charlm", "digits 2-D"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_seed_alone_and_in_a_stack_of_five_agree_on_cuda(case: str, precision: str) -> None:
    """On a GPU a stack's batched kernels may sum in another order than one seed's, so a seed need not be bit for
    bit the same in a stack (tests/test_stacked.py checks that on the CPU); it must land within rounding, and
    every seed must come out of the stack done."""
    from test_stacked import CASES as STACK_CASES
    from test_stacked import _cfg

    from pelab.train import train_group

    task, model = STACK_CASES[case]
    alone = train_group([_cfg(3, task, model, precision=precision)], device="cuda")[0]
    stack = train_group([_cfg(s, task, model, precision=precision) for s in range(5)], device="cuda")
    assert all(r.status == "done" and r.device.startswith("cuda") for r in [alone, *stack]), [r.reason for r in stack]
    tol = 1e-4 if precision == "fp32" else 2e-2
    assert stack[3].metrics["loss"] == pytest.approx(alone.metrics["loss"], rel=tol)
