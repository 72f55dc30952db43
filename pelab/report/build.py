"""Build the report of a study folder from its database (and stored checkpoints) alone.

``build_report`` never trains: every number comes from the results store or from an
analysis of a stored checkpoint, so `pelab report DIR` rebuilds the same report.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

import pelab
from pelab.errors import NothingFinished, PelabError
from pelab.files import write_atomic
from pelab.records import same_computation, trained_on
from pelab.report import rates
from pelab.report.answer import gap_figure, lm_sentences
from pelab.report.catalog import all_claims
from pelab.report.claim_lines import claim_line
from pelab.report.compact import published
from pelab.report.context import ReportContext, measuring_code, protocol_line, report_pool
from pelab.report.figures import curves_plot
from pelab.report.first_screen import answer_sentences
from pelab.report.looks import VERDICT_CLASS, VERDICT_GLYPH
from pelab.report.overview import claim_forests, overview_figure
from pelab.report.progress import CLAIM, WRITING, OnProgress, ReportWork
from pelab.report.published import published_section
from pelab.report.registry import Claim, ClaimResult, Figure, Section, Table
from pelab.report.render import template_env, verdict_split
from pelab.report.summary import DOC, claims_markdown, not_measured, run_elsewhere, scale, seeds_line
from pelab.rules import ERROR, FLOOR_POLICY, NOT_RUN
from pelab.study.design import reading_under, seeds_text
from pelab.study.folder import StudyFolder
from pelab.study.protocol import confirmatory_runs, read_protocol, reading_protocol

__all__ = ["VERDICT_CLASS", "VERDICT_GLYPH", "build_report", "decide_claims", "template_env", "verdict_split"]
from pelab.study.grid import Study
from pelab.study.stats import runs_frame
from pelab.study.store import Store


def machine_facts(rows: Sequence[dict[str, Any]] = ()) -> dict[str, str]:
    """This machine, which builds the report, and the kinds of machine the finished runs recorded training on
    (``versions.cpu`` or ``versions.gpu``): a run is bit for bit again only on its own kind (`pelab verify`)."""
    from pelab.device import cpu_name

    kinds = Counter(
        trained_on(r) or f"{r.get('device', 'cpu')}, not recorded" for r in rows if r.get("status") == "done"
    )
    return {
        "cpu": cpu_name(),
        "cores": str(os.cpu_count()),
        "torch threads": str(torch.get_num_threads()),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pelab": pelab.__version__,
        **({"runs trained on": "; ".join(f"{k}: {n} run(s)" for k, n in kinds.most_common())} if kinds else {}),
    }


def load_context(folder: Path) -> ReportContext:
    with Store(folder, create=False) as store:
        study = store.study()  # damaged stored text: one line naming results.sqlite
        rows = store.rows()
        excluded = len(store.excluded)  # rows that do not hold together: left out, and the report says how many
    if study is None:
        raise PelabError(f"out: {folder} has no study file recorded; run `pelab study` there first")
    study, design = StudyFolder(folder).load_design(study)  # a sequential study: the seeds its rounds added
    ids = {r.run_id for r in study.runs}
    rows = [r for r in rows if r["run_id"] in ids]
    rows = same_computation(rows)
    if not rows:
        raise NothingFinished(f"out: {folder} has no finished runs of its study yet")
    protocol = read_protocol(folder)
    confirmatory = confirmatory_runs(protocol, study, {r["run_id"]: str(r["finished_at"]) for r in rows})
    frame = runs_frame(rows, floor=study.report["floor"])
    widths = {r.run_id: r.model.widths().model for r in study.runs}
    frame["width"] = frame.run_id.map(widths)  # the model's actual width (d + d_position for concat_wide)
    chosen, choices = rates.choose(frame, study.tuned)
    return ReportContext(
        folder=folder,
        study=study,
        rows=rows,
        frame=chosen,
        frame_all=frame,
        rate_choices=choices,
        excluded=excluded,
        design=design,
        protocol=protocol,
        confirmatory=confirmatory,
        **study.report,
    )


def plugin_rows(records: list[dict[str, Any]]) -> list[list[str]]:
    """The plugins a study used, one row each for the report's method section: name, file, sha256 prefix,
    version and what it registered."""
    return [[str(r.get("name")), str(r.get("file")), str(r.get("sha256"))[:12], str(r.get("version") or "none"),
             ", ".join(str(x).replace(":", " ") for x in r.get("provides", []))] for r in records]  # fmt: skip


def claim_plugins(ctx: ReportContext, run_ids: Sequence[str]) -> dict[str, Any]:
    """``{"plugins": [...]}`` for a claim whose runs used plugins' code (their records, without the source), so
    claims.json says which code each verdict rests on; nothing for a claim of pelab's own classes alone."""
    runs = set(run_ids)
    names = {n for r in ctx.rows if r["run_id"] in runs for n in (r["config"].get("plugins") or {})}
    records = [{k: v for k, v in rec.items() if k != "source"} for rec in ctx.study.plugins if rec["name"] in names]
    return {"plugins": records} if records else {}


