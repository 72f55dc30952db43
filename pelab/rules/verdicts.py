"""The words a verdict can be. How each looks wherever it is shown (HTML, Markdown, terminal) is the report's
business: ``pelab.report.looks``. The rules that choose among them are the rest of ``pelab.rules``.
"""

from __future__ import annotations

SUPPORTED = "supported"


NOT_SUPPORTED = "not supported"


INCONCLUSIVE = "inconclusive at this budget"


TOO_SMALL = "budget too small: arms did not learn"


#: The study has no runs a claim could compare (its task or its arms are not in the study): unlike TOO_SMALL,
#: no budget was tried, so nothing is said about one.
NOT_RUN = "not run in this study"


NO_INFO = "no information"  # both arms at a ceiling, or paired differences with zero spread, on every metric


#: A comparison the sequential design stopped at an interim look (decided there) whose arms later got more seeds
#: for other comparisons, and whose reading on all those seeds, at the level of the look it stopped at, does not
#: decide it the same way (``rules.families.decide``; SCIENCE.md, "Every seed counts"). Never a win, never a
#: refutation: in a family it counts like an inconclusive row.
UNCONFIRMED = "decided early, not confirmed"


#: A claim of two halves (C4, C18) of which one ran and the other was not run in this study, and nothing it ran
#: refutes the claim: its run half's verdict is shown beside it (``ClaimResult.halves``).
PARTLY_RUN = "partly run"


REPORTED = "reported"


EXACT = "exact"


ERROR = "error"


#: Every word a claim's verdict can be, in the order a reader meets them.
VERDICTS = (
    EXACT, SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, UNCONFIRMED, NO_INFO, TOO_SMALL, PARTLY_RUN, NOT_RUN, REPORTED, ERROR
)  # fmt: skip
