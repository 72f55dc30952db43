"""One run: seed everything, train, evaluate (at the training size and beyond), return a result.

A pure function of its config (plus where it runs): the study driver calls it in
worker processes and alone decides what to store. Same config, seed and thread
count give the same numbers bit for bit on CPU.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import platform
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

import pelab
from pelab.config import RunConfig
from pelab.device import cpu_kind, device_kind, resolve_device
from pelab.errors import PelabError
from pelab.model import Transformer
from pelab.records import ENGINE, RunResult, size_metric
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
        "cpu": cpu_kind(),  # which CPU kind trained it: a run trained again elsewhere drifts (pelab verify)
    }


def plugin_versions(cfg: RunConfig) -> dict[str, str]:
    """What identifies the plugin code a run's classes come from, for its record: ``versions["plugins"]``, a JSON
    list of each plugin's name, file, sha256, version and what it registered (the sha256 is in the config too,
    so in the run id); nothing for a run of pelab's own classes."""
    if not cfg.plugins:
        return {}
    from pelab.plugins import records_for

    return {"plugins": json.dumps(records_for(set(cfg.plugins), with_source=False), sort_keys=True)}


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


def flushing_subnormals() -> bool:
    """Whether this thread's arithmetic flushes subnormals now (torch has a setter and no getter): 1e-40 is a
    subnormal float, and under FTZ the product that makes it is zero."""
    return float(torch.tensor([1e-30]) * torch.tensor([1e-10])) == 0.0


@contextlib.contextmanager
def flushed_subnormals() -> Iterator[bool]:
    """Subnormal floats (below 1.2e-38) read and computed as zero while a run trains and evaluates (x86 FTZ and
    DAZ; elsewhere nothing changes); yields whether the CPU took the mode. An encoder's attention has no causal
    mask, and as it sharpens some probabilities and their gradients turn subnormal, which an x86 CPU handles in
    microcode: the full preset's masked byte model at d=128 took 3.35x as long per step (bench/denormal.py).
    The mode is the processor's, so it is set for the run alone and then put back as it was: SciPy's statistics
    and the rest of the process keep IEEE arithmetic. Part of the engine, ``records.ENGINE`` "stacked-2"."""
    before = flushing_subnormals()
    took = torch.set_flush_denormal(True)
    try:
        yield took
    finally:
        torch.set_flush_denormal(before)


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
    """Loss, token accuracy, whole-sequence exact match at size n; for language models also perplexity (per
    target) and bits per byte of the split's text: the mean loss in nats per target over ln 2, over the bytes a
    target stands for (``Task.bytes_per_target``: 1 for a byte, about 5 for a word piece)."""
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
        out["bpb"] = out["loss"] / math.log(2) / task.bytes_per_target(split)
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
    """Train and evaluate one config (a stack of one). Never raises for the run's own failures."""
    return train_group([cfg], device, threads, [checkpoint], on_step)[0]


def train_group(
    cfgs: list[RunConfig],
    device: str | None = "auto",
    threads: int | None = None,
    checkpoints: list[str | Path | None] | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> list[RunResult]:
    """Train and evaluate configs that differ only in seed, as one stacked computation; one result each, in
    order. Never raises for the runs' own failures: they become statuses, and a seed that diverges leaves the
    stack without touching its neighbours (each seed's numbers do not depend on which seeds share its stack)."""
    checkpoints = list(checkpoints) if checkpoints is not None else [None] * len(cfgs)
    bases = [dict(run_id=c.run_id, versions={**versions(), "engine": ENGINE, "stack": str(len(cfgs)),
                                             **plugin_versions(c)}) for c in cfgs]  # fmt: skip
    try:
        check_group(cfgs)
        with flushed_subnormals():
            return _train(cfgs, device, threads, checkpoints, on_step, bases)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # the study records it and goes on
        tb = traceback.extract_tb(e.__traceback__)[-1]
        reason = f"{type(e).__name__}: {e} ({Path(tb.filename).name}:{tb.lineno})"
        return [RunResult(**b, status="failed", reason=reason) for b in bases]


def check_group(cfgs: list[RunConfig]) -> None:
    """Configs share a stack only when they differ in seed alone, and their seeds are distinct."""
    if not cfgs:
        raise ValueError("a group needs at least one run")
    same = {c.arm_id for c in cfgs}
    if len(same) != 1:
        raise ValueError("a stacked group holds runs that differ only in seed")
    if len({c.seed for c in cfgs}) != len(cfgs):
        raise ValueError("a stacked group holds each seed once")
    from pelab.stacked import unstackable

    if len(cfgs) > 1 and (why := unstackable(cfgs[0].model)) is not None:
        raise ValueError(f"runs with {why} train one seed at a time (pelab.stacked.unstackable)")


def clip_per_seed(params: list[list[Tensor]], max_norm: float) -> Tensor:
    """``clip_grad_norm_`` for each seed's own parameters, in one pass over all seeds' gradients: each seed's
    norm is the 2-norm of its tensors' norms, and its gradients are scaled by min(1, max_norm / (norm + 1e-6)).
    Returns each seed's norm before clipping, (S,)."""
    grads = [[p.grad for p in ps if p.grad is not None] for ps in params]
    flat = [g for gs in grads for g in gs]
    norms = torch._foreach_norm(flat, 2.0)
    totals, at = [], 0
    for gs in grads:
        totals.append(torch.linalg.vector_norm(torch.stack(norms[at : at + len(gs)]), 2.0))
        at += len(gs)
    total = torch.stack(totals)  # (S,)
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    torch._foreach_mul_(flat, [coef[i] for i, gs in enumerate(grads) for _ in gs])
    return total


def _stacked_loss(logits: Tensor, batches: list[Batch]) -> tuple[Tensor, Tensor, Tensor]:
    """Per-seed mean cross-entropy over scored targets (S,), and per-seed correct and mask (S, N). Each seed's
    loss reduces over its own rows only; the loss is always computed in fp32."""
    S = logits.shape[0]
    logits = logits.float().reshape(S, -1, logits.shape[-1])  # (S, N, V)
    targets = torch.stack([b.targets.reshape(-1) for b in batches])  # (S, N)
    mask = torch.stack([b.mask.reshape(-1) for b in batches])
    safe = torch.where(mask, targets, torch.zeros_like(targets))
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), safe.reshape(-1), reduction="none").view(S, -1)
    loss = torch.where(mask, ce, torch.zeros_like(ce)).sum(1) / mask.sum(1)
    correct = logits.argmax(-1) == targets
    return loss, correct, mask


