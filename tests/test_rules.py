"""The verdict engine on hand-made comparisons whose verdict is known.

Each case names the situation a careful reader worries about: a ceiling, two arms that solved the task, zero
spread, an arm below the floor, Holm turning a lone small p into inconclusive, a relative loss margin read on
log-ratios and never widened near a floor.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pelab.rules import (
    ACC,
    AUC,
    BPB,
    INCONCLUSIVE,
    LOG_MARGIN,
    LOSS,
    LOSS_FLOOR,
    NO_INFO,
    NOT_SUPPORTED,
    SUPPORTED,
    TOO_SMALL,
    Comparison,
    Side,
    family,
    from_diffs,
    holm,
    margin_for,
    paired_test,
)

FLOOR, MARGIN = 0.8, 0.01


def arm(label: str, acc: list[float], loss: list[float] | None = None, auc: list[float] | None = None) -> Side:
    values = {"acc": dict(enumerate(acc))}
    if loss is not None:
        values["loss"] = dict(enumerate(loss))
    if auc is not None:
        values["auc"] = dict(enumerate(auc))
    return Side(label, values, params=100, flops=200, run_ids=(f"{label}-run",))


def comp(a: Side, b: Side, **where: object) -> Comparison:
    return Comparison(where or {"task": "t"}, a, b)


# --- tests on one metric ------------------------------------------------------------------
def test_paired_test_matches_scipy() -> None:
    a, b = [0.90, 0.93, 0.95, 0.91], [0.85, 0.90, 0.86, 0.88]
    t = paired_test(comp(arm("a", a), arm("b", b)), ACC)
    ref = st.ttest_rel(a, b)
    assert t.info is None and math.isclose(t.mean, float(np.mean(np.subtract(a, b))))
    assert math.isclose(t.p_beyond(0.0), ref.pvalue, rel_tol=1e-9)
    lo, hi = t.interval()
    half = st.t.ppf(0.975, 3) * np.std(np.subtract(a, b), ddof=1) / 2
    assert math.isclose(lo, t.mean - half) and math.isclose(hi, t.mean + half)


def test_ceiling_carries_no_information() -> None:
    t = paired_test(comp(arm("a", [1.0, 1.0, 0.9995]), arm("b", [1.0, 1.0, 1.0])), ACC)
    assert t.info == "both arms solved the task (accuracy 100.0% and 100.0%)"


def test_zero_spread_carries_no_information() -> None:
    t = paired_test(comp(arm("a", [0.9, 0.8, 0.85]), arm("b", [0.88, 0.78, 0.83])), ACC)
    assert t.info is not None and "zero spread" in t.info


def test_relative_metric_and_orientation() -> None:
    # A's loss is 10% lower than B's on every seed, with a little spread: A better.
    t = paired_test(comp(arm("a", [0.9] * 3, [0.09, 0.18, 0.27]), arm("b", [0.9] * 3, [0.1, 0.2, 0.31])), LOSS)
    assert t.info is None and t.mean < 0
    lo, hi = t.oriented()
    assert lo > 0 and hi > lo  # oriented: positive = A better


def test_relative_differences_are_per_seed_log_ratios() -> None:
    """SCIENCE.md: relative differences of losses are per-seed log-ratios. The interval is the t-interval of
    log(A / B), shown as 100·(exp(x) − 1)%, so it can never cross −100% and needs no clip; A against B and B against
    A are mirror images (a ratio and its inverse are the same size), which (A − B) / B was not."""
    a, b = [0.50, 0.30, 0.80, 0.45, 0.61], [0.55, 0.31, 0.95, 0.50, 0.60]
    t = paired_test(comp(arm("a", [0.9] * 5, a), arm("b", [0.9] * 5, b)), LOSS)
    logs = np.log(np.divide(a, b))
    half = st.t.ppf(0.975, 4) * np.std(logs, ddof=1) / math.sqrt(5)
    assert t.diffs == pytest.approx(tuple(logs)) and t.interval() == pytest.approx((logs.mean() - half, logs.mean() +
                                                                                      half))  # fmt: skip
    back = paired_test(comp(arm("b", [0.9] * 5, b), arm("a", [0.9] * 5, a)), LOSS)
    assert back.interval() == pytest.approx((-t.interval()[1], -t.interval()[0]))
    assert LOSS.fmt_diff(math.log(0.905)) == "-9.5%" and LOSS.fmt_diff(math.log(2.0)) == "+100.0%"
    assert LOSS.fmt_diff(-50.0) == "-100.0%"  # a log-ratio as far below as it goes still shows above −100%
    assert LOSS.clip_diff(-5.0) == -5.0  # nothing to clip


def test_both_arms_solved_carry_no_information_on_any_metric() -> None:
    """SCIENCE.md, "Solved is not informative": two arms that both solved the task (each mean accuracy within the
    ceiling tolerance of 100%, or each mean held-out loss under 0.01 nats) tell nothing on accuracy, held-out loss or
    learning speed: quick's C6 read 0.016 against 0.028 nats as "−43%" for two arms at 100%. The row is no
    information, shown with both accuracies, and counts for nothing."""
    a = arm("a", [1.0] * 5, [0.010, 0.012, 0.011, 0.013, 0.014], [0.95, 0.96, 0.95, 0.97, 0.96])
    b = arm("b", [1.0] * 5, [0.020, 0.025, 0.022, 0.021, 0.030], [0.90, 0.90, 0.91, 0.90, 0.90])
    for m in (ACC, LOSS, AUC):
        assert paired_test(comp(a, b), m).info == "both arms solved the task (accuracy 100.0% and 100.0%)"
    f = family([comp(a, b)], ["acc", "loss", "auc"], FLOOR, MARGIN)
    assert f.verdict == NO_INFO and f.rows[0].verdict == NO_INFO and f.rows[0].test is None
    assert f.rows[0].skipped == ["both arms solved the task (accuracy 100.0% and 100.0%)"]  # said once
    assert family([comp(a, b)], ["acc", "loss"], FLOOR, MARGIN, "equivalent", "all").verdict == NO_INFO
    # solved on held-out loss alone: both means under the 0.01-nat floor (accuracy a hair under the tolerance)
    c = arm("c", [0.985] * 5, [0.004, 0.005, 0.004, 0.006, 0.004])
    d = arm("d", [0.984, 0.986, 0.985, 0.984, 0.985], [0.008, 0.009, 0.007, 0.009, 0.008])
    info = paired_test(comp(c, d), ACC).info
    assert info == f"both arms solved the task (held-out loss 0.0046 and 0.0082 nats, at most {LOSS_FLOOR}; " \
        "accuracy 98.5% and 98.5%)"  # fmt: skip
    # one arm off the ceiling: accuracy informs, as before
    off = arm("e", [1.0, 0.97, 0.98, 0.96, 0.97])
    assert paired_test(comp(off, arm("b", [1.0] * 5)), ACC).info is None
    # measures of the trained models (a probe) are not the task's metrics: two solved decoders are still probed
    probe_a = Side("a", {"acc": dict.fromkeys(range(3), 1.0), "probe": {0: 0.6, 1: 0.62, 2: 0.65}})
    probe_b = Side("b", {"acc": dict.fromkeys(range(3), 1.0), "probe": {0: 0.1, 1: 0.12, 2: 0.11}})
    from pelab.rules import PROBE

    assert paired_test(comp(probe_a, probe_b), PROBE).info is None


def test_language_models_are_never_solved() -> None:
    """A language model is decided on bits per byte, which has no ceiling: two LMs are never "solved"."""
    lm = {"baseline_loss": dict.fromkeys(range(5), 3.2), "acc": dict.fromkeys(range(5), 1.0)}
    a = Side("a", {**lm, "bpb": dict(enumerate([2.50, 2.52, 2.49, 2.51, 2.50])),
                   "loss": dict.fromkeys(range(5), 0.005)})  # fmt: skip
    b = Side("b", {**lm, "bpb": dict(enumerate([2.60, 2.61, 2.62, 2.60, 2.59])),
                   "loss": dict.fromkeys(range(5), 0.005)})  # fmt: skip
    assert paired_test(comp(a, b), BPB).info is None


# --- Holm --------------------------------------------------------------------------------
def test_holm_by_hand() -> None:
    # m = 3, alpha 0.05: thresholds 0.0167, 0.025, 0.05 in order of p.
    assert [r for r, _ in holm([0.01, 0.02, 0.04])] == [True, True, True]
    assert [r for r, _ in holm([0.02, 0.01, 0.04])] == [True, True, True]
    assert [r for r, _ in holm([0.02, 0.03, 0.04])] == [False, False, False]  # 0.02 > 0.0167 stops it
    assert [r for r, _ in holm([0.001, 0.03, math.nan])] == [True, False, False]
    assert [round(lv, 4) for _, lv in holm([0.01, 0.02, 0.04])] == [round(1 - 0.05 / 3, 4), 0.975, 0.95]


# --- families: every branch ----------------------------------------------------------------
WIN = ([0.90, 0.93, 0.95, 0.92, 0.94], [0.85, 0.86, 0.88, 0.85, 0.86])  # clear win, spread
TIE = ([0.900, 0.905, 0.902, 0.898, 0.903], [0.901, 0.903, 0.900, 0.900, 0.902])  # inside ±1 pp
NOISY = ([0.95, 0.85, 0.99, 0.82, 0.90], [0.90, 0.90, 0.90, 0.90, 0.91])  # could go either way


def test_directional_supported_on_a_clear_win() -> None:
    f = family([comp(arm("a", WIN[0]), arm("b", WIN[1]))], ["acc", "loss"], FLOOR, MARGIN)
    assert f.verdict == SUPPORTED and f.rows[0].test.metric is ACC


def test_directional_not_supported_the_other_way_and_inside_margin() -> None:
    assert family([comp(arm("a", WIN[1]), arm("b", WIN[0]))], ["acc"], FLOOR, MARGIN).verdict == NOT_SUPPORTED
    assert family([comp(arm("a", TIE[0]), arm("b", TIE[1]))], ["acc"], FLOOR, MARGIN).verdict == NOT_SUPPORTED


def test_directional_inconclusive() -> None:
    assert family([comp(arm("a", NOISY[0]), arm("b", NOISY[1]))], ["acc"], FLOOR, MARGIN).verdict == INCONCLUSIVE


def test_below_floor_is_budget_too_small() -> None:
    f = family([comp(arm("a", [0.5, 0.6, 0.55]), arm("b", [0.3, 0.35, 0.31]))], ["acc"], FLOOR, MARGIN)
    assert f.verdict == TOO_SMALL and f.rows[0].verdict == TOO_SMALL


def test_below_floor_arm_does_not_count_beside_learned_ones() -> None:
    rows = [comp(arm("a", [0.5, 0.6, 0.55]), arm("b", [0.3, 0.35, 0.31])), comp(arm("a", TIE[0]), arm("b", TIE[1]))]
    f = family(rows, ["acc"], FLOOR, MARGIN)
    assert f.verdict == NOT_SUPPORTED and [r.verdict for r in f.rows] == [TOO_SMALL, NOT_SUPPORTED]


def test_one_arm_below_the_floor_takes_no_part_unless_its_failure_is_the_claim() -> None:
    """SCIENCE.md: "a verdict is only drawn from arms that learned their task". A comparison where one arm learned
    and the other did not is budget too small (shown, with which arm), whichever way it points; a claim whose
    content is that one arm fails (C18's NoPE, C19's added codes) counts it on the paired interval."""
    learned, failed = arm("a", [0.95, 0.96, 0.94, 0.95, 0.96]), arm("b", [0.50, 0.55, 0.52, 0.51, 0.53])
    f = family([comp(learned, failed)], ["acc"], FLOOR, MARGIN)
    assert f.verdict == TOO_SMALL
    assert f.rows[0].skipped == ["b below the floor (a verdict needs both arms to have learned)"]
    assert family([comp(failed, learned)], ["acc"], FLOOR, MARGIN).verdict == TOO_SMALL
    assert family([comp(learned, failed)], ["acc"], FLOOR, MARGIN, failure_is_evidence=True).verdict == SUPPORTED
    assert family([comp(failed, learned)], ["acc"], FLOOR, MARGIN, failure_is_evidence=True).verdict == NOT_SUPPORTED
    both_low = comp(arm("a", [0.5, 0.6, 0.55]), arm("b", [0.3, 0.35, 0.31]))
    assert family([both_low], ["acc"], FLOOR, MARGIN, failure_is_evidence=True).verdict == TOO_SMALL


def test_zero_spread_on_accuracy_falls_back_to_loss() -> None:
    # Two arms off the ceiling with the same accuracy on every seed (zero spread): accuracy says nothing, and held-out
    # loss decides; the arms did not solve the task, so the fallback stands.
    a = arm("a", [0.9, 0.92, 0.91, 0.9], [0.20, 0.22, 0.21, 0.23])
    b = arm("b", [0.9, 0.92, 0.91, 0.9], [0.30, 0.35, 0.32, 0.31])
    f = family([comp(a, b)], ["acc", "loss"], FLOOR, MARGIN)
    assert f.verdict == SUPPORTED
    assert f.rows[0].test.metric is LOSS and "zero spread" in f.rows[0].skipped[0]


def test_solved_is_judged_on_each_arms_mean() -> None:
    # Two arms whose mean losses sit below 0.01 nats, one seed a hair above: still solved (the quick report once read
    # 0.0090 against 0.0105 as "-14%"). An arm whose mean is above the floor, off the accuracy ceiling, is not.
    a = arm("a", [0.985] * 5, [0.0080, 0.0103, 0.0085, 0.0090, 0.0092], [0.90] * 5)
    b = arm("b", [0.986] * 5, [0.0098, 0.0101, 0.0099, 0.0097, 0.0096], [0.80, 0.82, 0.81, 0.79, 0.80])
    assert paired_test(comp(a, b), LOSS).info.startswith("both arms solved the task (held-out loss 0.0090 and 0.0098")
    above = arm("b", [0.986] * 5, [0.0105, 0.0110, 0.0102, 0.0108, 0.0104])
    assert paired_test(comp(a, above), LOSS).info is None
    # Accuracy's ceiling is judged the same way, within the margin of 100%: both means within a point of it can
    # only read "equal", the ceiling's doing (one seed at 99% does not make a solved pair informative) ...
    assert paired_test(comp(arm("a", [1.0, 1.0, 0.99]), arm("b", [1.0] * 3)), ACC).info == (
        "both arms solved the task (accuracy 99.7% and 100.0%)"
    )
    # ... while an arm whose mean is a point or more below it makes accuracy inform.
    assert paired_test(comp(arm("a", [1.0, 0.97, 0.98]), arm("b", [1.0] * 3)), ACC).info is None


def test_ceiling_everywhere_is_no_information() -> None:
    a, b = arm("a", [1.0] * 3), arm("b", [1.0] * 3)
    f = family([comp(a, b)], ["acc"], FLOOR, MARGIN)
    assert f.verdict == NO_INFO and f.rows[0].verdict == NO_INFO
    # ... and never counts as evidence for an equivalence either
    assert family([comp(a, b)], ["acc"], FLOOR, MARGIN, kind="equivalent", combine="all").verdict == NO_INFO


def test_holm_turns_a_lone_small_p_into_inconclusive() -> None:
    # One row significant at 95% alone (p ~ 0.03), four rows of noise: with Holm over 5, not enough.
    lone = comp(arm("a", [0.92, 0.91, 0.95, 0.91, 0.93]), arm("b", [0.90, 0.90, 0.90, 0.90, 0.90]))
    t = paired_test(lone, ACC)
    assert 0.01 < t.p_beyond(0.0) < 0.05
    alone = family([lone], ["acc"], FLOOR, MARGIN)
    assert alone.verdict == SUPPORTED
    noise = [comp(arm("a", NOISY[0]), arm("b", NOISY[1])) for _ in range(4)]
    f = family([lone, *noise], ["acc"], FLOOR, MARGIN)
    assert f.verdict == INCONCLUSIVE and f.rows[0].verdict == INCONCLUSIVE
    assert f.rows[0].level == pytest.approx(1 - 0.05 / 5)
    assert "Holm" in f.correction and "5" in f.correction


def test_equivalence_all() -> None:
    tie = comp(arm("a", TIE[0]), arm("b", TIE[1]))
    assert family([tie, tie], ["acc"], FLOOR, MARGIN, kind="equivalent", combine="all").verdict == SUPPORTED
    far = comp(arm("a", WIN[0]), arm("b", WIN[1]))
    assert family([tie, far], ["acc"], FLOOR, MARGIN, kind="equivalent", combine="all").verdict == NOT_SUPPORTED
    noisy = comp(arm("a", NOISY[0]), arm("b", NOISY[1]))
    assert family([tie, noisy], ["acc"], FLOOR, MARGIN, kind="equivalent", combine="all").verdict == INCONCLUSIVE


#: Accuracy that tells two arms nothing without their having solved the task: the same on every seed (zero spread).
SAME = [0.90, 0.92, 0.91, 0.90, 0.93]


def test_equivalence_on_relative_loss_margin() -> None:
    # Accuracy with zero spread; losses within 0.5% of each other: equivalent within ±2%.
    a = arm("a", SAME, [0.100, 0.2005, 0.150, 0.1201, 0.180])
    b = arm("b", SAME, [0.1002, 0.200, 0.1503, 0.120, 0.1803])
    f = family([comp(a, b)], ["acc", "loss"], FLOOR, MARGIN, kind="equivalent", combine="all")
    assert f.verdict == SUPPORTED and f.rows[0].test.metric is LOSS


def test_the_loss_margin_is_two_percent_as_a_log_ratio_and_never_widened_near_a_floor() -> None:
    """SCIENCE.md: ±2% relative loss, none widened near a floor. It is read as |log(A / B)| ≤ log(1.02), whatever
    B's value: 0.014 against 0.012 nats is +17%, far outside it (the rule this replaces called it "within a margin of
    0.01 nats", ±78% of B there); 0.52 against 0.50 (+4%) is outside it too; 0.501 against 0.500 is inside."""
    assert margin_for(LOSS, MARGIN) == LOG_MARGIN == pytest.approx(math.log(1.02))
    assert margin_for(BPB, MARGIN) == LOG_MARGIN and margin_for(ACC, MARGIN) == MARGIN
    near = comp(arm("a", SAME, [0.0140, 0.0145, 0.0138, 0.0142, 0.0141]),
                arm("b", SAME, [0.0120, 0.0122, 0.0119, 0.0121, 0.0118]))  # fmt: skip
    f = family([near], ["acc", "loss"], FLOOR, MARGIN, kind="equivalent", combine="all")
    assert f.verdict == NOT_SUPPORTED and f.rows[0].test.metric is LOSS and not f.rows[0].notes
    b = arm("b", SAME, [0.500, 0.501, 0.499, 0.500, 0.502])
    far = comp(arm("a", SAME, [0.520, 0.522, 0.519, 0.521, 0.520]), b)
    assert family([far], ["acc", "loss"], FLOOR, MARGIN, kind="equivalent", combine="all").verdict == NOT_SUPPORTED
    close = comp(arm("a", SAME, [0.501, 0.502, 0.500, 0.501, 0.503]), b)
    assert family([close], ["acc", "loss"], FLOOR, MARGIN, kind="equivalent", combine="all").verdict == SUPPORTED


