"""Pretrained models measured for the report: MiniLM's tables, and the models a study file names side by side.

The numbers come from ``pelab.pretrained.report``: MiniLM's tables are measured when the report is built (no
training), on a worker beside the first claims (``build``), and cached under the study's ``analyses/pretrained``;
C11, C16 and the published-vs-measured section read them. A study file may name more models (``[pretrained] models
= ["mini-lm", "/path/to/folder"]``): C16 then compares them side by side (``pelab.pretrained.sidebyside``), measured
once into ``analyses/pretrained/side_by_side`` and measured again when the list changes.
"""

from __future__ import annotations

from pathlib import Path

from pelab.errors import PelabError


def folder(ctx_folder: Path) -> Path:
    return ctx_folder / "analyses" / "pretrained"


def side_folder(ctx_folder: Path) -> Path:
    return folder(ctx_folder) / "side_by_side"


def run_pretrained(study_folder: Path, settings: None = None) -> dict | None:
    """MiniLM's numbers for a study's report: measured once into its folder, cached; trains nothing.

    ``settings`` is what C9's budget used to be; it must be None now (C9's arms are the study's grids).
    """
    from pelab.pretrained.report import load_or_measure

    if settings is not None:
        raise PelabError("pretrained: C9's runs are ordinary [[grid]]s of the study now; nothing trains here")
    return load_or_measure(folder(study_folder))


def run_side_by_side(study_folder: Path, models: list[str], minilm: dict | None = None) -> dict | None:
    """The models a study file names (``[pretrained] models``) side by side, for C16: cached in the study's
    ``analyses/pretrained/side_by_side`` and measured again when the list changes (``sidebyside.for_study``);
    None when the study names none. A folder that cannot be read raises a one-line PelabError."""
    if not models:
        return None
    from pelab.pretrained.sidebyside import for_study

    return for_study(side_folder(study_folder), models, minilm)
