"""Runs that train together: the seeds of one arm, as one stacked computation (``pelab.train.train_group``).

A group is the runs of a study that differ only in seed (``RunConfig.arm_id``). A seed's numbers do not
depend on which seeds share its stack, so how runs are grouped is a matter of speed alone: groups are capped
(``MAX_STACK``, memory), ordered longest first so a work queue spreads them evenly, and split further when
there are fewer groups than workers, so no core waits while one trains a whole arm.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pelab.config import RunConfig
from pelab.study.estimate import group_seconds, spread

if TYPE_CHECKING:
    from pelab.study.grid import Study

#: The most seeds one stack holds: past about 8, a stack is no cheaper per seed (bench/study.py), and memory
#: grows with every seed.
MAX_STACK = 8
#: Stacking pays where a step is many small operator calls; where a seed's activations are already large
#: (charlm at d=64 and 64 bytes: 2048 rows of 64), a stack only makes every tensor bigger than the CPU's caches
#: and is slower per seed than one at a time (bench/study.py). So on a CPU a stack holds at most this many
#: activation values per row-block (seeds x batch x sequence x model width): 512 KiB of fp32, about a core's L2.
#: A GPU has no such cliff at these sizes (the paper's language model, 524k values a seed, is still launch-bound
#: there: bench/study.py --device cuda), so on a GPU only memory and MAX_STACK bound a stack.
STACK_VALUES = 131_072


def unstackable(cfg: RunConfig) -> str | None:
    """Why this run's seeds must train one at a time, or None (``pelab.stacked.unstackable``)."""
    from pelab.stacked import unstackable as why

    return why(cfg.model)


def stack_groups(
    runs: Sequence[RunConfig],
    workers: int = 1,
    most: int = MAX_STACK,
    budget: int | None = None,
    gpu: bool = False,
    tiers: Mapping[str, int] | None = None,
) -> list[list[RunConfig]]:
    """``runs`` as groups of one arm's seeds: at most ``most`` each and, with ``budget``, no more seeds than fit
    in that many bytes (``pelab.preflight``: a stack needs each seed's memory); on a CPU (``gpu`` False) no more
    than fit its caches (``STACK_VALUES``) and at least ``workers`` groups where the runs allow it; the costliest
    first (by ``pelab.study.estimate``). With ``tiers`` (run id -> tier, ``grid_tiers``), a lower tier's groups
    all come before a higher one's, the costliest first within each."""
    from pelab.preflight import estimate

    def cap(cfg: RunConfig) -> int:
        fits = most if budget is None else budget // max(1, estimate(cfg).bytes)
        cached = most if gpu else STACK_VALUES // max(1, values_per_seed(cfg))
        return max(1, min(most, fits, cached))

    arms: dict[str, list[RunConfig]] = {}
    singles: list[list[RunConfig]] = []
    for r in runs:
        if unstackable(r) is not None:
            singles.append([r])
        else:
            arms.setdefault(r.arm_id, []).append(r)
    groups = [s[i : i + cap(s[0])] for s in arms.values() for i in range(0, len(s), cap(s[0]))] + singles
    # A CPU core left idle is lost; on a GPU, where a stack of 5 costs about what one seed does, splitting a stack
    # to feed another process only shares the GPU more finely (bench/study.py --device cuda: 2.4x against 1.7x).
    while not gpu and len(groups) < workers and any(len(g) > 1 for g in groups):
        g = max((g for g in groups if len(g) > 1), key=len)
        groups.remove(g)
        half = (len(g) + 1) // 2
        groups += [g[:half], g[half:]]
    tier = (lambda g: tiers.get(g[0].run_id, 0)) if tiers else (lambda g: 0)
    return sorted(groups, key=lambda g: (tier(g), -group_seconds(g)))


def grid_tiers(study: Study) -> dict[str, int]:
    """Each run's tier: the place, in the study file, of the first grid that holds it. On a GPU the driver starts
    the groups tier by tier (``stack_groups``), so a study stopped by a time box (a lease) has finished its first
    grids, the ones its author put first, rather than a scatter of the costliest runs of every grid."""
    place: dict[str, int] = {}
    for i, g in enumerate(study.grids):
        place.setdefault(g.name, i)
    return {run_id: min(place.get(n, 0) for n in names) for run_id, names in study.membership.items() if names}


def values_per_seed(cfg: RunConfig) -> int:
    """One seed's activation values per layer-wide tensor: batch x sequence x model width."""
    from pelab.tasks import make_task

    task = make_task(cfg.task)
    return cfg.train.batch_size * task.seq_len(task.n) * cfg.model.widths().model


def unstacked_arms(runs: Sequence[RunConfig]) -> dict[str, str]:
    """Arms whose seeds train one at a time, and why: ``pelab study`` says so before it starts."""
    out: dict[str, str] = {}
    for r in runs:
        why = unstackable(r)
        if why is not None:
            out.setdefault(r.arm_id, why)
    return out


def study_seconds(runs: Sequence[RunConfig], workers: int | None = None) -> float:
    """Estimated wall seconds of ``runs`` on ``workers`` CPU workers (default: one per core): grouped as the
    driver groups them (``stack_groups``), longest groups first on the least-loaded worker, as a work
    queue would spread them."""
    workers = max(1, workers or os.cpu_count() or 1)
    return spread([group_seconds(g) for g in stack_groups(runs, workers)], workers)
