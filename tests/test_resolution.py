"""The resolution of a comparison (SCIENCE.md, "Resolution"), on hand-made intervals whose answer is a formula.

An equivalence's resolution is the smallest margin that would decide it, max(|lo|, |hi|); a non-inferiority's is
how far A may still trail, max(0, −lo); a direction's is the largest effect the interval allows either way. The
checks below also ask the verdict engine itself: at a margin just above the stated resolution the row is decided,
just below it is not, so the number means what the sentence says.
"""

from __future__ import annotations

import math

import pytest
from scipy import stats as st

from pelab.report.tables import row_records
from pelab.rules import ACC, INCONCLUSIVE, LOSS, NOT_SUPPORTED, SUPPORTED, TOO_SMALL, Comparison, Side, family
from pelab.rules.resolution import claim_resolution, resolve

FLOOR, MARGIN = 0.8, 0.01


def arm(label: str, acc: list[float]) -> Side:
    return Side(label, {"acc": dict(enumerate(acc))}, params=100, flops=200)


def comp(a: list[float], b: list[float]) -> Comparison:
    return Comparison({"task": "t"}, arm("a", a), arm("b", b))


# A − B per seed: +0.03, −0.01, +0.02, 0.00, +0.015 (mean +0.011): the interval straddles 0 and the ±1 pp margin.
A5, B5 = [0.93, 0.89, 0.92, 0.90, 0.915], [0.90, 0.90, 0.90, 0.90, 0.90]


