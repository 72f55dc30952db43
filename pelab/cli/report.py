"""`pelab report` and `pelab results`: what a study folder holds, without training."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.markup import escape

from pelab.cli.app import PluginOption, TrustOption, app, console, folder_plugins
from pelab.errors import PelabError

if TYPE_CHECKING:
    from pelab.report.progress import OnProgress

T = TypeVar("T")


def _older_runs_note(out: Path) -> None:
    """One line when a folder mixes runs of two training computations: the report reads the current one's."""
    from pelab.records import ENGINE
    from pelab.study.store import Store

    with Store(out, create=False) as store:  # quiet: the report's own reading counts what it left out, once
        versions = [r["versions"] for r in store.rows(quiet=True) if r["status"] == "done"]
    engines = [v.get("engine") if isinstance(v, dict) else None for v in versions]
    older = sum(e != ENGINE for e in engines)
    if older and older < len(engines):
        console.print(
            f"[yellow]{older} stored run(s) were trained by an older computation; the report leaves them out "
            "(`pelab study` trains them again)[/]"
        )


def _told(label: str, what: str, job: Callable[[OnProgress], T], command: str = "report") -> tuple[T, float]:
    """``job(on_progress)`` behind the runs' kind of progress (a bar, or plain lines in a log file, opened by a line
    that says, as ``command``, what is done); returns its result and its seconds."""
    from pelab.study.driver import progress_display

    start = time.perf_counter()
    if not console.is_terminal:  # a log file gets plain lines where a terminal gets a bar
        console.print(f"{command}: {what}", markup=False)
    with progress_display(console, quiet=False) as progress:
        task = progress.add_task(label, total=1, completed=0, failed="", left="")

        def told(done: int, known: int, left: str) -> None:
            progress.update(task, total=known, completed=done, left=left)

        result = job(told)
    return result, time.perf_counter() - start


def _report(out: Path) -> None:
    from pelab.report.build import build_report
    from pelab.report.console import summary_table

    _older_runs_note(out)
    (html_path, md_path, claims), seconds = _told(
        "report", "measures of stored models, claims, figures and pages", lambda on: build_report(out, on_progress=on)
    )
    if not console.is_terminal:
        console.print(f"report: done in {seconds:.0f} s", markup=False)
    summary_table(console, claims)
    console.print(f"report: [bold]{escape(str(html_path))}[/] (and {escape(md_path.name)}); open it in a browser")


@app.command("report")
def report_cmd(
    out: Annotated[Path, typer.Argument(help="study folder")],
    plugin: PluginOption = None,
    trust_plugins: TrustOption = False,
    keep_measures: Annotated[
        bool,
        typer.Option(
            "--keep-measures",
            help="write no report: take and keep in the database every measure of every stored model (arms that "
            "learned or not), so the study can travel, or go on, without its checkpoints (docs/study.md)",
        ),
    ] = False,
) -> None:
    """Rebuild a study's report from its database and checkpoints, without training."""
    from pelab.study.folder import StudyFolder
    from pelab.study.store import DB_NAME, Store, StudyLock

    StudyFolder(out).check()  # a received folder with a link or a FIFO where pelab keeps a file: one line
    if not os.path.lexists(out / DB_NAME):
        raise PelabError(f"out: {out} holds no pelab study (no {DB_NAME})")
    Store(out, create=False).close()  # a damaged or foreign database is refused before the lock file is made
    folder_plugins(out, plugin, trust_plugins)  # its plugins' code runs only when confirmed
    with StudyLock(out):  # not while a study (or another report) writes this folder
        StudyFolder(out).remove_leftovers()  # temp files of a report cut short (Ctrl-C, kill -9)
        if keep_measures:
            _keep_measures(out)
        else:
            _report(out)


def _keep_measures(out: Path) -> None:
    from pelab.report.build import keep_measures

    kept, seconds = _told(
        "measures", "taking every measure of the stored models, to keep", lambda on: keep_measures(out, on_progress=on)
    )
    console.print(
        f"report: {kept} measure(s) of stored models kept in {escape(str(out / 'results.sqlite'))} "
        f"({seconds:.0f} s); no report written"
    )


def _results_table(out: Path, by: list[str] | None = None, csv: Path | None = None, metric: str | None = None) -> None:
    from pelab.report.console import results_table

    results_table(console, out, by=by, csv=csv, metric=metric)


@app.command()
def results(
    out: Annotated[Path, typer.Argument(help="study folder")],
    by: Annotated[list[str] | None, typer.Option(help="group by this config key (repeatable)")] = None,
    csv: Annotated[Path | None, typer.Option(help="also write the per-arm table here")] = None,
    metric: Annotated[str | None, typer.Option(help="main metric (default: acc, or ppl for charlm)")] = None,
    plugin: PluginOption = None,
    trust_plugins: TrustOption = False,
) -> None:
    """Per arm: mean and 95% interval over seeds, with parameters and FLOPs beside."""
    from pelab.study.folder import StudyFolder
    from pelab.study.store import DB_NAME

    StudyFolder(out).check()  # read-only, but a link there would still be read through
    if (out / DB_NAME).is_file():
        folder_plugins(out, plugin, trust_plugins)  # its plugins' code runs only when confirmed
    _results_table(out, by=by, csv=csv, metric=metric)
