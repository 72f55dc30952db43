"""The per-run training path as it was before stacked training (pelab at e1a1e4a, ``pelab/train.py``), kept
verbatim as the reference that ``bench/study.py`` measures stacked seeds against and ``tests/test_stacked.py``
checks the stacked computation against (within a stated tolerance: the two are different computations).

Original docstring: one run: seed everything, train, evaluate (at the training size and beyond), return a result.

A pure function of its config (plus where it runs): the study driver calls it in
worker processes and alone decides what to store. Same config, seed and thread
count give the same numbers bit for bit on CPU.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import platform
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

import pelab
from pelab.config import RunConfig
from pelab.device import resolve_device
from pelab.errors import PelabError
from pelab.model import Transformer
from pelab.records import RunResult, size_metric
from pelab.tasks import Batch, Task, make_task


@functools.cache
def source_digest() -> str:
    """A hash of pelab's own files: two machines with the same version string can still run different code
    (an editable install, a local patch), and a study spread over several machines must not mix them."""
    root = Path(pelab.__file__).parent
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in {".py", ".toml", ".j2"}):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def versions() -> dict[str, str]:
    return {
        "pelab": pelab.__version__,
        "pelab_source": source_digest(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


@functools.cache
def bf16_supported(device: torch.device) -> bool:
    """Whether this device computes bf16 natively or through oneDNN's bf16 kernels (CPU: AVX512-BW or
    newer; native, and so faster than fp32, only with AVX512-BF16 or AMX: see bench/precision.py)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Where the forward pass runs: fp32 as it always did (nothing wraps it), or under bf16 autocast
    (matmuls and attention in bf16; weights, gradients and optimiser state stay fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if not bf16_supported(device):
        raise PelabError(f"train.precision: bf16 is not supported on {device} here; use fp32")
    return torch.autocast(device.type, dtype=torch.bfloat16)


def batch_loss(
    model: Transformer, batch: Batch, precision: str = "fp32"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean cross-entropy over scored targets; also per-target correctness and the mask, flat.
    The forward pass runs in ``precision``; the loss is always computed in fp32."""
    with autocast(precision, batch.inputs.device):
        logits = model(batch.inputs, batch.segments).logits  # (B, T, V) or (B, V)
    logits = logits.float().reshape(-1, logits.shape[-1])  # .float() is a no-op in fp32
    targets, mask = batch.targets.reshape(-1), batch.mask.reshape(-1)
    loss = F.cross_entropy(logits[mask], targets[mask])
    correct = logits.argmax(-1) == targets
    return loss, correct, mask


@torch.no_grad()
def evaluate(
    model: Transformer,
    task: Task,
    n: int,
    batch_size: int,
    count: int,
    generator: torch.Generator,
    device: torch.device,
    split: str = "test",
    precision: str = "fp32",
) -> dict[str, float]:
    """Loss, token accuracy, whole-sequence exact match at size n; for language models also perplexity and
    bits per byte (the inputs are bytes, so the mean loss in nats per target byte over ln 2)."""
    model.eval()
    total_loss, scored, right, seqs, exact = 0.0, 0, 0, 0, 0
    for batch in task.eval_batches(n, batch_size, count, generator, split=split):
        batch = batch.to(device)
        loss, correct, mask = batch_loss(model, batch, precision)
        k = int(mask.sum())
        total_loss += float(loss) * k
        scored += k
        right += int((correct & mask).sum())
        per_seq = (correct | ~mask).reshape(batch.targets.shape[0], -1).all(dim=1)
        seqs += per_seq.numel()
        exact += int(per_seq.sum())
    model.train()
    out = {"loss": total_loss / scored, "acc": right / scored, "exact": exact / seqs}
    if task.reports_perplexity:
        out["ppl"] = math.exp(min(out["loss"], 50.0))
        out["bpb"] = out["loss"] / math.log(2)
    return out


def lr_lambda(steps: int, warmup: float) -> Callable[[int], float]:
    w = max(1, int(warmup * steps))

    def f(step: int) -> float:
        if step < w:
            return (step + 1) / w
        progress = (step - w) / max(1, steps - w)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    return f


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


__all__ = ["RunResult", "autocast", "bf16_supported", "evaluate", "train_run", "versions"]
