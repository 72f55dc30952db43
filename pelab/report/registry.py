"""The claims registry and the objects the report is made of.

Each claim of SCIENCE.md is one declaration (``@claim(...)``: id, the claim in a sentence, who made it, its deciding
metrics, its rule in words) on a function ``(ReportContext, ClaimResult) -> ClaimResult`` in its own module of
``pelab.report.claims``. The function gathers typed evidence from stored runs and stored checkpoints and hands it to
a pure rule (``pelab.rules`` and the ``rule_cN`` functions beside each claim), which returns the verdict; nothing
else sets one. Adding a claim is adding a module with its declaration. ``docs/claims.md`` is written from this
registry (`pelab claims`), so the documentation and the code state one rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pelab.report.context import ReportContext
from pelab.rules import INCONCLUSIVE
from pelab.rules.metrics import LM_RULE_TEXT, LOSS_MARGIN_TEXT, SOLVED_TEXT
from pelab.rules.resolution import claim_resolution

#: The deciding metrics of a claim drawn from trained arms, in order: accuracy at the training size; held-out
#: loss when accuracy carries no information (both arms at the ceiling, or zero spread); and the area under
#: the learning curve (how fast each learned) when both also sit below the loss floor (``rules.LOSS_FLOOR``).
CHAIN = ("acc", "loss", "auc")
DOC = "claims.md"


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]


@dataclass
class Section:
    """A part of the report beside the claims (learning rates, published vs measured): prose and tables."""

    id: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


@dataclass
class Figure:
    title: str
    path: Path
    caption: str = ""


@dataclass
class ClaimResult:
    id: str
    title: str
    claim: str
    source: str
    rule: str
    setup: str = ""
    verdict: str = "reported"
    key: str = ""
    #: the deciding metric as it was used ("accuracy; held-out loss where accuracy sat at the ceiling")
    metric: str = ""
    #: where the rule is explained (relative to report.html)
    doc: str = ""
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    #: every comparison behind the verdict, as claims.json records it
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: a claim of several halves: each half's verdict, so the summary line says which half failed, not only that
    #: the claim did (C4's cross terms do carry a share; what fails is "removing them costs")
    halves: dict[str, str] = field(default_factory=dict)
    #: what its rows' intervals establish (``resolution.claim_resolution``): set from ``rows`` once the claim ran
    resolution: dict[str, Any] | None = None
    #: the family (``rows``' "family") whose rows the verdict reads, where others are shown beside it for reference
    #: (C7's learning speed and rotary rows): counts of comparisons that bear the verdict out read it alone
    deciding: str = ""
    #: whether its comparisons are confirmatory or exploratory (``claim_reading``); "" for a claim without any
    reading: str = ""

    @property
    def open(self) -> bool:
        """Inconclusive, or with an inconclusive half: the summary then states its resolution beside it."""
        return self.verdict == INCONCLUSIVE or INCONCLUSIVE in self.halves.values()


@dataclass(frozen=True)
class Claim:
    """One claim of SCIENCE.md: what it says, who said it, how it is decided."""

    id: str
    title: str
    claim: str
    source: str
    #: the deciding metrics in order (the next is read where the one before carries no information)
    metrics: tuple[str, ...]
    #: the rule in words; ``{floor}`` and ``{margin}`` are filled in from the study
    rule: str
    evaluate: Callable[[ReportContext, ClaimResult], ClaimResult]
    #: starts the claim's measures of stored models on the report's workers (``ReportContext.submit``) before any
    #: claim runs, so the workers stay busy while this process reads and decides, claim after claim
    plan: Callable[[ReportContext], None] | None = None

    @property
    def number(self) -> int:
        return int(self.id[1:])

    def rule_for(self, floor: float, margin: float) -> str:
        """The rule in words with the study's floor and margin, the relative margin and the solved rule filled in;
        a rule on the chain of trained arms' metrics adds how it reads language models."""
        text = self.rule.format(
            floor=f"{floor:.0%}", margin=f"±{100 * margin:g} pp", loss_margin=LOSS_MARGIN_TEXT, solved=SOLVED_TEXT
        )
        return f"{text}; {LM_RULE_TEXT}" if "acc" in self.metrics and "loss" in self.metrics else text

    def run(self, ctx: ReportContext) -> ClaimResult:
        r = ClaimResult(
            id=self.id,
            title=self.title,
            claim=self.claim,
            source=self.source,
            rule=self.rule_for(ctx.floor, ctx.margin),
            doc=f"{DOC}#{self.id.lower()}",
        )
        r = self.evaluate(ctx, r)
        if r.resolution is None:
            r.resolution = claim_resolution(r.rows, INCONCLUSIVE)
        r.reading = r.reading or claim_reading(r.rows)
        return r


def claim_reading(rows: list[dict[str, Any]]) -> str:
    """Whether a claim's comparisons (claims.json rows read on a metric) are confirmatory (SCIENCE.md, "Frozen
    protocols, fresh seeds"): "confirmatory" when all are, "exploratory" when none is, else how many are; "" for a
    claim with none read on a metric (an exact check, a table)."""
    read = [r for r in rows if r.get("metric") and r.get("reading")]
    if not read:
        return ""
    k = sum(r["reading"] == "confirmatory" for r in read)
    if k == len(read):
        return "confirmatory"
    if k == 0:
        return "exploratory"
    return f"mixed: {k} of {len(read)} comparisons confirmatory, the rest exploratory"


REGISTRY: dict[str, Claim] = {}


def claim(
    id: str,
    title: str,
    claim: str,
    source: str,
    rule: str,
    metrics: tuple[str, ...] = (),
    plan: Callable[[ReportContext], None] | None = None,
) -> Callable[[Callable[[ReportContext, ClaimResult], ClaimResult]], Callable]:
    """Declare a claim: registers it, in id order, with the function that gathers its evidence (and, for a claim
    that measures stored models, the ``plan`` that starts those measures early)."""

    def register(fn: Callable[[ReportContext, ClaimResult], ClaimResult]) -> Callable:
        if id in REGISTRY:
            raise ValueError(f"claim {id} declared twice")
        if fn.__name__ != id.lower():  # a helper slipped between the declaration and its function
            raise ValueError(f"claim {id} declared on {fn.__name__}(), not on {id.lower()}()")
        REGISTRY[id] = Claim(id, title, claim, source, tuple(metrics), rule, fn, plan)
        return fn

    return register