def rate_note(study: Study) -> str:
    """How the learning rate was set, said where every reader looks: one fixed rate is not neutral."""
    if study.learning_rates:
        return (f"each arm kept its best of {rates.rate_lists(study)} on validation and is scored on test (see "
                "'Learning rates' below for each arm's rate and the verdicts at one fixed rate)")  # fmt: skip
    fixed = sorted({r.train.lr for r in study.runs})
    return (f"one fixed rate per task ({', '.join(f'{x:g}' for x in fixed)}), the same for every arm of a comparison, "
            "not tuned per arm: an arm that wants another rate can lose for that reason alone (the gpu preset "
            "gives its C7 and C18 arms a grid of rates)")  # fmt: skip


def rates_section(ctx: ReportContext, claims: list[ClaimResult]) -> Section | None:
    """Which rate each tuned arm kept, and every claim decided again at one fixed rate: a verdict that
    changes is a verdict that hangs on the learning rate."""
    if not ctx.rate_choices or ctx.frame_all is None:
        return None
    tried = ctx.study.learning_rates
    fixed = rates.fixed_rate(tried)
    varying = rates.varying_keys(ctx.rate_choices)
    rows = []
    for c in ctx.rate_choices:
        cells = [
            f"{c.val_loss[lr]:.4f}" + (" ◀" if lr == c.chosen else "") if lr in c.val_loss else "–" for lr in tried
        ]
        rows.append([c.describe(varying), f"{c.chosen:g}", *cells])
    table = Table(
        "Each arm's rate (validation loss, mean over seeds; ◀ kept)", ["arm", "kept", *map("{:g}".format, tried)], rows
    )
    at_fixed = replace(
        ctx, frame=rates.at_rate(ctx.frame_all, ctx.study.tuned, fixed), rate_choices=[], analyses=dict(ctx.analyses)
    )
    decided = {c.id for c in claims}
    fixed_claims = {c.id: c for c in _run_claims(at_fixed, [s for s in all_claims() if s.id in decided])}
    changed, compare = 0, []
    for c in claims:
        other = fixed_claims.get(c.id)
        if other is None:
            continue
        same = other.verdict == c.verdict
        changed += not same
        compare.append([c.id, c.verdict, other.verdict, "same" if same else "changes"])
    counts = Counter(c.chosen for c in ctx.rate_choices)
    # an arm's edge is that of the rates it tried, not of the study's union (full gives each width its own two)
    at_edge = sum(c.chosen in (min(c.val_loss), max(c.val_loss)) for c in ctx.rate_choices if len(c.val_loss) > 1)
    pairs = all(len(c.val_loss) == 2 for c in ctx.rate_choices)
    edge = (
        [f"{at_edge} of {len(ctx.rate_choices)} arms kept the smallest or largest rate they tried"
         + (" (each tried two, so every kept rate is at an edge of its list)" if pairs else "")
         + ": their best rate may lie outside it, so widen the list before reading a verdict that hangs on them."]
        if at_edge else []
    )  # fmt: skip
    missing = sum(fixed not in c.val_loss for c in ctx.rate_choices if c.val_loss)
    left_out = f" ({missing} arms did not train at {fixed:g} and are left out of that check)" if missing else ""
    return Section(
        "rates",
        "Learning rates",
        [
            f"Learning rate is a nuisance parameter here: {len(ctx.rate_choices)} arms each trained at "
            f"{rates.rate_lists(ctx.study, 'every rate in ')} with the same seeds, data and budget, kept the rate "
            "with the lowest mean validation loss, and every claim above reads that rate's test split, which nothing "
            "was chosen on. "
            "Rates kept: " + ", ".join(f"{lr:g} by {n}" for lr, n in sorted(counts.items())) + ".",
            *edge,
            f"At the single fixed rate {fixed:g} (the middle one tried){left_out} {changed} of {len(compare)} verdicts "
            "change.",
        ],
        [
            table,
            Table(
                f"Verdicts with each arm's best rate and at {fixed:g} for every arm",
                ["claim", "best rate", f"at {fixed:g}", ""],
                compare,
            ),
        ],
    )


