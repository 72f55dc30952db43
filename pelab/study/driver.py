"""The study driver: expand, skip what is stored, run the rest, store each result as it lands."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from pelab.config import RunConfig
from pelab.errors import PelabError
from pelab.study.backends import default_threads, run_local
from pelab.study.grid import Study
from pelab.study.store import Store, StudyLock
from pelab.train import RunResult


@dataclass
class StudyOutcome:
    total: int
    skipped: int
    ran: int
    failed: int
    diverged: int
    seconds: float


def run_study(
    study: Study,
    out: str | Path,
    workers: int = 1,
    threads: int | None = None,
    device: str = "auto",
    backend: str = "local",
    checkpoints: bool = False,
    console: Console | None = None,
    quiet: bool = False,
    command: str | None = None,
) -> StudyOutcome:
    if backend != "local":
        raise PelabError(f"backend: unknown value {backend!r}; allowed: local")
    if workers < 1:
        raise PelabError(f"workers: must be at least 1 (got {workers})")
    out = Path(out)
    console = console or Console()
    with StudyLock(out):
        store = Store(out)
        try:
            store.set_meta(study=study.source, name=study.name, **({"command": command} if command else {}))
            finished = store.finished_ids()
            pending = [r for r in study.runs if r.run_id not in finished]
            skipped = len(study.runs) - len(pending)
            ckpt_dir = None
            if checkpoints:
                ckpt_dir = out / "checkpoints"
                ckpt_dir.mkdir(exist_ok=True)
            counts = {"failed": 0, "diverged": 0}
            start = time.perf_counter()
            threads = threads or default_threads(workers)
            if not quiet:
                console.print(
                    f"study [bold]{study.name}[/]: {len(study.runs)} runs, {skipped} already stored, "
                    f"{len(pending)} to run on {workers} worker(s) x {threads} thread(s)"
                )
            with _progress(console, quiet) as progress:
                task = progress.add_task("runs", total=len(study.runs), completed=skipped, failed="")

                def on_result(cfg: RunConfig, result: RunResult) -> None:
                    store.write(cfg, result)
                    if result.status != "done":
                        counts[result.status] += 1
                        progress.console.print(f"[yellow]{result.status}[/] {cfg.run_id}: {result.reason}")
                    bad = counts["failed"] + counts["diverged"]
                    progress.update(task, advance=1, failed=f"[red]{bad} failed[/]" if bad else "")

                run_local(pending, on_result, workers=workers, threads=threads, device=device, checkpoint_dir=ckpt_dir)
            elapsed = time.perf_counter() - start
            previous = float(store.meta("study_seconds") or 0.0)
            store.set_meta(study_seconds=f"{previous + elapsed:.0f}")
            return StudyOutcome(
                total=len(study.runs),
                skipped=skipped,
                ran=len(pending),
                failed=counts["failed"],
                diverged=counts["diverged"],
                seconds=time.perf_counter() - start,
            )
        finally:
            store.close()


def _progress(console: Console, quiet: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
    )
