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
