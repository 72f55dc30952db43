"""How long a study will take, said before it starts, from each run's size alone.

A run's seconds on one CPU core are modelled as start-up + steps x (a fixed per-step cost + a cost per
training token + a cost per training FLOP), with the four constants fitted by least squares to the 189
runs of the quick preset in a fresh-clone main job on a quiet 2-core machine of the kind pelab is developed
on (AVX-512, PyTorch's CPU build; 2026-11-23): the fit is within 20% on every task of that study and
exact in total (624 core-s). An earlier fit, to runs measured beside other work, was 45% high. Other
machines differ; the estimate says so, and a GPU is much faster for the larger presets. Evaluation at the
default budget (``eval_batches`` x ``eval_batch_size`` sequences per size) is folded into the per-run constant;
sequences past it are added as forward passes (a third of a training token's cost), so a study that asks for a
billion evaluation batches is told what that costs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from pelab.config import RunConfig
from pelab.tasks import make_task

#: Seconds of one stacked group of S seeds on one CPU core (``pelab.train.train_group``):
#:     start-up + steps x (per-step + S x per-seed-step) + S x (per 1e5 training tokens + per 1e11 FLOPs),
#: constants in that order. A run alone is a group of one.
CPU_FIT = (0.241, 1.858e-3, 0.0, 1.317, 3.175)


def group_seconds(group: Sequence[RunConfig]) -> float:
    """Estimated seconds of one group (one arm's seeds, stacked) on one CPU core."""
    from pelab.model import body_flops_per_token

    cfg, S = group[0], len(group)
    task = make_task(cfg.task)
    seq = task.seq_len(task.n)
    tokens = cfg.train.steps * cfg.train.batch_size * seq
    flops = tokens * body_flops_per_token(cfg.model, seq)
    c0, c_step, c_seed_step, c_tok, c_flop = CPU_FIT
    per_seed = c_tok * tokens / 1e5 + c_flop * flops / 1e11 + eval_seconds(cfg)
    return c0 + cfg.train.steps * (c_step + S * c_seed_step) + S * per_seed


def run_seconds(cfg: RunConfig) -> float:
    """Estimated seconds of one run alone on one CPU core."""
    return group_seconds([cfg])


def eval_seconds(cfg: RunConfig) -> float:
    """Seconds of evaluation past the default budget the fit includes: forward passes only, at each evaluated
    size and once more for validation."""
    from pelab.config import TrainConfig
    from pelab.model import body_flops_per_token

    task = make_task(cfg.task)
    default = TrainConfig()
    extra = cfg.train.eval_batches * cfg.train.eval_batch_size - default.eval_batches * default.eval_batch_size
    if extra <= 0:
        return 0.0
    *_, c_tok, c_flop = CPU_FIT
    seconds = 0.0
    for n in [*task.eval_sizes(), task.n]:
        seq = task.seq_len(n)
        tokens = extra * seq
        seconds += (c_tok * tokens / 1e5 + c_flop * tokens * body_flops_per_token(cfg.model, seq) / 1e11) / 3
    return seconds


def study_seconds(runs: Sequence[RunConfig], workers: int | None = None) -> float:
    """Estimated wall seconds of ``runs`` on ``workers`` CPU workers (default: one per core): grouped as the
    driver groups them (``pelab.study.groups``), longest groups first on the least-loaded worker, as a work
    queue would spread them."""
    from pelab.study.groups import stack_groups

    workers = max(1, workers or os.cpu_count() or 1)
    return spread([group_seconds(g) for g in stack_groups(runs, workers)], workers)


def spread(seconds: Sequence[float], workers: int) -> float:
    """Wall seconds of jobs taking ``seconds`` on ``workers``: longest first on the least-loaded worker."""
    load = [0.0] * max(1, workers)
    for s in sorted(seconds, reverse=True):
        i = load.index(min(load))
        load[i] += s
    return max(load) if seconds else 0.0


#: This machine's pace against the fit, from the studies it finished (``$PELAB_CACHE/pace.json``).
PACE_FILE = "pace.json"
#: A study shorter than this says too little about a machine's pace (start-up dominates) to be recorded.
PACE_MIN_SECONDS = 60.0


def machine_key() -> str:
    """The CPU's model name and core count: the pace of one machine kind (the same CPU model took 4 min 52 s on
    one machine and 8 min 14 s on one without AVX-512: the model name tells them apart)."""
    name = ""
    try:
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    import platform

    return f"{name or platform.processor() or platform.machine()} x{os.cpu_count() or 1}"


def read_pace() -> float | None:
    """Measured wall over estimated seconds of the studies this machine kind finished, or None before its first."""
    from pelab.files import cache_dir, read_json_cache

    def check(v: object) -> str | None:
        return None if isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()) else "not a pace table"

    table = read_json_cache(cache_dir() / PACE_FILE, check) or {}
    entry = table.get(machine_key())
    try:
        ratio = float(entry["wall"]) / float(entry["estimated"]) if entry else None
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return ratio if ratio is not None and 0.05 < ratio < 50 else None


def record_pace(estimated: float, wall: float) -> None:
    """Add one finished CPU study to this machine kind's pace (sums, the older halved each time, so the pace follows
    the machine without one odd study ruling it). Studies shorter than ``PACE_MIN_SECONDS`` are not recorded; a
    cache that cannot be written is skipped (the estimate is a courtesy, never a reason to fail a study)."""
    import json

    from pelab.files import cache_dir, read_json_cache, write_atomic

    if wall < PACE_MIN_SECONDS or estimated <= 0:
        return
    path = cache_dir() / PACE_FILE
    table = read_json_cache(path) or {}
    if not isinstance(table, dict):
        table = {}
    old = table.get(machine_key()) if isinstance(table.get(machine_key()), dict) else {}
    try:
        before = (float(old.get("estimated", 0)) / 2, float(old.get("wall", 0)) / 2)
    except (TypeError, ValueError):
        before = (0.0, 0.0)
    table[machine_key()] = {"estimated": round(before[0] + estimated, 1), "wall": round(before[1] + wall, 1)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(table, indent=1))
    except OSError:
        pass


def describe(seconds: float) -> str:
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    if seconds < 5400:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


__all__ = [
    "CPU_FIT",
    "PACE_FILE",
    "describe",
    "machine_key",
    "read_pace",
    "record_pace",
    "eval_seconds",
    "group_seconds",
    "run_seconds",
    "spread",
    "study_seconds",
]
