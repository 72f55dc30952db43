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

A check whose inputs another check found broken is skipped and says which ("needs shapes and dtypes"). A fault
fails the check that names it, and each other property it breaks (a leak in ``rotate`` also breaks stacked seeds).
Beyond the list above: ``causality`` holds in training mode too, rows are kept in place even against a symmetric
mix (one row redrawn, the others unchanged), ``save and load`` first asks that one seed build one model and that
an evaluation read no global generator, and ``stacked seeds`` that seed 3 trains (does not diverge) and trains
alike twice. ``pelab check --set model.position.NAME=VALUE`` checks a class at options other than its defaults.
Stochastic schemes (randomized positions) reset their draws when put in eval mode,
so every check reads them in eval mode, reset before each call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pelab.conformance.combiners import _combiner_scheme, check_combiner
from pelab.conformance.core import FAILED, NOT_APPLICABLE, PASSED, SKIPPED, Check, _config, building_with
from pelab.conformance.schemes import _scheme_combine, check_scheme
from pelab.conformance.tasks import check_task

CHECKERS: dict[str, Callable[[str], list[Check]]] = {
    "position": check_scheme, "combine": check_combiner, "task": check_task
}  # fmt: skip


def settings_problem(classes: list[tuple[str, str]], settings: dict[str, Any]) -> str | None:
    """Why ``settings`` cannot build the checks' tiny models of these classes (a value a field refuses), as one
    line naming the field, or None: a wrong ``--set`` is the command's mistake, not a failed check of the class."""
    from pydantic import ValidationError

    from pelab.frozen import validation_message

    for field, name in classes:
        if field == "task":
            continue
        scheme, combine = (name, _scheme_combine(name)) if field == "position" else (_combiner_scheme(name), name)
        with building_with(settings, field, name) as reaches:
            if not reaches:  # its declaration check says what its defaults do
                continue
            try:
                _config("encoder", scheme, combine)
            except ValidationError as e:
                return validation_message(e)
            except ValueError as e:
                return " ".join(str(e).split())[:200]
    return None


def check_classes(classes: list[tuple[str, str]], settings: dict[str, Any] | None = None) -> list[Check]:
    """Every check on every (registry field, name), in order. ``settings``: model settings to build with besides
    the checks' own, nested as a study file's ``model`` table (``pelab check --set``); a scheme's options
    (``settings["position"]``) reach the schemes that declare them."""
    out = []
    for field, name in classes:
        with building_with(settings or {}, field, name):
            out += CHECKERS[field](name)
    return out


__all__ = [
    "CHECKERS", "FAILED", "NOT_APPLICABLE", "PASSED", "SKIPPED", "Check", "check_classes", "check_combiner",
    "check_scheme", "check_task", "settings_problem",
]  # fmt: skip
