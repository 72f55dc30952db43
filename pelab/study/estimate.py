"""How long a study will take, said before it starts, from each run's size alone.

A group of S stacked seeds on one CPU core is modelled as start-up + steps x (a cost per step + S x a cost per
seed-step) + S x (a cost per training token + per training FLOP + per token-position pair), six constants fitted
by non-negative least squares (``bench/fit_estimate.py``) on a quiet 2-core machine of the kind pelab is developed
on (Intel Xeon with AVX-512, PyTorch's CPU build; 2026-11-26) to two sets given equal weight: the 52 groups of a
fresh-clone quick main job, and 12 arm kinds of the full preset (decoders, segments, digits, language models,
d=32-256) timed alone. The token-position term is attention's: its per-token cost grows with the sequence beyond
its FLOPs. The fit is 4% high on quick's total (per task -20% to +28%) and 13% low on the full preset's kinds
(per kind -35% to +5%; addition, a decoder on short sequences, the lowest: its per-step cost is not in its size).
The fit it replaced, made on 2026-11-23 before the stacked path got faster, was 68% high on quick. Other machines
differ; each study records this machine's pace against the fit, and the next study's estimate is scaled by it. A GPU
is much faster for the larger presets. Evaluation at the default budget (``eval_batches`` x ``eval_batch_size``
sequences per size) is folded into the other constants; sequences past it are added as forward passes (a third of a
training token's cost), so a study that asks for a billion evaluation batches is told what that costs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from pelab.config import RunConfig
from pelab.tasks import make_task

#: Seconds of one stacked group of S seeds on one CPU core (``pelab.train.train_group``):
#:     start-up + steps x (per-step + S x per-seed-step)
#:     + S x (per 1e5 training tokens + per 1e11 FLOPs + per 1e7 token-position pairs),
#: constants in that order. A run alone is a group of one.
CPU_FIT = (0.0, 0.0, 2.347e-3, 0.0, 3.419, 1.054)


def fit_terms(cfg: RunConfig, S: int) -> list[float]:
    """What ``CPU_FIT``'s six constants multiply, for a group of ``S`` seeds of ``cfg``: the one place the model
    is written, read by the estimate and by its fit (``bench/fit_estimate.py``)."""
    task = make_task(cfg.task)
    seq = task.seq_len(task.n)
    tokens = cfg.train.steps * cfg.train.batch_size * seq
    return [1.0, cfg.train.steps, cfg.train.steps * S, *(S * x for x in _token_terms(cfg, tokens, seq))]


def _token_terms(cfg: RunConfig, tokens: int, seq: int) -> tuple[float, float, float]:
    """Training tokens (per 1e5), their FLOPs (per 1e11) and token-position pairs (per 1e7), at length ``seq``."""
    from pelab.model import body_flops_per_token

    return tokens / 1e5, tokens * body_flops_per_token(cfg.model, seq) / 1e11, tokens * seq / 1e7


def group_seconds(group: Sequence[RunConfig]) -> float:
    """Estimated seconds of one group (one arm's seeds, stacked) on one CPU core."""
    cfg, S = group[0], len(group)
    return sum(c * x for c, x in zip(CPU_FIT, fit_terms(cfg, S), strict=True)) + S * eval_seconds(cfg)


def run_seconds(cfg: RunConfig) -> float:
    """Estimated seconds of one run alone on one CPU core."""
    return group_seconds([cfg])


def eval_seconds(cfg: RunConfig, whole: bool = False) -> float:
    """Seconds of evaluation past the default budget the fit includes (``whole``: all of it, as `pelab verify`
    evaluates a stored model again): forward passes only (a third of a training token's cost), at each evaluated
    size and once more for validation."""
    from pelab.config import TrainConfig

    task = make_task(cfg.task)
    default = TrainConfig()
    extra = cfg.train.eval_batches * cfg.train.eval_batch_size
    if not whole:
        extra -= default.eval_batches * default.eval_batch_size
    if extra <= 0:
        return 0.0
    per_token = CPU_FIT[3:]
    seconds = 0.0
    for n in [*task.eval_sizes(), task.n]:
        seq = task.seq_len(n)
        terms = _token_terms(cfg, extra * seq, seq)
        seconds += sum(c * x for c, x in zip(per_token, terms, strict=True)) / 3
    return seconds


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
    from pelab.device import cpu_name

    return f"{cpu_name()} x{os.cpu_count() or 1}"


def read_pace() -> float | None:
    """Measured wall over estimated seconds of the studies this machine kind finished, or None before its first
    (a pace recorded against an earlier ``CPU_FIT`` says nothing of this one)."""
    from pelab.files import cache_dir, read_json_cache

    def check(v: object) -> str | None:
        return None if isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()) else "not a pace table"

    table = read_json_cache(cache_dir() / PACE_FILE, check) or {}
    entry = table.get(machine_key())
    if entry and entry.get("fit") != list(CPU_FIT):  # a pace against another fit would scale this one wrongly
        return None
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
    if old.get("fit") != list(CPU_FIT):  # measured against another fit: this fit's pace starts afresh
        old = {}
    try:
        before = (float(old.get("estimated", 0)) / 2, float(old.get("wall", 0)) / 2)
    except (TypeError, ValueError):
        before = (0.0, 0.0)
    table[machine_key()] = {
        "estimated": round(before[0] + estimated, 1),
        "wall": round(before[1] + wall, 1),
        "fit": list(CPU_FIT),
    }
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
]
