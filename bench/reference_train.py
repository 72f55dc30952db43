"""The per-run training path as it was before stacked training (pelab at e1a1e4a, ``pelab/train.py``), kept
verbatim as the reference that ``bench/study.py`` measures stacked seeds against and ``tests/test_stacked.py``
checks the stacked computation against (within a stated tolerance: the two are different computations).

Original docstring: one run: seed everything, train, evaluate (at the training size and beyond), return a result.

A pure function of its config (plus where it runs): the study driver calls it in
worker processes and alone decides what to store. Same config, seed and thread
count give the same numbers bit for bit on CPU.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from pelab.config import RunConfig
from pelab.device import resolve_device
from pelab.model import Transformer
from pelab.records import RunResult, size_metric
from pelab.tasks import make_task

# The helpers this path shared with today's are unchanged in pelab.train: only the training loop is kept here.
from pelab.train import autocast, batch_loss, evaluate, lr_lambda, versions  # noqa: E402


def train_run(
    cfg: RunConfig,
    device: str | None = "auto",
    threads: int | None = None,
    checkpoint: str | Path | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Train and evaluate one config. Never raises for the run's own failures: they become a status."""
    base = dict(run_id=cfg.run_id, versions=versions())
    try:
        return _train(cfg, device, threads, checkpoint, on_step, base)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # the study records it and goes on
        tb = traceback.extract_tb(e.__traceback__)[-1]
        return RunResult(
            **base, status="failed", reason=f"{type(e).__name__}: {e} ({Path(tb.filename).name}:{tb.lineno})"
        )


def _train(
    cfg: RunConfig,
    device_name: str | None,
    threads: int | None,
    checkpoint: str | Path | None,
    on_step: Callable[[int, int], None] | None,
    base: dict,
) -> RunResult:
    if threads:
        torch.set_num_threads(threads)
    device = resolve_device(device_name)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)  # a worker given cuda:k makes no context on cuda:0 (several runs per GPU)
    task = make_task(cfg.task)
    task.check_data()  # a config validates without reading data; a run that reads it checks it first
    torch.manual_seed(cfg.seed)
    model = Transformer(cfg.model).to(device)
    data_gen = torch.Generator().manual_seed(cfg.seed)
    t = cfg.train
    autocast(t.precision, device)  # an unsupported precision fails here, before any training
    opt = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(t.steps, t.warmup))
    every = max(1, t.steps // t.curve_points)
    curve: list[dict[str, float]] = []
    run_loss = torch.zeros((), device=device)  # accumulated on the device: no sync per step
    run_right = torch.zeros((), device=device)
    run_scored = torch.zeros((), device=device)
    tokens = 0
    start = time.perf_counter()

    def diverged(reason: str) -> RunResult:
        return RunResult(
            **base, status="diverged", reason=reason, curve=curve, params=model.num_parameters(),
            seconds=time.perf_counter() - start, device=str(device), threads=torch.get_num_threads(),
        )  # fmt: skip

    for step in range(t.steps):
        batch = task.batch("train", t.batch_size, data_gen).to(device)
        loss, correct, mask = batch_loss(model, batch, t.precision)
        if step % 10 == 0 and not torch.isfinite(loss):  # checked every few steps: each check syncs
            return diverged(f"non-finite loss at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        if step % 10 == 0 and not torch.isfinite(grad_norm):
            return diverged(f"non-finite gradient at step {step}")
        opt.step()
        sched.step()
        tokens += batch.inputs.shape[0] * batch.inputs.shape[1]
        run_loss += loss.detach()
        run_right += (correct & mask).sum()
        run_scored += mask.sum()
        if (step + 1) % every == 0 or step + 1 == t.steps:
            k = (step % every) + 1
            acc = float(run_right) / max(float(run_scored), 1.0)
            curve.append({"step": step + 1, "loss": float(run_loss) / k, "acc": acc})
            for acc_t in (run_loss, run_right, run_scored):
                acc_t.zero_()
        if on_step is not None:
            on_step(step + 1, t.steps)
    train_seconds = time.perf_counter() - start
    if not all(math.isfinite(c["loss"]) for c in curve):
        return diverged("non-finite training loss")
    evals: dict[str, dict[str, float]] = {}
    for n in task.eval_sizes():
        gen = torch.Generator().manual_seed(1_000_003 * (cfg.seed + 1) + n)
        evals[str(n)] = evaluate(model, task, n, t.eval_batch_size, t.eval_batches, gen, device, precision=t.precision)
    # Validation: drawn apart from test (another generator; a dataset's own split), read only to choose
    # among learning rates. Test, at every size, is what the report scores.
    val_gen = torch.Generator().manual_seed(2_000_029 * (cfg.seed + 1) + task.n)
    val = evaluate(
        model, task, task.n, t.eval_batch_size, t.eval_batches, val_gen, device, split="val", precision=t.precision
    )
    metrics = dict(evals[str(task.n)])
    metrics.update({f"val_{k}": v for k, v in val.items()})
    metrics["train_loss"] = curve[-1]["loss"]
    baseline = task.context_free_loss()
    if baseline is not None:
        metrics["baseline_loss"] = baseline
    for n, m in evals.items():
        metrics[size_metric(int(n))] = m["acc"]
    if checkpoint is not None:
        from pelab.checkpoint import save
        from pelab.files import atomic_path

        with atomic_path(checkpoint) as tmp:  # a checkpoint is either whole or absent
            save(model, tmp)
    return RunResult(
        **base,
        status="done",
        metrics=metrics,
        evals=evals,
        curve=curve,
        params=model.num_parameters(),
        flops_per_token=model.flops_per_token(task.seq_len(task.n)),
        tokens_per_s=tokens / train_seconds,
        seconds=time.perf_counter() - start,
        device=str(device),
        threads=torch.get_num_threads(),
    )


__all__ = ["train_run"]
