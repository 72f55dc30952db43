"""Tables a reader scans: cells hold numbers and short labels, and what a cell said beyond that goes under the table.

The claims build their tables for completeness (``claims.Table``): a cell may carry a reason in parentheses or a
note after a semicolon, and a title carries the family's correction. ``compact`` keeps each cell's head (the part
before the first " (" or "; ", at most ``WORDS`` words) and moves the rest, whole, into numbered notes under the
table, each note once however many cells share it; a title's explanation after " — " becomes the first note.
``published`` does the same for the published-vs-measured table, where the measured cell's number is the point.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

#: The most words a compact cell keeps before its note takes over.
WORDS = 12


@dataclass
class Compact:
    """A table ready to render: ``rows`` of (text, note number or 0) cells; ``notes`` numbered from 1."""

    title: str
    columns: list[str]
    rows: list[list[tuple[str, int]]]
    notes: list[str] = field(default_factory=list)
    #: the title's explanation (a family's correction, how many comparisons), said under the table
    about: str = ""

    def note(self, text: str) -> int:
        if text not in self.notes:
            self.notes.append(text)
        return self.notes.index(text) + 1


def head(cell: str, words: int = WORDS) -> str:
    """The start of a cell a reader scans: a cell of at most ``words`` words whole; a longer one up to its first
    " (" or "; " (not inside brackets), at most ``words`` words, "…" where it was cut."""
    text = " ".join(str(cell).split())
    if len(text.split()) <= words:
        return text
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(" and depth == 0 and i and text[i - 1] == " ":
            text = text[: i - 1]
            break
        if ch == ";" and depth == 0:
            text = text[:i]
            break
        depth += (ch in "([") - (ch in ")]")
    parts = text.split()
    if len(parts) <= words:
        return text
    keep = parts[:words]
    while " ".join(keep).count("[") > " ".join(keep).count("]") and len(keep) < len(parts):
        keep.append(parts[len(keep)])  # an interval is a number: never cut inside it
    return " ".join(keep) + (" …" if len(keep) < len(parts) else "")


def compact(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], words: int = WORDS) -> Compact:
    """``rows`` with every cell cut to its ``head``; a cell that lost text points to a note holding it whole."""
    name, _, about = str(title).partition(" — ")
    out = Compact(name, [str(c) for c in columns], [], about=about)
    for row in rows:
        cells = []
        for cell in row:
            full = " ".join(str(cell).split())
            short = head(full, words)
            cells.append((short, 0) if short == full else (short, out.note(full)))
        out.rows.append(cells)
    return out


#: Columns of the published table that keep more words: who said it, and what they said, are short labels there.
LONGER = {"result": 12, "published": 20}
#: The number in a measured cell: "A − B +1.2 pp [-0.3 pp, +2.7 pp] accuracy", "A's bits per byte +3.1% [...]".
NUMBERS = re.compile(
    r"(?:A − B |A's (?P<rel>[a-z -]+?) )(?P<num>[+\-−]?[\d.]+ ?(?:pp|%)? \[[^\]]*\])"
    r"(?P<label> [a-z -]+?)?(?= relative| \(|;|$)"
)
ARMS = re.compile(r"^(.*?) vs (.*?) \(")


def measured_head(cell: str) -> str:
    """ "learned vs sinusoidal: +0.3% [-1.2%, +1.8%]" from a published row's measured cell (its first comparison),
    "+1 more" when it had several; the cell's ``head`` when it holds no interval."""
    parts = [p for p in re.split(r"; (?=[^;()]+ vs [^;()]+ \()", str(cell)) if p]
    found = NUMBERS.search(parts[0]) if parts else None
    arms = ARMS.match(parts[0]) if parts else None
    if not found:
        return head(cell)
    label = found["label"] or (f" {found['rel']}" if found["rel"] else "")
    text = (f"{arms.group(1)} vs {arms.group(2)}: " if arms else "") + found["num"] + label
    return text + (f" (+{len(parts) - 1} more)" if len(parts) > 1 else "")


#: The outcome of a published result whose runs this study does not have (``pelab.report.published``).
NOT_RUN_OUTCOME = "not run"


def published(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Compact:
    """The published-vs-measured table as result | published | measured | outcome; the measured cell's full text
    and the "why" column become notes."""
    cols = [str(c) for c in columns]
    keep = [c for c in cols if c != "why"]
    out = Compact("Published vs measured", keep, [])
    outcome = cols.index("outcome") if "outcome" in cols else None
    # a result this study did not run at all is named once under the table, not given a row of "not run" cells
    absent = [re.sub(r"^(.*?\d{4}).*$", r"\1", str(r[0]))  # "Haviv et al. 2022 (masked), …" reads "Haviv et al. 2022"
              for r in rows if outcome is not None and str(r[outcome]).strip() == NOT_RUN_OUTCOME]  # fmt: skip
    if absent:
        out.about = f"Not run in this study (the full preset runs them): {', '.join(dict.fromkeys(absent))}."
    for row in rows:
        if outcome is not None and str(row[outcome]).strip() == NOT_RUN_OUTCOME:
            continue
        cells = dict(zip(cols, (" ".join(str(x).split()) for x in row), strict=True))
        line = []
        for c in keep:
            full = cells[c]
            short = measured_head(full) if c == "measured here" else head(full, LONGER.get(c, WORDS))
            why = cells.get("why", "") if c == "outcome" else ""
            lost = full if short != full else ""
            text = "; ".join(x for x in (lost, why) if x)
            line.append((short, out.note(text) if text else 0))
        out.rows.append(line)
    return out


__all__ = ["WORDS", "Compact", "compact", "head", "measured_head", "published"]