def test_a_directional_row_inside_the_margin_on_three_seeds_says_inside() -> None:
    close = comp(arm("a", [0.901, 0.899, 0.902]), arm("b", [0.900, 0.900, 0.901]))
    f = family([close], ["acc"], FLOOR, MARGIN)
    assert f.verdict == INCONCLUSIVE and f.rows[0].notes == [
        "inside the margin, but equivalence needs ≥ 5 seeds (3 here)"
    ]


def test_a_sure_but_negligible_win_is_no_win() -> None:
    # A's loss 0.5% below B's on every seed: the interval excludes 0 and lies inside the ±2% margin. Not a win:
    # with 5 seeds "not supported", with 3 "inconclusive" (the conclusion rests on the margin).
    a5 = arm("a", SAME, [0.4975, 0.4980, 0.4970, 0.4976, 0.4972])
    b5 = arm("b", SAME, [0.5000, 0.5004, 0.4996, 0.5001, 0.4998])
    f = family([comp(a5, b5)], ["acc", "loss"], FLOOR, MARGIN)
    assert f.rows[0].test.metric is LOSS and f.rows[0].test.oriented()[0] > 0
    assert f.verdict == NOT_SUPPORTED
    a3 = arm("a", SAME[:3], [0.4975, 0.4980, 0.4970])
    b3 = arm("b", SAME[:3], [0.5000, 0.5004, 0.4996])
    assert family([comp(a3, b3)], ["acc", "loss"], FLOOR, MARGIN).verdict == INCONCLUSIVE
    # A gap beyond the ±2% margin: a win.
    a = arm("a", SAME[:3], [0.40, 0.41, 0.395])
    b = arm("b", SAME[:3], [0.51, 0.52, 0.505])
    assert family([comp(a, b)], ["acc", "loss"], FLOOR, MARGIN).verdict == SUPPORTED


