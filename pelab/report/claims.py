"""Claims → evidence → verdict: the claims registry, the objects the report is made of, and the shared context.

Each claim of SCIENCE.md is one declaration (``@claim(...)``: id, the claim in a sentence,
who made it, its deciding metrics, its rule in words) on a function
``(ReportContext, ClaimResult) -> ClaimResult`` in ``claims_training`` (comparisons of
trained arms), ``claims_inside`` (analyses of encodings and trained models) or
``claims_pretrained`` (MiniLM). The function gathers typed evidence from stored runs and
stored checkpoints and hands it to a pure rule (``pelab.report.rules`` and the
``rule_cN`` functions beside each claim), which returns the verdict; nothing else sets
one. Adding a claim is adding a declaration. ``docs/claims.md`` is written from this
registry (`pelab claims`), so the documentation and the code state one rule.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from pelab import forkserver
from pelab.report.resolution import claim_resolution
from pelab.report.rules import ACC, LOSS_DOUBTS, OVERLAP, PROBE, SHARE, Family, Row, Side, metric
from pelab.report.verdicts import INCONCLUSIVE, NO_INFO, SUPPORTED, TOO_SMALL
from pelab.study.folder import StudyFolder
from pelab.study.grid import Study

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
        return self.rule.format(floor=f"{floor:.0%}", margin=f"±{100 * margin:g} pp")

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
        return r


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
        REGISTRY[id] = Claim(id, title, claim, source, tuple(metrics), rule, fn, plan)
        return fn

    return register


def measure_job(folder: str, name: str, run_id: str, at_init: bool) -> dict[str, Any]:
    """One measure on one stored model; a top-level function, so worker processes can run it."""
    from pelab.analysis import AnalysisInput, load_trained
    from pelab.analysis.measures import MEASURES

    model, run = load_trained(Path(folder), run_id)
    inputs = AnalysisInput.for_model(model, run)
    if at_init:
        inputs = replace(inputs, model=inputs.initial_model())
    return MEASURES[name](inputs)


def _worker_init() -> None:
    """Each report worker: torch on one thread, and Ctrl-C (which a terminal sends to the whole group) ends it
    at once and quietly: the driver alone says "interrupted" and exits 130. A write it was making is left as a
    temp file, never as a part of its target, and the next report removes it."""
    import signal

    import torch

    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    torch.set_num_threads(1)


def _measure_key(name: str, run_id: str, at_init: bool) -> str:
    return json.dumps(["measure", name, run_id, at_init])


@contextmanager
def report_pool(workers: int | None = None) -> Iterator[Executor | None]:
    """Worker processes for the report's per-seed measures (one per core; none on one core). Started from a
    fork server, so they do not inherit this process's threads; each runs torch on one thread."""
    n = workers if workers is not None else (os.cpu_count() or 1)
    if n < 2:
        yield None
        return
    before = set(mp.active_children())
    pool = ProcessPoolExecutor(max_workers=n, mp_context=forkserver.context(), initializer=_worker_init)
    try:
        yield pool
    except BaseException:
        # Interrupted: a worker still starting when Ctrl-C came ignored it (pelab.forkserver) and would go on
        # to measure; end every worker this pool started rather than wait for them.
        for child in set(mp.active_children()) - before:
            child.kill()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class ReportContext:
    folder: Path
    study: Study
    rows: list[dict[str, Any]]
    frame: pd.DataFrame
    floor: float = 0.8
    margin: float = 0.01
    analyses: dict[str, Any] = field(default_factory=dict)
    #: every run's row before each tuned arm was reduced to its best rate (``pelab.report.rates``)
    frame_all: pd.DataFrame | None = None
    rate_choices: list[Any] = field(default_factory=list)
    #: stored runs left out because their rows do not hold together (``pelab.study.store.row_problem``)
    excluded: int = 0
    #: worker processes for ``measure_many`` (``report_pool``); None measures in this process
    pool: Executor | None = None
    #: analyses started on ``pool`` beside the claims (``prefetch``), by name, until first read
    pending: dict[str, Future] = field(default_factory=dict)
    #: measures started on ``pool`` ahead of their first read (``submit``), by cache key, until first read
    started: dict[str, Future] = field(default_factory=dict)
    #: a sequential study's design (``pelab.report.design``): the looks of every comparison; None: fixed seeds
    design: Any = None

    def prefetch(self, name: str, job: Callable[..., Any], *args: Any) -> None:
        """Start ``job(*args)`` on a worker now, so it runs while the claims before its first reader run (and
        while this process waits on their measures); without a pool it runs here, at once."""
        if self.pool is None:
            self.analyses[name] = job(*args)
        else:
            self.pending[name] = self.pool.submit(job, *args)

    def prefetched(self, name: str) -> Any:
        """A prefetched analysis, waited for on first read; None when none was started. A job that failed
        raises its error at every read, so no reader mistakes a failure for an analysis that had nothing to
        say (C16 would tell the user MiniLM is not installed)."""
        if name in self.pending:
            self.analyses[name] = self.pending[name].result()  # a failed job raises here, at every read
            del self.pending[name]
        return self.analyses.get(name)

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
        return StudyFolder(self.folder).has_checkpoint(run_id)

    def pick_run(self, frame: pd.DataFrame) -> str | None:
        """The lowest-seed finished run of an arm that has a checkpoint: the one analyses look at."""
        done = frame[frame.status == "done"].sort_values("seed")
        for run_id in done.run_id:
            if self.has_checkpoint(run_id):
                return str(run_id)
        return None

    def learned_runs(self, arm: pd.DataFrame) -> list[str]:
        """Every finished run with a checkpoint of an arm that learned its task (mean accuracy at the floor or
        above), lowest seed first; empty when the arm did not learn: analyses that feed a verdict read these."""
        from pelab.report.evidence import side

        done = arm[arm.status == "done"].sort_values("seed")
        if done.empty or not side(done, "arm").learned(self.floor):  # one test, language models included
            return []
        return [str(r) for r in done.run_id if self.has_checkpoint(str(r))]

    def submit(self, name: str, run_ids: Sequence[str], at_init: bool = False) -> None:
        """Start ``measure`` for these runs on the report's workers without waiting (nothing without a pool). A
        claim's ``plan`` calls this for every model it will read, before any claim runs: the workers then go
        from one measure to the next, claim after claim, instead of idling between one arm's seeds and the
        next arm's while this process decides."""
        if self.pool is None:
            return
        for r in dict.fromkeys(run_ids):
            key = _measure_key(name, r, at_init)
            if key not in self.analyses and key not in self.started:
                self.started[key] = self.pool.submit(measure_job, str(self.folder), name, r, at_init)

    def measure(self, name: str, run_id: str, at_init: bool = False) -> dict[str, Any]:
        """One of ``pelab.analysis.measures`` on a stored checkpoint (or its initialisation); cached. A measure
        started on a worker is waited for; one never started runs here."""
        key = _measure_key(name, run_id, at_init)
        if key not in self.analyses:
            started = self.started.pop(key, None)
            self.analyses[key] = (
                started.result() if started is not None else measure_job(str(self.folder), name, run_id, at_init)
            )
        return self.analyses[key]

    def measure_many(self, name: str, run_ids: Sequence[str], at_init: bool = False) -> dict[str, dict[str, Any]]:
        """``measure`` for every seed of an arm at once: the missing ones run side by side on the report's
        worker processes (one per core), so no core idles while the report reads stored models."""
        missing = [r for r in dict.fromkeys(run_ids) if _measure_key(name, r, at_init) not in self.analyses]
        if len(missing) > 1:
            self.submit(name, missing, at_init)
        return {r: self.measure(name, r, at_init) for r in run_ids}

    def analyse(
        self, name: str, run_id: str | None = None, at_init: bool = False, **scheme: Any
    ) -> dict[str, Any] | None:
        """Run (or reuse) one analysis on a stored checkpoint (or, ``at_init``, on the same model before
        training: same seed, same construction) or on a scheme alone."""
        from pelab.analysis import AnalysisInput, analysis, load_trained
        from pelab.config import PositionConfig

        key = json.dumps([name, run_id, at_init, scheme], sort_keys=True, default=str)
        if key in self.analyses:
            return self.analyses[key]
        label = "-".join(str(v) for k, v in sorted(scheme.items()) if k not in ("d", "length", "grid"))
        stem = f"{name}-{run_id}{'-init' if at_init else ''}"
        out = self.analysis_dir / (stem if run_id else f"{name}-{label}-{scheme.get('d')}")
        if run_id is not None:
            model, run = load_trained(self.folder, run_id)
            inputs = AnalysisInput.for_model(model, run)
            if at_init:
                inputs = replace(inputs, model=inputs.initial_model())
        else:
            position = PositionConfig(**{k: v for k, v in scheme.items() if k not in ("d", "length", "grid")})
            inputs = AnalysisInput.for_scheme(position, scheme["d"], scheme["length"], scheme.get("grid"))
        result = analysis(name).run(inputs, out)
        result["folder"] = out  # where its figures are (added after the JSON is written)
        self.analyses[key] = result
        return result


