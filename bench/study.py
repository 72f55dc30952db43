"""Study throughput: runs per minute of a fixed small grid with 1 and with 2 workers (on a GPU: against the
number of runs sharing it), the share of a training step spent generating data, and (``--phases FOLDER``)
where a finished study's time went: data, training, evaluation, analyses and report.

A benchmark, not a test: it prints figures and asserts nothing. Ratios are against a
reference measured in the same run (1 worker), since these machines are noisy.

    python bench/study.py [--steps 100] [--seeds 2] [--device cuda]
    python bench/study.py --phases pelab-out/quick     # a finished study: its report is rebuilt in a copy
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import tempfile
import time
from collections import defaultdict
from pathlib import Path

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


def runs_per_minute(
    steps: int, seeds: int, workers: int | None, device: str = "auto", runs_per_gpu: int | None = None
) -> tuple[float, int, float]:
    study = parse_study(GRID.format(steps=steps, seeds=list(range(seeds))))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        outcome = run_study(study, out, workers=workers, device=device, runs_per_gpu=runs_per_gpu, quiet=True)
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


def phases(folder: Path) -> None:
    """Where a finished study's time went. Training is each run's tokens over its training speed; the rest of a
    run's seconds is evaluation (and saving weights); data is training's share measured per task by
    ``data_share``; the report (analyses included) is rebuilt from scratch in a copy of the folder."""
    from pelab.report.build import build_report

    con = sqlite3.connect(f"file:{folder / 'results.sqlite'}?mode=ro", uri=True)  # never creates one
    rows = con.execute("select config, seconds, tokens_per_s from runs where status = 'done'").fetchall()
    wall = con.execute("select value from meta where key = 'study_seconds'").fetchone()
    per_task: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for cfg_json, seconds, tps in rows:
        cfg = RunConfig.model_validate_json(cfg_json)
        task = make_task(cfg.task)
        tokens = cfg.train.steps * cfg.train.batch_size * task.seq_len(task.n)
        train = min(seconds, tokens / tps) if tps else seconds
        per_task[cfg.task.name][0] += train
        per_task[cfg.task.name][1] += seconds - train
    torch.set_num_threads(1)
    data = 0.0
    for name, (train, _) in per_task.items():
        t_data, t_all = data_share(name, 16)
        data += train * t_data / t_all
    train = sum(t for t, _ in per_task.values()) - data
    evaluation = sum(e for _, e in per_task.values())
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "study"
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("analyses", "figures", "report.*", "claims.*"))
        start = time.perf_counter()
        build_report(copy)
        report = time.perf_counter() - start
    total = data + train + evaluation
    print(f"{folder}: {len(rows)} runs, {total:.0f} core-s of runs" + (f", runs' wall {wall[0]} s" if wall else ""))
    for label, secs in (("data", data), ("training", train), ("evaluation + saving", evaluation)):
        print(f"  {label:24s} {secs:7.0f} core-s  {100 * secs / total:5.1f}% of the runs")
    print(f"  {'report (analyses incl.)':24s} {report:7.0f} s wall on {os.cpu_count()} core(s)")
    print("  (data: each task's share of a step at n=16, d=64, applied to its runs' training time: an estimate)")
    con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: runs/min against runs per GPU")
    ap.add_argument("--phases", type=Path, help="a finished study folder: where its time went")
    args = ap.parse_args()
    print(f"cores: {os.cpu_count()}, torch {torch.__version__}")
    if args.phases is not None:
        phases(args.phases)
        return
    print(f"grid: 4 arms x {args.seeds} seeds, reverse n=12, d=32, {args.steps} steps each")
    base = None
    if args.device.startswith("cuda"):
        for rpg in (1, 2, 4, 8):
            rpm, ran, seconds = runs_per_minute(args.steps, args.seeds, None, args.device, rpg)
            base = base or rpm
            print(f"  {rpg} run(s) per GPU: {ran} runs in {seconds:5.1f}s = {rpm:6.1f} runs/min (x{rpm / base:.2f})")
        return
    for workers in (1, 2):
        rpm, ran, seconds = runs_per_minute(args.steps, args.seeds, workers, "cpu")
        base = base or rpm
        print(f"  {workers} worker(s): {ran} runs in {seconds:5.1f}s = {rpm:6.1f} runs/min (x{rpm / base:.2f})")
    torch.set_num_threads(1)
    print("share of a training step spent generating data (1 thread, d=64, batch 32):")
    for task, length in (("reverse", 16), ("lookup", 16), ("recall", 8), ("charlm", 128), ("same", 16), ("digits", 16)):
        t_data, t_all = data_share(task, length)
        print(f"  {task:8s} n={length:<4d} {100 * t_data / t_all:5.1f}%  ({1000 * t_all / 50:.1f} ms/step)")


if __name__ == "__main__":
    main()