def test_not_worse_when_better_beyond_the_interval_needs_no_five_seeds() -> None:
    # 3 seeds, A clearly better: "not worse" holds by the interval alone (no margin argument, so no seed minimum);
    # A within the margin but not clearly better stays inconclusive at 3 seeds.
    better = comp(arm("a", [0.95, 0.96, 0.97]), arm("b", [0.90, 0.90, 0.91]))
    assert family([better], ["acc"], FLOOR, MARGIN, "not_worse", "all").verdict == SUPPORTED
    close = comp(arm("a", [0.901, 0.899, 0.902]), arm("b", [0.900, 0.900, 0.901]))
    f = family([close], ["acc"], FLOOR, MARGIN, "not_worse", "all")
    assert f.verdict == INCONCLUSIVE and "needs ≥ 5 seeds" in f.rows[0].notes[0]


LOW3, HIGH3 = [0.90, 0.90, 0.91], [0.95, 0.96, 0.97]
LOW5, HIGH5 = LOW3 + [0.90, 0.91], HIGH3 + [0.95, 0.96]


@pytest.mark.parametrize(("kind", "a_high"), [("equivalent", True), ("equivalent", False), ("not_worse", False)])
def test_a_test_against_the_margin_is_not_refuted_on_three_seeds(kind: str, a_high: bool) -> None:
    # 3 seeds, the interval wholly outside the margin (A ahead or behind): SCIENCE.md wants 5 seeds wherever an
    # equivalence is tested, and "not worse" is an equivalence with one side (C18's causal half at the quick
    # preset's 3 seeds), so each stays inconclusive and says why; with 5 seeds the same gap refutes it.
    a, b = (HIGH3, LOW3) if a_high else (LOW3, HIGH3)
    f = family([comp(arm("a", a), arm("b", b))], ["acc"], FLOOR, MARGIN, kind, "all")
    assert f.verdict == INCONCLUSIVE and f.rows[0].notes == [
        "outside the margin, but equivalence needs ≥ 5 seeds (3 here)"
    ]
    a, b = (HIGH5, LOW5) if a_high else (LOW5, HIGH5)
    assert family([comp(arm("a", a), arm("b", b))], ["acc"], FLOOR, MARGIN, kind, "all").verdict == NOT_SUPPORTED