def _curves(ctx: ReportContext) -> list[Figure]:
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    kept = set(ctx.frame.run_id)  # a tuned arm's curves at the rate it kept
    for r in ctx.rows:
        if r["run_id"] in kept:
            by_task[r["config"]["task"]["name"]].append(r)
    figs = []
    for task, rows in by_task.items():
        widths = {r["config"]["model"]["d"] for r in rows}
        groups: dict[str, list] = defaultdict(list)
        for r in rows:
            if r["status"] != "done":
                continue
            m = r["config"]["model"]
            label = f"{m['position']['scheme']} + {m['combine']}" + (f", d={m['d']}" if len(widths) > 1 else "")
            groups[label].append(r["curve"])
        path = curves_plot(ctx.figures / f"curves-{task}.png", dict(groups), f"{task}: learning curves")
        figs.append(Figure(f"{task}: training loss", path, "mean over seeds"))
    return figs


def sequential_method(claims: list[ClaimResult]) -> str:
    """The method line for sequential seeds when any comparison was read under a design (its claims.json row
    carries its looks), else "": a fixed-seed report says nothing of it."""
    from pelab.study.sequential import Looks, method_line

    for c in claims:
        for row in c.rows:
            if row.get("looks"):
                return method_line(Looks.from_record(row["looks"]).spending)
    return ""


def sequential_text(ctx: ReportContext, claims: list[ClaimResult]) -> str:
    """The method line's sentence on seeds for a sequential study: the method, naming the spending function the study
    file asks for (``[sequential] spending``), the design and the seeds each arm got; "" for fixed seeds."""
    if ctx.design is None or ctx.study.sequential is None:
        return sequential_method(claims)
    from pelab.study.sequential import method_line

    method = method_line(ctx.study.sequential.spending)  # type: ignore[arg-type]
    return f"{method}; {seeds_text(ctx.study, ctx.design)}"


def _plan_claims(ctx: ReportContext, specs: Sequence[Claim]) -> None:
    """Start every claim's measures of stored models on the workers, in claim order, before any claim runs: the
    workers then stay busy while this process decides claim after claim, instead of waiting for one claim's
    seeds at a time. A plan that fails starts nothing; its claim meets the same error and shows it."""
    for spec in specs:
        if spec.plan is not None:
            try:
                spec.plan(ctx)
            except Exception:  # noqa: BLE001 - shown by the claim itself
                continue


def _run_claims(ctx: ReportContext, specs: Sequence[Claim]) -> list[ClaimResult]:
    out = []
    for spec in specs:
        try:
            out.append(spec.run(ctx))
        except PelabError:
            raise
        except Exception as e:  # a broken claim is shown, never hidden
            out.append(
                ClaimResult(
                    id=spec.id,
                    title=f"{spec.title} (evidence could not be computed)",
                    claim=spec.claim,
                    source=spec.source,
                    rule=spec.rule_for(ctx.floor, ctx.margin),
                    verdict=ERROR,
                    key=f"{type(e).__name__}: {e}",
                    caveats=[traceback.format_exc(limit=3)],
                )
            )
        if ctx.work is not None:
            ctx.work.finished(f"claim {spec.id}")
    return out


def decide_claims(folder: str | Path, only: Sequence[str] = ()) -> list[ClaimResult]:
    """Every claim (or those in ``only``) decided from the stored runs, as the report decides them (analyses of
    stored models included), without writing the report: what a sequential study reads after each round. A
    round that buys seeds for a few claims decides only those, so it measures only what they read."""
    ctx = load_context(Path(folder))
    ctx.display = False  # verdicts only: no figure, no analysis of a displayed run
    with report_pool() as pool, reading_under(ctx.design), reading_protocol(ctx.confirmatory):
        ctx.pool = pool
        return _claims(ctx, only)


