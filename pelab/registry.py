"""One registry for everything pelab looks up by name: position schemes, combiners, tasks.

Each is a dict from name to class, so listing and membership read as they always did; what it adds is the
same checks for all three (a name that is empty or taken fails at import, an unknown one is a one-line error
naming the field and the allowed values), and where each class came from: pelab itself, or a user's plugin
(``pelab.plugins``), whose identity a run's config records so that a changed plugin makes new runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pelab.errors import PelabError, unknown

T = TypeVar("T")


@dataclass(frozen=True)
class Origin:
    """The plugin a registered class came from: its module name and the sha256 of its code."""

    plugin: str
    sha256: str


class Registry(dict[str, type[T]], Generic[T]):
    def __init__(self, field: str) -> None:
        super().__init__()
        #: the config field that names an entry (``position``, ``combine``, ``task``), for error messages
        self.field = field
        #: name -> the plugin that registered it; pelab's own classes have none
        self.origins: dict[str, Origin] = {}

    def register(self, cls: type[T]) -> type[T]:
        """Class decorator: make ``cls`` reachable by its ``name``."""
        name: Any = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise RuntimeError(f"{self.field} name {name!r} is empty; give the class a name")
        if name in self:
            taken = self[name]
            raise RuntimeError(
                f"{self.field} name {name!r} is taken (by {taken.__module__}.{taken.__qualname__}); choose another"
            )
        self[name] = cls
        return cls

    def lookup(self, name: str, field: str | None = None) -> type[T]:
        """The class registered as ``name``; a PelabError naming ``field`` and the allowed names otherwise."""
        try:
            return self[name]
        except KeyError:
            err: PelabError = unknown(field or self.field, name, self)
            raise err from None

    def forget(self, name: str) -> None:
        """Take a name back (a plugin that failed half-way through its import leaves nothing registered)."""
        self.pop(name, None)
        self.origins.pop(name, None)
