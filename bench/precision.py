"""bf16 against fp32: do the curves agree, and how much faster is bf16?

What is measured: whole runs through ``pelab.train.train_run`` (the code a study runs), once with
``train.precision = "fp32"`` and once with ``"bf16"``, same config, seed and steps, on two tasks:

- ``copy``: a small causal decoder (d=64, 2 layers) copying 12 symbols;
- ``charlm``: byte-level language modelling on real text (Python's standard library), d=128,
  4 layers, context 128.

For each seed the final held-out loss (test split, at the training length) of both precisions is
read, and their paired relative difference (bf16 - fp32) / fp32. Over seeds: the mean and its 95%
Student-t interval. The tolerance: bf16's held-out loss within +-2% (relative) of fp32's. Verdict:
``holds`` when the whole interval lies inside +-2%, ``fails`` when the whole interval lies outside,
``not shown`` when it crosses a bound (too few seeds or too much noise to tell).

Speed: tokens/s of the training steps (data, forward, loss, backward, AdamW; evaluation excluded),
as ``train_run`` reports it. The two precisions of a seed run back to back, in alternating order
from seed to seed, so drift in machine load hits both alike; the ratio bf16/fp32 is taken within each
pair, and the median (and range) over pairs is printed. Absolute tokens/s depend on whatever else the
machine runs; only the ratio is meant to be read.

Hardware: bf16 is fast on a CPU only with native bf16 instructions (AVX512-BF16 or AMX); elsewhere
oneDNN emulates it and bf16 is slower than fp32. The header says which this CPU has.

Run: ``python bench/precision.py`` (about 10 min on 2 busy cores) or ``--quick`` (about 2 min).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass

import torch

from pelab.config import RunConfig
from pelab.device import resolve_device
from pelab.records import RunResult
from pelab.study.stats import t_interval
from pelab.train import bf16_supported, train_run

TOLERANCE = 0.02  # bf16's held-out loss within +-2% (relative) of fp32's


@dataclass(frozen=True)
class Setup:
    """One benchmarked task: its config fields, steps (default, --quick)."""

    name: str
    task: dict
    model: dict
    train: dict
    steps: int
    quick_steps: int

    def describe(self) -> str:
        m = self.model
        return (
            f"{self.name}: d={m['d']} layers={m['n_layers']} heads={m['n_heads']} "
            f"length={self.task['length']} batch={self.train['batch_size']} lr={self.train['lr']}"
        )


SETUPS = (
    Setup(
        "copy",
        task={"name": "copy", "length": 12, "vocab": 16},
        model={"d": 64, "n_layers": 2, "n_heads": 4, "position": {"scheme": "learned"}},
        train={"batch_size": 32, "lr": 3e-3, "eval_batches": 4},
        steps=250,
        quick_steps=120,
    ),
    Setup(
        "charlm",
        task={"name": "charlm", "length": 128},
        model={"d": 128, "n_layers": 4, "n_heads": 4, "position": {"scheme": "learned"}},
        train={"batch_size": 16, "lr": 2e-3, "eval_batches": 2, "eval_batch_size": 32},
        steps=60,
        quick_steps=15,
    ),
)


def native_bf16_cpu() -> str:
    """Which native bf16 instructions this CPU has, as torch sees them ('none' when emulated)."""
    found = []
    for name, probe in (("AVX512-BF16", "_is_avx512_bf16_supported"), ("AMX", "_is_amx_tile_supported")):
        fn = getattr(torch.cpu, probe, None)
        if fn is not None and fn():
            found.append(name)
    return ", ".join(found) or "none"


def config(setup: Setup, steps: int, precision: str, seed: int) -> RunConfig:
    return RunConfig(
        task=setup.task,
        model=setup.model,
        train={**setup.train, "steps": steps, "precision": precision},
        seed=seed,
    )


def run_pair(setup: Setup, steps: int, seed: int, device: str, threads: int) -> dict[str, RunResult]:
    """Both precisions of one seed, back to back; odd seeds start with bf16."""
    order = ("fp32", "bf16") if seed % 2 == 0 else ("bf16", "fp32")
    out = {}
    for precision in order:
        r = train_run(config(setup, steps, precision, seed), device=device, threads=threads)
        if r.status != "done":
            raise SystemExit(f"{setup.name} seed {seed} {precision}: {r.status} ({r.reason})")
        out[precision] = r
    return out


def verdict(lo: float, hi: float, tol: float = TOLERANCE) -> str:
    if -tol <= lo and hi <= tol:
        return "holds"
    if hi < -tol or lo > tol:
        return "fails"
    return "not shown"


def report(setup: Setup, steps: int, pairs: list[dict[str, RunResult]]) -> None:
    print(f"\n{setup.describe()}, {steps} steps")
    print(
        f"  {'seed':>4}{'fp32 loss':>11}{'bf16 loss':>11}{'rel diff':>10}"
        f"{'fp32 acc':>10}{'bf16 acc':>10}{'tok/s ratio':>13}"
    )
    rel, speed = [], []
    for seed, p in enumerate(pairs):
        a, b = p["fp32"].metrics, p["bf16"].metrics
        rel.append((b["loss"] - a["loss"]) / a["loss"])
        speed.append(p["bf16"].tokens_per_s / p["fp32"].tokens_per_s)
        print(
            f"  {seed:>4}{a['loss']:>11.4f}{b['loss']:>11.4f}{rel[-1]:>+10.2%}{a['acc']:>10.3f}{b['acc']:>10.3f}"
            f"{speed[-1]:>13.2f}"
        )
    mean, lo, hi = t_interval(rel)
    print(
        f"  held-out loss, bf16 vs fp32: {mean:+.2%} (95% t-interval {lo:+.2%} .. {hi:+.2%}, {len(rel)} seeds); "
        f"tolerance +-{TOLERANCE:.0%}: {verdict(lo, hi)}"
    )
    tps = [p["fp32"].tokens_per_s for p in pairs], [p["bf16"].tokens_per_s for p in pairs]
    print(
        f"  tokens/s bf16/fp32: median {statistics.median(speed):.2f} (range {min(speed):.2f} .. {max(speed):.2f}); "
        f"fp32 {statistics.median(tps[0]):,.0f}, bf16 {statistics.median(tps[1]):,.0f} tok/s (medians, load-dependent)"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="fewer steps (about 2 min on 2 busy cores)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per task (default 3)")
    p.add_argument("--tasks", default="copy,charlm", help="comma-separated, from: copy, charlm")
    p.add_argument("--steps", type=int, default=0, help="override every task's steps")
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto (default cpu)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    args = p.parse_args(argv)
    names = {s.name for s in SETUPS}
    bad = [t for t in args.tasks.split(",") if t not in names]
    if bad or args.seeds < 2:
        p.error(f"--tasks: unknown {bad}; choose from {sorted(names)}" if bad else "--seeds: at least 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = resolve_device(args.device)
    if not bf16_supported(device):
        print(f"bf16 is not supported on {device} here: nothing to compare", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, python {platform.python_version()}, device {device}", end="")
    if device.type == "cuda":
        print(f" ({torch.cuda.get_device_name(device)})")
    else:
        print(f", native bf16 instructions: {native_bf16_cpu()}")
    print(f"torch threads per run {args.threads}; cores {len(os.sched_getaffinity(0))}")
    if hasattr(os, "getloadavg"):
        print("load average before the run: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    start = time.perf_counter()
    for setup in SETUPS:
        if setup.name not in args.tasks.split(","):
            continue
        steps = args.steps or (setup.quick_steps if args.quick else setup.steps)
        pairs = [run_pair(setup, steps, seed, str(device), args.threads) for seed in range(args.seeds)]
        report(setup, steps, pairs)
    print(f"\n{time.perf_counter() - start:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
