"""One registry for everything pelab looks up by name: position schemes, combiners, tasks.

Each is a dict from name to class, so listing and membership read as they always did; what it adds is the
same checks for all three (a name that is empty or taken fails at import, an unknown one is a one-line error
naming the field and the allowed values).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pelab.errors import PelabError, unknown

T = TypeVar("T")


class Registry(dict[str, type[T]], Generic[T]):
    def __init__(self, field: str) -> None:
        super().__init__()
        #: the config field that names an entry (``position``, ``combine``, ``task``), for error messages
        self.field = field

    def register(self, cls: type[T]) -> type[T]:
        """Class decorator: make ``cls`` reachable by its ``name``."""
        name: Any = getattr(cls, "name", None)
        if not isinstance(name, str) or not name or name in self:
            raise RuntimeError(f"{self.field} name {name!r} is empty or taken")
        self[name] = cls
        return cls

    def lookup(self, name: str, field: str | None = None) -> type[T]:
        """The class registered as ``name``; a PelabError naming ``field`` and the allowed names otherwise."""
        try:
            return self[name]
        except KeyError:
            err: PelabError = unknown(field or self.field, name, self)
            raise err from None
