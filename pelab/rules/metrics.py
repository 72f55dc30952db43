"""Deciding metrics: what a run is scored on (accuracy, held-out loss, learning speed), which way is better, its
range, and whether its margin is absolute (±1 pp of accuracy) or relative (±2% of loss, and at least 0.01 nats near
the loss floor); and the constants every rule shares.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from pelab.records import sizes_in

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

    def clip_diff(self, x: float) -> float:
        """A paired difference A − B (a relative metric's (A − B) / B) clipped to the range it can take, as SCIENCE.md
        asks of intervals on display: a t-interval on heavy-tailed per-seed ratios can reach below −100% ("A's loss
        −159.6% of B's"), which no pair of losses can. Never used by a verdict."""
        lo, hi = self.bounds
        low, high = (-1.0, math.inf) if self.relative else (lo - hi, hi - lo)
        return min(max(x, low), high)

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


#: How close to 100% (or 0%) both arms' mean accuracy must be for accuracy to sit at its ceiling (or floor): the
#: default equivalence margin. Two arms both within a point of 100% cannot differ by more than the margin, so
#: accuracy could only ever call them equal, and that "equal" would be the ceiling's, not the arms' (full's C7
#: read learned and sinusoidal "equal" at 100% against 99.8-100%, where held-out loss had them 59% apart): the
#: comparison falls back to held-out loss, as SCIENCE.md asks of a metric at its ceiling. Judged on each arm's
#: mean, as the loss floor is: one seed a hair off 100% does not make a solved pair informative.
CEILING = 0.01


ACC = Metric("acc", "accuracy", True, (0.0, 1.0), tolerance=CEILING, bound_by_mean=True)


#: Overlap of the token and position subspaces (C2): 0 orthogonal, 1 one inside the other.
OVERLAP = Metric("overlap", "token/position subspace overlap", False, (0.0, 1.0), tolerance=1e-9)


#: Held-out accuracy of a linear probe (C8, C10).
PROBE = Metric("probe", "probe accuracy", True, (0.0, 1.0), tolerance=CEILING, bound_by_mean=True)


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
        return Metric(key, f"accuracy at n={n}", True, (0.0, 1.0), tolerance=CEILING, bound_by_mean=True)
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
