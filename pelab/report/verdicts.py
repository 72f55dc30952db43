"""The words a claim's verdict can be. The rules that choose among them are in ``pelab.report.rules``."""

from __future__ import annotations

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
INCONCLUSIVE = "inconclusive at this budget"
TOO_SMALL = "budget too small: arms did not learn"
NO_INFO = "no information"  # both arms at a ceiling, or paired differences with zero spread, on every metric
REPORTED = "reported"
EXACT = "exact"
ERROR = "error"
#: Every word a claim's verdict can be, in the order a reader meets them.
VERDICTS = (EXACT, SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NO_INFO, TOO_SMALL, REPORTED, ERROR)
