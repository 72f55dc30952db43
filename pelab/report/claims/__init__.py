"""The claims of SCIENCE.md, one module per claim (as ``pelab.positions`` holds one module per scheme).

Each module holds its claim's declaration (``@claim``, ``pelab.report.registry``), the gathering of its evidence
from stored runs and stored models, its pure rule (``rule_cN``, built on ``pelab.rules``) and its figures. Importing
this package imports every one of them, which fills ``registry.REGISTRY``; ``pelab.report.catalog`` reads it. The
pieces the claims share sit below them in ``pelab.report``: ``registry``, ``context``, ``tables``, ``evidence``,
``arms`` (claims on trained arms), ``measured`` (claims read off encodings and stored models). No claim module
imports another. Adding a claim is one new module here and its name in ``_MODULES``.
"""

from __future__ import annotations

import importlib

_MODULES = (
    "c01_sinusoid_concat",
    "c02_add_supercase",
    "c03_near_orthogonal",
    "c04_four_terms",
    "c05_cost",
    "c06_concat_beats_add",
    "c07_kind_matters_little",
    "c08_nope_learns_position",
    "c09_frozen_vectors",
    "c10_collisions",
    "c11_relative_linear",
    "c12_multiplicative",
    "c13_segments",
    "c14_vit_2d",
    "c15_pictures",
    "c16_pretrained_positions",
    "c17_extrapolation",
    "c18_causal_nope",
    "c19_grid_concat",
)
for _module in _MODULES:
    importlib.import_module(f"pelab.report.claims.{_module}")
