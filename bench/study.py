"""Study throughput: runs per minute of a fixed small grid with 1 and with 2 workers,
and the share of a training step spent generating data.

A benchmark, not a test: it prints figures and asserts nothing. Ratios are against a
reference measured in the same run (1 worker), since these machines are noisy.

    python bench/study.py [--steps 100] [--seeds 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch

from pelab.config import RunConfig
from pelab.model import Transformer
from pelab.study.driver import run_study
from pelab.study.grid import parse_study
from pelab.tasks import make_task
from pelab.train import batch_loss

GRID = """
name = "bench"
seeds = {seeds}
[task]
name = "reverse"
length = 12
[model]
d = 32
n_heads = 2
[train]
steps = {steps}
eval_batches = 2
[axes]
"model.position.scheme" = ["sinusoidal", "learned"]
"model.combine" = ["add", "concat_split"]
"""


def runs_per_minute(steps: int, seeds: int, workers: int) -> tuple[float, int, float]:
    study = parse_study(GRID.format(steps=steps, seeds=list(range(seeds))))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        outcome = run_study(study, out, workers=workers, quiet=True)
        seconds = time.perf_counter() - start
    return 60 * outcome.ran / seconds, outcome.ran, seconds


def data_share(task_name: str, length: int, steps: int = 50, batch: int = 32) -> tuple[float, float]:
    """(seconds generating data, seconds for whole steps) over ``steps`` training steps."""
    cfg = RunConfig(task={"name": task_name, "length": length}, model={"d": 64})
    task, model = make_task(cfg.task), Transformer(cfg.model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    task.batch("train", batch, gen)  # warm-up: loading a data set or corpus is a one-off, not per step
    t_data = t_all = 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        b = task.batch("train", batch, gen)
        t1 = time.perf_counter()
        loss, _, _ = batch_loss(model, b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        t_data += t1 - t0
        t_all += t2 - t0
    return t_data, t_all


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args()
    print(f"cores: {os.cpu_count()}, torch {torch.__version__}")
    print(f"grid: 4 arms x {args.seeds} seeds, reverse n=12, d=32, {args.steps} steps each")
    base = None
    for workers in (1, 2):
        rpm, ran, seconds = runs_per_minute(args.steps, args.seeds, workers)
        base = base or rpm
        print(f"  {workers} worker(s): {ran} runs in {seconds:5.1f}s = {rpm:6.1f} runs/min (x{rpm / base:.2f})")
    torch.set_num_threads(1)
    print("share of a training step spent generating data (1 thread, d=64, batch 32):")
    for task, length in (("reverse", 16), ("lookup", 16), ("recall", 8), ("charlm", 128), ("same", 16), ("digits", 16)):
        t_data, t_all = data_share(task, length)
        print(f"  {task:8s} n={length:<4d} {100 * t_data / t_all:5.1f}%  ({1000 * t_all / 50:.1f} ms/step)")


if __name__ == "__main__":
    main()
