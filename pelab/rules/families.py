"""Every comparison behind one claim, each decided on the first informative metric of the claim's chain, with
Holm–Bonferroni across them wherever the claim says "on some comparison"; the family's verdict, and the one floor
policy every family follows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pelab.rules.compare import Comparison, Side, Test, from_diffs, paired_test
from pelab.rules.metrics import ALPHA, MIN_EQUIVALENCE_SEEDS, margin_for, metric
from pelab.rules.rows import Family, Kind, Row, _capped, _decide, difference_text, holm, second_opinion
from pelab.rules.verdicts import INCONCLUSIVE, NO_INFO, NOT_RUN, NOT_SUPPORTED, SUPPORTED, TOO_SMALL, UNCONFIRMED
from pelab.study.design import looks_for
from pelab.study.sequential import SPENDING_NAMES, Looks


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
    """One comparison ready for a rule: whether it enters (``FLOOR_POLICY``), its tests in the claim's metric order,
    and, where it does not enter, why."""

    comparison: Comparison
    learned: bool
    tests: tuple[Test, ...]
    why: str = "both arms below the floor"


def chain_for(c: Comparison, chain: Sequence[str]) -> tuple[str, ...]:
    """Language models are decided on held-out loss (bits per byte up to a constant: relative differences are
    the same), whatever the claim's chain: next-byte accuracy is not what a language model is for."""
    if c.a.is_language_model and c.b.is_language_model:
        return ("bpb",)
    return tuple(chain)


def evidence(
    comparisons: Sequence[Comparison], chain: Sequence[str], floor: float, failure_is_evidence: bool = False
) -> list[Evidence]:
    """Paired tests of every comparison on each metric of ``chain``; whether it enters is ``FLOOR_POLICY``."""
    return [
        Evidence(
            c,
            enters(c, floor, failure_is_evidence),
            tuple(paired_test(c, metric(k)) for k in chain_for(c, chain)),
            below_floor(c, floor),
        )
        for c in comparisons
    ]


def enters(c: Comparison, floor: float, failure_is_evidence: bool = False) -> bool:
    """``FLOOR_POLICY``: whether a comparison takes part in a verdict: both arms learned; or, for a claim whose
    content is that one arm fails (``failure_is_evidence``), at least one did."""
    if failure_is_evidence:
        return c.a.learned(floor) or c.b.learned(floor)
    return c.a.learned(floor) and c.b.learned(floor)


def below_floor(c: Comparison, floor: float) -> str:
    """Which arm kept a comparison out, in words: "both arms below the floor", "add + 40 below the floor"."""
    down = [s.label for s in (c.a, c.b) if not s.learned(floor)]
    if len(down) == 2:
        return "both arms below the floor"
    if down:
        return f"{down[0]} below the floor (a verdict needs both arms to have learned)"
    return ""


#: The one floor policy of every verdict family (SCIENCE.md: "a verdict is only drawn from arms that learned their
#: task"). A comparison enters when both of its arms learned (are above the study's floor); one where an arm did
#: not is shown, marked "budget too small", and takes no part: a win over an arm that had not learned says how fast
#: each arm learns at this budget, not how well. The exception is a claim whose content is that one arm fails where
#: the other learns (``failure_is_evidence``: C18's NoPE language models, C19's added 2-D codes, which cap the
#: which-cell task below the floor by construction, and the published results that make the same prediction):
#: there a comparison enters when at least one arm learned, and the failure counts against the arm on the paired
#: interval like any other difference. Measures of what a model learned (C2's overlap, C4's shares, C8's and C10's
#: probes) are taken only on runs that learned, since a model that learned nothing has no learned structure to
#: measure.
FLOOR_POLICY = (
    "a comparison enters when both arms are above the floor; one where an arm is below it is shown as budget too "
    "small and takes no part, except in claims whose content is that one arm fails where the other learns (C18, "
    "C19), where an arm that failed where its pair learned counts against it on the paired interval"
)


def sequential_note(looks: Looks, alpha: float = ALPHA) -> str:
    """How a row examined sequentially was read: its looks and its last look's nominal level (with overrunning data,
    the level of the look it stopped at)."""
    which = "the level of the look it stopped at" if looks.overrun else "the last look's nominal level"
    return (
        f"sequential seeds ({looks.text()}): {which} is "
        f"{100 * looks.nominal_level(1 - alpha):.2f}% before any Holm correction "
        f"({SPENDING_NAMES[looks.spending]}-type alpha spending)"
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
    failure_is_evidence: bool = False,
) -> Family:
    """Decide every comparison on the first informative metric of ``chain`` and combine them (``decide``)."""
    return decide(evidence(comparisons, chain, floor, failure_is_evidence), margin, kind, combine, alpha)


