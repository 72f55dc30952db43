"""Claims → evidence → verdict: the objects the report is made of, and the shared context.

Each claim of SCIENCE.md is a function ``(ReportContext) -> ClaimResult`` in one of
``claims_training`` (comparisons of trained arms), ``claims_inside`` (analyses of
encodings and trained models) and ``claims_pretrained`` (MiniLM). Every number in a
ClaimResult is computed here from stored runs or from analyses of stored checkpoints;
``run_ids`` lists the runs it came from.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pelab.report.evidence import ArmStats, Comparison
from pelab.report.verdicts import REPORTED, TOO_SMALL, directional, equivalent
from pelab.study.grid import Study


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]


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
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)


@dataclass
class ReportContext:
    folder: Path
    study: Study
    rows: list[dict[str, Any]]
    frame: pd.DataFrame
    floor: float = 0.8
    margin: float = 0.01
    analyses: dict[str, Any] = field(default_factory=dict)

    @property
    def figures(self) -> Path:
        p = self.folder / "figures"
        p.mkdir(parents=True, exist_ok=True)
        return p

    @property
    def analysis_dir(self) -> Path:
        p = self.folder / "analyses"
        p.mkdir(parents=True, exist_ok=True)
        return p

    def has_checkpoint(self, run_id: str) -> bool:
        return (self.folder / "checkpoints" / f"{run_id}.safetensors").exists()

    def pick_run(self, frame: pd.DataFrame) -> str | None:
        """The lowest-seed finished run of an arm that has a checkpoint: the one analyses look at."""
        done = frame[frame.status == "done"].sort_values("seed")
        for run_id in done.run_id:
            if self.has_checkpoint(run_id):
                return str(run_id)
        return None

    def analyse(self, name: str, run_id: str | None = None, **scheme: Any) -> dict[str, Any] | None:
        """Run (or reuse) one analysis on a stored checkpoint or a scheme; None when impossible."""
        from pelab.analysis import AnalysisInput, analysis, load_trained
        from pelab.config import PositionConfig

        key = json.dumps([name, run_id, scheme], sort_keys=True, default=str)
        if key in self.analyses:
            return self.analyses[key]
        label = "-".join(str(v) for k, v in sorted(scheme.items()) if k not in ("d", "length", "grid"))
        out = self.analysis_dir / (f"{name}-{run_id}" if run_id else f"{name}-{label}-{scheme.get('d')}")
        if run_id is not None:
            model, run = load_trained(self.folder, run_id)
            inputs = AnalysisInput.for_model(model, run)
        else:
            position = PositionConfig(**{k: v for k, v in scheme.items() if k not in ("d", "length", "grid")})
            inputs = AnalysisInput.for_scheme(position, scheme["d"], scheme["length"], scheme.get("grid"))
        result = analysis(name).run(inputs, out)
        result["folder"] = out  # where its figures are (added after the JSON is written)
        self.analyses[key] = result
        return result


# --- formatting ---------------------------------------------------------------------
def pct(x: float) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def pp(mean: float, lo: float, hi: float) -> str:
    if math.isnan(mean):
        return "–"
    if math.isnan(lo):
        return f"{100 * mean:+.1f} pp"
    return f"{100 * mean:+.1f} pp [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def arm_cell(a: ArmStats) -> str:
    if not a.seeds:
        return "no finished run"
    if math.isnan(a.lo):
        return pct(a.mean)
    return f"{pct(a.mean)} [{pct(a.lo)}, {pct(a.hi)}]"


def comparison_table(
    title: str, comparisons: list[Comparison], where_keys: list[str], verdicts: list[str] | None = None
) -> Table:
    """One row per comparison: the held-equal keys, both arms, the paired difference, size, verdict."""
    verdicts = verdicts if verdicts is not None else [REPORTED] * len(comparisons)
    rows = []
    for c, v in zip(comparisons, verdicts, strict=True):
        rows.append(
            [
                c.where(where_keys),
                f"{c.a.label}: {arm_cell(c.a)}",
                f"{c.b.label}: {arm_cell(c.b)}",
                pp(c.diff, c.lo, c.hi),
                str(c.pairs),
                f"{c.a.params:,} / {c.b.params:,}",
                f"{c.a.flops:,} / {c.b.flops:,}",
                v,
            ]
        )
    return Table(title, COMPARISON_COLUMNS, rows)


COMPARISON_COLUMNS = [
    "held equal",
    "arm A",
    "arm B",
    "A − B [95% CI]",
    "seeds",
    "params A / B",
    "FLOPs/token A / B",
    "verdict",
]


def learned(c: Comparison, floor: float) -> bool:
    return c.a.learned(floor) and c.b.learned(floor)


def directional_verdict(c: Comparison, ctx: ReportContext, direction: int = 1) -> str:
    if not learned(c, ctx.floor):
        return TOO_SMALL
    return directional(c.lo, c.hi, ctx.margin, direction)


def equivalence_verdict(c: Comparison, ctx: ReportContext) -> str:
    if not learned(c, ctx.floor):
        return TOO_SMALL
    return equivalent(c.lo, c.hi, ctx.margin)


def all_claims() -> list[Any]:
    from pelab.report import claims_inside, claims_pretrained, claims_training

    order = {}
    for module in (claims_inside, claims_training, claims_pretrained):
        for fn in module.CLAIMS:
            order[fn.__name__] = fn
    return [order[f"c{i}"] for i in range(1, 18) if f"c{i}" in order]
