"""Position schemes: one module each, one registry.

Adding a scheme is one new module that subclasses ``PositionScheme`` and is
decorated with ``@register``, plus its import in ``_MODULES`` below.
"""

from __future__ import annotations

import importlib

from pelab.errors import unknown
from pelab.positions.base import PositionScheme, SchemeContext

SCHEMES: dict[str, type[PositionScheme]] = {}


def register(cls: type[PositionScheme]) -> type[PositionScheme]:
    """Class decorator: make a scheme reachable by its ``name``."""
    if not cls.name or cls.name in SCHEMES:
        raise RuntimeError(f"scheme name {cls.name!r} is empty or taken")
    SCHEMES[cls.name] = cls
    return cls


def scheme_class(name: str, field: str = "position") -> type[PositionScheme]:
    try:
        return SCHEMES[name]
    except KeyError:
        raise unknown(field, name, SCHEMES) from None


_MODULES = ("sinusoidal", "learned", "none", "rotary", "alibi", "t5", "untied", "sincos2d")
for _module in _MODULES:
    importlib.import_module(f"pelab.positions.{_module}")

__all__ = ["SCHEMES", "PositionScheme", "SchemeContext", "register", "scheme_class"]