def keep_measures(folder: str | Path, on_progress: OnProgress | None = None) -> int:
    """Take, and keep in the database, every measure a report could read of every finished run of this study,
    of arms that learned or not, and those of the runs a report only shows; returns how many measures are kept.
    What a study about to travel without its weights needs (a long study carried from one machine to the next,
    docs/study.md): a report reads only the arms that learned, and an arm below the floor today can be above it
    after the seeds a later round adds, when its first seeds' weights are gone. No verdict is written or shown,
    no figure drawn."""
    from pelab.study.store import Store

    folder = Path(folder)
    ctx = load_context(folder)
    ctx.work = ReportWork(on_progress)
    ctx.display = True  # the measures of what a report shows (C10's collisions of one run) are kept too

    unreadable: set[str] = set()

    def every_run(arm: Any) -> list[str]:
        done = [str(r) for r in arm[arm.status == "done"].sort_values("seed").run_id]
        unreadable.update(r for r in done if not ctx.measurable(r))
        return [r for r in done if r not in unreadable]

    analyse = ctx.analyse

    def schemes_only(name: str, run_id: str | None = None, at_init: bool = False, **scheme: Any) -> Any:
        """A scheme's analysis (a fresh encoder) as the report takes it; none of one run's weights, drawn only
        for figures (and where the weights are gone, a report goes without them)."""
        return None if run_id is not None else analyse(name, run_id, at_init, **scheme)

    ctx.learned_runs = every_run  # type: ignore[method-assign]
    ctx.unmeasured = lambda arm: False  # type: ignore[method-assign]  # a pair is measured whole, never skipped
    ctx.analyse = schemes_only  # type: ignore[method-assign]
    measuring = [c.id for c in all_claims() if c.plan is not None]  # a claim that measures plans its measures
    frames = [ctx.frame]  # the rate each tuned arm keeps now, and every rate it tried: a later round may change it
    if ctx.frame_all is not None and ctx.study.tuned:
        frames += [rates.at_rate(ctx.frame_all, ctx.study.tuned, lr) for lr in ctx.study.learning_rates]
    results = []
    with report_pool() as pool, reading_under(ctx.design), reading_protocol(ctx.confirmatory):
        ctx.pool = pool
        for frame in frames:
            ctx.frame = frame
            results += _claims(ctx, measuring)
        ctx.pool = None
    broken = [c for c in results if c.verdict == ERROR]
    if broken:  # its measures may be missing: carried so, the weights gone, they could not be taken again
        raise PelabError(f"report: claim {broken[0].id} could not read its measures ({broken[0].key[:200]})")
    if unreadable:  # it would travel with neither: the stamp that lets it travel is not written
        first = sorted(unreadable)[0]
        raise PelabError(
            f"report: {len(unreadable)} finished run(s) have neither readable weights nor kept measures (the first: "
            f"{first}); put back their checkpoints, or delete their rows so that `pelab study` trains them again"
        )
    with Store(folder, create=False) as store:
        store.set_meta(measures_kept=store.finished_stamp())
        return len(store.stored_measures(measuring_code()))


#: The claims that read MiniLM's own tables (``run_pretrained``), measured once beside the other claims.
READ_PRETRAINED = ("C11", "C16")


def _claims(ctx: ReportContext, only: Sequence[str] = ()) -> list[ClaimResult]:
    from pelab.report.pretrained import run_pretrained

    specs = [c for c in all_claims() if not only or c.id in only]
    if ctx.work is not None:  # every claim counted before any plans its measures: the first lines see the whole list
        for spec in specs:
            ctx.work.expect(f"claim {spec.id}", CLAIM)
    pretrained = not only or any(c in only for c in READ_PRETRAINED)
    if pretrained:  # MiniLM's tables are measured (nothing trains) on a worker while the first claims run.
        ctx.prefetch("pretrained", run_pretrained, ctx.folder, None)
    _plan_claims(ctx, specs)
    claims = _run_claims(ctx, specs)
    if pretrained:
        ctx.prefetched("pretrained")  # written whole to the folder even when no claim read it
    return claims


