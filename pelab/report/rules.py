"""The verdict engine: deciding metrics, paired tests, Holm–Bonferroni, and the rules of SCIENCE.md.

Everything here is a pure function of typed evidence, so every branch of every rule
is unit-tested on hand-made comparisons whose verdict is known (``tests/test_rules.py``)
and a verdict can be trusted without rerunning a study.

The pieces, bottom up:

* ``Metric``: what a run is scored on (accuracy, held-out loss, learning speed), which way is better,
  its range, and whether its margin is absolute (±1 pp of accuracy) or relative
  (±2% of loss, and at least 0.01 nats near the loss floor).
* ``Side`` / ``Comparison``: two arms that share everything but the compared axis,
  with per-seed values of every metric, so differences are paired by seed.
* ``Test``: one comparison on one metric: the paired differences, their mean, the
  t-interval at any confidence, the p-value; or why the metric carries **no
  information** here (both arms at a ceiling or floor of the metric, or paired
  differences with zero spread), in which case the comparison falls back to the
  claim's next metric.
* ``Row`` / ``Family``: every comparison behind one claim, each decided on the first
  informative metric of the claim's chain, with Holm–Bonferroni across them wherever
  the claim says "on some comparison"; the family's verdict.

Orientation: a rule always asks about "A is better than B" (or "A ≈ B"). For a metric
where lower is better (loss), the difference is turned round before the rule reads it,
so a positive number always means A better.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from scipy import stats as st

from pelab.records import sizes_in
from pelab.report.design import looks_for
from pelab.report.resolution import Resolution, resolve
from pelab.report.verdicts import INCONCLUSIVE, NO_INFO, NOT_RUN, NOT_SUPPORTED, SUPPORTED, TOO_SMALL
from pelab.study.sequential import SPENDING_NAMES, Looks

ALPHA = 0.05
#: Default equivalence margin on relative metrics (loss, perplexity): ±2% of the baseline.
RELATIVE_MARGIN = 0.02
#: SCIENCE.md: at least 5 seeds wherever an equivalence is tested (fewer leave it inconclusive).
MIN_EQUIVALENCE_SEEDS = 5
#: A language model "learned its task" when its held-out loss is at most this share of the context-free
#: baseline's (the test bytes' cross-entropy under the training bytes' unigram frequencies): it uses context
#: to save at least a fifth of the bits. Next-byte accuracy has no ceiling to compare with a floor.
LM_LEARNED_SHARE = 0.8
#: The run metric that marks a language model, and its context-free baseline.
BASELINE = "baseline_loss"


# --- metrics ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    key: str  # the run metric (``m.<key>`` in the runs frame)
    label: str
    higher_is_better: bool
    #: (low, high) range of the metric; a comparison whose every value sits at one end carries no information
    bounds: tuple[float, float]
    #: how close to a bound counts as sitting on it
    tolerance: float
    #: margin and differences relative to the baseline arm's value, (A − B) / B
    relative: bool = False
    #: whether each arm's mean (not every seed) decides that the arms sit at a bound: for a bound that is a
    #: judgement (the loss floor) rather than the end of the range, one seed a hair past it must not turn two
    #: solved arms' difference into evidence
    bound_by_mean: bool = False
    #: for a relative metric, the smallest margin in the metric's own units: a relative margin shrinks with
    #: the baseline, and near the loss floor ±2% of 0.012 nats (0.0002) would call "worse" two arms that
    #: both give the right answer p ≈ 0.99 (see ``margin_for``)
    margin_floor: float = 0.0

    def arms_at_bound(self, *arms: Sequence[float]) -> str | None:
        """``at_bound`` over arms: their every value, or (``bound_by_mean``) each arm's mean."""
        if self.bound_by_mean:
            return self.at_bound([float(np.mean(a)) for a in arms if len(a)])
        return self.at_bound([v for a in arms for v in a])

    def at_bound(self, values: Iterable[float]) -> str | None:
        """'ceiling' or 'floor' (the top or bottom of the range, whichever way is better) when every value
        sits at that end, else None: a held-out loss near 0 is at its floor."""
        v = np.asarray(list(values), dtype=float)
        if v.size == 0:
            return None
        lo, hi = self.bounds
        if np.all(v >= hi - self.tolerance):
            return "ceiling"
        if np.all(v <= lo + self.tolerance):
            return "floor"
        return None

    def fmt_diff(self, x: float) -> str:
        if math.isnan(x):
            return "–"
        if self.relative:
            return f"{100 * x:+.1f}%"
        return f"{100 * x:+.1f} pp" if self.bounds == (0.0, 1.0) and self.key != "overlap" else f"{x:+.3f}"

    def fmt_value(self, x: float) -> str:
        if math.isnan(x):
            return "–"
        return f"{100 * x:.1f}%" if self.bounds == (0.0, 1.0) and self.key != "overlap" else f"{x:.4g}"


