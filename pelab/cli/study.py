"""`pelab study`: a study's runs (in rounds where it asks for a decision), then its report."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from pelab.cli import report as reporting
from pelab.cli.app import PluginOption, TrustOption, app, console, preset_path
from pelab.errors import PelabError, visible

if TYPE_CHECKING:
    from pelab.config import RunConfig


@app.command()
def study(
    file: Annotated[Path | None, typer.Argument(help="study file (TOML); default: the chosen preset")] = None,
    preset: Annotated[str, typer.Option(help="built-in study when no file is given: quick | full | gpu")] = "quick",
    out: Annotated[Path | None, typer.Option(help="study folder (default: pelab-out/NAME)")] = None,
    workers: Annotated[
        int | None, typer.Option(help="runs at a time (default: one per core; with Ray, as many as the cluster fits)")
    ] = None,
    threads: Annotated[
        int | None, typer.Option(help="torch threads per run (default: cores / workers; with Ray, 1)")
    ] = None,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    backend: Annotated[str, typer.Option(help="local | ray (a Ray cluster: install the ray extra first)")] = "local",
    address: Annotated[
        str | None, typer.Option(help="with --backend ray: auto | HOST:PORT of a Ray head (default: start Ray here)")
    ] = None,
    retries: Annotated[
        int, typer.Option(help="with --backend ray: times a run is resubmitted when its worker or node dies")
    ] = 3,
    checkpoints: Annotated[bool, typer.Option(help="keep each model's weights (safetensors) for the analyses")] = True,
    report: Annotated[bool, typer.Option(help="write report.html and report.md when the runs are done")] = True,
    runs_per_gpu: Annotated[
        int | None,
        typer.Option(
            help="on GPUs: runs sharing each GPU at once (default: as many as fit its memory, at most 8 and one "
            "per core; with Ray, 1)"
        ),
    ] = None,
    allow_long: Annotated[
        bool, typer.Option(help="run a study estimated past 100 hours (without it: asked on a terminal, else refused)")
    ] = False,
    plugin: PluginOption = None,
    trust_plugins: TrustOption = False,
) -> None:
    """Run a study (default: the quick preset) and write its report. Resumable: rerun to finish."""
    from pelab.device import check_device_name, resolve_device
    from pelab.plugins import load_named
    from pelab.study.driver import check_study, run_study, too_long
    from pelab.study.folder import StudyFolder
    from pelab.study.grid import load_study
    from pelab.study.store import DB_NAME, Store, StudyLock

    load_named(plugin)  # named on the command line: asked for
    path = file if file is not None else preset_path(preset)
    spec = load_study(path, trust=trust_plugins)  # the plugins the file names: named above, or trusted
    if backend == "ray":
        check_device_name(device)  # the cluster's nodes, not this machine, decide whether CUDA is there
    else:
        resolve_device(device)
    out = out or Path("pelab-out") / (path.stem if file is not None else preset)
    command = "pelab " + " ".join(sys.argv[1:]) if sys.argv[1:] else "pelab study"
    # Every check before the folder is touched; then one lock over the runs and the report, so a second
    # driver cannot write this folder's report while this one does.
    check_study(spec, workers, threads, device, backend, address, retries, runs_per_gpu)
    if not allow_long:
        _not_too_long(too_long(spec.runs, workers))
    StudyFolder(out).check()  # a received folder with a link or a FIFO where pelab keeps a file: one line
    if os.path.lexists(out / DB_NAME):  # a damaged or foreign database is refused before the lock file is made
        Store(out, create=False).close()
    with StudyLock(out):
        if checkpoints and (out / DB_NAME).exists():
            _retrain_damaged(out, spec.runs)
        if (out / DB_NAME).exists():
            _measured_by_other_code(out, {r.run_id for r in spec.runs})
        go = run_study
        if spec.sequential is not None:  # rounds of seeds until every comparison is decided or at the cap
            from pelab.rounds import run_sequential

            go = run_sequential  # type: ignore[assignment]
        outcome = go(
            spec,
            out,
            workers=workers,
            threads=threads,
            device=device,
            backend=backend,
            address=address,
            retries=retries,
            checkpoints=checkpoints,
            console=console,
            command=command,
            locked=True,
            runs_per_gpu=runs_per_gpu,
        )
        console.print(
            f"{outcome.ran} run(s) in {outcome.seconds:.1f}s ({outcome.skipped} already stored, "
            f"{outcome.failed} failed, {outcome.diverged} diverged); results: {escape(str(out))}"
        )
        _none_learned(out, {r.run_id for r in spec.runs})
        arms = len({r.arm_id for r in spec.runs})
        if report:
            reporting._report(out)
        elif arms <= MAX_TABLE_ARMS:
            reporting._results_table(out)
        else:  # a table of hundreds of arms is a wall in a terminal or a log: say where the numbers are
            console.print(
                f"{arms} arms: `pelab results {escape(str(out))}` prints each arm's mean and interval, "
                f"`pelab report {escape(str(out))}` writes the report",
                soft_wrap=True,  # one line, so the paths stay whole to copy
            )


def _not_too_long(message: str | None) -> None:
    """A study estimated past ``driver.MAX_STUDY_HOURS`` starts only when the user says so: asked (y/N) on a
    terminal, refused in one line elsewhere (CI, a log), the message naming --allow-long either way."""
    if message is None:
        return
    if _on_terminal():
        console.print(escape(message.removeprefix("study: ")), soft_wrap=True)
        if typer.confirm("start it anyway?", default=False):
            return
    raise PelabError(message)


def _on_terminal() -> bool:
    """Whether a person can answer: stdin and stdout both a terminal (not CI, not a log, not a pipe)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


