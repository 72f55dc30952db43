"""Position schemes: one module each, one registry.

Adding a scheme is one new module that subclasses ``PositionScheme`` (its options, if
any, declared in its ``Options``: ``PositionConfig`` picks them up) and is decorated
with ``@register``, plus its import in ``_MODULES`` below.
"""

from __future__ import annotations

import importlib

from pelab.positions.base import PositionScheme, SchemeContext, relative_offsets
from pelab.registry import Registry

SCHEMES: Registry[PositionScheme] = Registry("position")
register = SCHEMES.register
scheme_class = SCHEMES.lookup


def with_tables() -> str:
    """The schemes with an input table, for messages that point to one (a plugin's included once loaded)."""
    return ", ".join(name for name, cls in SCHEMES.items() if cls.has_table)


# The last three are written as plugins would be (the public interface alone), and registered as pelab's own.
_MODULES = (
    "sinusoidal", "learned", "none", "rotary", "alibi", "t5", "untied", "sincos2d", "randomized", "xpos", "kerple"
)  # fmt: skip
for _module in _MODULES:
    importlib.import_module(f"pelab.positions.{_module}")

__all__ = ["SCHEMES", "PositionScheme", "SchemeContext", "register", "relative_offsets", "scheme_class", "with_tables"]