ACC = Metric("acc", "accuracy", True, (0.0, 1.0), tolerance=1e-3)
#: Overlap of the token and position subspaces (C2): 0 orthogonal, 1 one inside the other.
OVERLAP = Metric("overlap", "token/position subspace overlap", False, (0.0, 1.0), tolerance=1e-9)
#: Held-out accuracy of a linear probe (C8, C10).
PROBE = Metric("probe", "probe accuracy", True, (0.0, 1.0), tolerance=1e-3)
#: Share of the layer-1 logit variance from the cross terms (C4), against a threshold.
SHARE = Metric("share", "cross-term share of logit variance", True, (0.0, 1.0), tolerance=1e-6)
#: Held-out cross-entropy in nats per scored target. Its floor is 0.01 nats, not 0: below it the right answer
#: already gets p > 0.99 on average, and two arms that both solve the task and sit there differ only in how
#: sharp their already-right answers are (0.0028 against 0.0024 nats is "14% worse" on a relative margin). That
#: depends on the step budget and the learning rate more than on the encoding, so it is no information, and
#: the claim falls back to how fast the arms learned (``AUC``).
LOSS_FLOOR = 0.01
LOSS = Metric(
    "loss",
    "held-out loss",
    False,
    (0.0, math.inf),
    tolerance=LOSS_FLOOR,
    relative=True,
    bound_by_mean=True,
    margin_floor=LOSS_FLOOR,
)
#: Language models' held-out loss in bits per byte (loss / ln 2: relative differences equal the loss's).
BPB = Metric("bpb", "bits per byte", False, (0.0, math.inf), tolerance=1e-4, relative=True)
#: Area under the learning curve (training accuracy on fresh draws, as a share of the run): how fast an arm
#: learned. The last fallback when both arms end at the accuracy ceiling and the loss floor; same steps, same
#: logging points in both arms, so it is paired like the rest.
AUC = Metric("auc", "area under the learning curve", True, (0.0, 1.0), tolerance=1e-3)
METRICS: dict[str, Metric] = {m.key: m for m in (ACC, LOSS, BPB, AUC, OVERLAP, PROBE, SHARE)}


def metric(key: str) -> Metric:
    """A registered metric, or one built for ``acc_at_N`` (accuracy at another size)."""
    if key in METRICS:
        return METRICS[key]
    sized = sizes_in([key])
    if sized or key == "acc_at_N":  # acc_at_N: the family, as a claim names it
        n = sized[0][0] if sized else "N"
        return Metric(key, f"accuracy at n={n}", True, (0.0, 1.0), tolerance=1e-3)
    raise KeyError(f"unknown metric {key!r}; known: {', '.join(METRICS)}")


def margin_for(m: Metric, margin: float, base: float = math.nan) -> float:
    """The study's margin applies to accuracy; relative metrics use RELATIVE_MARGIN of B's mean ``base``, but
    never less than the metric's ``margin_floor`` in its own units (held-out loss: LOSS_FLOOR nats, so 0.012
    against 0.015 nats, two arms whose right answers both get p ≈ 0.99, is within the margin, where ±2% would
    call it 25% worse)."""
    if not m.relative:
        return margin
    if m.margin_floor > 0 and base > 0:
        return max(RELATIVE_MARGIN, m.margin_floor / base)
    return RELATIVE_MARGIN


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