def test_not_worse() -> None:
    assert family([comp(arm("a", TIE[0]), arm("b", TIE[1]))], ["acc"], FLOOR, MARGIN, "not_worse", "all").verdict == (
        SUPPORTED
    )
    assert family([comp(arm("a", WIN[1]), arm("b", WIN[0]))], ["acc"], FLOOR, MARGIN, "not_worse", "all").verdict == (
        NOT_SUPPORTED
    )


def test_from_diffs_zero_spread_and_too_few() -> None:
    assert from_diffs(ACC, [0.1, 0.1, 0.1]).info is not None
    assert from_diffs(ACC, [0.1]).info is not None
    assert from_diffs(ACC, [0.1, 0.12, 0.11]).info is None


def test_equivalence_needs_five_seeds() -> None:
    # The same tie, from three seeds and from five: SCIENCE.md asks for at least 5 wherever an equivalence is tested.
    three = comp(arm("a", TIE[0][:3]), arm("b", TIE[1][:3]))
    five = comp(arm("a", TIE[0]), arm("b", TIE[1]))
    f3 = family([three], ["acc"], FLOOR, MARGIN, kind="equivalent", combine="all")
    assert f3.verdict == INCONCLUSIVE and "5 seeds" in f3.rows[0].describe()
    assert family([five], ["acc"], FLOOR, MARGIN, kind="equivalent", combine="all").verdict == SUPPORTED
    # ... and so does 'no effect' (inside the margin) as a refutation of a directional claim.
    assert family([three], ["acc"], FLOOR, MARGIN).verdict == INCONCLUSIVE
    assert family([five], ["acc"], FLOOR, MARGIN).verdict == NOT_SUPPORTED


