"""Arms, comparisons and the paired test of one comparison on one metric.

``Side`` / ``Comparison``: two arms that share everything but the compared axis, with per-seed values of every
metric, so differences are paired by seed. ``Test``: the paired differences on one metric, their mean, the
t-interval at any confidence, the p-value; or why the metric carries **no information** here (both arms at a ceiling
or floor of the metric, or paired differences with zero spread), in which case the comparison falls back to the
claim's next metric; or why none of the task's metrics does (``solved``: both arms solved the task).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as st

from pelab.rules.metrics import ALPHA, BASELINE, CEILING, LM_LEARNED_SHARE, LOSS_FLOOR, SOLVED_SILENCES, Metric
from pelab.study.sequential import Looks


def setting_text(key: str, value: Any) -> str:
    """ "key=value", except a ``setting`` (what tells two configurations of one task apart), which already reads
    "task.length=12"."""
    return str(value) if key == "setting" else f"{key}={value}"


# --- arms and comparisons ---------------------------------------------------------------
#: How a held-equal key reads in a table cell.
SHORT = {"task.name": "task", "model.position.scheme": "scheme", "model.combine": "combine", "model.d": "d"}


@dataclass(frozen=True)
class Side:
    """One arm of a comparison: per metric, the finished runs' values by seed."""

    label: str
    values: Mapping[str, Mapping[int, float]]
    params: int = 0
    flops: int = 0
    run_ids: tuple[str, ...] = ()

    def of(self, key: str) -> dict[int, float]:
        return {s: float(v) for s, v in self.values.get(key, {}).items() if v is not None and not math.isnan(v)}

    def mean(self, key: str = "acc") -> float:
        v = list(self.of(key).values())
        return float(np.mean(v)) if v else math.nan

    def seeds(self, key: str = "acc") -> int:
        return len(self.of(key))

    @property
    def is_language_model(self) -> bool:
        return bool(self.of(BASELINE))

    def learned(self, floor: float) -> bool:
        """Mean accuracy at the training size at or above the study's floor (one floor for every claim); for a
        language model, held-out loss at most LM_LEARNED_SHARE of the context-free baseline's."""
        if self.is_language_model:
            loss, base = self.mean("loss"), self.mean(BASELINE)
            return not math.isnan(loss) and loss <= LM_LEARNED_SHARE * base
        m = self.mean("acc")
        return not math.isnan(m) and m >= floor


@dataclass(frozen=True)
class Comparison:
    """Arm A against arm B; ``where`` names what both share (task, width, ...)."""

    where: Mapping[str, Any]
    a: Side
    b: Side
    #: the seed counts it was examined at and the cap, when the study adds seeds sequentially; None: fixed seeds
    looks: Looks | None = None

    def learned(self, floor: float) -> bool:
        return self.a.learned(floor) and self.b.learned(floor)

    def place(self, keys: Sequence[str] | None = None) -> str:
        keys = list(self.where) if keys is None else keys
        return ", ".join(setting_text(SHORT.get(k, k.split(".")[-1]), self.where[k]) for k in keys if k in self.where)

    def run_ids(self) -> list[str]:
        return [*self.a.run_ids, *self.b.run_ids]


def solved(c: Comparison) -> str | None:
    """Why the comparison carries no information on any of the task's metrics (``SOLVED_SILENCES``), in words, or
    None: both arms *solved* the task (SCIENCE.md, "Solved is not informative"): each arm's mean accuracy within
    ``CEILING`` of 100%, or each arm's mean held-out loss at most ``LOSS_FLOOR`` nats. Two such arms give the same
    answers; what still differs between them (how sharp their right answers are, how fast they got there) depends on
    the budget and the learning rate more than on the encoding, so no metric of the task tells them apart, and the
    row is no information, like a ceiling (quick's C6 once read 0.016 nats against 0.028 as "−43%" for two arms at
    100%). Language models are never solved this way: they are decided on bits per byte, which has no ceiling."""
    if c.a.is_language_model or c.b.is_language_model:
        return None
    accs = (c.a.mean("acc"), c.b.mean("acc"))
    shown = " and ".join(f"{100 * x:.1f}%" for x in accs)
    if all(not math.isnan(x) and x >= 1 - CEILING for x in accs):
        return f"both arms solved the task (accuracy {shown})"
    losses = (c.a.mean("loss"), c.b.mean("loss"))
    if all(not math.isnan(x) and x <= LOSS_FLOOR for x in losses):
        nats = " and ".join(f"{x:.4f}" for x in losses)
        return f"both arms solved the task (held-out loss {nats} nats, at most {LOSS_FLOOR}; accuracy {shown})"
    return None