# --- one comparison on one metric -------------------------------------------------------
@dataclass(frozen=True)
class Test:
    """Paired differences A − B on one metric, oriented so that positive means A better."""

    metric: Metric
    diffs: tuple[float, ...]  # raw A − B per seed ((A − B) / B for relative metrics)
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

    def oriented(self, level: float = 1 - ALPHA) -> tuple[float, float]:
        """The interval with positive meaning 'A better'."""
        lo, hi = self.interval(level)
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
    """The paired test of A against B on ``m``, or a Test whose ``info`` says why the metric is silent."""
    a, b = c.a.of(m.key), c.b.of(m.key)
    seeds = sorted(a.keys() & b.keys())
    if m.relative:
        diffs = tuple((a[s] - b[s]) / b[s] if b[s] != 0 else math.nan for s in seeds)
        diffs = tuple(d for d in diffs if not math.isnan(d))
    else:
        diffs = tuple(a[s] - b[s] for s in seeds)
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


# --- Holm–Bonferroni --------------------------------------------------------------------
def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[tuple[bool, float]]:
    """Holm's step-down: for each p-value, whether it is rejected and the confidence level of the interval
    that decides it (1 − alpha / (m − rank)). NaN p-values (no test in the direction that matters) rank last
    and are never rejected; they still count in m."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: (math.isnan(pvalues[i]), pvalues[i]))
    out: list[tuple[bool, float]] = [(False, 1 - alpha / max(m, 1))] * m
    going = True
    for rank, i in enumerate(order):
        level_alpha = alpha / (m - rank)
        p = pvalues[i]
        going = going and not math.isnan(p) and p < level_alpha
        out[i] = (going, 1 - level_alpha)
    return out


# --- rows and families ------------------------------------------------------------------
#: better: A beats B (the interval excludes 0); beyond_margin: A beats B by more than the margin ("far better");
#: equivalent: within ±margin; not_worse: A trails B by less than the margin.
Kind = Literal["better", "beyond_margin", "equivalent", "not_worse"]


@dataclass
class Row:
    """One comparison's outcome inside a claim."""

    comparison: Comparison
    verdict: str
    test: Test | None = None  # the test that decided it (None: too small, or no metric informative)
    skipped: list[str] = field(default_factory=list)  # metrics passed over, and why
    notes: list[str] = field(default_factory=list)  # what else limited the verdict
    level: float = 1 - ALPHA  # confidence of the interval the verdict read
    interval: tuple[float, float] = (math.nan, math.nan)  # raw A − B at ``level``
    kind: Kind | None = None  # the rule the row was read by (None: no test)

    @property
    def tested(self) -> bool:
        return self.test is not None and self.verdict not in (TOO_SMALL, NO_INFO)

    @property
    def resolution(self) -> Resolution | None:
        """What the interval the verdict read establishes, whatever the verdict (``pelab.report.resolution``):
        computed from the interval, the metric and the level, so it follows any later change of level (Holm,
        groups) and never feeds back into the verdict."""
        if self.test is None or self.kind is None or not self.tested:
            return None
        return resolve(self.kind, self.test.metric, self.interval, self.level, self.test.n, MIN_EQUIVALENCE_SEEDS)

    def describe(self) -> str:
        """The difference in words whose sign cannot be misread: 'A − B +1.2 pp [+0.3, +2.1] accuracy' or
        "A's held-out loss −8.0% [−12.1%, −3.9%] relative to B's"; or why there is no number."""
        if self.test is None:
            return "; ".join(self.skipped) or self.verdict
        return "; ".join([difference_text(self.test, self.interval), *self.notes])

    @property
    def p(self) -> float:
        """Two-sided p-value of 'no difference' (nan without a test): how telling the row is, on any metric."""
        return self.test.p_beyond(0.0) if self.test is not None else math.nan


def difference_text(t: Test, interval: tuple[float, float]) -> str:
    """A paired difference and its interval in words whose sign cannot be misread."""
    lo, hi = interval
    numbers = f"{t.metric.fmt_diff(t.mean)} [{t.metric.fmt_diff(lo)}, {t.metric.fmt_diff(hi)}]"
    if t.metric.relative:
        return f"A's {t.metric.label} {numbers} relative to B's"
    return f"A − B {numbers} {t.metric.label}"


#: How ``second_opinion`` notes begin, whichever loss it read (held-out loss; bits per byte).
LOSS_DOUBTS = tuple(f"{m.label} {how}" for m in (LOSS, BPB) for how in ("does not confirm", "contradicts"))


