"""How each verdict looks wherever it is shown (HTML, Markdown, terminal): no two alike on any channel.

The words themselves, and the rules that choose among them, are in ``pelab.rules``.
"""

from __future__ import annotations

from typing import NamedTuple

from pelab.rules import (
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
)


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
    # a stop the later seeds did not bear out: open like "?", but it was decided once, so its own mark (and no win)
    UNCONFIRMED: Look("v-early-unconfirmed", "‽", "cyan"),
    NO_INFO: Look("v-no-info", "∅", "dim"),
    TOO_SMALL: Look("v-too-small", "↓", "magenta"),
    NOT_RUN: Look("v-not-run", "○", "dim italic"),
    PARTLY_RUN: Look("v-partly-run", "◐", "italic"),
    REPORTED: Look("v-reported", "•", "blue"),
    ERROR: Look("v-error", "!", "bold white on red"),
}


VERDICT_CLASS = {v: look.css for v, look in LOOKS.items()}


VERDICT_GLYPH = {v: look.glyph for v, look in LOOKS.items()}


VERDICT_STYLE = {v: look.style for v, look in LOOKS.items()}
