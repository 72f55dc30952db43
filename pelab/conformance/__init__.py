"""The properties every position scheme, combiner and task must have, as checks anyone can run on a class:
``pelab check my_pe.py`` runs them on each class a plugin registers, and pelab's tests run every built-in class
through the very same functions (``tests/test_check.py``), so what a plugin is held to cannot drift from what pelab
holds itself to.

Each check is a small function over tiny models (d=16, 2 layers, 16 positions) that passes, fails with one line
saying what is wrong, or does not apply. The checks, by kind of class:

- schemes: ``declaration`` (the class attributes and ``Options`` a config needs), ``shapes and dtypes`` (the three
  hooks' shapes; outputs follow the model's dtype, float32 and float64), ``hooks follow positions`` (a hook's
  value at a position is a function of that position: permuting the positions permutes the table, the bias and
  the rotation alike), ``gradients`` (finite, and reaching every trainable parameter, encoder and decoder),
  ``save and load`` (a safetensors round trip gives the same outputs), ``stacked seeds`` (a seed trained in a
  stack of 3 equals the same seed alone, bit for bit, as ``tests/test_stacked.py`` holds built-ins to),
  ``longer inputs`` (a class that says it ``extrapolates`` gives finite outputs at twice the length the model was
  sized for; one that does not refuses with a clean PelabError), ``position information`` (a scheme that says it
  is ``position_free`` leaves an encoder permutation-equivariant; any other breaks it) and ``causality`` (a
  decoder's outputs before a token do not change with it);
- combiners: the same, with the output width checked against ``widths.model`` and rows kept in place;
- tasks: ``declaration``, ``batches`` (shapes, dtypes, ranges, every split), ``seeded batches``, ``longer inputs``
  and ``stacked seeds``.

A check whose inputs another check found broken is skipped and says which ("needs shapes and dtypes"), so a class
with one fault fails one check. Stochastic schemes (randomized positions) reset their draws when put in eval mode,
so every check reads them in eval mode, reset before each call.
"""

from __future__ import annotations

from collections.abc import Callable

from pelab.conformance.combiners import check_combiner
from pelab.conformance.core import FAILED, NOT_APPLICABLE, PASSED, SKIPPED, Check
from pelab.conformance.schemes import check_scheme
from pelab.conformance.tasks import check_task

CHECKERS: dict[str, Callable[[str], list[Check]]] = {
    "position": check_scheme, "combine": check_combiner, "task": check_task
}  # fmt: skip


def check_classes(classes: list[tuple[str, str]]) -> list[Check]:
    """Every check on every (registry field, name), in order."""
    return [c for field, name in classes for c in CHECKERS[field](name)]


__all__ = [
    "CHECKERS", "FAILED", "NOT_APPLICABLE", "PASSED", "SKIPPED", "Check", "check_classes", "check_combiner",
    "check_scheme", "check_task",
]  # fmt: skip