def second_opinion(row: Row, tests: Sequence[Test]) -> str | None:
    """Whether held-out loss agrees with a directional win decided on accuracy, in words, or None when it does.

    SCIENCE.md decides on the claim's deciding metric, so this never changes a verdict; but a win of a point or
    two in accuracy (C9's wordorder arms, near 50% chance) that the loss, read at the same level, does not
    show is one a careful reader discounts, and the report says so beside it rather than leave it to be found."""
    t = row.test
    if row.verdict != SUPPORTED or t is None or t.metric.relative or not t.metric.key.startswith("acc"):
        return None
    loss = next((x for x in tests if x.metric.key in ("loss", "bpb") and x.info is None), None)
    if loss is None:
        return None
    lo, hi = loss.oriented(row.level)
    if lo > 0:
        return None
    how = "contradicts" if hi < 0 else "does not confirm"
    return f"{loss.metric.label} {how} it ({difference_text(loss, loss.interval(row.level))})"


@dataclass
class Family:
    """Every comparison behind one claim and what they add up to."""

    rows: list[Row]
    verdict: str
    kind: Kind
    combine: Literal["any", "all"]
    correction: str

    @property
    def tested(self) -> list[Row]:
        return [r for r in self.rows if r.tested]

    def explain(self) -> str:
        learned = [r for r in self.rows if r.verdict != TOO_SMALL]
        return (
            f"{len(self.rows)} comparison(s); {len(learned)} with an arm above the floor; "
            f"{len(self.tested)} informative; {self.correction}"
        )


def _decide(kind: Kind, lo: float, hi: float, margin: float, n: int = MIN_EQUIVALENCE_SEEDS) -> str:
    """The rules of SCIENCE.md on an oriented interval (positive = A better) from ``n`` paired seeds.

    A conclusion that rests on the interval lying *inside* a margin (an equivalence, a non-inferiority,
    "no effect") needs at least MIN_EQUIVALENCE_SEEDS pairs; with fewer it stays inconclusive. An equivalence
    claim needs them either way: SCIENCE.md asks for 5 seeds wherever an equivalence is tested, so 3 seeds
    neither confirm nor refute one; so does a non-inferiority ("not worse"), save that A better beyond the
    interval needs no margin and so no seed minimum."""
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    equivalence_ok = n >= MIN_EQUIVALENCE_SEEDS
    if kind == "better":
        inside = -margin <= lo and hi <= margin
        if inside and lo > 0:
            # Sure but negligible: SCIENCE.md's directional rule also says "not supported when it lies inside the
            # equivalence margin", and a difference the margin calls negligible (0.002 nats between two solved
            # arms) is no win however tight its interval. Deciding that rests on the margin: 5 seeds.
            return NOT_SUPPORTED if equivalence_ok else INCONCLUSIVE
        if lo > 0:
            return SUPPORTED
        if hi < 0 or (equivalence_ok and inside):
            return NOT_SUPPORTED
        return INCONCLUSIVE
    if kind == "beyond_margin":
        if lo > margin:
            return SUPPORTED
        if hi < 0 or (equivalence_ok and hi <= margin):
            return NOT_SUPPORTED
        return INCONCLUSIVE
    if kind == "equivalent":  # SCIENCE.md: at least 5 seeds wherever an equivalence is tested, either way
        if equivalence_ok and -margin <= lo and hi <= margin:
            return SUPPORTED
        if equivalence_ok and (lo > margin or hi < -margin):
            return NOT_SUPPORTED
        return INCONCLUSIVE
    if kind == "not_worse":
        # A non-inferiority is an equivalence with one side, so it is tested on 5 seeds either way (C18's causal
        # half in quick, 3 seeds, reads like the Vaswani equivalence beside it). The one exception: A better
        # beyond the interval is not worse without any appeal to the margin, so it needs no seed minimum.
        if lo > 0 or (equivalence_ok and lo > -margin):
            return SUPPORTED
        if equivalence_ok and hi < -margin:
            return NOT_SUPPORTED
        return INCONCLUSIVE
    raise ValueError(kind)


def _capped(kind: Kind, lo: float, hi: float, margin: float, n: int) -> bool:
    """Whether only the seed count kept this interval from an equivalence-type conclusion."""
    return n < MIN_EQUIVALENCE_SEEDS and _decide(kind, lo, hi, margin) != _decide(kind, lo, hi, margin, n)


def choose_test(c: Comparison, chain: Sequence[str]) -> tuple[Test | None, list[str]]:
    """The first metric of ``chain`` that carries information for ``c``, and the reasons the earlier ones
    did not."""
    skipped = []
    for key in chain:
        t = paired_test(c, metric(key))
        if t.info is None:
            return t, skipped
        skipped.append(t.info)
    return None, skipped


