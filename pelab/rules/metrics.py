"""Deciding metrics: what a run is scored on (accuracy, held-out loss, learning speed), which way is better, its
range, and whether its margin is absolute (±1 pp of accuracy) or relative (±2% of loss or bits per byte, read on
per-seed log-ratios); and the constants every rule shares.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from pelab.records import sizes_in

ALPHA = 0.05


#: Default equivalence margin on relative metrics (loss, bits per byte, perplexity): ±2% (SCIENCE.md). A relative
#: difference is read as the per-seed log-ratio log(A / B) (``Metric.diff``), so the margin is |log(A / B)| ≤
#: log(1.02) (``LOG_MARGIN``): A's value within a factor 1.02 of B's either way (−1.96% to +2.0%), the same on
#: both sides, whichever arm is called A. It is never widened, near a floor or anywhere else.
RELATIVE_MARGIN = 0.02


#: ``RELATIVE_MARGIN`` on the log-ratio scale every relative difference is read on: log(1.02) = 0.0198.
LOG_MARGIN = math.log1p(RELATIVE_MARGIN)


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
    #: differences relative to the baseline arm: per seed the log-ratio log(A / B), shown as 100·(exp(x) − 1)%, so a
    #: loss can never be shown "below −100%" and a ratio and its inverse are the same size; the margin is
    #: ``LOG_MARGIN``. Otherwise the plain difference A − B.
    relative: bool = False
    #: whether each arm's mean (not every seed) decides that the arms sit at a bound: for a bound that is a
    #: judgement (the loss floor) rather than the end of the range, one seed a hair past it must not turn two
    #: solved arms' difference into evidence
    bound_by_mean: bool = False

    def diff(self, a: float, b: float) -> float:
        """One seed's paired difference: log(a / b) for a relative metric (NaN where either is not positive: a ratio
        needs two positive losses), else a − b."""
        if not self.relative:
            return a - b
        return math.log(a / b) if a > 0 and b > 0 else math.nan

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
        """A paired difference A − B clipped to the range it can take, as SCIENCE.md asks of intervals on display
        (accuracy differences within ±100 pp). A relative metric's log-ratio needs none: any log-ratio shows as a
        change above −100%. Never used by a verdict."""
        if self.relative:
            return x
        lo, hi = self.bounds
        return min(max(x, lo - hi), hi - lo)

    def fmt_diff(self, x: float) -> str:
        """A difference in the metric's display units: "+1.2 pp"; a relative metric's log-ratio x as the change it
        stands for, 100·(exp(x) − 1)% ("−9.5%" for A's loss 0.905 times B's)."""
        if math.isnan(x):
            return "–"
        if self.relative:
            return f"{100 * math.expm1(x):+.1f}%"
        return f"{100 * x:+.1f} pp" if self.bounds == (0.0, 1.0) and self.key != "overlap" else f"{x:+.3f}"

    def fmt_value(self, x: float) -> str:
        if math.isnan(x):
            return "–"
        return f"{100 * x:.1f}%" if self.bounds == (0.0, 1.0) and self.key != "overlap" else f"{x:.4g}"


#: How close to 100% (or 0%) both arms' mean accuracy must be for accuracy to sit at its ceiling (or floor): the
#: default equivalence margin. Two arms both within a point of 100% cannot differ by more than the margin, so
#: accuracy could only ever call them equal, and that "equal" would be the ceiling's, not the arms' (full's C7
#: read learned and sinusoidal "equal" at 100% against 99.8-100%). Two arms there have both *solved* the task
#: (SCIENCE.md, "Solved is not informative"): the comparison carries no information on any of the task's metrics,
#: held-out loss and learning speed included (``rules.compare.solved``). Judged on each arm's mean, as the loss
#: floor is: one seed a hair off 100% does not make a solved pair informative.
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
#: depends on the step budget and the learning rate more than on the encoding, so two arms whose mean loss is under
#: it have both *solved* the task (``rules.compare.solved``), and their comparison carries no information.
LOSS_FLOOR = 0.01


LOSS = Metric(
    "loss",
    "held-out loss",
    False,
    (0.0, math.inf),
    tolerance=LOSS_FLOOR,
    relative=True,
    bound_by_mean=True,
)


#: Language models' held-out loss in bits per byte (loss / ln 2: relative differences equal the loss's).
BPB = Metric("bpb", "bits per byte", False, (0.0, math.inf), tolerance=1e-4, relative=True)


#: Area under the learning curve (training accuracy on fresh draws, as a share of the run): how fast an arm
#: learned. The last fallback, where accuracy and held-out loss both carry no information without the arms having
#: solved the task (zero spread); same steps, same logging points in both arms, so it is paired like the rest. Two
#: arms that both solved the task say nothing on it either (``rules.compare.solved``): how fast each got to the
#: same answer depends on the budget and the learning rate more than on the encoding.
AUC = Metric("auc", "area under the learning curve", True, (0.0, 1.0), tolerance=1e-3)


#: The task's own metrics, which a comparison of two arms that both solved the task leaves silent
#: (``rules.compare.solved``). Not accuracy at a longer size (C17: a task solved at n may still fail at 2n), nor
#: measures of what the trained models hold (probes, overlaps, shares: C8 probes decoders that learned their task).
SOLVED_SILENCES = ("acc", "loss", "auc")


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


#: The relative margin and the solved rule in words, for the claims' rule texts (``Claim.rule_for`` fills
#: ``{loss_margin}`` and ``{solved}``), so docs/claims.md states the rule the code reads.
LOSS_MARGIN_TEXT = (
    f"±{RELATIVE_MARGIN:.0%} relative loss, read on per-seed log-ratios: |log(A / B)| ≤ log {1 + RELATIVE_MARGIN:g}"
)
#: How a rule drawn from trained arms reads language models (``families.chain_for``, ``Side.learned``), appended to
#: those rules in the report, so a reader of a language-model row sees the metric and the floor it was read on.
LM_RULE_TEXT = (
    "language models (charlm, mlm, wordlm) are decided on bits per byte instead, on the same margin, an arm counting "
    f"as learned when its held-out loss is at most {LM_LEARNED_SHARE:.0%} of the context-free (unigram) baseline's"
)
SOLVED_TEXT = (
    f"a comparison whose arms both solved the task (each mean accuracy within {100 * CEILING:g} pp of 100%, or each "
    f"mean held-out loss at most {LOSS_FLOOR} nats) is no information on accuracy, held-out loss and learning speed "
    "alike (language models excepted)"
)


def margin_for(m: Metric, margin: float) -> float:
    """The margin a difference on ``m`` is read against, in the units its differences are taken in: the study's
    ``margin`` for accuracy-like metrics; for relative ones SCIENCE.md's ±2% as a log-ratio, ``LOG_MARGIN``, the
    same whatever B's value (no margin is widened near a floor: two solved arms are no information instead)."""
    return LOG_MARGIN if m.relative else margin
