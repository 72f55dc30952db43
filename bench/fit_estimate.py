"""Fit ``pelab.study.estimate.CPU_FIT`` to a finished study's stored groups, and say how well it fits.

Each stored run records its share of its group's wall time (``seconds``) and the group's size
(``versions["stack"]``), so a group's seconds are a share times its size. The model is linear in its five
constants (``estimate.group_seconds``); non-negative least squares keeps every constant a cost.

    python bench/fit_estimate.py pelab-out/quick      # prints the constants and the error per task
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from pelab.config import RunConfig
from pelab.model import body_flops_per_token
from pelab.tasks import make_task


def features(cfg: RunConfig, S: int) -> list[float]:
    task = make_task(cfg.task)
    seq = task.seq_len(task.n)
    tokens = cfg.train.steps * cfg.train.batch_size * seq
    flops = tokens * body_flops_per_token(cfg.model, seq)
    return [1.0, cfg.train.steps, cfg.train.steps * S, S * tokens / 1e5, S * flops / 1e11]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    args = ap.parse_args()
    con = sqlite3.connect(f"file:{args.folder / 'results.sqlite'}?mode=ro", uri=True)
    rows = con.execute("select config, seconds, versions from runs where status = 'done'").fetchall()
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    cfgs: dict[tuple[str, int], RunConfig] = {}
    for cfg_json, seconds, versions in rows:
        cfg = RunConfig.model_validate_json(cfg_json)
        S = int(json.loads(versions or "{}").get("stack", 1))
        groups[(cfg.arm_id, S)].append(seconds)
        cfgs[(cfg.arm_id, S)] = cfg
    keys = list(groups)
    X = np.array([features(cfgs[k], k[1]) for k in keys])
    # a group's wall time: each run's share times the group's size (several groups of one arm: their mean)
    y = np.array([np.mean(groups[k]) * k[1] for k in keys])
    coef, _ = nnls(X, y)
    fit = X @ coef
    print(f"{len(rows)} runs in {len(keys)} groups, {y.sum():.0f} core-s measured, {fit.sum():.0f} fitted")
    print("CPU_FIT = (" + ", ".join(f"{c:.4g}" for c in coef) + ")")
    by_task: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for k, yi, fi in zip(keys, y, fit, strict=True):
        by_task[cfgs[k].task.name][0] += yi
        by_task[cfgs[k].task.name][1] += fi
    for name, (yi, fi) in sorted(by_task.items()):
        print(f"  {name:10s} measured {yi:7.1f} s  fitted {fi:7.1f} s  ({100 * (fi / yi - 1):+.0f}%)")


if __name__ == "__main__":
    main()
