"""Learning rate as a nuisance parameter: each arm keeps its best rate on validation, scored on test.

One rate for every arm is not neutral: a scheme that wants another rate loses for that reason
alone. Where a study gives ``train.lr`` as a list, every arm trains at each rate (same seeds,
data and budget), keeps the rate whose mean *validation* loss over seeds is lowest, and the
claims read that rate's *test* metrics, which nothing was chosen on. The report also decides
every claim again at one fixed rate (``fixed_rate``) and says which verdicts change.

Choosing on validation loss, not accuracy, because loss does not saturate: two rates that both
reach 100% are still told apart.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from pelab.report.evidence import config_columns

if TYPE_CHECKING:
    from pelab.study.grid import Study

#: What a tuned arm's ``train.lr`` reads after selection, so arms that chose different rates still
#: compare (their rate is the nuisance, not an axis); ``lr_chosen`` keeps the number.
TUNED = "best on validation"
CHOOSE_ON = "m.val_loss"


@dataclass(frozen=True)
class RateChoice:
    """One arm: the rate it kept and the mean validation loss (over finished seeds) at every rate it tried."""

    arm: dict[str, object]
    chosen: float
    val_loss: dict[float, float]
    seeds: dict[float, int]

    def describe(self, varying: list[str]) -> str:
        return ", ".join(f"{k.split('.')[-1]}={self.arm[k]}" for k in varying if k in self.arm) or "every arm"


def fixed_rate(rates: list[float]) -> float:
    """The rate the fixed-rate check uses: the middle of the study's list (the lower middle for an even
    count), so the check is neither the smallest nor the largest rate tried."""
    ordered = sorted(rates)
    return ordered[(len(ordered) - 1) // 2]


def rates_per_arm(study: Study) -> list[tuple[float, ...]]:
    """The rates each tuned arm trained at, one ascending tuple per arm. A preset may give its grids different
    rate lists (full: two rates per width), so the study's union of rates is not what any one arm tried, and a
    sentence that names the union as every arm's grid misstates the search."""
    arms: dict[str, set[float]] = defaultdict(set)
    for r in study.runs:
        if r.run_id in study.tuned:
            key = r.model_copy(update={"seed": 0, "train": r.train.model_copy(update={"lr": 0.0})}).digest()
            arms[key].add(r.train.lr)
    return [tuple(sorted(v)) for v in arms.values()]


def rate_lists(study: Study, shared: str = "") -> str:
    """The rates the tuned arms tried, in words: the one list they share (after ``shared``), or how many each
    tried and from what."""
    lists = set(rates_per_arm(study))
    union = ", ".join(f"{x:g}" for x in study.learning_rates)
    if len(lists) <= 1:
        return f"{shared}{union}"
    sizes = sorted({len(t) for t in lists})
    n = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}"
    return f"the {n} rates of its own list ({len(lists)} lists, drawn from {union})"


def _arm_keys(frame: pd.DataFrame) -> list[str]:
    return [c for c in config_columns(frame) if c not in ("seed", "train.lr")]


def choose(frame: pd.DataFrame, tuned: set[str]) -> tuple[pd.DataFrame, list[RateChoice]]:
    """The frame with each tuned arm reduced to its chosen rate's runs, and the choices made.

    An arm whose runs carry no validation loss (stored before pelab measured it) keeps the fixed rate,
    and its choice says so by an empty ``val_loss``.
    """
    is_tuned = frame.run_id.isin(tuned)
    if not is_tuned.any():
        return frame, []
    keys = _arm_keys(frame)
    part = frame[is_tuned]
    rates = sorted(set(part["train.lr"].astype(float)))
    keep: list[int] = []
    choices: list[RateChoice] = []
    for _, idx in part[keys].astype(str).groupby(keys, sort=False, dropna=False).groups.items():
        arm = part.loc[idx]
        done = arm[arm.status == "done"]
        losses: dict[float, float] = {}
        seeds: dict[float, int] = {}
        for lr, runs in done.groupby("train.lr"):
            vals = runs[CHOOSE_ON].dropna() if CHOOSE_ON in runs else pd.Series(dtype=float)
            seeds[float(lr)] = len(vals)
            if len(vals):
                losses[float(lr)] = float(vals.mean())
        finite = {lr: v for lr, v in losses.items() if math.isfinite(v)}
        chosen = min(finite, key=lambda lr: (finite[lr], lr)) if finite else fixed_rate(rates)
        keep.extend(arm.index[arm["train.lr"].astype(float) == chosen])
        first = arm.iloc[0]
        where = {k: first[k] for k in keys if not (isinstance(first[k], float) and math.isnan(first[k]))}
        choices.append(RateChoice(where, chosen, finite, seeds))
    out = pd.concat([frame[~is_tuned], frame.loc[keep]]).sort_index()
    out["lr_chosen"] = out["train.lr"].astype(float)
    out["train.lr"] = out["train.lr"].astype(object)
    out.loc[out.run_id.isin(tuned), "train.lr"] = TUNED
    return out, choices


def at_rate(frame: pd.DataFrame, tuned: set[str], lr: float) -> pd.DataFrame:
    """The frame as if the study had trained every tuned arm at ``lr`` alone."""
    is_tuned = frame.run_id.isin(tuned)
    return frame[~is_tuned | (frame["train.lr"].astype(float) == lr)]


def varying_keys(choices: list[RateChoice]) -> list[str]:
    """The config keys that tell the tuned arms apart (what a reader needs to name each arm)."""
    if not choices:
        return []
    keys = list(choices[0].arm)
    return [k for k in keys if len({str(c.arm.get(k)) for c in choices}) > 1]


__all__ = ["TUNED", "RateChoice", "at_rate", "choose", "fixed_rate", "varying_keys"]