def _p_for(kind: Kind, t: Test, margin: float, combine: str) -> float:
    """The p-value Holm ranks: for 'any' families the test that would support the claim on this row; for
    'all' families the test that would refute it."""
    if combine == "any":  # only 'A beats B (far) on some comparison' is claimed that way
        theta = margin if kind == "beyond_margin" else 0.0
        return t.p_beyond(theta) if kind in ("better", "beyond_margin") and t.sign * t.mean > theta else math.nan
    # 'all': refuting rows
    if kind == "equivalent":
        m = abs(t.mean)
        return t.p_beyond(math.copysign(margin, t.sign * t.mean)) if m > margin else math.nan
    if kind == "not_worse":
        return t.p_beyond(-margin) if t.sign * t.mean < -margin else math.nan
    if kind == "beyond_margin":
        return t.p_beyond(margin) if t.sign * t.mean < margin else math.nan
    # 'better': refuted by A worse beyond the interval, or (on enough seeds) by an interval wholly inside the
    # margin; the latter's p is the smallest alpha whose interval excludes both bounds (two one-sided tests)
    o = t.sign * t.mean
    worse = t.p_beyond(0.0) if o < 0 else math.nan
    inside = (
        max(t.p_beyond(-margin), t.p_beyond(margin))
        if -margin < o < margin and t.n >= MIN_EQUIVALENCE_SEEDS
        else math.nan
    )
    return min((p for p in (worse, inside) if not math.isnan(p)), default=math.nan)


@dataclass(frozen=True)
class Evidence:
    """One comparison ready for a rule: whether its arms learned, and its tests in the claim's metric order."""

    comparison: Comparison
    learned: bool
    tests: tuple[Test, ...]


def chain_for(c: Comparison, chain: Sequence[str]) -> tuple[str, ...]:
    """Language models are decided on held-out loss (bits per byte up to a constant: relative differences are
    the same), whatever the claim's chain: next-byte accuracy is not what a language model is for."""
    if c.a.is_language_model and c.b.is_language_model:
        return ("bpb",)
    return tuple(chain)


def evidence(comparisons: Sequence[Comparison], chain: Sequence[str], floor: float) -> list[Evidence]:
    """Paired tests of every comparison on each metric of ``chain``; whether it enters is ``FLOOR_POLICY``."""
    return [
        Evidence(c, enters(c, floor), tuple(paired_test(c, metric(k)) for k in chain_for(c, chain)))
        for c in comparisons
    ]


def enters(c: Comparison, floor: float) -> bool:
    """``FLOOR_POLICY``: whether a comparison takes part in a verdict (at least one arm learned)."""
    return c.a.learned(floor) or c.b.learned(floor)


#: The one floor policy of every verdict family. A comparison enters when at least one of its arms learned (is
#: above the study's floor): an arm that failed where its pair learned is evidence against that arm, and dropping
#: the row as "budget too small" would hide it (SCIENCE.md, C2: "none may be dropped"; C18's masked NoPE and
#: C19's added grid fail by the claim's own account). Only a comparison where neither arm learned says nothing
#: but that the budget was too small. The row is then decided like any other, on the paired interval of its first
#: informative metric, so an arm just under the floor beside one just over it is no win unless the interval says
#: so. Key figures still quote only rows whose arms both learned where there are any (``key_of``). C3's width
#: series follow it too (a width enters when an arm learned). Measures of what a model learned (C2's overlap,
#: C4's shares, C8's and C10's probes) are a different matter: they are taken only on runs that learned, since a
#: model that learned nothing has no learned structure to measure.
FLOOR_POLICY = (
    "a comparison enters when at least one arm is above the floor (an arm that failed where its pair learned "
    "counts against it, on the paired interval like any other); one where neither learned is budget too small"
)


def sequential_note(looks: Looks, alpha: float = ALPHA) -> str:
    """How a row examined sequentially was read: its looks and its last look's nominal level."""
    return (
        f"sequential seeds ({looks.text()}): its interval is read at the last look's nominal "
        f"{100 * looks.nominal_level(1 - alpha):.2f}% ({SPENDING_NAMES[looks.spending]}-type alpha spending)"
    )


