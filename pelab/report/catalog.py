"""Every claim of SCIENCE.md, gathered: importing the modules that declare them fills ``claims.REGISTRY``.

It sits above those modules, so they can import the shared pieces of ``pelab.report.claims`` without that
module importing them back (the cycle it once had).
"""

from __future__ import annotations

from pelab.report import claims_inside, claims_pretrained, claims_published, claims_training  # noqa: F401
from pelab.report.claims import REGISTRY, Claim


def all_claims() -> list[Claim]:
    """Every declared claim, C1 first."""
    return sorted(REGISTRY.values(), key=lambda c: c.number)
