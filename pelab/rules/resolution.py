"""What an interval establishes, whatever the verdict: the resolution of a comparison (SCIENCE.md, "Resolution").

A verdict reads an interval against a margin; when the margin is not met the verdict is *inconclusive*, which alone
tells a reader nothing of how close the arms are. The interval still bounds the effect, so every row states it:

* an **equivalence** ("A ≈ B"): the smallest margin at which it would be decided equivalent, max(|lo|, |hi|) of
  the interval ("within ±2.3 pp at 95%");
* a **non-inferiority** ("A not worse"): how far A may still trail B, max(0, −lo) (the smallest margin at which A
  would be "not worse"); 0 when A is better beyond the interval;
* a **direction** ("A beats B"): the largest effect the interval still allows either way, hi for A and −lo for B,
  and, since a 'better' row is also read against the margin ("inside the margin: no win"), the symmetric bound
  max(|lo|, |hi|) as well.

Numbers are oriented (positive = A better) in the deciding metric's units: percentage points for accuracy-like
metrics; for relative ones (held-out loss, bits per byte) the per-seed log-ratio log(A / B) the verdict reads, shown
as the change 100·(exp(x) − 1)% of B's value, as the interval beside it reads: A's bits per byte 4.2% to 7.2% under B's
read "A better by 4.2% to 7.2% of B's", never the same interval turned into A's base (4.4% to 7.8%), which a reader
would set against the interval's own ends and find different. The interval is the one the verdict read, at its level
(95%, or a Holm level), so the resolution is exactly as sure as the verdict beside it. It is a pure function of the
interval, the metric and the level: it never changes a verdict (``rules.decide`` does not read it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # rules imports this module; the metric is read by duck type at run time
    from pelab.rules.metrics import Metric

Reading = Literal["equivalence", "non_inferiority", "direction"]
#: Which reading each kind of rule (``rules.Kind``) asks of its interval.
READING: dict[str, Reading] = {
    "equivalent": "equivalence",
    "not_worse": "non_inferiority",
    "better": "direction",
    "beyond_margin": "direction",
}


@dataclass(frozen=True)
class Resolution:
    """One interval's resolution, oriented so that positive means A better, in the metric's units."""

    reading: Reading
    level: float
    #: the interval's bounds, oriented
    lo: float
    hi: float
    #: the smallest symmetric margin that holds the whole interval: the largest effect it allows either way
    within: float
    #: the largest effect in A's favour, and in B's, that the interval still allows (0 when it excludes that side)
    a_by_at_most: float
    b_by_at_most: float
    #: the smallest margin at which this row's rule would be decided in its favour (equivalence: ``within``;
    #: non-inferiority: ``b_by_at_most``; direction: ``within``, the margin that would call the effect negligible)
    margin_needed: float
    #: the same in words, e.g. "within ±2.3 pp accuracy at 95%"
    text: str
    #: the deciding metric's label, and ``within`` in its units ("2.3 pp accuracy"), for a claim's summary
    unit: str = ""
    within_text: str = ""

    def record(self) -> dict[str, Any]:
        """As claims.json stores it."""
        return asdict(self)


def level_text(level: float) -> str:
    """95% reads "95%"; a Holm level "99.17%"."""
    return "95%" if abs(level - 0.95) < 1e-9 else f"{100 * level:.2f}%"


def raw_number(m: Metric, raw: float) -> str:
    """An end of the raw A − B interval as the size the interval itself prints, unsigned: "2.3 pp"; a relative
    metric's log-ratio as |100·(exp(x) − 1)|% of B's value ("7.2%" for x = −0.0748)."""
    return m.fmt_diff(raw).lstrip("+-")


def raw_size(m: Metric, raw: float) -> str:
    """``raw_number`` with the metric named: "1.8% of B's held-out loss"."""
    of_b = "of B's " if m.relative else ""
    return f"{raw_number(m, raw)} {of_b}{m.label}"


def resolve(
    kind: str, m: Metric, interval: tuple[float, float], level: float, n: int | None = None, min_seeds: int = 0
) -> Resolution | None:
    """The resolution of a row of rule ``kind`` whose raw A − B interval on ``m`` at ``level`` is ``interval``;
    None when there is no interval (fewer than two seeds). With ``n`` paired seeds below ``min_seeds`` (the rules'
    minimum for any conclusion that rests on a margin) the text says that no margin decides it yet: the number is
    still what the interval bounds."""
    raw_lo, raw_hi = interval
    if math.isnan(raw_lo) or math.isnan(raw_hi):
        return None
    raw_lo, raw_hi = m.clip_diff(raw_lo), m.clip_diff(raw_hi)  # within the metric's range (a log-ratio needs none)
    lo, hi = (raw_lo, raw_hi) if m.higher_is_better else (-raw_hi, -raw_lo)
    reading = READING[kind]
    within = max(abs(lo), abs(hi))
    a_most, b_most = max(hi, 0.0), max(-lo, 0.0)
    at = level_text(level)

    def raw(o: float) -> float:  # an oriented end back to the raw interval's sign, to be shown as the interval is
        return o if m.higher_is_better else -o

    widest = max((raw_lo, raw_hi), key=lambda r: float(raw_number(m, r).split()[0].rstrip("%")))
    if reading == "equivalence":
        needed = within
        text = f"within ±{raw_size(m, widest)} at {at}"
        if lo > 0 or hi < 0:
            nearest = min((raw_lo, raw_hi), key=lambda r: float(raw_number(m, r).split()[0].rstrip("%")))
            text += f" (apart by at least {raw_number(m, nearest)})"
    elif reading == "non_inferiority":
        needed = b_most
        text = (
            f"A better by at least {raw_size(m, raw(lo))} at {at}"
            if lo > 0
            else f"A trails B by at most {raw_size(m, raw(lo))} at {at}"
        )
    else:
        needed = within
        if lo > 0:
            text = f"A better by {raw_number(m, raw(lo))} to {raw_size(m, raw(hi))} at {at}"
        elif hi < 0:
            text = f"B better by {raw_number(m, raw(hi))} to {raw_size(m, raw(lo))} at {at}"
        else:
            text = f"within ±{raw_size(m, widest)} at {at} (A better by at most {raw_number(m, raw(a_most))}, B by "
            text += f"at most {raw_number(m, raw(-b_most))})"
    no_margin = (reading == "direction" and (lo > 0 or hi < 0)) or (reading == "non_inferiority" and lo > 0)
    if n is not None and n < min_seeds and not no_margin:  # decided by the interval alone: no seed minimum
        text += f" (a margin decides only on ≥ {min_seeds} seeds; {n} here)"
    return Resolution(reading, level, lo, hi, within, a_most, b_most, needed, text, m.label, raw_size(m, widest))


def _once(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Each pair of arms once: a claim read both ways (C6's "concat_split vs add" and "add vs concat_split") has
    the same comparison in two families, whose intervals are mirror images; counting both would double it."""
    seen: set[frozenset[frozenset[str]]] = set()
    out = []
    for r in rows:
        a, b = frozenset(r.get("a_runs", ())), frozenset(r.get("b_runs", ()))
        key = frozenset((a, b))
        if a and b and key in seen:
            continue
        seen.add(key)
        out.append(r)
    return out