def swapped(comps: Sequence[Comparison]) -> list[Comparison]:
    """The same comparisons with A and B exchanged: the claim's opposite, tested by the same rule."""
    return [Comparison(c.where, c.b, c.a, c.looks) for c in comps]


def family(
    comparisons: Sequence[Comparison],
    chain: Sequence[str],
    floor: float,
    margin: float,
    kind: Kind = "better",
    combine: Literal["any", "all"] = "any",
    alpha: float = ALPHA,
) -> Family:
    """Decide every comparison on the first informative metric of ``chain`` and combine them (``decide``)."""
    return decide(evidence(comparisons, chain, floor), margin, kind, combine, alpha)


def decide(
    items: Sequence[Evidence],
    margin: float,
    kind: Kind = "better",
    combine: Literal["any", "all"] = "any",
    alpha: float = ALPHA,
) -> Family:
    """The family rule of SCIENCE.md.

    * Rows where neither arm learned are ``TOO_SMALL`` and take no part (``FLOOR_POLICY``).
    * Rows where no test carries information are ``NO_INFO`` and take no part; otherwise the first
      informative test decides the row (the metrics before it are listed as skipped, with why).
    * ``combine="any"`` (A beats B on *some* comparison): Holm–Bonferroni across the informative rows;
      a row supports the claim only on the interval at its Holm level. Supported when some row is; not
      supported when every informative row is not (each at 95%: refuting all is an intersection); else
      inconclusive.
    * ``combine="all"`` (the claim must hold on *every* comparison): supported when every informative row is
      supported at the plain 95% level (an intersection–union test needs no correction); not supported when
      some row refutes it at its Holm level; else inconclusive.
    """
    rows: list[Row] = []
    tests: list[tuple[int, Test, float, tuple[Test, ...]]] = []  # row, deciding test, margin, every metric's test
    for item in items:
        c = item.comparison
        if not item.learned:
            rows.append(Row(c, TOO_SMALL, skipped=["both arms below the floor"]))
            continue
        skipped = [t.info for t in item.tests if t.info is not None]
        t = next((t for t in item.tests if t.info is None), None)
        if t is None:
            rows.append(Row(c, NO_INFO, skipped=skipped))
            continue
        skipped = [x.info for x in item.tests[: item.tests.index(t)] if x.info is not None]
        if t.looks is None and (looks := looks_for(c.a.run_ids, c.b.run_ids)) is not None:
            t = replace(t, looks=looks)  # a sequential study: read at its last look's nominal level
        row = Row(c, INCONCLUSIVE, test=t, skipped=skipped, kind=kind)
        if t.looks is not None:
            row.notes.append(sequential_note(t.looks, alpha))
        m = row_margin(row, margin)
        if t.metric.relative and m > RELATIVE_MARGIN:
            row.notes.append(
                f"margin ±{m:.0%} here: {t.metric.margin_floor:g} nats of B's {c.b.mean(t.metric.key):.3g} "
                f"(±{RELATIVE_MARGIN:.0%} would be {RELATIVE_MARGIN * c.b.mean(t.metric.key):.1g} nats)"
            )
        rows.append(row)
        tests.append((len(rows) - 1, t, m, item.tests))
    k = len(tests)
    decisions = holm([_p_for(kind, t, m, combine) for _, t, m, _ in tests], alpha)
    for (i, t, m, every), (rejected, level) in zip(tests, decisions, strict=True):
        row = rows[i]
        plain = _decide(kind, *t.oriented(1 - alpha), m, t.n)
        strict = _decide(kind, *t.oriented(level), m, t.n)
        if _capped(kind, *t.oriented(1 - alpha), m, t.n):
            refuted = kind in ("equivalent", "not_worse") and _decide(kind, *t.oriented(1 - alpha), m) == NOT_SUPPORTED
            where = "outside" if refuted else "inside"
            row.notes.append(f"{where} the margin, but equivalence needs ≥ {MIN_EQUIVALENCE_SEEDS} seeds ({t.n} here)")
        if combine == "any":
            # Support on some row needs Holm; refuting every row is an intersection, so 95% each suffices.
            if rejected and strict == SUPPORTED:
                row.verdict, row.level = SUPPORTED, level
            elif plain == SUPPORTED:  # significant alone, not after Holm: show the interval that decided
                row.verdict, row.level = INCONCLUSIVE, level
            else:
                row.verdict = NOT_SUPPORTED if plain == NOT_SUPPORTED else INCONCLUSIVE
        elif plain == SUPPORTED:  # 'all': support on every row at 95% each (intersection-union)
            row.verdict = SUPPORTED
        elif rejected and strict == NOT_SUPPORTED:  # refuting on some row needs Holm
            row.verdict, row.level = NOT_SUPPORTED, level
        else:
            row.verdict = INCONCLUSIVE
            if plain == NOT_SUPPORTED:
                row.level = level
        row.interval = t.interval(row.level)
        if kind in ("better", "beyond_margin") and (note := second_opinion(row, every)) is not None:
            row.notes.append(note)
    correction = (
        f"Holm–Bonferroni across {k} informative comparison(s)"
        if combine == "any"
        else f"every comparison must hold at 95% (no correction needed); refutations Holm-corrected across {k}"
    )
    return Family(rows, combine_verdicts([r.verdict for r in rows], combine), kind, combine, correction)