def test_every_comparison_must_show_a_win_so_one_inside_the_margin_refutes_on_five_seeds() -> None:
    """'A beats B on every comparison' (combine="all"): a row whose interval lies wholly inside the margin on 5
    seeds refutes it, Holm-corrected like a row that goes the other way (its p is the two one-sided tests'). On
    3 seeds the margin may not decide, so it stays inconclusive."""
    win = comp(arm("a", [0.95, 0.97, 0.96, 0.94, 0.96]), arm("b", [0.85, 0.86, 0.87, 0.85, 0.84]))
    flat = comp(arm("a", [0.901, 0.902, 0.900, 0.901, 0.902]), arm("b", [0.900, 0.901, 0.900, 0.902, 0.901]))
    f = family([win, flat], ["acc"], FLOOR, MARGIN, kind="better", combine="all")
    assert [r.verdict for r in f.rows] == [SUPPORTED, NOT_SUPPORTED] and f.verdict == NOT_SUPPORTED
    assert f.rows[1].level == pytest.approx(1 - 0.05 / 2)  # refuted at its Holm level across the 2 rows
    three = comp(arm("a", [0.901, 0.902, 0.900]), arm("b", [0.900, 0.901, 0.900]))
    assert family([win, three], ["acc"], FLOOR, MARGIN, kind="better", combine="all").verdict == INCONCLUSIVE


