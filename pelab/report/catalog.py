"""Every claim of SCIENCE.md, gathered: importing ``pelab.report.claims`` (one module per claim) fills
``registry.REGISTRY``.

It sits above the claim modules, so they import the shared pieces of ``pelab.report.registry`` without that module
importing them back.
"""

from __future__ import annotations

import pelab.report.claims  # noqa: F401  (declares every claim)
from pelab.report.registry import REGISTRY, Claim


def all_claims() -> list[Claim]:
    """Every declared claim, C1 first."""
    return sorted(REGISTRY.values(), key=lambda c: c.number)