def decide_some_group(
    groups: Sequence[Sequence[Evidence]], margin: float, kind: Kind = "better", alpha: float = ALPHA
) -> tuple[Family, list[str]]:
    """Claims of the form "on some task, A beats every control" (C8: a NoPE decoder's probe beats both controls).

    Within a group every row must hold: an intersection–union test, so the group's p-value is the largest of its
    rows'. Across groups, Holm–Bonferroni on those p-values; a group supports the claim when it is rejected and
    each of its rows' intervals at the group's Holm level says so. The claim is supported when some group is, not
    supported when every informative group is refuted, else inconclusive. Returns the family (every row, with the
    level that decided it) and each group's verdict, in order.
    """
    per = [decide(g, margin, kind, combine="all", alpha=alpha) for g in groups]
    pvalues = []
    for fam in per:
        ps = [_p_for(kind, r.test, row_margin(r, margin), "any") for r in fam.rows if r.test is not None]
        whole = fam.rows and all(r.tested for r in fam.rows) and not any(math.isnan(x) for x in ps)
        pvalues.append(max(ps) if whole else math.nan)
    verdicts = []
    for fam, (rejected, level) in zip(per, holm(pvalues, alpha), strict=True):
        holds = rejected and all(
            _decide(kind, *r.test.oriented(level), row_margin(r, margin), r.test.n) == SUPPORTED
            for r in fam.rows
            if r.test is not None
        )
        if holds or fam.verdict == SUPPORTED:
            for r in fam.rows:
                r.verdict, r.level = (SUPPORTED if holds else INCONCLUSIVE), level
                r.interval = r.test.interval(level) if r.test is not None else r.interval
        verdicts.append(SUPPORTED if holds else INCONCLUSIVE if fam.verdict == SUPPORTED else fam.verdict)
    k = sum(not math.isnan(x) for x in pvalues)
    correction = (
        f"on some of {len(per)} group(s): within a group every comparison must hold (its p is the largest of its "
        f"rows'); Holm–Bonferroni across all {len(per)} group(s), {k} of them with every row pointing the claimed "
        "way (a group that does not still counts in the correction)"
    )
    rows = [r for fam in per for r in fam.rows]
    return Family(rows, combine_verdicts(verdicts, "any"), kind, "any", correction), verdicts


def row_margin(r: Row, margin: float) -> float:
    """The margin a decided row is read against: ``margin_for`` its deciding metric and its B arm's mean."""
    assert r.test is not None
    return margin_for(r.test.metric, margin, r.comparison.b.mean(r.test.metric.key))


def combine_verdicts(verdicts: Sequence[str], how: Literal["any", "all"]) -> str:
    if not verdicts:  # no comparison at all: the study lacks its arms, which says nothing of a budget
        return NOT_RUN
    learned = [v for v in verdicts if v != TOO_SMALL]
    if not learned:
        return TOO_SMALL
    tested = [v for v in learned if v != NO_INFO]
    if not tested:
        return NO_INFO
    if how == "any":
        if SUPPORTED in tested:
            return SUPPORTED
        if all(v == NOT_SUPPORTED for v in tested):
            return NOT_SUPPORTED
        return INCONCLUSIVE
    if NOT_SUPPORTED in tested:
        return NOT_SUPPORTED
    if all(v == SUPPORTED for v in tested):
        return SUPPORTED
    return INCONCLUSIVE
