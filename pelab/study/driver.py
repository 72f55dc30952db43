"""The study driver: expand, skip what is stored, run the rest, store each result as it lands."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pelab import plugins
from pelab.config import RunConfig
from pelab.errors import PelabError, check_range, visible
from pelab.preflight import CUDA_CONTEXT_BYTES, check_data, check_fits, check_gpu_share, machine_bytes
from pelab.preflight import runs_per_gpu as default_runs_per_gpu
from pelab.records import ENGINE, RunResult
from pelab.study.backends import OnResult, default_threads, device_slots, run_local
from pelab.study.estimate import group_seconds
from pelab.study.folder import CHECKPOINTS, StudyFolder
from pelab.study.grid import Study
from pelab.study.groups import grid_tiers, stack_groups, study_seconds, unstacked_arms
from pelab.study.progress import Pace, PlainProgress
from pelab.study.protocol import record_protocol
from pelab.study.ray_backend import DEFAULT_RETRIES, check_address, check_nodes, connect, require_ray, run_ray
from pelab.study.store import Store, StudyLock


@dataclass
class StudyOutcome:
    total: int
    skipped: int
    ran: int
    failed: int
    diverged: int
    seconds: float


BACKENDS = ("local", "ray")


def expected_line(pending: list[RunConfig], backend: str, workers: int | None, device: str) -> str:
    """The time the runs should take, said before they start (``pelab.study.estimate``)."""
    from pelab.study.estimate import describe, read_pace

    n = workers or os.cpu_count() or 1
    seconds = study_seconds(pending, n)
    cpu = describe(seconds)
    where = f"{n} CPU worker{'s' if n != 1 else ''}"
    if device.startswith("cuda"):  # the fit is a CPU's: a GPU's time depends on how many runs share it
        return (
            f"expected: no GPU estimate (pelab's is fitted to CPUs: about {cpu} on {where} like its 2-core "
            "reference); the progress lines give the time left once runs finish"
        )
    if backend == "ray":
        return f"expected: about {cpu} on {where} (estimated for a CPU like pelab's 2-core reference; faster here)"
    pace = read_pace()
    if pace is not None:
        # short enough for one line of a log: "(its pace: ...)" is this machine's measured pace in its earlier studies
        took = describe(seconds * pace)
        return f"expected: about {took} on {where} (its pace: {pace:.2f}x the reference), then the report"
    return f"expected: about {cpu} on {where} (at pelab's 2-core reference CPU's speed), then the report"


#: Longest a study may be estimated to take (hours on its CPU workers at pelab's reference 2-core CPU speed,
#: ``study_seconds``) before it needs ``--allow-long``: the paper preset, the longest, is about 25 h on one worker
#: and 12.5 h on two; past 100 h a setting is more likely a typo (``steps = 1e9`` is about 48,000 h) than a plan.
#: The bound reads the reference CPU's figure on every device: a GPU is faster, so a long GPU study may need the flag.
MAX_STUDY_HOURS = 100


def too_long(runs: list[RunConfig], workers: int | None) -> str | None:
    """The one line that says a study's estimate is past ``MAX_STUDY_HOURS`` (None when it is not), with what
    makes its longest run long and the flag that runs it anyway."""
    n = workers or os.cpu_count() or 1
    seconds = study_seconds(runs, n)
    if seconds <= MAX_STUDY_HOURS * 3600:
        return None
    from pelab.study.estimate import describe, run_seconds

    longest = max(runs, key=run_seconds).train
    steps = f"{longest.steps:,} step{'s' if longest.steps != 1 else ''}"
    return (
        f"study: estimated {describe(seconds)} on {n} CPU worker{'s' if n != 1 else ''} at pelab's reference CPU "
        f"speed, past the {MAX_STUDY_HOURS} h a study may take unasked (its longest run trains {steps} and "
        f"evaluates {longest.eval_batches:,} batches per size); shorten it, or add --allow-long to run it"
    )


#: Bounds on the options of a study: past them a number is a typo, and would overflow a C integer or start more
#: processes than any machine holds.
MAX_WORKERS, MAX_THREADS, MAX_RETRIES, MAX_RUNS_PER_GPU = 4096, 1024, 100, 64


def check_study(
    study: Study,
    workers: int | None = None,
    threads: int | None = None,
    device: str = "auto",
    backend: str = "local",
    address: str | None = None,
    retries: int = DEFAULT_RETRIES,
    runs_per_gpu: int | None = None,
) -> None:
    """Everything that can be refused before the study folder is touched: the options, whether each task's
    data can serve it, and whether the largest run fits in memory (``pelab.preflight``)."""
    if backend not in BACKENDS:
        raise PelabError(f"backend: unknown value {backend!r}; allowed: {', '.join(BACKENDS)}")
    for name, value, lo, hi in (
        ("workers", workers, 1, MAX_WORKERS),
        ("threads", threads, 1, MAX_THREADS),
        ("retries", retries, 0, MAX_RETRIES),
        ("runs_per_gpu", runs_per_gpu, 1, MAX_RUNS_PER_GPU),
    ):
        check_range(name, value, lo, hi)
    if runs_per_gpu is not None and device == "cpu":
        raise PelabError("runs_per_gpu: only used with a GPU (device=cpu); leave it out or use --device cuda")
    if address is not None and backend != "ray":
        raise PelabError("address: only used with --backend ray")
    if backend == "ray":
        require_ray()
        check_address(address)
    if backend == "local":
        budget = machine_bytes("cpu" if device == "auto" else device)
        where = f"this machine ({'GPU' if device.startswith('cuda') else 'RAM'})"
    else:
        budget, where = RAY_NODE_BYTES, "a Ray node is assumed to have"
    check_fits(study.runs, budget, where)
    check_data(study.runs)


#: Memory assumed for one node of a Ray cluster (not this machine) when sizing runs before they are sent.
RAY_NODE_BYTES = 2**40


def run_study(
    study: Study,
    out: str | Path,
    workers: int | None = None,
    threads: int | None = None,
    device: str = "auto",
    backend: str = "local",
    checkpoints: bool = False,
    console: Console | None = None,
    quiet: bool = False,
    command: str | None = None,
    address: str | None = None,
    retries: int = DEFAULT_RETRIES,
    locked: bool = False,
    runs_per_gpu: int | None = None,
) -> StudyOutcome:
    """Run a study's pending runs on a backend; ``workers`` defaults to one per core (local) or the cluster (Ray).

    ``locked``: the caller already holds ``StudyLock(out)`` (``pelab study`` holds it through the report too).
    """
    check_study(study, workers, threads, device, backend, address, retries, runs_per_gpu)
    out = Path(out)
    console = console or Console()
    StudyFolder(out).check()  # a link or a FIFO at a name pelab keeps: one line, before anything is opened
    with nullcontext() if locked else StudyLock(out), Store(out) as store:
        removed = StudyFolder(out).remove_leftovers()
        if removed and not quiet:
            console.print(f"removed {removed} temporary file(s) left by an interrupted write")
        # the command as text SQLite can store: a path's byte that is not UTF-8 is kept as \xff
        store.set_meta(study=study.source, name=study.name, **({"command": visible(command)} if command else {}))
        store.record_plugins(study.plugins)
        finished = store.finished_ids(engine=ENGINE)
        older = len({r.run_id for r in study.runs} & (store.finished_ids() - finished))
        pending = [r for r in study.runs if r.run_id not in finished]
        skipped = len(study.runs) - len(pending)
        if pending:  # the protocol is fixed before the first run trains, and kept (with what changed) after that
            record_protocol(out, study)
        ckpt_dir = None
        if checkpoints:
            ckpt_dir = StudyFolder(out).folder(CHECKPOINTS)  # made here; a link in its place is refused
        counts = {"failed": 0, "diverged": 0}
        start = time.perf_counter()
        chosen = _backend(backend, address, workers, threads, device, ckpt_dir, retries, pending, runs_per_gpu)
        # where the runs train: a GPU shapes the stacks (groups.py) and has no time estimate
        gpu = device.startswith("cuda") or (device == "auto" and backend == "local" and _auto_is_cuda())
        with chosen as (where, execute, slots):
            if not quiet:
                # the name on a line of its own: full's name and counts together made a line of 130 characters
                console.print(f"study [bold]{escape(study.name)}[/]")
                console.print(f"{len(study.runs)} runs, {skipped} already stored, {len(pending)} to run on {where}")
                if older:
                    console.print(
                        f"{older} stored run(s) were trained by an older computation (not {ENGINE}); they are "
                        f"trained again with {ENGINE}, so no comparison mixes the two"
                    )
                if pending:
                    console.print(expected_line(pending, backend, workers, "cuda" if gpu else device))
                    for why, n in _unstacked(pending).items():
                        console.print(f"{n} arm(s) train one seed at a time ({why}); the rest train stacked")
            # on a GPU, grid by grid in the study file's order: a time-boxed lease ends with its first grids done
            budget = _stack_budget(backend, device, slots, gpu)
            groups = stack_groups(pending, slots, budget=budget, gpu=gpu, tiers=grid_tiers(study) if gpu else None)
            pace = Pace({c.run_id: group_seconds(g) / len(g) for g in groups for c in g})
            with progress_display(console, quiet, estimate=pace.text) as progress:
                task = progress.add_task("runs", total=len(study.runs), completed=skipped, failed="", left="")

                def on_result(cfg: RunConfig, result: RunResult) -> None:
                    store.write(cfg, result)
                    pace.finished(cfg.run_id)
                    if result.status != "done":
                        counts[result.status] += 1
                        reason = escape(result.reason or "")
                        progress.console.print(f"[yellow]{result.status}[/] {cfg.run_id}: {reason}")
                    bad = counts["failed"] + counts["diverged"]
                    progress.update(task, advance=1, failed=f"[red]{bad} failed[/]" if bad else "", left=pace.text())

                execute(groups, on_result)
        elapsed = time.perf_counter() - start
        if pending and backend == "local" and not str(device).startswith("cuda") and not counts["failed"]:
            from pelab.study.estimate import record_pace

            record_pace(study_seconds(pending, slots), elapsed)  # the next study's expected time, at this pace
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


Execute = Callable[[list[list[RunConfig]], OnResult], None]


def _stack_budget(backend: str, device: str, slots: int, gpu: bool = False) -> int:
    """Bytes one group may use: this machine's memory shared by the groups running at once, half of it (the
    estimate errs high, but the report's analyses and the driver need room too); on a GPU, which holds nothing
    else, the 80% that ``preflight.runs_per_gpu`` shares out, less each process's CUDA context (so a stack of five
    language models at d=640 stays whole with 4 processes on an 80 GB GPU); a Ray node's assumed."""
    if backend != "local":
        return RAY_NODE_BYTES // 2
    if gpu:
        first = device if device.startswith("cuda") else "cuda"
        return max(1, int(0.8 * machine_bytes(first)) // max(1, slots) - CUDA_CONTEXT_BYTES)
    return machine_bytes("cpu" if device == "auto" else device) // (2 * max(1, slots))


def _auto_is_cuda() -> bool:
    """Whether ``--device auto`` trains on a GPU here (``pelab.device.resolve_device``, as the workers resolve it)."""
    from pelab.device import resolve_device

    return resolve_device("auto").type == "cuda"


def _unstacked(pending: list[RunConfig]) -> dict[str, int]:
    """How many arms train one seed at a time, by reason."""
    counts: dict[str, int] = {}
    for why in unstacked_arms(pending).values():
        counts[why] = counts.get(why, 0) + 1
    return counts


@contextmanager
def _backend(
    backend: str,
    address: str | None,
    workers: int | None,
    threads: int | None,
    device: str,
    checkpoint_dir: Path | None,
    retries: int,
    pending: list[RunConfig],
    runs_per_gpu: int | None = None,
) -> Iterator[tuple[str, Execute, int]]:
    """Where the runs will go (in words, for the opening line), the function that sends them there, and how many
    groups run at once (so a study has at least that many groups where its runs allow)."""
    if backend == "local":
        slots = _gpu_slots(device, pending, runs_per_gpu, workers)
        if slots:
            threads = threads or 1
            gpus = len(set(slots))
            most = max(slots.count(s) for s in set(slots))
            where = (
                f"{gpus} GPU(s), up to {most} run(s) at a time on each "
                f"({len(slots)} local worker(s) x {threads} thread(s))"
            )
            run = partial(run_local, threads=threads, device=device, checkpoint_dir=checkpoint_dir, devices=slots,
                          carried=plugins.carried())  # fmt: skip
            yield where, run, len(slots)
            return
        workers = workers or os.cpu_count() or 1
        threads = threads or default_threads(workers)
        where = f"{workers} local worker(s) x {threads} thread(s)"
        yield (
            where,
            partial(
                run_local,
                workers=workers,
                threads=threads,
                device=device,
                checkpoint_dir=checkpoint_dir,
                carried=plugins.carried(),
            ),
            workers,
        )
        return
    if not pending:  # nothing to run: no reason to start or join a cluster
        yield "Ray (nothing to do)", lambda groups, on_result: None, 1
        return
    threads = threads or 1
    with connect(address) as cluster:
        if not cluster.started_here:
            check_nodes(cluster)
        at_once = f"at most {workers} at a time" if workers else "as many at a time as its CPUs allow"
        where = f"{cluster.describe()}, {threads} thread(s) per run, {at_once}"
        yield (
            where,
            partial(
                run_ray,
                cluster=cluster,
                workers=workers,
                threads=threads,
                device=device,
                checkpoint_dir=checkpoint_dir,
                retries=retries,
                runs_per_gpu=runs_per_gpu or 1,
                carried=plugins.carried(),
            ),
            workers or max(1, int(cluster.cpus // threads)),
        )


def _gpu_slots(
    device: str, pending: list[RunConfig], runs_per_gpu: int | None, workers: int | None
) -> list[str] | None:
    """Each local worker's GPU when the runs go to CUDA (several runs per GPU: a small model uses a sliver of
    one), else None. ``runs_per_gpu`` defaults to what fits (``preflight.runs_per_gpu``); ``workers``, when
    given, caps the runs in flight over all GPUs."""
    import torch

    if not (device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())):
        return None
    gpus = 1 if device.startswith("cuda:") else max(1, torch.cuda.device_count())
    first = device if device.startswith("cuda:") else "cuda:0"
    if runs_per_gpu is None:
        cpus = max(1, (os.cpu_count() or 1) // gpus)
        runs_per_gpu = default_runs_per_gpu(pending, machine_bytes(first), cpus)
    else:
        check_gpu_share(pending, runs_per_gpu, machine_bytes(first))
    slots = device_slots(first if device.startswith("cuda:") else "cuda", gpus, runs_per_gpu)
    return slots[:workers] if workers else slots


def progress_display(
    console: Console, quiet: bool, estimate: Callable[[], str] | None = None
) -> Progress | PlainProgress:
    """A live bar on a terminal; elsewhere (a log file) plain lines (``pelab.study.progress``), said again every
    minute between runs with ``estimate``'s time left."""
    if not console.is_terminal and not quiet:
        return PlainProgress(console, estimate=estimate)
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]}"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[left]}"),  # weighted by each run's estimated cost (``Pace``), not by count
        console=console,
        disable=quiet,
    )