def t_bounds(diffs: list[float], level: float) -> tuple[float, float]:
    """The t-interval by hand: mean ± t(level, n − 1) · sd / √n."""
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = float(st.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


# --- the pure function ------------------------------------------------------------------
def test_equivalence_is_the_smallest_symmetric_margin() -> None:
    r = resolve("equivalent", ACC, (-0.015, 0.031), 0.95)
    assert r is not None and r.reading == "equivalence"
    assert r.within == pytest.approx(0.031) and r.margin_needed == pytest.approx(0.031)
    assert (r.a_by_at_most, r.b_by_at_most) == pytest.approx((0.031, 0.015))
    assert r.text == "within ±3.1 pp accuracy at 95%"
    apart = resolve("equivalent", ACC, (0.004, 0.031), 0.95)
    assert apart is not None and apart.text == "within ±3.1 pp accuracy at 95% (apart by at least 0.4 pp)"


def test_non_inferiority_is_how_far_a_may_trail() -> None:
    r = resolve("not_worse", ACC, (-0.023, 0.010), 0.95)
    assert r is not None and r.margin_needed == pytest.approx(0.023)
    assert r.text == "A trails B by at most 2.3 pp accuracy at 95%"
    better = resolve("not_worse", ACC, (0.004, 0.02), 0.95)
    assert better is not None and better.margin_needed == 0.0 and better.text.startswith("A better by at least 0.4 pp")


def test_direction_gives_the_largest_effect_either_way() -> None:
    r = resolve("better", ACC, (-0.015, 0.031), 1 - 0.05 / 3)
    assert r is not None and r.reading == "direction"
    assert r.text == "within ±3.1 pp accuracy at 98.33% (A better by at most 3.1 pp, B by at most 1.5 pp)"
    win = resolve("beyond_margin", ACC, (0.004, 0.031), 0.95)
    assert win is not None and win.text == "A better by 0.4 pp to 3.1 pp accuracy at 95%"
    loss = resolve("better", ACC, (-0.031, -0.004), 0.95)
    assert loss is not None and loss.b_by_at_most == pytest.approx(0.031) and loss.a_by_at_most == 0.0
    assert loss.text == "B better by 0.4 pp to 3.1 pp accuracy at 95%"


def test_lower_is_better_metrics_are_turned_round_and_relative() -> None:
    # Held-out loss: raw log(A / B) in [log 0.95, log 1.02]: A's loss down to 0.95 times B's (better), or up to 1.02
    # times (worse).
    r = resolve("not_worse", LOSS, (math.log(0.95), math.log(1.02)), 0.95)
    assert r is not None and (r.lo, r.hi) == pytest.approx((-math.log(1.02), -math.log(0.95)))
    assert r.text == "A trails B by at most 2.0% of B's held-out loss at 95%"


def test_below_five_seeds_the_text_says_no_margin_decides_yet() -> None:
    r = resolve("equivalent", ACC, (-0.015, 0.031), 0.95, n=3, min_seeds=5)
    assert r is not None and r.text == "within ±3.1 pp accuracy at 95% (a margin decides only on ≥ 5 seeds; 3 here)"
    # a direction the interval already shows needs no margin, and so no fifth seed
    win = resolve("better", ACC, (0.004, 0.031), 0.95, n=3, min_seeds=5)
    assert win is not None and "seeds" not in win.text
    trails = resolve("not_worse", ACC, (-0.031, -0.004), 0.95, n=3, min_seeds=5)  # refuting it rests on the margin
    assert trails is not None and trails.text.endswith("(a margin decides only on ≥ 5 seeds; 3 here)")
    row = family([comp(A5[:3], B5[:3])], ["acc"], FLOOR, MARGIN, kind="equivalent", combine="all").rows[0]
    assert row.resolution is not None and row.resolution.text.endswith("(a margin decides only on ≥ 5 seeds; 3 here)")


def test_no_interval_no_resolution() -> None:
    assert resolve("equivalent", ACC, (math.nan, math.nan), 0.95) is None


# --- on rows the verdict engine decided ---------------------------------------------------
def test_a_rows_resolution_reads_the_interval_at_its_level() -> None:
    diffs = [a - b for a, b in zip(A5, B5, strict=True)]
    f = family([comp(A5, B5)], ["acc"], FLOOR, MARGIN, kind="equivalent", combine="all")
    row = f.rows[0]
    assert row.verdict == INCONCLUSIVE and row.resolution is not None
    lo, hi = t_bounds(diffs, 0.95)
    assert row.resolution.within == pytest.approx(max(abs(lo), abs(hi)))
    # Holm: five copies of one comparison, claimed "on some": each read at its own Holm level, and so its resolution.
    f = family([comp(A5, B5)] * 5, ["acc"], FLOOR, MARGIN, kind="better", combine="any")
    assert all(r.resolution is not None and r.resolution.level == r.level for r in f.rows)
    for r in f.rows:
        lo, hi = t_bounds(diffs, r.level)
        assert (r.resolution.lo, r.resolution.hi) == pytest.approx((lo, hi))


@pytest.mark.parametrize("kind", ["equivalent", "not_worse"])
def test_the_stated_margin_is_where_the_verdict_turns(kind: str) -> None:
    """At a margin a hair above the resolution the same row is supported; a hair below, not: the resolution is the
    smallest margin at which it would be decided."""
    row = family([comp(A5, B5)], ["acc"], FLOOR, MARGIN, kind=kind, combine="all").rows[0]
    assert row.resolution is not None
    needed = row.resolution.margin_needed
    above = family([comp(A5, B5)], ["acc"], FLOOR, needed * 1.001, kind=kind, combine="all")
    below = family([comp(A5, B5)], ["acc"], FLOOR, needed * 0.999, kind=kind, combine="all")
    assert above.verdict == SUPPORTED and below.verdict == INCONCLUSIVE


def test_a_directional_rows_bound_is_where_no_effect_would_be_read() -> None:
    row = family([comp(A5, B5)], ["acc"], FLOOR, MARGIN).rows[0]
    assert row.verdict == INCONCLUSIVE and row.resolution is not None
    wider = family([comp(A5, B5)], ["acc"], FLOOR, row.resolution.within * 1.001)
    assert wider.verdict == NOT_SUPPORTED  # inside the margin on 5 seeds: no effect worth the name


def test_the_resolution_never_changes_a_verdict() -> None:
    # the rows' verdicts and intervals are those of the engine; the resolution is read from them afterwards
    for kind in ("better", "beyond_margin", "equivalent", "not_worse"):
        f = family([comp(A5, B5), comp([0.5] * 5, [0.4, 0.5, 0.45, 0.3, 0.5])], ["acc"], FLOOR, MARGIN, kind=kind)
        assert f.rows[1].verdict == TOO_SMALL and f.rows[1].resolution is None
        assert f.rows[0].resolution is not None and f.rows[0].kind == kind


# --- a claim's summary --------------------------------------------------------------------
def test_a_claims_resolution_is_the_widest_undecided_row() -> None:
    tight = [0.905, 0.899, 0.902, 0.90, 0.901]
    f = family([comp(A5, B5), comp(tight, B5)], ["acc"], FLOOR, MARGIN, kind="equivalent", combine="all")
    records = row_records(f, "x")
    assert [r["verdict"] for r in records] == [INCONCLUSIVE, SUPPORTED]
    assert records[0]["resolution"]["text"] == f.rows[0].resolution.text
    res = claim_resolution(records, INCONCLUSIVE)
    assert res is not None and res["of"] == "undecided" and res["rows"] == 1
    assert res["within"]["accuracy"] == pytest.approx(f.rows[0].resolution.within)
    assert res["text"] == f"its undecided comparison lies within ±{f.rows[0].resolution.within_text} at 95%"
    # nothing open: the widest of every row with an interval
    decided = claim_resolution(records[1:], INCONCLUSIVE)
    assert decided is not None and decided["of"] == "all" and decided["text"].startswith("its comparison lies within ±")
    assert claim_resolution([{**records[0], "resolution": None}], INCONCLUSIVE) is None
    # a comparison read both ways (C6's two families: the same runs, A and B exchanged) counts once
    one = {**records[0], "a_runs": ["r1"], "b_runs": ["r2"]}
    mirror = {**records[0], "a_runs": ["r2"], "b_runs": ["r1"], "family": "y"}
    other = {**records[0], "a_runs": ["r3"], "b_runs": ["r2"]}
    assert claim_resolution([one, mirror], INCONCLUSIVE)["rows"] == 1
    assert claim_resolution([one, mirror, other], INCONCLUSIVE)["rows"] == 2


def test_intervals_are_shown_within_the_metrics_range() -> None:
    """SCIENCE.md: intervals are shown within the metric's range. Accuracy differences are clipped to ±100 pp. A
    relative loss is read on per-seed log-ratios, shown as 100·(exp(x) − 1)%, which no interval can take below −100%:
    quick's C6 once showed "−159.6%" from a t-interval on (A − B) / B; no clip is needed now, and none is made. The
    verdict never reads a clipped number."""
    from pelab.rules import ACC, LOSS, Test, difference_text
    from pelab.rules.resolution import resolve

    assert ACC.clip_diff(-1.3) == -1.0 and ACC.clip_diff(1.2) == 1.0 and ACC.clip_diff(0.2) == 0.2
    heavy = Test(LOSS, tuple(math.log(r) for r in (0.1, 0.05, 1.6, 0.02, 0.3)))  # A's loss far lower on 4 seeds
    lo, hi = heavy.interval()
    assert math.expm1(lo) > -1.0 and heavy.oriented(clip=True) == heavy.oriented() == (-hi, -lo)
    text = difference_text(heavy, (lo, hi))
    assert text == (f"A's held-out loss {100 * math.expm1(heavy.mean):+.1f}% [{100 * math.expm1(lo):+.1f}%, "
                    f"{100 * math.expm1(hi):+.1f}%] relative to B's")  # fmt: skip
    res = resolve("better", LOSS, (lo, hi), 0.95)
    # oriented: A better by at most −lo on the log scale; the text shows it as the interval does, on B's base
    assert res is not None and res.a_by_at_most == pytest.approx(-lo) and res.b_by_at_most == pytest.approx(hi)
    assert f"A better by at most {-100 * math.expm1(lo):.1f}%" in res.text


def test_a_relative_resolution_reads_on_the_intervals_own_base() -> None:
    """quick's C6 printed "−5.8% [−7.2%, −4.2%] relative to B's" beside "A better by 4.4% to 7.8% of B's": the same
    log-ratio interval turned to A's base. The resolution's numbers are now the interval's own ends, either way."""
    from pelab.rules import LOSS, Test, difference_text

    lo, hi = math.log(1 - 0.072), math.log(1 - 0.042)
    win = resolve("better", LOSS, (lo, hi), 0.975)
    assert win is not None and win.text == "A better by 4.2% to 7.2% of B's held-out loss at 97.50%"
    assert win.within_text == "7.2% of B's held-out loss"
    worse = resolve("better", LOSS, (-hi, -lo), 0.95)  # A above B: the interval prints +4.4% to +7.8%
    assert worse is not None and worse.text == "B better by 4.4% to 7.8% of B's held-out loss at 95%"
    shown = difference_text(Test(LOSS, (-hi, -lo, -hi, -lo)), (-hi, -lo))
    assert "[+4.4%, +7.8%]" in shown
    eq = resolve("equivalent", LOSS, (math.log(0.99), math.log(1.015)), 0.95)
    assert eq is not None and eq.text == "within ±1.5% of B's held-out loss at 95%"