# --- a second opinion on accuracy wins ----------------------------------------------------
def test_an_accuracy_win_the_loss_does_not_show_says_so_and_keeps_its_verdict() -> None:
    # A wins on accuracy beyond the interval; its loss leans its way but the interval spans 0 (C9's row in
    # full): the verdict stands, and the row says the loss does not confirm it.
    a = arm("a", [0.83, 0.82, 0.81, 0.82, 0.83], [0.50, 0.47, 0.52, 0.49, 0.51])
    b = arm("b", [0.80, 0.80, 0.79, 0.80, 0.81], [0.50, 0.49, 0.50, 0.50, 0.49])
    f = family([comp(a, b)], ["acc", "loss"], FLOOR, MARGIN)
    assert f.verdict == SUPPORTED
    assert [n for n in f.rows[0].notes if "held-out loss" in n][0].startswith("held-out loss does not confirm it (")
    # The loss against it beyond the interval: "contradicts".
    worse = arm("a", [0.83, 0.82, 0.81, 0.82, 0.83], [0.55, 0.56, 0.55, 0.57, 0.56])
    f = family([comp(worse, b)], ["acc", "loss"], FLOOR, MARGIN)
    assert f.verdict == SUPPORTED and any(n.startswith("held-out loss contradicts it") for n in f.rows[0].notes)
    # The loss agrees beyond the interval: nothing to say.
    agree = arm("a", [0.83, 0.82, 0.81, 0.82, 0.83], [0.40, 0.41, 0.40, 0.42, 0.41])
    f = family([comp(agree, b)], ["acc", "loss"], FLOOR, MARGIN)
    assert f.verdict == SUPPORTED and not f.rows[0].notes
    # A family whose chain has no loss (accuracy only) has no second opinion to give.
    assert not family([comp(a, b)], ["acc"], FLOOR, MARGIN).rows[0].notes
