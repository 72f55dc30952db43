"""The verdict engine: deciding metrics, paired tests, Holm–Bonferroni, and the rules of SCIENCE.md.

Everything here is a pure function of typed evidence, so every branch of every rule
is unit-tested on hand-made comparisons whose verdict is known (``tests/test_rules.py``)
and a verdict can be trusted without rerunning a study. It sits below the report and
below ``pelab.pretrained`` (whose C9 summary reads the report's own rule), above the study.

The pieces, bottom up, one module each:

* ``verdicts``: the words a verdict can be.
* ``metrics``: ``Metric``, what a run is scored on (accuracy, held-out loss, learning speed), which way is
  better, its range, and whether its margin is absolute (±1 pp of accuracy) or relative (±2% of loss or bits per
  byte, read on per-seed log-ratios log(A / B): |log(A / B)| ≤ log(1.02); never widened near a floor).
* ``compare``: ``Side`` / ``Comparison``, two arms that share everything but the compared axis,
  with per-seed values of every metric, so differences are paired by seed; and ``Test``, one
  comparison on one metric: the paired differences, their mean, the t-interval at any confidence,
  the p-value; or why the metric carries **no information** here (both arms at a ceiling or floor
  of the metric, or paired differences with zero spread), in which case the comparison falls back
  to the claim's next metric; or why none of the task's metrics does (``solved``: both arms solved the task,
  SCIENCE.md's "Solved is not informative").
* ``resolution``: what an interval establishes, whatever the verdict.
* ``rows``: ``Row`` / ``Family``, one comparison's outcome and a claim's comparisons together; Holm's
  step-down; the rules of SCIENCE.md on one interval.
* ``families``: every comparison behind one claim, each decided on the first informative metric of
  the claim's chain, with Holm–Bonferroni across them wherever the claim says "on some comparison";
  under sequential seeds, every seed read, a decision at an interim look standing only where all the seeds
  its arms got later confirm it (``decide``); the family's verdict.

Orientation: a rule always asks about "A is better than B" (or "A ≈ B"). For a metric
where lower is better (loss), the difference is turned round before the rule reads it,
so a positive number always means A better.

The names below are the engine's public face: ``from pelab.rules import Comparison, Side, family``.
"""

from __future__ import annotations

from pelab.rules.compare import SHORT, Comparison, Side, Test, from_diffs, paired_test, setting_text, solved
from pelab.rules.families import (
    CONFIRMED,
    EARLY,
    FLOOR_POLICY,
    NOT_CONFIRMED,
    Evidence,
    chain_for,
    choose_test,
    combine_verdicts,
    decide,
    decide_some_group,
    enters,
    evidence,
    family,
    row_margin,
    sequential_note,
    swapped,
)
from pelab.rules.metrics import (
    ACC,
    ALPHA,
    AUC,
    BASELINE,
    BPB,
    LM_LEARNED_SHARE,
    LOG_MARGIN,
    LOSS,
    LOSS_FLOOR,
    METRICS,
    MIN_EQUIVALENCE_SEEDS,
    OVERLAP,
    PROBE,
    RELATIVE_MARGIN,
    SHARE,
    SOLVED_SILENCES,
    Metric,
    margin_for,
    metric,
)
from pelab.rules.rows import LOSS_DOUBTS, Family, Kind, Row, difference_text, holm, second_opinion
from pelab.rules.verdicts import (
    ERROR,
    EXACT,
    INCONCLUSIVE,
    NO_INFO,
    NOT_RUN,
    NOT_SUPPORTED,
    PARTLY_RUN,
    REPORTED,
    SUPPORTED,
    TOO_SMALL,
    UNCONFIRMED,
    VERDICTS,
)

__all__ = [
    "ACC",
    "ALPHA",
    "AUC",
    "BASELINE",
    "BPB",
    "CONFIRMED",
    "Comparison",
    "ERROR",
    "EXACT",
    "Evidence",
    "EARLY",
    "FLOOR_POLICY",
    "Family",
    "INCONCLUSIVE",
    "Kind",
    "LM_LEARNED_SHARE",
    "LOG_MARGIN",
    "LOSS",
    "LOSS_DOUBTS",
    "LOSS_FLOOR",
    "METRICS",
    "MIN_EQUIVALENCE_SEEDS",
    "Metric",
    "NOT_CONFIRMED",
    "NOT_RUN",
    "NOT_SUPPORTED",
    "PARTLY_RUN",
    "NO_INFO",
    "OVERLAP",
    "PROBE",
    "RELATIVE_MARGIN",
    "REPORTED",
    "Row",
    "SHARE",
    "SHORT",
    "SOLVED_SILENCES",
    "SUPPORTED",
    "Side",
    "TOO_SMALL",
    "Test",
    "UNCONFIRMED",
    "VERDICTS",
    "chain_for",
    "choose_test",
    "combine_verdicts",
    "decide",
    "decide_some_group",
    "difference_text",
    "enters",
    "evidence",
    "family",
    "from_diffs",
    "holm",
    "margin_for",
    "metric",
    "paired_test",
    "row_margin",
    "second_opinion",
    "sequential_note",
    "setting_text",
    "solved",
    "swapped",
]
