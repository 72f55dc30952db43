"""Pre-flight: what a run would need, estimated from its config before anything is built.

A typo such as ``d = 100000`` or ``batch_size = 10**9`` must be refused in one line before a
study folder is touched, not found out by the allocator halfway through a grid. The estimate is
deliberately simple (fp32 everywhere, every activation kept for the backward pass, attention as a
full T x T matrix per head), so it errs on the high side by a small factor, never by orders of
magnitude; it is compared with this machine's memory.

    parameters P  = token table + position table (+ matrix maps) + L x (4C^2 + 2CF) + head
    training      = 16 P bytes (weights, gradients, two AdamW moments)
                    + 4 x [L x (B T (12C + 2F) + 2 B H T^2) + B T (4C + 3V)] bytes of activations
    evaluation    = 4 P + 4 x [Be Te (12C + 2F) + 2 Be H Te^2 + 3 Be Te V] bytes (one layer at a time)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pelab.config import ModelConfig, RunConfig
from pelab.errors import PelabError

#: Keys a user sets that drive a run's size, with their defaults: the one furthest above its default
#: is the one the refusal names.
SIZE_KEYS = {
    "model.d": 64,
    "model.d_ff": None,
    "model.d_position": None,
    "model.n_layers": 2,
    "model.n_heads": 4,
    "task.length": 16,
    "task.vocab": 16,
    "task.eval_multipliers": 2.0,
    "train.batch_size": 32,
    "train.eval_batch_size": 64,
}


@dataclass(frozen=True)
class Estimate:
    params: int
    train_bytes: int  # weights, optimiser state and the activations of one training step
    eval_bytes: int  # weights and one layer's activations at the longest evaluated length
    batch: int
    positions: int

    @property
    def bytes(self) -> int:
        return max(self.train_bytes, self.eval_bytes)


def gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"


def model_params(m: ModelConfig) -> int:
    """Parameters of ``m``, from its config alone (within a few per cent of the model's own count)."""
    w = m.widths()
    C, Fw, L = w.model, m.ff_width, m.n_layers
    inputs = (m.vocab_size or m.patch_dim or 0) * w.token + m.max_len * max(w.sides.get("position", 0), C)
    if m.combine == "matrix":
        inputs += m.max_len * 2 * m.d * (m.d if m.matrix_rank is None else m.matrix_rank)
    return inputs + L * (4 * C * C + 2 * C * Fw + 4 * C) + C * m.n_outputs


def estimate(cfg: RunConfig) -> Estimate:
    from pelab.tasks import make_task

    m, t = cfg.model, cfg.train
    task = make_task(cfg.task)
    P = model_params(m)
    C, Fw, L, H, V = m.widths().model, m.ff_width, m.n_layers, m.n_heads, m.n_outputs
    B, T = t.batch_size, task.seq_len(task.n)
    Be, Te = t.eval_batch_size, m.max_len
    train = 16 * P + 4 * (L * (B * T * (12 * C + 2 * Fw) + 2 * B * H * T * T) + B * T * (4 * C + 3 * V))
    evaluate = 4 * P + 4 * (Be * Te * (12 * C + 2 * Fw) + 2 * Be * H * Te * Te + 3 * Be * Te * V)
    return Estimate(params=P, train_bytes=train, eval_bytes=evaluate, batch=B, positions=T)


def machine_bytes(device: str = "cpu") -> int:
    """Memory a run can use here: the GPU's for a CUDA device, else RAM (or the container's limit, if lower)."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = Path("/sys/fs/cgroup/memory.max")
    try:
        text = limit.read_text().strip()
    except OSError:
        return total
    return min(total, int(text)) if text.isdigit() else total


def culprit(cfg: RunConfig) -> str:
    """The size key furthest above its default: the one a refusal tells the user to lower."""
    values = {
        "model.d": cfg.model.d,
        "model.d_ff": cfg.model.ff_width / (4 * cfg.model.widths().model),
        "model.d_position": (cfg.model.d_position or 0) / max(1, cfg.model.d // 4),
        "model.n_layers": cfg.model.n_layers,
        "model.n_heads": cfg.model.n_heads,
        "task.length": cfg.task.length,
        "task.vocab": cfg.task.vocab,
        "task.eval_multipliers": max(cfg.task.eval_multipliers),
        "train.batch_size": cfg.train.batch_size,
        "train.eval_batch_size": cfg.train.eval_batch_size,
    }
    return max(values, key=lambda k: values[k] / (SIZE_KEYS[k] or 1))


def check_fits(runs: list[RunConfig], budget: int, where: str = "this machine") -> None:
    """Refuse, in one line with the estimate, when the largest of ``runs`` cannot fit in ``budget`` bytes."""
    if not runs:
        return
    sized = [(estimate(r), r) for r in runs]
    est, cfg = max(sized, key=lambda s: s[0].bytes)
    if est.bytes <= budget:
        return
    over = sum(1 for e, _ in sized if e.bytes > budget)
    key = culprit(cfg)
    which = f"{over} of {len(runs)} runs need" if len(runs) > 1 else "the run needs"
    raise PelabError(
        f"{key}: {which} more memory than {where} has ({gib(budget)}): the largest about {gib(est.bytes)} "
        f"({est.params:,} parameters; batch {est.batch} x {est.positions} positions); lower {key}"
    )


def check_data(runs: list[RunConfig]) -> None:
    """Refuse, in one line, a task whose data cannot serve it (a corpus too short for the length, too few
    paragraphs): once per distinct task, since it reads the data. Configs validate without reading any."""
    from pelab.tasks import make_task

    seen: set[str] = set()
    for r in runs:
        key = r.task.digest()
        if key not in seen:
            seen.add(key)
            make_task(r.task).check_data()


#: Memory a CUDA process holds before it allocates a tensor (its context and kernels), counted once per run.
CUDA_CONTEXT_BYTES = 600 * 2**20
#: Past a handful of small runs at once, a GPU's scheduler rather than its memory is what they share.
MAX_RUNS_PER_GPU = 8


def gpu_bytes_per_run(runs: list[RunConfig]) -> int:
    """What one run may hold on a GPU: the largest run's estimate plus a CUDA context."""
    return max((estimate(r).bytes for r in runs), default=0) + CUDA_CONTEXT_BYTES


def runs_per_gpu(runs: list[RunConfig], gpu_bytes: int, cpus_per_gpu: int) -> int:
    """How many runs share one GPU by default: as many as fit in 80% of its memory (the largest run's
    estimate plus a CUDA context each), at most one per CPU core left to that GPU (each run's Python
    dispatches its kernels) and at most MAX_RUNS_PER_GPU; never fewer than one."""
    fit = int(0.8 * gpu_bytes) // gpu_bytes_per_run(runs)
    return max(1, min(fit, cpus_per_gpu, MAX_RUNS_PER_GPU))


def check_gpu_share(runs: list[RunConfig], runs_per_gpu: int, gpu_bytes: int) -> None:
    """Refuse, in one line, a ``--runs-per-gpu`` whose runs cannot fit on one GPU together (each alone may)."""
    each = gpu_bytes_per_run(runs)
    if runs_per_gpu * each > gpu_bytes:
        raise PelabError(
            f"runs_per_gpu: {runs_per_gpu} runs of about {gib(each)} each (the largest, with a CUDA context) need "
            f"{gib(runs_per_gpu * each)}, more than the GPU's {gib(gpu_bytes)}; lower runs_per_gpu or leave it out"
        )
