"""One exception type for every mistake a user can make.

The CLI turns a ``PelabError`` into a single line and exit code 2, so messages
must name the offending field and, where there is a finite set, the allowed values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


class PelabError(ValueError):
    """A user-facing error: bad configuration, bad input, impossible request."""


class NothingFinished(PelabError):
    """A study folder without a finished run of its study to read (every run failed so far): a sequential study's
    look then has nothing to decide and its rounds stop, where any other error stops the study with its line."""


#: What a terminal would act on rather than show: C0 and C1 control characters (ESC starts a sequence that can
#: recolour the screen, move the cursor or set the window title; 0x9b is a one-byte CSI on some terminals), DEL,
#: the line and paragraph separators, the bidirectional overrides that reorder what is read ("Trojan source"),
#: and lone surrogates (a path's bytes that are not UTF-8, as Python decodes them).
_UNSEEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSEEN_BUT_LINES = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _shown(m: re.Match[str]) -> str:
    if m.group() in _NAMED:
        return _NAMED[m.group()]
    code = ord(m.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, kept by the file system's decoding (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object, lines: bool = False) -> str:
    """``text`` with every character a terminal would act on written out as Python writes it (ESC as ``\\x1b``,
    a path's non-UTF-8 byte 0xff as ``\\xff``), so a name from a study file, a stored row or a path can neither
    rewrite the user's screen nor make the line unencodable; letters of any script (é, 位) stay as they are. One
    line unless ``lines`` (then newlines and tabs stay: the console's own text has them). Rich markup escaping
    (``rich.markup.escape``) is another matter and still applies to user text in markup."""
    text = str(text)
    pattern = _UNSEEN_BUT_LINES if lines else _UNSEEN
    return text if pattern.search(text) is None else pattern.sub(_shown, text)


def unknown(field: str, value: object, allowed: Iterable[str]) -> PelabError:
    """The error for a name that is not in a registry, listing what is."""
    return PelabError(f"{field}: unknown value {value!r}; allowed: {', '.join(sorted(allowed))}")


def shown(value: int) -> str:
    """An integer as a message shows it: whole while short, else its size (a 5,000-digit number cannot even be
    turned into text by default)."""
    if abs(value) < 10**15:
        return str(value)
    return f"{'-' if value < 0 else ''}about 2^{abs(value).bit_length() - 1}"


def check_range(field: str, value: int | None, lo: int, hi: int) -> None:
    """An integer setting within lo..hi (None: left to its default), or one PelabError naming it and the range."""
    if value is not None and not lo <= value <= hi:
        raise PelabError(f"{field}: must be in {lo}..{hi:,} (got {shown(value)})")