def _train(
    cfgs: list[RunConfig],
    device_name: str | None,
    threads: int | None,
    checkpoints: list[str | Path | None],
    on_step: Callable[[int, int], None] | None,
    bases: list[dict],
) -> list[RunResult]:
    from pelab.stacked import StackedForward

    if threads:
        torch.set_num_threads(threads)
    device = resolve_device(device_name)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)  # a worker given cuda:k makes no context on cuda:0 (several runs per GPU)
    if device.type == "cuda":  # whose kernels made the numbers: a run evaluated again elsewhere drifts (pelab verify)
        for base in bases:
            base["versions"]["gpu"] = device_kind(device)
    cfg0 = cfgs[0]
    task = make_task(cfg0.task)
    task.check_data()  # a config validates without reading data; a run that reads it checks it first
    models = []
    for cfg in cfgs:  # each seed's initialisation exactly as if it trained alone
        torch.manual_seed(cfg.seed)
        models.append(Transformer(cfg.model).to(device))
    data_gens = [torch.Generator().manual_seed(cfg.seed) for cfg in cfgs]
    t = cfg0.train
    autocast(t.precision, device)  # an unsupported precision fails here, before any training
    forward = StackedForward(models)  # the seeds' block weights become views of stacked leaves
    seed_params = [list(m.parameters()) for m in models]
    params = [p for ps in seed_params for p in ps]
    # fused: one kernel per parameter tensor (the per-parameter Python loop was a quarter of a step)
    opt = torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(t.steps, t.warmup))
    every = max(1, t.steps // t.curve_points)
    # A language model's curve also follows held-out loss (the same validation windows at every point), so the
    # report can show a gap along training and say whether training had levelled off (``CURVE_VAL_BATCHES``)
    watch_val = task.context_free_loss() is not None
    S = len(cfgs)
    curves: list[list[dict[str, float]]] = [[] for _ in cfgs]
    alive = list(range(S))  # the seeds still training, in stack order
    results: list[RunResult | None] = [None] * S
    run_loss = torch.zeros(S, device=device)  # accumulated on the device: no sync per step
    run_right = torch.zeros(S, device=device)
    run_scored = torch.zeros(S, device=device)
    tokens = 0
    start = time.perf_counter()

    def diverge(s: int, reason: str) -> None:
        results[s] = RunResult(
            **bases[s], status="diverged", reason=reason, curve=curves[s], params=models[s].num_parameters(),
            seconds=time.perf_counter() - start, device=str(device), threads=torch.get_num_threads(),
        )  # fmt: skip
        dead = {id(p) for p in models[s].parameters()}
        for group in opt.param_groups:
            group["params"] = [p for p in group["params"] if id(p) not in dead]
        for p in models[s].parameters():
            opt.state.pop(p, None)

    for step in range(t.steps):
        batches = [task.batch("train", t.batch_size, data_gens[s]).to(device) for s in alive]
        inputs = torch.stack([b.inputs for b in batches])
        segments = torch.stack([b.segments for b in batches]) if batches[0].segments is not None else None
        with autocast(t.precision, device):
            logits = forward(inputs, segments)
        loss, correct, mask = _stacked_loss(logits, batches)
        opt.zero_grad(set_to_none=True)
        loss.sum().backward()  # seeds share no parameter: each gets the gradient of its own loss
        forward.hand_grads()
        norms = clip_per_seed([seed_params[s] for s in alive], t.grad_clip)  # (S,)
        if step % 10 == 0:  # checked every few steps: each check syncs
            bad = ((~torch.isfinite(loss)) | (~torch.isfinite(norms))).tolist()
            if any(bad):
                finite = torch.isfinite(loss).tolist()
                for i, s in enumerate(alive):
                    if bad[i]:
                        diverge(s, f"non-finite {'loss' if not finite[i] else 'gradient'} at step {step}")
                keep = torch.tensor([i for i, b in enumerate(bad) if not b], device=device, dtype=torch.long)
                loss, correct, mask = loss[keep], correct[keep], mask[keep]
                run_loss, run_right, run_scored = run_loss[keep], run_right[keep], run_scored[keep]
                alive = [s for s, b in zip(alive, bad, strict=True) if not b]
                if not alive:
                    break
                # the survivors step on as they would alone (their gradients, handed over already, stay theirs)
                forward = StackedForward([models[s] for s in alive])
        opt.step()
        sched.step()
        tokens += batches[0].inputs.shape[0] * batches[0].inputs.shape[1]
        run_loss += loss.detach()
        run_right += (correct & mask).sum(1)
        run_scored += mask.sum(1)
        if (step + 1) % every == 0 or step + 1 == t.steps:
            k = (step % every) + 1
            losses = (run_loss / k).tolist()
            accs = (run_right / run_scored.clamp(min=1.0)).tolist()
            for i, s in enumerate(alive):
                point = {"step": step + 1, "loss": losses[i], "acc": accs[i]}
                if watch_val:
                    point["val_loss"] = curve_val_loss(models[s], task, cfgs[s], device)
                curves[s].append(point)
            for acc_t in (run_loss, run_right, run_scored):
                acc_t.zero_()
        if on_step is not None:
            on_step(step + 1, t.steps)
    train_seconds = time.perf_counter() - start
    forward.release()
    for s in alive:
        cfg, model = cfgs[s], models[s]
        if not all(math.isfinite(c["loss"]) for c in curves[s]):
            diverge(s, "non-finite training loss")
            continue
        results[s] = _finish(cfg, model, task, curves[s], checkpoints[s], device, bases[s])
        results[s].tokens_per_s = tokens * len(alive) / train_seconds / len(alive)
    wall = time.perf_counter() - start
    for r in results:  # each seed's share of the group's wall time
        assert r is not None
        r.seconds = wall / S
    return [r for r in results if r is not None]


#: Validation batches (of ``eval_batch_size`` sequences) a language model's curve point reads: one, the same at
#: every point, so a point costs about a tenth of a training step per sequence and points are paired along training.
CURVE_VAL_BATCHES = 1


def curve_val_loss(model: Transformer, task: Task, cfg: RunConfig, device: torch.device) -> float:
    """Held-out loss (nats per scored target) on fixed validation windows: the same windows at every point of
    one run's curve, and for every arm of the same seed (the generator depends on the seed alone), drawn apart
    from the end-of-run validation and test sets. Reads no training generator, so training is unchanged."""
    t = cfg.train
    gen = torch.Generator().manual_seed(3_000_017 * (cfg.seed + 1) + task.n)
    return evaluate(model, task, task.n, t.eval_batch_size, CURVE_VAL_BATCHES, gen, device, "val", t.precision)["loss"]


def end_metrics(
    cfg: RunConfig, model: Transformer, task: Task, device: torch.device, train_loss: float | None = None
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """What a run's record says of its trained model: (metrics, evals by size). One function for the run that
    stores them and for ``pelab verify``, which recomputes them from a checkpoint: the same windows, by the same
    generators, or a received folder's numbers could not be checked against its weights. ``train_loss`` (the
    curve's last point, which the model alone cannot give) goes where records have always had it; None leaves
    it out."""
    t = cfg.train
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
    if train_loss is not None:
        metrics["train_loss"] = train_loss
    baseline = task.context_free_loss()
    if baseline is not None:
        metrics["baseline_loss"] = baseline
    for n, m in evals.items():
        metrics[size_metric(int(n))] = m["acc"]
    return metrics, evals


def _finish(
    cfg: RunConfig,
    model: Transformer,
    task: Task,
    curve: list[dict[str, float]],
    checkpoint: str | Path | None,
    device: torch.device,
    base: dict,
) -> RunResult:
    """Evaluate one trained seed (alone, as every analysis reads it) and save its checkpoint."""
    metrics, evals = end_metrics(cfg, model, task, device, train_loss=curve[-1]["loss"])
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
        device=str(device),
        threads=torch.get_num_threads(),
    )


__all__ = [
    "ENGINE",
    "RunResult",
    "autocast",
    "bf16_supported",
    "curve_val_loss",
    "end_metrics",
    "evaluate",
    "train_group",
    "train_run",
    "versions",
]