# --- formatting ---------------------------------------------------------------------
def pct(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def clip(lo: float, hi: float, bounds: tuple[float, float] = (0.0, 1.0)) -> tuple[float, float]:
    """An interval of a bounded metric, for display: never past the metric's range."""
    return (max(lo, bounds[0]), min(hi, bounds[1]))


def interval_cell(mean: float, lo: float, hi: float, key: str = "acc") -> str:
    """An arm's mean and 95% interval over seeds, clipped to the metric's range."""
    m = metric(key)
    if math.isnan(mean):
        return "–"
    if math.isnan(lo):
        return m.fmt_value(mean)
    lo, hi = clip(lo, hi, m.bounds)
    return f"{m.fmt_value(mean)} [{m.fmt_value(lo)}, {m.fmt_value(hi)}]"


def side_cell(s: Side, key: str = "acc") -> str:
    from pelab.study.stats import t_interval

    values = list(s.of(key).values())
    if not values:
        return f"{s.label}: no finished run"
    return f"{s.label}: {interval_cell(*t_interval(values), key)}"


def speed_cell(s: Side) -> str:
    """Mean steps to reach the floor over the seeds that did, and how many did: learning speed, which still
    differs where final accuracy has saturated."""
    reached = list(s.of("steps_to_floor").values())
    seeds = s.seeds()
    if not seeds or "steps_to_floor" not in s.values or s.is_language_model:  # an accuracy floor: not for LMs
        return "–"
    if not reached:
        return f"never (0/{seeds})"
    return f"{sum(reached) / len(reached):.0f} ({len(reached)}/{seeds})"


def level_cell(row: Row) -> str:
    """The level the verdict read; with sequential seeds, also the nominal level its last look was read at."""
    text = "95%" if abs(row.level - 0.95) < 1e-9 else f"{100 * row.level:.2f}% (Holm)"
    if row.test is not None and row.test.looks is not None:
        text += f"; read at the nominal {100 * row.test.read_level(row.level):.2f}% of its last look"
    return text


def family_table(title: str, fam: Family, where_keys: Sequence[str], words: dict[str, str] | None = None) -> Table:
    """One row per comparison: held-equal keys, both arms (accuracy, and the deciding metric when it is
    another), the metric that decided, the paired difference at the level that decided it, size, verdict."""
    words = words or {}
    rows = []
    for row, place in zip(fam.rows, places(fam, where_keys), strict=True):
        c, t = row.comparison, row.test
        # probe scores, overlaps: measured on the models, not run metrics; a run has no accuracy to show beside them
        measured = t is not None and t.metric.key not in RUN_METRICS
        # a row without a test (a measure at its ceiling) still shows the measure, not the task's accuracy
        shown = t.metric.key if t is not None else next((k for k in c.a.values if k in MEASURES), None)
        cells = (
            [f"{side_cell(s, shown)} {metric(shown).label}" for s in (c.a, c.b)]
            if shown is not None and shown not in RUN_METRICS
            else [side_cell(c.a), side_cell(c.b)]
        )
        if c.a is c.b:  # a row that stands for an arm never measured (C2's overlap, C8's probe): one arm, shown once
            cells[1] = "–"
        if t is not None and not measured and t.metric.key != "acc":
            cells = [f"{cell}; {side_cell(s, t.metric.key).split(': ', 1)[1]} {t.metric.label}"
                     for cell, s in zip(cells, (c.a, c.b), strict=True)]  # fmt: skip
        decided = t.metric.label if t is not None else "–"
        if row.skipped and t is not None:
            decided += f" ({'; '.join(row.skipped)})"
        rows.append(
            [
                place,
                *cells,
                decided,
                row.describe() if t is not None else "; ".join(row.skipped) or "–",
                level_cell(row) if t is not None else "–",
                res.text if (res := row.resolution) is not None else "–",
                str(min(c.a.seeds(), c.b.seeds())),
                f"{c.a.params:,} / {c.b.params:,}" if c.a.params and c.b.params else "–",
                f"{c.a.flops:,} / {c.b.flops:,}" if c.a.flops and c.b.flops else "–",
                f"{speed_cell(c.a)} / {speed_cell(c.b)}",
                words.get(row.verdict, row.verdict),
            ]
        )
    return Table(f"{title} — {fam.explain()}", FAMILY_COLUMNS, rows)


def places(fam: Family, keys: Sequence[str]) -> list[str]:
    """Each row's held-equal values for ``keys``, and, where two rows share those, the other settings that tell
    them apart ("task=offset, scheme=sinusoidal, d=32 (layout=tensor2tensor)"): no two rows read alike."""
    from pelab.report.evidence import config_labels

    wheres = [dict(row.comparison.where) for row in fam.rows]
    extra = config_labels(wheres, list(keys))
    return [row.comparison.place(list(keys)) + (f" ({x})" if x else "") for row, x in zip(fam.rows, extra, strict=True)]


#: Metrics every run stores: a family table shows each arm's accuracy, then the deciding one beside it.
RUN_METRICS = ("acc", "loss", "auc", "bpb")
#: What is measured on trained models rather than stored by a run (``measured_side``'s keys).
MEASURES = (PROBE.key, OVERLAP.key, SHARE.key)

FAMILY_COLUMNS = [
    "held equal",
    "arm A (accuracy [95% CI])",
    "arm B",
    "deciding metric",
    "A − B [interval]",
    "interval level",
    "what the interval establishes (resolution)",
    "seeds",
    "params A / B",
    "FLOPs/token A / B",
    "steps to floor A / B (seeds that reached it)",
    "verdict",
]


def row_records(fam: Family, label: str = "") -> list[dict[str, Any]]:
    """A family's rows as claims.json stores them: enough to check a verdict without the report."""
    out = []
    for row in fam.rows:
        c, t = row.comparison, row.test
        out.append(
            {
                "family": label,
                "where": {k: (v.item() if hasattr(v, "item") else v) for k, v in c.where.items()},
                "a": c.a.label,
                "b": c.b.label,
                "a_runs": list(c.a.run_ids),
                "b_runs": list(c.b.run_ids),
                "a_acc": c.a.mean("acc"),
                "b_acc": c.b.mean("acc"),
                "metric": t.metric.key if t is not None else None,
                "diff": t.mean if t is not None else None,
                "lo": row.interval[0] if t is not None else None,
                "hi": row.interval[1] if t is not None else None,
                "level": row.level,
                "seeds": min(c.a.seeds(), c.b.seeds()),
                "looks": t.looks.record() if t is not None and t.looks is not None else None,
                "resolution": res.record() if (res := row.resolution) is not None else None,
                "skipped": row.skipped,
                "notes": row.notes,
                "verdict": row.verdict,
            }
        )
    return out


def loss_disagrees(records: Sequence[dict[str, Any]]) -> bool:
    """Every supporting row (``row_records``) won on accuracy where held-out loss does not confirm it
    (``rules.second_opinion``): the headline says so, since a reader discounts such a win."""
    wins = [r for r in records if r["verdict"] == SUPPORTED]
    return bool(wins) and all(any(n.startswith(LOSS_DOUBTS) for n in r.get("notes", [])) for r in wins)


def speed_only(records: Sequence[dict[str, Any]]) -> bool:
    """Every supporting row (claims.json records: ``row_records``) was decided on learning speed (AUC): both arms
    had solved the task, so the win says how fast, not how well. SCIENCE.md allows that fallback; the key and
    the headline tell the reader."""
    wins = [r for r in records if r["verdict"] == SUPPORTED]
    return bool(wins) and all(r["metric"] == "auc" for r in wins)


def used_metrics(*families: Family) -> str:
    """The deciding metric as it was used across a claim's comparisons, for the reader."""
    used: dict[str, int] = {}
    skipped = 0
    for fam in families:
        for row in fam.rows:
            if row.test is not None:
                used[row.test.metric.label] = used.get(row.test.metric.label, 0) + 1
                skipped += bool(row.skipped)
            elif row.verdict == NO_INFO:
                used["no informative metric"] = used.get("no informative metric", 0) + 1
    if not used:
        return ""
    text = ", ".join(f"{k} ({n} comparison{'s' if n > 1 else ''})" for k, n in used.items())
    if skipped:
        text += f"; {skipped} fell back from {ACC.label}, which carried no information there"
    return text


def runs_of(*families: Family) -> list[str]:
    return sorted({r for fam in families for row in fam.rows for r in row.comparison.run_ids()})


def learned_rows(fam: Family) -> list[Row]:
    """Rows that entered the verdict: an arm above the floor (``rules.FLOOR_POLICY``)."""
    return [r for r in fam.rows if r.verdict != TOO_SMALL]
