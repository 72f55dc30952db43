"""One exception type for every mistake a user can make.

The CLI turns a ``PelabError`` into a single line and exit code 2, so messages
must name the offending field and, where there is a finite set, the allowed values.
"""

from __future__ import annotations

from collections.abc import Iterable


class PelabError(ValueError):
    """A user-facing error: bad configuration, bad input, impossible request."""


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
