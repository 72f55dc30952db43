"""A claim in one line: its verdict and the number behind it, for the report's claim list and the terminal.

* ``claim_line``: a claim and its verdict in one sentence of at most ``MAX_WORDS`` words;
* ``short_figure``: the number behind a verdict in a few words (an open claim's resolution, how many comparisons
  bear it out);
* ``key_interval``: a key figure's deciding interval and where it was measured.
"""

from __future__ import annotations

import re
from typing import Any

from pelab.report.first_screen import tested
from pelab.report.summary import FULL_COMMAND
from pelab.rules import INCONCLUSIVE, NO_INFO, NOT_RUN, NOT_SUPPORTED, SUPPORTED, TOO_SMALL

#: The longest claim line (``claim_line``), in words.
MAX_WORDS = 25


def short_resolution(text: str) -> str:
    """A claim's resolution (``resolution.claim_resolution``) in few words: "its 13 undecided comparisons lie within
    ±59.0% of B's held-out loss at 95%" reads "13 undecided, within ±59.0% of B's held-out loss"."""
    text = re.sub(r"^its (\d+) undecided comparisons lie within", r"\1 undecided, within", text)
    text = re.sub(r"^its (\d+) comparisons lie within", r"\1 comparisons, within", text)
    text = text.replace("its undecided comparison lies within", "1 undecided, within")
    text = text.replace("its comparison lies within", "1 comparison, within")
    return re.sub(r" (at [\d.]+%|each at the level that decided it)$", "", text)


def short_figure(c: Any) -> str:
    """The number behind a claim's verdict in a few words: an open claim's resolution, how many comparisons bear
    it out, or (no comparisons) the first clause of its key figure; "" for a claim that has no number."""
    deciding = getattr(c, "deciding", "")
    rows = tested([r for r in c.rows if not deciding or r.get("family") == deciding])
    if c.verdict == NOT_RUN and c.open and c.resolution:  # a half ran and is open; the claim waits on the other
        measured = [h for h, v in (c.halves or {}).items() if v == INCONCLUSIVE]
        what = f"{measured[0]}: " if len(measured) == 1 else "measured here: "
        return f"{FULL_COMMAND} runs the rest; {what}{short_resolution(c.resolution['text'])}"
    halves = getattr(c, "halves", None) or {}
    if halves and c.verdict in (SUPPORTED, NOT_SUPPORTED):  # decided: by which half, not an open half's bound
        return "; ".join(f"{h}: {v}" for h, v in halves.items())
    if c.open and c.resolution:
        return short_resolution(c.resolution["text"])
    if rows and c.verdict == SUPPORTED:
        return f"{sum(r['verdict'] == SUPPORTED for r in rows)} of {len(rows)} comparisons support it"
    if rows and c.verdict == NOT_SUPPORTED:
        return f"{sum(r['verdict'] == NOT_SUPPORTED for r in rows)} of {len(rows)} comparisons refute it"
    if c.verdict == NOT_RUN:
        return f"{FULL_COMMAND} runs it"
    if c.verdict in (TOO_SMALL, NO_INFO, INCONCLUSIVE):
        return ""
    return " ".join(str(c.key).split(";")[0].split())


#: A key figure's number and its interval: "+62.0 pp [+35.5 pp, +88.5 pp]", "+5.3% [+3.5%, +7.1%]".
_INTERVAL = re.compile(r"([+\-−]?\d[\d.,]*(?: ?pp|%)?) \[([^\]]+)\]")


def key_interval(key: str) -> tuple[str, str]:
    """The decisive comparison of a key figure in few words: its number ("+62.0 pp [+35.5, +88.5] accuracy") and
    where it was measured ("concat_split vs add (reverse, sinusoidal, d=32)"); ("", "") when the key holds no
    interval."""
    text = " ".join(str(key).split())
    m = _INTERVAL.search(text)
    if m is None:
        return "", ""
    value, (lo, hi) = m.group(1), [x.strip() for x in m.group(2).split(",", 1)] if "," in m.group(2) else ("", "")
    unit = "pp" if value.endswith("pp") else "%" if value.endswith("%") else ""
    lo, hi = (x.removesuffix(unit).strip() if unit == "pp" else x for x in (lo, hi))
    after = re.match(r" ([a-z][a-z ]*?)(?= \(|;|$| relative)", text[m.end() :])
    before = re.search(r"A's ([a-z][a-z ]*) $", text[: m.start()])
    metric = after.group(1) if after else before.group(1) if before else ""
    head = text.split(":", 1)[0] if ":" in text[: m.start()] else ""
    head = re.sub(r"\b(task|scheme|width)=", "", head)
    return f"{value} [{lo}, {hi}]" + (f" {metric}" if metric else ""), head


def claim_line(c: Any, max_words: int = MAX_WORDS) -> str:
    """ "C6 Concatenation can beat addition without making the model bigger: supported (1 of 12 comparisons
    support it)." in at most ``max_words`` words; a long figure is cut with "…" (the details hold it whole)."""
    head = f"{c.id} {c.title}: {c.verdict}"
    words = head.split()
    figure = short_figure(c).split()
    room = max_words - len(words)
    if figure and room >= 3:
        cut = figure if len(figure) <= room else [*figure[: room - 1], "…"]
        return f"{head} ({' '.join(cut)})."
    return " ".join(words[:max_words]) + "."


__all__ = ["MAX_WORDS", "claim_line", "key_interval", "short_figure", "short_resolution"]