def build_report(
    folder: str | Path, command: str | None = None, on_progress: OnProgress | None = None
) -> tuple[Path, Path, list[ClaimResult]]:
    """Decide every claim and write report.html, report.md, claims.json and the claims' rules; ``on_progress`` is
    told (done, known, time left) as each measure, claim and the writing ends (``pelab.report.progress``)."""
    folder = Path(folder)
    started = time.perf_counter()
    work = ReportWork(on_progress)
    work.expect("writing", WRITING)
    ctx = load_context(folder)
    ctx.work = work
    with report_pool() as pool, reading_under(ctx.design), reading_protocol(ctx.confirmatory):
        ctx.pool = pool
        claims = _claims(ctx)
        published_ = published_section(ctx, claims)
        sections = [s for s in (rates_section(ctx, claims),) if s is not None]
        ctx.pool = None
    curves = _curves(ctx)
    overview, _ = overview_figure(ctx, claims)
    gap = gap_figure(ctx, claims)
    claim_forests(ctx, claims)
    with Store(folder, create=False) as store:
        seconds = store.meta("study_seconds")
        cmd = command or store.meta("command") or f"pelab study --out {folder}"
    done = sum(r["status"] == "done" for r in ctx.rows)  # every stored run: those at a rate not kept included
    failed = len(ctx.rows) - done
    unkept = done - int((ctx.frame.status == "done").sum())  # read only in 'Learning rates'
    held = [
        "task (per comparison)",
        "data order and evaluation sets (paired seeds)",
        "steps, batch, optimiser, learning-rate schedule",
        "width d, layers, heads",
    ]
    env = template_env(folder)
    gone = {c.id for c in claims if c.verdict == NOT_RUN}
    lm = lm_sentences(ctx, claims)
    data = dict(
        study=ctx.study,
        claims=claims,
        sections=sections,
        curves=curves,
        runs=len(ctx.rows),
        done=done,
        failed=failed,
        unkept=unkept,
        excluded=ctx.excluded,
        undrawn=", ".join(sorted(ctx.undrawn)),
        unmeasurable=len(ctx.unmeasurable),
        seeds=seeds_line(ctx),
        floor=ctx.floor,
        floor_policy=FLOOR_POLICY,
        rate_note=rate_note(ctx.study),
        margin=ctx.margin,
        axes=ctx.study.axes,
        held=held,
        command=cmd,
        machine=machine_facts(ctx.rows),
        study_seconds=seconds,
        report_seconds=None,
        source=ctx.study.source,
        Table=Table,
        sentences=answer_sentences(claims, ctx.floor, ctx.margin),
        lm_answer=lm.sentences,
        lm_where=lm.where,
        gap=gap,
        overview=overview,
        published=published(published_.tables[0].columns, published_.tables[0].rows),
        published_about=published_.paragraphs,
        lines={c.id: claim_line(c) for c in claims},
        not_measured=[x for x in not_measured(ctx) if re.match(r"C\d+", x).group() not in gone]
        + run_elsewhere(claims),  # a part of a claim that ran, then the claims that did not run at all, by id
        scale=scale(ctx),
        sequential=sequential_text(ctx, claims),
        plugins=plugin_rows(ctx.study.plugins),
        protocol=protocol_line(ctx),
    )
    data["report_seconds"] = f"{time.perf_counter() - started:.0f}"
    html_path, md_path = folder / "report.html", folder / "report.md"
    write_atomic(html_path, env.get_template("report.html.j2").render(**data))
    write_atomic(md_path, env.get_template("report.md.j2").render(**data))
    write_atomic(folder / DOC, claims_markdown())
    write_atomic(
        folder / "claims.json",
        json.dumps(
            [
                {
                    "id": c.id,
                    "verdict": c.verdict,
                    "halves": c.halves,
                    "key": c.key,
                    "resolution": c.resolution,
                    "metric": c.metric,
                    "reading": c.reading,
                    "runs": c.run_ids,
                    "rows": c.rows,
                    **claim_plugins(ctx, c.run_ids),
                }
                for c in claims
            ],
            indent=1,
            default=float,
        ),
    )
    work.finished("writing")
    return html_path, md_path, claims