def decide(
    items: Sequence[Evidence],
    margin: float,
    kind: Kind = "better",
    combine: Literal["any", "all"] = "any",
    alpha: float = ALPHA,
) -> Family:
    """The family rule of SCIENCE.md (``decide_at_look``), under sequential seeds look by look, reading every seed
    its arms have (SCIENCE.md, "Every seed counts").

    * A comparison never decided at an interim look is read at its last look, on all its seeds.
    * A comparison decided (supported or not supported) at look k, where the group-sequential procedure stops it,
      whose arms got no seed after it, keeps that look's verdict, interval and seeds: they are all it has.
    * A comparison decided at look k whose arms later got more seeds (bought by another open comparison that reads
      one of them: *overrunning* data) is read again on all of them, at the nominal level of look k, the last look it
      took part in (``Looks.overrun``), with Holm across the family as at any look. Its decision stands only where
      that reading decides it the same way; otherwise the row is ``UNCONFIRMED`` ("decided early, not confirmed"),
      never a win and never a refutation. This is a conservative variant of the deletion method for overrunning data
      (Whitehead 1992; Hall & Liu 2002): the deletion method reads the overrun data at the stopping look's boundary
      in place of the stop; this rule asks both the stop and that reading to cross it, so every decision it declares
      is one the design declared at look k, and the error rate stays at most the design's (a planted null and a
      planted equivalence are simulated in tests/test_sequential.py). The rule it replaces kept the first look's
      decision whatever the later seeds said (quick's C6 lookup row stayed a win at 5 seeds, −43.1% in held-out
      loss, where all 8 read +84.3% [−100%, +436%]).

    Without a design: one look, all seeds."""
    looks = [_looks_of(item) for item in items]
    depth = max((len(lk.counts) for lk in looks if lk is not None), default=0)
    if depth <= 1:
        return decide_at_look(items, margin, kind, combine, alpha)
    at = [[_at_look(item, lk, j) for item, lk in zip(items, looks, strict=True)] for j in range(1, depth + 1)]
    # A sequential test is one statistic followed across its looks: a comparison is read at every look on the metric
    # its first look read (accuracy, or held-out loss where accuracy had zero spread), even where another metric of
    # its chain would decide a later look (quick's C2 lookup row went from loss at 5 seeds to accuracy at 8, when one
    # seed pulled a mean under the ceiling). Where that metric carries no information at a later look, the row has
    # none there.
    pinned = [_first_metric([look[i] for look in at]) for i in range(len(items))]
    per_look = [
        decide_at_look([_pin(ev, key) for ev, key in zip(look, pinned, strict=True)], margin, kind, combine, alpha)
        for look in at
    ]
    stops = [next((j for j, f in enumerate(per_look) if f.rows[i].verdict in DECIDED), None) for i in range(len(items))]
    # overrun: stopped before the last look the comparison itself was examined at, so its arms hold seeds past the stop
    over = [k is not None and lk is not None and k + 1 < len(lk.counts) for k, lk in zip(stops, looks, strict=True)]
    final_items = []
    for i, (item, lk) in enumerate(zip(items, looks, strict=True)):
        ev = at[-1][i]
        if over[i]:
            assert lk is not None and stops[i] is not None
            read = Looks(lk.counts[: stops[i] + 1], lk.cap, lk.spending, overrun=lk.counts[-1])
            ev = _at_look(item, lk, len(lk.counts), read)
        final_items.append(_pin(ev, pinned[i]))
    final = decide_at_look(final_items, margin, kind, combine, alpha)
    rows = []
    for i, k in enumerate(stops):
        if k is None or not over[i]:
            rows.append(final.rows[i] if k is None else per_look[k].rows[i])
            continue
        stopped, row = per_look[k].rows[i], final.rows[i]
        assert stopped.test is not None
        then = f"{EARLY} {stopped.test.n} seeds: {difference_text(stopped.test, stopped.interval)}, {stopped.verdict}"
        seeds = row.test.n if row.test is not None else stopped.test.n
        now = f"all {seeds} seeds its arms got later (for other comparisons), read at that look's nominal level"
        reading = f"{difference_text(row.test, row.interval)}, {row.verdict}" if row.test is not None else row.verdict
        if row.verdict == stopped.verdict:
            row.notes.append(f"{then}; {CONFIRMED} {now}: {reading}")
        else:
            row.notes.append(f"{then}; {NOT_CONFIRMED} {now}: {reading}")
            row.verdict = UNCONFIRMED
        rows.append(row)
    return Family(rows, combine_verdicts([r.verdict for r in rows], combine), kind, combine, final.correction)