# --- one comparison on one metric -------------------------------------------------------
@dataclass(frozen=True)
class Test:
    """Paired differences A − B on one metric, oriented so that positive means A better."""

    metric: Metric
    diffs: tuple[float, ...]  # raw A − B per seed (log(A / B) for relative metrics: ``Metric.diff``)
    info: str | None = None  # why this metric tells nothing here; None when it does
    #: the sequential design it was examined under (``pelab.study.sequential``): every interval and p-value is
    #: then read at its last look's nominal level, so interim looks do not inflate the error rate; None (fixed
    #: seeds) reads them as they are
    looks: Looks | None = None

    def read_level(self, level: float) -> float:
        """The confidence level actually read for an overall ``level``: itself with fixed seeds; with a design,
        the nominal level of the last look (a repeated confidence interval)."""
        return level if self.looks is None else self.looks.nominal_level(level)

    @property
    def n(self) -> int:
        return len(self.diffs)

    @property
    def sign(self) -> int:
        return 1 if self.metric.higher_is_better else -1

    @property
    def mean(self) -> float:
        return float(np.mean(self.diffs)) if self.diffs else math.nan

    @property
    def se(self) -> float:
        return float(np.std(self.diffs, ddof=1) / math.sqrt(self.n)) if self.n >= 2 else math.nan

    def interval(self, level: float = 1 - ALPHA) -> tuple[float, float]:
        """Two-sided t-interval of the raw mean difference at ``level``."""
        if self.n < 2:
            return (math.nan, math.nan)
        half = float(st.t.ppf(0.5 + self.read_level(level) / 2, self.n - 1)) * self.se
        return (self.mean - half, self.mean + half)

    def oriented(self, level: float = 1 - ALPHA, clip: bool = False) -> tuple[float, float]:
        """The interval with positive meaning 'A better'; with ``clip``, first held to the range the difference can
        take (``Metric.clip_diff``): for display only, never for a verdict."""
        lo, hi = self.interval(level)
        if clip:
            lo, hi = self.metric.clip_diff(lo), self.metric.clip_diff(hi)
        return (lo, hi) if self.sign > 0 else (-hi, -lo)

    def p_beyond(self, theta: float) -> float:
        """Two-sided p-value of H0: mean difference (oriented) = theta; the smallest alpha whose interval
        excludes theta (with a design: the smallest total alpha at whose nominal level it does)."""
        if self.n < 2 or not self.se > 0:
            return math.nan
        t = (self.sign * self.mean - theta) / self.se
        p = float(2 * st.t.sf(abs(t), self.n - 1))
        return p if self.looks is None else self.looks.adjusted(p)


def paired_test(c: Comparison, m: Metric) -> Test:
    """The paired test of A against B on ``m``, or a Test whose ``info`` says why the metric is silent: the arms
    solved the task (``solved``, for the task's own metrics), fewer than 2 paired seeds, both arms at a bound of the
    metric, or zero spread."""
    a, b = c.a.of(m.key), c.b.of(m.key)
    seeds = sorted(a.keys() & b.keys())
    diffs = tuple(d for d in (m.diff(a[s], b[s]) for s in seeds) if not math.isnan(d))
    if m.key in SOLVED_SILENCES and (why := solved(c)) is not None:
        return Test(m, diffs, info=why, looks=c.looks)
    if len(diffs) < 2:
        return Test(m, diffs, info=f"fewer than 2 paired seeds ({len(diffs)})", looks=c.looks)
    bound = m.arms_at_bound([a[s] for s in seeds], [b[s] for s in seeds])
    if bound:
        return Test(m, diffs, info=f"both arms at the {bound} of {m.label}", looks=c.looks)
    if float(np.std(diffs)) <= 1e-12 * max(1.0, abs(float(np.mean(diffs)))):
        return Test(m, diffs, info=f"paired differences of {m.label} have zero spread", looks=c.looks)
    return Test(m, diffs, looks=c.looks)


def from_diffs(m: Metric, diffs: Sequence[float], info: str | None = None, looks: Looks | None = None) -> Test:
    """A Test over differences computed elsewhere (differences of gaps, probe scores), with the same
    zero-spread rule."""
    diffs = tuple(float(d) for d in diffs if not math.isnan(d))
    if info is None and len(diffs) < 2:
        info = f"fewer than 2 paired seeds ({len(diffs)})"
    elif info is None and float(np.std(diffs)) <= 1e-12 * max(1.0, abs(float(np.mean(diffs)))):
        info = f"paired differences of {m.label} have zero spread"
    return Test(m, diffs, info, looks)