def claim_resolution(records: Sequence[Mapping[str, Any]], open_verdict: str) -> dict[str, Any] | None:
    """A claim's resolution from its claims.json rows (``claims.row_records``): per deciding metric, the widest
    symmetric bound over the rows still open (verdict ``open_verdict``: inconclusive), or over every row with an
    interval when none is open; None when no row has one. The text is one short phrase for the summary, e.g.
    "its 3 undecided comparisons lie within ±3.1 pp accuracy". Widest, so it holds for every row it covers."""
    rows = [r for r in records if r.get("resolution")]
    if not rows:
        return None
    undecided = _once([r for r in rows if r["verdict"] == open_verdict])
    chosen = undecided or _once(rows)
    widest: dict[str, tuple[float, str, int]] = {}  # metric label -> (bound, its text, rows)
    for r in chosen:
        res = r["resolution"]
        label = res["unit"]
        bound, text, n = widest.get(label, (-1.0, "", 0))
        if res["within"] > bound:
            bound, text = res["within"], res["within_text"]
        widest[label] = (bound, text, n + 1)
    parts = [
        f"±{text}" + (f" ({n} comparison{'s' * (n > 1)})" if len(widest) > 1 else "") for _, text, n in widest.values()
    ]
    whose = "undecided comparison" if undecided else "comparison"
    count = f"its {len(chosen)} {whose}s lie" if len(chosen) > 1 else f"its {whose} lies"
    levels = {round(r["resolution"]["level"], 9) for r in chosen}
    at = f"at {level_text(levels.pop())}" if len(levels) == 1 else "each at the level that decided it"
    return {
        "of": "undecided" if undecided else "all",
        "rows": len(chosen),
        "within": {label: bound for label, (bound, _, _) in widest.items()},
        "text": f"{count} within {', '.join(parts)} {at}",
    }