#: The verdicts at which the group-sequential procedure stops a comparison.
DECIDED = (SUPPORTED, NOT_SUPPORTED)


#: How the note of a comparison decided before its arms' last look begins, and how it says what all its seeds read
#: (the first screen counts the comparisons not confirmed by their verdict, ``UNCONFIRMED``).
EARLY = "decided at the look at"
CONFIRMED = "confirmed on"
NOT_CONFIRMED = "not confirmed on"


def _first_metric(looks: Sequence[Evidence]) -> str | None:
    """The metric a comparison was first read on: the first informative test of the first look it entered."""
    for ev in looks:
        t = next((t for t in ev.tests if t.info is None), None) if ev.learned else None
        if t is not None:
            return t.metric.key
    return None


def _pin(ev: Evidence, key: str | None) -> Evidence:
    """The evidence decided on metric ``key`` alone (``decide``: one statistic across looks): the metrics before it
    in the chain are shown as not read, with why, and those after it are dropped."""
    if key is None or all(t.metric.key != key for t in ev.tests):
        return ev
    kept: list[Test] = []
    for t in ev.tests:
        if t.metric.key == key:
            kept.append(t)
            break
        why = f"{t.metric.label} not read: this comparison's first look read {metric(key).label}, one statistic"
        kept.append(t if t.info is not None else replace(t, info=why + " across its looks"))
    return replace(ev, tests=tuple(kept))


def _looks_of(item: Evidence) -> Looks | None:
    """The looks a comparison was examined at: its tests' own, else the design's (``looks_for``)."""
    own = next((t.looks for t in item.tests if t.looks is not None), None)
    return own or looks_for(item.comparison.a.run_ids, item.comparison.b.run_ids)


def _first(side: Side, seeds: set[int]) -> Side:
    return replace(side, values={k: {s: v for s, v in by.items() if s in seeds} for k, by in side.values.items()})


def _at_look(item: Evidence, looks: Looks | None, j: int, read: Looks | None = None) -> Evidence:
    """The evidence as it stood at look ``j``: the first paired seeds of that look (the seeds of a sequential study
    are one increasing sequence after its listed ones, so a look's seeds are the smallest), each test recomputed on
    them and read at that look's nominal level (or at ``read``'s: an overrun reading). A comparison examined at fewer
    looks stays at its last."""
    if looks is None:
        return item
    k = min(j, len(looks.counts))
    n, at = looks.counts[k - 1], read or Looks(looks.counts[:k], looks.cap, looks.spending)
    c = item.comparison
    first = set(sorted(set().union(*[set(v) for v in c.a.values.values()]) &
                       set().union(*[set(v) for v in c.b.values.values()]))[:n])  # fmt: skip
    cut = Comparison(c.where, _first(c.a, first), _first(c.b, first), c.looks)
    tests = []
    for t in item.tests:
        again = paired_test(cut, t.metric) if t.metric.key in c.a.values and t.metric.key in c.b.values else None
        if again is None or (t.info is None and again.n != min(n, t.n)):  # a test built from its own differences
            again = from_diffs(t.metric, t.diffs[:n], t.info)
        tests.append(replace(again, looks=at))
    return Evidence(cut, item.learned, tuple(tests), item.why)


def decide_at_look(
    items: Sequence[Evidence],
    margin: float,
    kind: Kind = "better",
    combine: Literal["any", "all"] = "any",
    alpha: float = ALPHA,
) -> Family:
    """The family rule of SCIENCE.md at one look.

    * Rows that do not enter (``FLOOR_POLICY``: an arm below the floor) are ``TOO_SMALL`` and take no part.
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
            rows.append(Row(c, TOO_SMALL, skipped=[item.why or "both arms below the floor"]))
            continue
        skipped = list(dict.fromkeys(t.info for t in item.tests if t.info is not None))  # "solved" once, not per metric
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
        m = row.margin = row_margin(row, margin)
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
    """The margin a decided row is read against: ``margin_for`` its deciding metric (a log-ratio's for a relative
    one, the same whatever B's value)."""
    assert r.test is not None
    return margin_for(r.test.metric, margin)


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
