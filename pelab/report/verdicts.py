"""The words a claim's verdict can be, and how each looks wherever it is shown (HTML, Markdown, terminal).

The rules that choose among them are in ``pelab.report.rules``.
"""

from __future__ import annotations

from typing import NamedTuple

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
INCONCLUSIVE = "inconclusive at this budget"
TOO_SMALL = "budget too small: arms did not learn"
#: The study has no runs a claim could compare (its task or its arms are not in the study): unlike TOO_SMALL,
#: no budget was tried, so nothing is said about one.
NOT_RUN = "not run in this study"
NO_INFO = "no information"  # both arms at a ceiling, or paired differences with zero spread, on every metric
REPORTED = "reported"
EXACT = "exact"
ERROR = "error"
#: Every word a claim's verdict can be, in the order a reader meets them.
VERDICTS = (EXACT, SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NO_INFO, TOO_SMALL, NOT_RUN, REPORTED, ERROR)


class Look(NamedTuple):
    css: str  # the badge's class in report.html.j2 (colour and border style)
    glyph: str  # leads every badge, so verdicts differ without colour: in print, in Markdown, in a terminal
    style: str  # Rich style in the terminal summary


#: One look per verdict, no two alike on any channel.
LOOKS: dict[str, Look] = {
    EXACT: Look("v-exact", "≡", "bold green"),
    SUPPORTED: Look("v-supported", "✓", "green"),
    NOT_SUPPORTED: Look("v-not-supported", "✗", "bold red"),
    INCONCLUSIVE: Look("v-inconclusive", "?", "yellow"),
    NO_INFO: Look("v-no-info", "∅", "dim"),
    TOO_SMALL: Look("v-too-small", "↓", "magenta"),
    NOT_RUN: Look("v-not-run", "○", "dim italic"),
    REPORTED: Look("v-reported", "•", "blue"),
    ERROR: Look("v-error", "!", "bold white on red"),
}
VERDICT_CLASS = {v: look.css for v, look in LOOKS.items()}
VERDICT_GLYPH = {v: look.glyph for v, look in LOOKS.items()}
VERDICT_STYLE = {v: look.style for v, look in LOOKS.items()}
