"""Fit ``pelab.study.estimate.CPU_FIT`` to a finished study's stored groups (and, with ``--time-full``, to arm kinds
of the full preset timed here), and say how well it fits.

Each stored run records its share of its group's wall time (``seconds``) and the group's size
(``versions["stack"]``), so a group's seconds are a share times its size. The model is linear in its six
constants (``estimate.group_seconds``); non-negative least squares on relative errors keeps every constant a cost
and every group's error counted alike, large or small. A quick study alone cannot tell a per-step cost from a
per-token one (its arms differ little in either), so ``--time-full`` times the first group of each of the full
preset's arm kinds in ``FULL_KINDS`` (one thread, alone, as ``pelab.study.groups`` stacks them) and gives that set
the same total weight as the study's groups.

    python bench/fit_estimate.py pelab-out/quick                # fit to a finished quick main job
    python bench/fit_estimate.py pelab-out/quick --time-full     # ... and 12 full-preset arm kinds (about 4 min)
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from pelab.config import RunConfig
from pelab.study.estimate import CPU_FIT, eval_seconds, fit_terms

#: (task, width) of the full preset's arm kinds timed by ``--time-full``: the first arm of each with add (or no
#: combiner), so decoders, segments, 2-D inputs, language models and widths 32-256 all enter the fit.
FULL_KINDS = (("addition", 64), ("same", 32), ("recall", 32), ("lookup", 32), ("sort", 64), ("mlm", 64),
              ("digits", 32), ("dsort", 32), ("copy", 32), ("sort", 256), ("cell2d", 32), ("charlm", 64))  # fmt: skip


def stored_groups(folder: Path) -> list[tuple[RunConfig, int, float]]:
    """(config, stack size, wall seconds) of each kind of group a finished study trained (a mean where an arm
    trained several groups of one size)."""
    con = sqlite3.connect(f"file:{folder / 'results.sqlite'}?mode=ro", uri=True)
    rows = con.execute("select config, seconds, versions from runs where status = 'done'").fetchall()
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    cfgs: dict[tuple[str, int], RunConfig] = {}
    for cfg_json, seconds, versions in rows:
        cfg = RunConfig.model_validate_json(cfg_json)
        S = int(json.loads(versions or "{}").get("stack", 1))
        groups[(cfg.arm_id, S)].append(seconds)
        cfgs[(cfg.arm_id, S)] = cfg
    return [(cfgs[k], k[1], float(np.mean(v)) * k[1]) for k, v in groups.items()]


def timed_full_kinds() -> list[tuple[RunConfig, int, float]]:
    """The first group of each of ``FULL_KINDS``, trained here on one thread: (config, stack size, seconds)."""
    import torch

    from pelab.cli import preset_path
    from pelab.study.grid import load_study
    from pelab.study.groups import stack_groups
    from pelab.train import train_group

    torch.set_num_threads(1)
    runs = load_study(preset_path("full")).runs
    out = []
    for name, d in FULL_KINDS:
        first = next(r for r in runs if r.task.name == name and r.model.d == d and r.model.combine in ("add", "none"))
        group = stack_groups([r for r in runs if r.arm_id == first.arm_id and r.seed < 5], 1)[0]
        t0 = time.perf_counter()
        train_group(group)
        out.append((group[0], len(group), time.perf_counter() - t0))
        print(f"  timed {name} d={d}: {len(group)} seed(s), {out[-1][2]:.1f} s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--time-full", action="store_true", help="also time the full preset's FULL_KINDS here")
    args = ap.parse_args()
    sets = {"study": stored_groups(args.folder)}
    if args.time_full:
        sets["full kinds"] = timed_full_kinds()
    X, y, w, label = [], [], [], []
    for name, groups in sets.items():
        for cfg, S, seconds in groups:
            X.append(fit_terms(cfg, S))
            y.append(seconds - S * eval_seconds(cfg))
            w.append(1 / np.sqrt(len(groups)))  # each set the same total weight
            label.append((name, cfg.task.name))
    Xa, ya, wa = np.array(X), np.array(y), np.array(w)
    coef, _ = nnls(Xa / ya[:, None] * wa[:, None], wa)
    print("CPU_FIT = (" + ", ".join(f"{c:.4g}" for c in coef) + ")")
    for fit_name, c in (("this fit", coef), ("CPU_FIT now", np.array(CPU_FIT))):
        fit = Xa @ c
        print(f"{fit_name}: fitted / measured")
        for name in sets:
            by_task: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
            for (s, task), yi, fi in zip(label, ya, fit, strict=True):
                if s == name:
                    by_task[task][0] += yi
                    by_task[task][1] += fi
            total = sum(v[1] for v in by_task.values()) / sum(v[0] for v in by_task.values())
            each = ", ".join(f"{t} {fi / yi:.2f}" for t, (yi, fi) in sorted(by_task.items()))
            print(f"  {name}: total {total:.2f}; {each}")


if __name__ == "__main__":
    main()