#: Past this many arms, ``pelab study --no-report`` names the commands that show the numbers instead of printing
#: them (the gpu preset has 72 arms).
MAX_TABLE_ARMS = 30


def _retrain_damaged(out: Path, runs: list[RunConfig]) -> None:
    """A finished run whose checkpoint is there but damaged (cut short, garbage, a link, a header naming another
    model than the run's) is trained again: its row and the damaged file go, one line says so, and the study trains
    it with the others (same config and seed: the same numbers, and whole weights). A checkpoint that is simply
    absent (a study run with --no-checkpoints) is left so; the report counts it as missing either way."""
    from pelab.study.folder import StudyFolder
    from pelab.study.store import Store

    folder = StudyFolder(out)
    models = {r.run_id: r.model for r in runs}
    with Store(out, create=False) as store:
        done = store.finished_ids(("done",))
        damaged = [r for r in models if r in done and os.path.lexists(folder.checkpoint(r))]
        damaged = [r for r in damaged if not folder.has_checkpoint(r, models[r]) and not folder.checkpoint(r).is_dir()]
        for r in damaged:
            folder.checkpoint(r).unlink(missing_ok=True)  # a file or a link: never what a link points to
        if not damaged:
            return
        store.forget(damaged)
    print(f"pelab: {len(damaged)} checkpoint(s) were damaged (the first: {visible(folder.checkpoint(damaged[0]))}); "
          "training their runs again", file=sys.stderr)  # fmt: skip


def _measured_by_other_code(out: Path, run_ids: set[str]) -> None:
    """A folder carried without its weights (docs/study.md) is refused before anything trains when a run's
    only measures were kept by other measuring code than this pelab's: its first look would stop on it hours
    later (``ReportContext.measurable``). One line: go on with the pelab that kept them."""
    from pelab.records import ENGINE
    from pelab.report.context import measuring_code
    from pelab.study.folder import StudyFolder
    from pelab.study.store import Store

    folder = StudyFolder(out)
    with Store(out, create=False) as store:  # this study's runs that stay stored (an older engine's train again)
        kept = store.finished_ids(("done",), engine=ENGINE) & run_ids
        other = (store.measured_runs() - store.measured_runs(measuring_code())) & kept
    stale = sorted(r for r in other if not os.path.lexists(folder.checkpoint(r)))
    if stale:
        raise PelabError(
            f"out: {len(stale)} run(s) in {out} have no weights and measures kept by other measuring code than this "
            f"pelab's ({measuring_code()[:12]}; the first: {stale[0]}); go on with the pelab that kept them "
            "(docs/study.md says how to check), or choose another --out"
        )


def _none_learned(out: Path, run_ids: set[str]) -> None:
    """A study whose every run failed has nothing to report: say why in one line and exit 1."""
    from pelab.study.store import Store

    with Store(out, create=False) as store:
        rows = [r for r in store.rows(quiet=True) if r["run_id"] in run_ids]  # the report or table says more
    if not rows or any(r["status"] != "failed" for r in rows):
        return
    first = (str(rows[0]["reason"] or "").strip().splitlines() or ["no reason stored"])[0]
    print(f"pelab: error: study: all {len(rows)} runs failed; the first: {visible(first)}", file=sys.stderr)
    raise typer.Exit(1)
