"""Study throughput: seeds per CPU-minute, stacked (``pelab.train.train_group``) against one at a time (the
per-run path stacking replaced, ``bench/reference_train.py``, and a stack of one), at quick's arm sizes, charlm
and d=128; runs per minute of a fixed small grid with 1 and with 2 workers (on a GPU: against the number of runs
sharing it); the share of a training step spent generating data; and (``--phases FOLDER``) where a finished
study's time went: data, training, evaluation, analyses and report.

A benchmark, not a test: it prints figures and asserts nothing. Ratios are against a
reference measured in the same run (1 worker), since these machines are noisy.

    python bench/study.py [--steps 100] [--seeds 2] [--device cuda]
    python bench/study.py --stacked [--repeats 3]      # seeds per CPU-minute only
    python bench/study.py --device cuda --stacked      # seeds per GPU-minute, and the paper's LM by the driver
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


#: Arm sizes for seeds per CPU-minute: quick's (d=16..64), charlm at quick's and full's size (d=64, 64 bytes:
#: the presets differ in steps, not size), and d=128 (the retired paper preset's language models: 128 bytes of context).
SIZES = {
    "reverse d=32 (quick)": ({"name": "reverse", "length": 10}, {"d": 32, "position": {"scheme": "learned"}}, 32),
    "sort d=16 (quick width)": ({"name": "sort", "length": 12, "vocab": 32}, {"d": 16}, 32),
    "sort d=64 (quick width)": ({"name": "sort", "length": 12, "vocab": 32}, {"d": 64}, 32),
    "dsort d=32 (quick)": ({"name": "dsort", "length": 5, "vocab": 8}, {"d": 32, "position": {"scheme": "alibi"},
                                                                         "combine": "none"}, 32),
    "charlm d=64 T=64 (quick, full)": ({"name": "charlm", "length": 64}, {"d": 64}, 32),
    "charlm d=128 T=128 (paper)": ({"name": "charlm", "length": 128}, {"d": 128, "position": {"scheme": "rotary"},
                                                                       "combine": "none"}, 32),
}  # fmt: skip


def size_configs(task: dict, model: dict, batch: int, steps: int, seeds: int) -> list[RunConfig]:
    """One arm of ``SIZES`` at seeds 0..seeds-1."""
    return [
        RunConfig.model_validate({"task": task, "model": {"n_heads": 4, **model},
                                  "train": {"steps": steps, "batch_size": batch, "eval_batches": 2}, "seed": s})
        for s in range(seeds)
    ]  # fmt: skip


def seeds_per_minute(repeats: int = 3, steps: int = 60, stack: int = 5) -> None:
    """Seeds per CPU-minute (one thread) of each size, three ways, interleaved so that drift in the machine's
    speed hits them alike: the per-run path before stacking, a stack of one (today's single path), and a stack of
    ``stack`` seeds. Training plus evaluation, as a study runs them; process start-up is left out."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("reference_train", Path(__file__).with_name("reference_train.py"))
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    from pelab.train import train_group

    torch.set_num_threads(1)
    print(f"seeds per CPU-minute, 1 thread, {steps} steps, median of {repeats} (ratios against the per-run path):")
    print(f"  {'arm size':32s} {'per-run':>8s} {'stack of 1':>11s} {f'stack of {stack}':>11s}")
    for label, (task, model, batch) in SIZES.items():
        cfgs = size_configs(task, model, batch, steps, stack)
        train_group(cfgs[:1])  # warm-up: data sets, corpus, kernels
        times: dict[str, list[float]] = defaultdict(list)
        for _ in range(repeats):
            for how in ("per-run", "stack of 1", "stack"):
                t0 = time.perf_counter()
                if how == "per-run":
                    reference.train_run(cfgs[0])
                elif how == "stack of 1":
                    train_group(cfgs[:1])
                else:
                    train_group(cfgs)
                times[how].append((time.perf_counter() - t0) / (stack if how == "stack" else 1))
        rate = {how: 60 / sorted(t)[len(t) // 2] for how, t in times.items()}
        base = rate["per-run"]
        print(f"  {label:32s} {base:8.1f} {rate['stack of 1']:6.1f} x{rate['stack of 1'] / base:.2f}"
              f" {rate['stack']:6.1f} x{rate['stack'] / base:.2f}")  # fmt: skip


def gpu_seeds_per_minute(device: str, repeats: int = 2, steps: int = 100) -> None:
    """Seeds per GPU-minute in one process: a stack of 1, 5 and 8 seeds of each size (``pelab.train.train_group``
    on ``device``). On a GPU these models are launch-bound, so a stack should cost about what one seed does."""
    from pelab.train import train_group

    print(f"seeds per GPU-minute on {device}, one process, {steps} steps, median of {repeats} (ratios against 1):")
    print(f"  {'arm size':32s} {'stack of 1':>10s} {'of 5':>12s} {'of 8':>12s}")
    for label, (task, model, batch) in SIZES.items():
        cfgs = size_configs(task, model, batch, steps, 8)
        train_group(cfgs[:1], device=device)  # warm-up: data sets, corpus, kernels
        times: dict[int, list[float]] = defaultdict(list)
        for _ in range(repeats):
            for n in (1, 5, 8):
                t0 = time.perf_counter()
                results = train_group(cfgs[:n], device=device)
                assert all(r.status == "done" for r in results), [r.reason for r in results]
                times[n].append((time.perf_counter() - t0) / n)
        rate = {n: 60 / sorted(t)[len(t) // 2] for n, t in times.items()}
        print(f"  {label:32s} {rate[1]:10.1f} {rate[5]:7.1f} x{rate[5] / rate[1]:.2f}"
              f" {rate[8]:7.1f} x{rate[8] / rate[1]:.2f}")  # fmt: skip


PAPER_LM = """
name = "paper's language model"
seeds = [0, 1, 2, 3, 4]
[task]
name = "charlm"
length = 128
[model]
d = 128
n_layers = 4
n_heads = 4
combine = "none"
[train]
steps = {steps}
batch_size = 32
eval_batches = 4
[axes]
"model.position.scheme" = ["rotary", "none", "alibi", "t5"]
"""


def gpu_study(device: str, steps: int) -> None:
    """The (retired) paper preset's language model (4 arms x 5 seeds) through the study driver on ``device``: every
    seed in its own process, 8 sharing the GPU (how the driver ran it before stacks were allowed on a GPU), against
    whole stacks with 2, 4 and 8 processes sharing it (on a GPU the driver no longer splits a stack to feed a
    process)."""
    from functools import partial

    import pelab.study.driver as driver
    from pelab.study.groups import stack_groups

    study = parse_study(PAPER_LM.format(steps=steps))
    print(f"paper's language model (charlm d=128, 128 bytes, 4 layers), 20 runs of {steps} steps, on {device}:")
    base = None
    ways = [("one seed a process, 8 per GPU", 1, 8)] + [(f"stacks, {n} per GPU", None, n) for n in (2, 4, 8)]
    for label, most, rpg in ways:
        driver.stack_groups = partial(stack_groups, most=most) if most else stack_groups
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            gpu = {"runs_per_gpu": rpg} if device.startswith("cuda") else {"workers": min(rpg, os.cpu_count() or 1)}
            outcome = driver.run_study(study, out, device=device, quiet=True, **gpu)
            seconds = time.perf_counter() - start
        rpm = 60 * outcome.ran / seconds
        base = base or rpm
        print(
            f"  {label:30s} {outcome.ran} runs ({outcome.failed} failed) in {seconds:6.1f}s = {rpm:6.1f} runs/min"
            f" (x{rpm / base:.2f})"
        )
    driver.stack_groups = stack_groups


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


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: runs/min against runs per GPU")
    ap.add_argument("--phases", type=Path, help="a finished study folder: where its time went")
    ap.add_argument("--stacked", action="store_true", help="only seeds per CPU-minute, stacked against one at a time")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"cores: {os.cpu_count()}, torch {torch.__version__}, CPU: {cpu_name()}")
    if args.phases is not None:
        phases(args.phases)
        return
    if args.device == "cpu":
        seeds_per_minute(args.repeats)
        if args.stacked:
            return
    print(f"grid: 4 arms x {args.seeds} seeds, reverse n=12, d=32, {args.steps} steps each")
    base = None
    if args.device.startswith("cuda"):
        gpu_seeds_per_minute(args.device, args.repeats)
        gpu_study(args.device, max(args.steps, 300))
        if args.stacked:
            return
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
