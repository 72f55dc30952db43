"""The `pelab` command. Every user mistake ends as one line on stderr and exit code 2."""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from pathlib import Path
from typing import Annotated

from pelab import INTERRUPTED

try:  # Ctrl-C while the command's libraries load (its first half second): the same one line, no traceback
    import typer
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from typer.exceptions import Abort, TyperException

    from pelab import interrupts
    from pelab.errors import PelabError, check_range
except KeyboardInterrupt:
    print(INTERRUPTED, file=sys.stderr)
    sys.exit(130)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="pelab: why are positional encodings added, not concatenated? Measure it.",
)
# Wide when piped, so tables stay readable in logs and CI output.
console = Console(width=None if sys.stdout.isatty() else 160)


#: Largest width and length of a table shown or analysed alone: past it, a heatmap has more cells than pixels
#: and the analyses' position-by-position matrices take gigabytes.
MAX_TABLE_SIDE = 4096


def check_sizes(**sizes: int | None) -> None:
    """Widths and lengths given on the command line: positive, and at most MAX_TABLE_SIDE."""
    for name, v in sizes.items():
        if v is not None and not 1 <= v <= MAX_TABLE_SIDE:
            raise PelabError(f"{name.replace('_', '-')}: must be in 1..{MAX_TABLE_SIDE} (got {v})")


def check_image(option: str, path: Path | None) -> None:
    """An image path whose format matplotlib can write, and that is not a folder."""
    from matplotlib.backend_bases import FigureCanvasBase

    if path is None:
        return
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = path.suffix.lstrip(".").lower()
    if suffix and suffix not in formats:
        raise PelabError(f"{option}: unknown image format {suffix!r}; allowed: {', '.join(sorted(formats))}")
    if path.is_dir():
        raise PelabError(f"{option}: {path} is a folder; give a file name such as {path / 'table.png'}")


def parse_grid(grid: str | None) -> tuple[int, int] | None:
    if grid is None:
        return None
    try:
        rows, cols = (int(v) for v in grid.lower().split("x"))
        assert rows > 0 and cols > 0
    except (ValueError, AssertionError):
        raise PelabError(f"grid: expected ROWSxCOLS with positive integers, e.g. 4x4 (got {grid!r})") from None
    return rows, cols


@app.command("list")
def list_cmd() -> None:
    """Every position scheme, combiner and task, one line each."""
    from pelab.combine import COMBINERS
    from pelab.positions import SCHEMES
    from pelab.tasks import TASKS

    t = Table(title="position schemes", title_justify="left")
    t.add_column("name", style="bold")
    t.add_column("acts at")
    t.add_column("description")
    for name, cls in SCHEMES.items():
        t.add_row(name, ", ".join(cls.hooks) or "nowhere", escape(cls.description))
    t.add_row("segment", "input", "token-type embeddings (n_segments > 0), combined by the same combiner")
    console.print(t)
    t = Table(title="combiners", title_justify="left")
    t.add_column("name", style="bold")
    t.add_column("description")
    for name, cls in COMBINERS.items():
        t.add_row(name, escape(cls.description))
    console.print(t)
    t = Table(title="tasks", title_justify="left")
    t.add_column("name", style="bold")
    t.add_column("kind")
    t.add_column("order matters for")
    t.add_column("claims")
    for name, cls in TASKS.items():
        t.add_row(name, cls.kind, escape(cls.order), " ".join(cls.claims))
    console.print(t)


@app.command()
def show(
    scheme: Annotated[str, typer.Argument(help="position scheme, e.g. sinusoidal")],
    d: Annotated[int, typer.Option(help="width of the encoding")] = 512,
    length: Annotated[int, typer.Option(help="number of positions")] = 128,
    layout: Annotated[str, typer.Option(help="sinusoidal layout: paper | tensor2tensor")] = "paper",
    grid: Annotated[str | None, typer.Option(help="patch grid ROWSxCOLS for sincos2d")] = None,
    max_len: Annotated[int, typer.Option(help="size of a learned table")] = 512,
    csv: Annotated[Path | None, typer.Option(help="write the table here: one row per position, no header")] = None,
    png: Annotated[Path | None, typer.Option(help="write a heatmap here (default: SCHEME.png when no --csv)")] = None,
) -> None:
    """The scheme's input table (positions x dimensions) as a heatmap and/or CSV."""
    import numpy as np

    from pelab.config import PositionConfig, build
    from pelab.tables import scheme_table

    check_sizes(d=d, length=length, max_len=max_len)
    check_image("png", png)
    if csv is not None and csv.is_dir():
        raise PelabError(f"csv: {csv} is a folder; give a file name such as {csv / 'table.csv'}")
    position = build(PositionConfig, scheme=scheme, layout=layout)
    table = scheme_table(position, d, length, parse_grid(grid), max_len=max_len)
    if table is None:
        raise PelabError(
            f"scheme: {scheme} has no input table (it acts inside attention); "
            "schemes with one: sinusoidal, learned, sincos2d"
        )
    values = table.numpy()
    if csv is not None:
        csv.parent.mkdir(parents=True, exist_ok=True)
        from pelab.files import atomic_path

        with atomic_path(csv) as tmp:
            np.savetxt(tmp, values, delimiter=",", fmt="%.17g")
        console.print(f"wrote {escape(str(csv))} ({length} positions x {d} dimensions)")
    if png is None and csv is None:
        png = Path(f"{scheme}.png")
    if png is not None:
        from pelab.plots import heatmap

        extra = (
            f", {layout} layout" if scheme == "sinusoidal" else (", at initialisation" if scheme == "learned" else "")
        )
        heatmap(values, png, f"{scheme} (d={d}, {length} positions{extra})")
        console.print(f"wrote {escape(str(png))}")


@app.command()
def params(
    d: Annotated[int, typer.Option(help="base width d")] = 64,
    layers: Annotated[int, typer.Option(help="Transformer blocks")] = 2,
    heads: Annotated[int, typer.Option(help="attention heads")] = 4,
    position: Annotated[str, typer.Option(help="position scheme with an input table")] = "sinusoidal",
    d_position: Annotated[int | None, typer.Option(help="position channels when concatenated")] = None,
    length: Annotated[int, typer.Option(help="sequence length for attention FLOPs")] = 64,
    vocab: Annotated[int, typer.Option(help="vocabulary size (inputs and outputs)")] = 16,
    kind: Annotated[str, typer.Option(help="encoder | decoder")] = "encoder",
    matrix_rank: Annotated[
        int | None, typer.Option(help="rank r of matrix's per-position maps, 0..d (default d: one full matrix)")
    ] = None,
) -> None:
    """Parameters and FLOPs per token for every combiner at the same settings."""
    from pelab.config import MAX_LENGTH, ModelConfig, PositionConfig, build
    from pelab.positions import scheme_class
    from pelab.sizes import combiner_sizes

    check_range("length", length, 1, MAX_LENGTH)  # attention FLOPs at 0 or -5 positions mean nothing
    cfg = build(
        ModelConfig,
        kind=kind,
        vocab_size=vocab,
        n_outputs=vocab,
        d=d,
        d_position=d_position,
        n_layers=layers,
        n_heads=heads,
        max_len=max(length, 512),
        position=build(PositionConfig, scheme=position),
        combine="add" if scheme_class(position).has_table else "none",
    )
    if matrix_rank is not None:
        if not 0 <= matrix_rank <= d:
            raise PelabError(f"matrix-rank: {matrix_rank} is not in 0..d={d}")
        # Carried for the matrix row alone (combiner_sizes drops it from the others), so not validated here.
        cfg = cfg.model_copy(update={"matrix_rank": matrix_rank})
    rank = d if matrix_rank is None else matrix_rank
    from pelab.preflight import gib, machine_bytes, model_params

    # Each combiner's model is built to be counted; concat_wide's, the widest, has under twice add's parameters.
    need = 2 * 4 * model_params(cfg)
    if need > machine_bytes():
        raise PelabError(
            f"d: counting builds every combiner's model, up to about {gib(need)} of weights, more than this "
            f"machine's {gib(machine_bytes())}; lower d, layers or vocab"
        )
    t = Table(
        title=f"d={d}, {layers} layers, {heads} heads, position={position}, T={length}, vocab={vocab}, "
        f"matrix: rank {rank}, one map per position up to max_len={cfg.max_len}"
    )
    for col in ("combine", "d_token", "d_position", "d_model", "parameters", "x add", "FLOPs/token (fwd)", "x add"):
        t.add_column(col, justify="left" if col == "combine" else "right")
    for row in combiner_sizes(cfg, length):
        notes = ([] if row.position == position else [f"position={row.position}"]) + (
            [f"rank {rank}"] if row.combine == "matrix" else []
        )
        label = row.combine + (f" ({', '.join(notes)})" if notes else "")
        t.add_row(
            label,
            str(row.d_token),
            str(row.d_position),
            str(row.d_model),
            f"{row.params:,}",
            f"{row.params_vs_add:.3f}",
            f"{row.flops_per_token:,}",
            f"{row.flops_vs_add:.3f}",
        )
    console.print(t)


@app.command()
def run(
    task: Annotated[str, typer.Option(help="task name (see `pelab list`)")] = "reverse",
    position: Annotated[str, typer.Option(help="position scheme")] = "sinusoidal",
    combine: Annotated[str, typer.Option(help="combiner")] = "add",
    d: Annotated[int, typer.Option(help="base width d")] = 64,
    d_position: Annotated[int | None, typer.Option(help="position channels when concatenated")] = None,
    matrix_rank: Annotated[
        int | None, typer.Option(help="combine=matrix: rank r of each position's map, 0..d (default d: full)")
    ] = None,
    layers: Annotated[int, typer.Option(help="Transformer blocks")] = 2,
    heads: Annotated[int, typer.Option(help="attention heads")] = 4,
    layout: Annotated[str, typer.Option(help="sinusoidal layout: paper | tensor2tensor")] = "paper",
    length: Annotated[int, typer.Option(help="problem size at training")] = 16,
    vocab: Annotated[int, typer.Option(help="symbols in synthetic tasks")] = 16,
    k: Annotated[int, typer.Option(help="rotate / offset distance")] = 2,
    corpus: Annotated[str | None, typer.Option(help="text file or folder for charlm")] = None,
    steps: Annotated[int, typer.Option(help="optimiser steps")] = 400,
    batch: Annotated[int, typer.Option(help="sequences per step")] = 32,
    lr: Annotated[float, typer.Option(help="peak learning rate")] = 1e-3,
    seed: Annotated[int, typer.Option(help="seed for initialisation and data")] = 0,
    precision: Annotated[
        str, typer.Option(help="fp32 | bf16 (autocast; weights, optimiser and loss stay fp32)")
    ] = "fp32",
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    threads: Annotated[int | None, typer.Option(help="torch threads (default: all cores)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Train and evaluate one model; print its result."""
    from pelab.config import RunConfig, build
    from pelab.train import autocast, train_run

    cfg = build(
        RunConfig,
        task=dict(name=task, length=length, vocab=vocab, k=k, corpus=corpus),
        model=dict(
            d=d,
            d_position=d_position,
            n_layers=layers,
            n_heads=heads,
            combine=combine,
            matrix_rank=matrix_rank,
            position=dict(scheme=position, layout=layout),
        ),
        train=dict(steps=steps, batch_size=batch, lr=lr, precision=precision),
        seed=seed,
    )
    from pelab.device import resolve_device

    where = resolve_device(device)
    autocast(precision, where)  # a bad device, or bf16 where it is missing: the user's mistake
    from pelab.study.driver import MAX_THREADS

    check_range("threads", threads, 1, MAX_THREADS)
    from pelab.preflight import check_data, check_fits, machine_bytes

    check_fits([cfg], machine_bytes(str(where)), f"this machine ({'GPU' if where.type == 'cuda' else 'RAM'})")
    check_data([cfg])
    with console.status(f"training {cfg.run_id} ({steps} steps)") as status:
        result = train_run(
            cfg,
            device=device,
            threads=threads,
            on_step=lambda s, n: status.update(f"training {cfg.run_id}: step {s}/{n}") if s % 10 == 0 else None,
        )
    if json_out:
        print(result.model_dump_json(indent=2))
    else:
        from pelab.report.console import print_result

        print_result(console, cfg, result)
    if result.status != "done":
        raise typer.Exit(1)


#: `pelab pretrained --seeds`: C9's seeds per arm (each a training run)
MAX_PRETRAINED_SEEDS = 1000

PRESETS = ("quick", "full", "paper")


def preset_path(name: str) -> Path:
    from importlib.resources import files

    if name not in PRESETS:
        raise PelabError(f"preset: unknown value {name!r}; allowed: {', '.join(PRESETS)}")
    return Path(str(files("pelab") / "presets" / f"{name}.toml"))


@app.command()
def study(
    file: Annotated[Path | None, typer.Argument(help="study file (TOML); default: the chosen preset")] = None,
    preset: Annotated[str, typer.Option(help="built-in study when no file is given: quick | full | paper")] = "quick",
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
) -> None:
    """Run a study (default: the quick preset) and write its report. Resumable: rerun to finish."""
    from pelab.device import check_device_name, resolve_device
    from pelab.study.driver import check_study, run_study
    from pelab.study.grid import load_study
    from pelab.study.store import DB_NAME, Store, StudyLock

    path = file if file is not None else preset_path(preset)
    spec = load_study(path)
    if backend == "ray":
        check_device_name(device)  # the cluster's nodes, not this machine, decide whether CUDA is there
    else:
        resolve_device(device)
    out = out or Path("pelab-out") / (path.stem if file is not None else preset)
    command = "pelab " + " ".join(sys.argv[1:]) if sys.argv[1:] else "pelab study"
    # Every check before the folder is touched; then one lock over the runs and the report, so a second
    # driver cannot write this folder's report while this one does.
    check_study(spec, workers, threads, device, backend, address, retries, runs_per_gpu)
    if (out / DB_NAME).exists():  # a damaged or foreign database is refused before the lock file is made
        Store(out, create=False).close()
    with StudyLock(out):
        if checkpoints and (out / DB_NAME).exists():
            _retrain_damaged(out, [r.run_id for r in spec.runs])
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
            _report(out)
        elif arms <= MAX_TABLE_ARMS:
            _results_table(out)
        else:  # a table of hundreds of arms is a wall in a terminal or a log: say where the numbers are
            console.print(
                f"{arms} arms: `pelab results {escape(str(out))}` prints each arm's mean and interval, "
                f"`pelab report {escape(str(out))}` writes the report",
                soft_wrap=True,  # one line, so the paths stay whole to copy
            )


#: Past this many arms, ``pelab study --no-report`` names the commands that show the numbers instead of printing
#: them (the paper preset has 207 arms).
MAX_TABLE_ARMS = 30


def _retrain_damaged(out: Path, run_ids: list[str]) -> None:
    """A finished run whose checkpoint is there but damaged (cut short, garbage, a link) is trained again: its row
    and the damaged file go, one line says so, and the study trains it with the others (same config and seed: the
    same numbers, and whole weights). A checkpoint that is simply absent (a study run with --no-checkpoints) is
    left so; the report counts it as missing either way."""
    from pelab.study.folder import StudyFolder
    from pelab.study.store import Store

    folder = StudyFolder(out)
    with Store(out, create=False) as store:
        done = store.finished_ids(("done",))
        damaged = [r for r in run_ids if r in done and os.path.lexists(folder.checkpoint(r))]
        damaged = [r for r in damaged if not folder.has_checkpoint(r) and not folder.checkpoint(r).is_dir()]
        for r in damaged:
            folder.checkpoint(r).unlink(missing_ok=True)  # a file or a link: never what a link points to
        if not damaged:
            return
        store.forget(damaged)
    print(f"pelab: {len(damaged)} checkpoint(s) were damaged (the first: {folder.checkpoint(damaged[0])}); "
          "training their runs again", file=sys.stderr)  # fmt: skip


def _none_learned(out: Path, run_ids: set[str]) -> None:
    """A study whose every run failed has nothing to report: say why in one line and exit 1."""
    from pelab.study.store import Store

    with Store(out, create=False) as store:
        rows = [r for r in store.rows(quiet=True) if r["run_id"] in run_ids]  # the report or table says more
    if not rows or any(r["status"] != "failed" for r in rows):
        return
    first = (str(rows[0]["reason"] or "").strip().splitlines() or ["no reason stored"])[0]
    print(f"pelab: error: study: all {len(rows)} runs failed; the first: {first}", file=sys.stderr)
    raise typer.Exit(1)


def _older_runs_note(out: Path) -> None:
    """One line when a folder mixes runs of two training computations: the report reads the current one's."""
    from pelab.records import ENGINE
    from pelab.study.store import Store

    with Store(out, create=False) as store:
        versions = [r["versions"] for r in store.rows() if r["status"] == "done"]
    engines = [v.get("engine") if isinstance(v, dict) else None for v in versions]
    older = sum(e != ENGINE for e in engines)
    if older and older < len(engines):
        console.print(
            f"[yellow]{older} stored run(s) were trained by an older computation; the report leaves them out "
            "(`pelab study` trains them again)[/]"
        )


def _report(out: Path) -> None:
    from pelab.report.build import build_report
    from pelab.report.console import summary_table
    from pelab.study.driver import progress_display

    _older_runs_note(out)
    start = time.perf_counter()
    if not console.is_terminal:  # a log file gets plain lines where a terminal gets a bar
        console.print("report: measures of stored models, claims, figures and pages", markup=False)
    with progress_display(console, quiet=False) as progress:  # as the runs' progress: a bar, or lines in a log file
        task = progress.add_task("report", total=1, completed=0, failed="", left="")

        def told(done: int, known: int, left: str) -> None:
            progress.update(task, total=known, completed=done, left=left)

        html_path, md_path, claims = build_report(out, on_progress=told)
    if not console.is_terminal:
        console.print(f"report: done in {time.perf_counter() - start:.0f} s", markup=False)
    summary_table(console, claims)
    console.print(f"report: [bold]{escape(str(html_path))}[/] (and {escape(md_path.name)}); open it in a browser")


@app.command("report")
def report_cmd(out: Annotated[Path, typer.Argument(help="study folder")]) -> None:
    """Rebuild a study's report from its database and checkpoints, without training."""
    from pelab.study.store import DB_NAME, Store, StudyLock

    if not (out / DB_NAME).is_file():
        raise PelabError(f"out: {out} holds no pelab study (no {DB_NAME})")
    Store(out, create=False).close()  # a damaged or foreign database is refused before the lock file is made
    with StudyLock(out):  # not while a study (or another report) writes this folder
        from pelab.study.folder import StudyFolder

        StudyFolder(out).remove_leftovers()  # temp files of a report cut short (Ctrl-C, kill -9)
        _report(out)


def _results_table(out: Path, by: list[str] | None = None, csv: Path | None = None, metric: str | None = None) -> None:
    from pelab.report.console import results_table

    results_table(console, out, by=by, csv=csv, metric=metric)


@app.command()
def results(
    out: Annotated[Path, typer.Argument(help="study folder")],
    by: Annotated[list[str] | None, typer.Option(help="group by this config key (repeatable)")] = None,
    csv: Annotated[Path | None, typer.Option(help="also write the per-arm table here")] = None,
    metric: Annotated[str | None, typer.Option(help="main metric (default: acc, or ppl for charlm)")] = None,
) -> None:
    """Per arm: mean and 95% interval over seeds, with parameters and FLOPs beside."""
    _results_table(out, by=by, csv=csv, metric=metric)


@app.command()
def analyze(
    what: Annotated[str, typer.Argument(help="spectrum | geometry | attention | probes | symmetry | linearity | all")],
    out: Annotated[Path, typer.Option(help="folder for the JSON and PNG files")] = Path("pelab-out/analysis"),
    run_id: Annotated[str | None, typer.Option("--run", help="a stored run's id (or unique prefix)")] = None,
    db: Annotated[Path | None, typer.Option(help="study folder holding --run (studied with --checkpoints)")] = None,
    position: Annotated[str | None, typer.Option(help="a scheme alone, no model (default: sinusoidal)")] = None,
    d: Annotated[int | None, typer.Option(help="scheme alone: width of the encoding (default 512)")] = None,
    length: Annotated[int | None, typer.Option(help="scheme alone: number of positions (default 128)")] = None,
    layout: Annotated[str, typer.Option(help="sinusoidal layout: paper | tensor2tensor")] = "paper",
    grid: Annotated[str | None, typer.Option(help="patch grid ROWSxCOLS for sincos2d")] = None,
    table: Annotated[Path | None, typer.Option(help="a table of your own: CSV (as show --csv writes) or .npy")] = None,
    seed: Annotated[int, typer.Option(help="seed of learned tables and random references (scheme alone)")] = 0,
) -> None:
    """Look inside an encoding or a trained model: each analysis writes WHAT.json and PNG figures to OUT."""
    from pelab.analysis import AnalysisInput, analysis, load_trained, read_table, run_analyses
    from pelab.config import PositionConfig, build

    if what != "all":
        analysis(what)  # an unknown name fails before any work
    alone = [
        f"--{k}" for k, v in (("position", position), ("d", d), ("length", length), ("table", table)) if v is not None
    ]
    check_sizes(d=d, length=length)
    from pelab.config import MAX_SEED

    check_range("seed", seed, 0, MAX_SEED)
    if run_id is not None or db is not None:
        if run_id is None or db is None:
            raise PelabError("run: give both --run RUN_ID and --db STUDY_DIR to analyse a trained model")
        if alone:
            raise PelabError(f"run: {', '.join(alone)} describe an encoding alone; leave them out with --run")
        inputs = AnalysisInput.for_model(*load_trained(db, run_id))
    elif table is not None:
        if position is not None:
            raise PelabError("table: give either --table or --position, not both")
        inputs = AnalysisInput.for_table(read_table(table), table.name)
    else:
        pos = build(PositionConfig, scheme=position or "sinusoidal", layout=layout)
        width, positions = 512 if d is None else d, 128 if length is None else length
        inputs = AnalysisInput.for_scheme(pos, width, positions, parse_grid(grid), seed=seed)
    with console.status(f"analysing {escape(inputs.label)}"):
        results = run_analyses(what, inputs, out)
    for name, res in results.items():
        if isinstance(res, str):
            console.print(f"[yellow]{name}[/]: skipped: {escape(res)}")
        else:
            console.print(f"[bold]{name}[/]: {escape(res['summary'])}")
            console.print(f"  wrote {escape(', '.join(res['files']))} in {escape(str(out))}")


@app.command()
def pretrained(
    out: Annotated[Path, typer.Option(help="folder for pretrained.json, pretrained.md and the figures")] = Path(
        "pelab-out/pretrained"
    ),
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            help="a local Hugging Face folder (config.json + *.safetensors, or a hub cache entry) or mini-lm "
            "(the default); repeat it to compare several side by side",
        ),
    ] = None,
    corpus: Annotated[str | None, typer.Option(help="text file or folder for C9 (default: Python's stdlib)")] = None,
    seeds: Annotated[int, typer.Option(help="C9: seeds per arm (paired across arms)")] = 3,
    steps: Annotated[int, typer.Option(help="C9: optimiser steps per run")] = 300,
    skip_c9: Annotated[bool, typer.Option("--skip-c9", help="only analyse the tables; train nothing")] = False,
) -> None:
    """What a pretrained model's positions encode (C16, C11, C1, geometry) beside a sinusoidal table of
    its size: MiniLM (pelab[pretrained]) by default, or local folders of BERT, RoBERTa, DistilBERT,
    ELECTRA, GPT-2, OPT, ViT and ViT-MAE models (--model, read with safetensors, never downloaded),
    several side by side. With MiniLM, also frozen word vectors + positions added or concatenated (C9:
    the quick preset's C9 grids, run by the study driver into OUT/c9)."""
    from pelab.weights.hf import BUILTIN, load_all

    names = list(dict.fromkeys(model or [BUILTIN]))
    models = load_all(names)  # every folder checked (one line, exit 2) before any work
    from pelab.config import MAX_COUNT

    check_range("seeds", seeds, 1, MAX_PRETRAINED_SEEDS)
    check_range("steps", steps, 1, MAX_COUNT)
    from pelab.pretrained import sidebyside
    from pelab.pretrained.frozen import Budget, study_text
    from pelab.pretrained.report import run as run_pretrained
    from pelab.pretrained.report import summary_lines
    from pelab.study.grid import parse_study

    budget = None if skip_c9 or BUILTIN not in names else Budget(seeds=seeds, steps=steps, corpus=corpus)
    if budget is not None:  # a bad corpus is the user's mistake: say so before the analyses
        from pelab.preflight import check_data

        check_data(parse_study(study_text(budget)).runs)
    numbers, files, lines = None, [], []
    if BUILTIN in names:
        numbers, files = run_pretrained(out, budget, console)
        lines = summary_lines(numbers)
    if names != [BUILTIN]:
        side, more = sidebyside.run(out, models, numbers, console)
        files = [f for f in files if f not in more] + more
        lines += sidebyside.summary_lines(side)
    for line in lines:
        console.print(escape(line))
    console.print(f"wrote {escape(', '.join(f.name for f in files))} in {escape(str(out))}")


@app.command("claims")
def claims_cmd(
    markdown: Annotated[bool, typer.Option("--markdown", help="print docs/claims.md")] = False,
) -> None:
    """Every claim the report decides: its deciding metrics and its verdict rule."""
    from pelab.report.catalog import all_claims
    from pelab.report.summary import claims_markdown

    if markdown:
        sys.stdout.write(claims_markdown() + "\n")
        return
    t = Table(title="claims", title_justify="left")
    t.add_column("id", style="bold")
    t.add_column("claim")
    t.add_column("deciding metric")
    t.add_column("rule")
    for c in all_claims():
        t.add_row(c.id, escape(c.title), ", then ".join(c.metrics) or "exact / reported", escape(c.rule_for(0.8, 0.01)))
    console.print(t)


def environment_message(e: OSError) -> str:
    """One line for an error of the machine rather than of the input: the path, what is wrong, what to do."""
    path = e.filename if e.filename is not None else "?"
    what = e.strerror or str(e)
    if e.errno == errno.ENOSPC:
        return f"{path}: the disk is full; free some space and run the same command again (a study resumes)"
    if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"{path}: {what}; make it writable or choose another path"
    if e.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        return f"{path}: {what}: a file stands where a folder is needed, or the other way round; choose another path"
    return f"{path}: {what}"


def database_message(e: Exception) -> str:
    """One line for an SQLite error that reached the top: a full disk or a busy database is the machine's state,
    not damage, so only damage is told to move results.sqlite away."""
    text = " ".join(str(e).split())
    if "full" in text:
        return "results database: the disk is full; free some space and run the same command again (a study resumes)"
    if "locked" in text or "busy" in text:
        return f"results database: {text}; another program holds it: wait for it, then run the same command again"
    if "readonly" in text or "unable to open" in text or "I/O" in text:
        return f"results database: {text}; make the study folder writable (or the disk readable) and run it again"
    return f"results database: {text}; move the study folder's results.sqlite away"


def usage_message(e: TyperException) -> str:
    """Click's usage error on one line, led by the option or argument it is about when there is one."""
    msg = " ".join(e.format_message().split())
    param = getattr(e, "param", None)
    name = getattr(e, "option_name", None) or (param.opts[0] if param is not None and param.opts else None)
    return f"{name.lstrip('-')}: {msg}" if name else msg


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's or `timeout`'s stop), raised where Ctrl-C's KeyboardInterrupt would be, so a study
    stops the same way: workers ended, nothing half-done stored, the lock released, resumable."""


def main() -> None:
    """Entry point: one-line errors, exit 2, no traceback; SIGTERM stops as Ctrl-C does (exit 143, not 130)."""
    main_pid, fired = os.getpid(), []

    def terminate(signum: int, frame: object) -> None:
        if os.getpid() != main_pid:  # a process forked from this one: SIGTERM ends it as it would have
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        fired.append(signum)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        with interrupts.remembered():
            rc = _main()
            if rc == 0 and interrupts.pending():  # a Ctrl-C swallowed after the last write: still an interrupt
                rc = 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    if fired and rc in (130, 1):  # typer and click hand Ctrl-C back as 130 (or an Abort); this was SIGTERM
        print(INTERRUPTED.replace("interrupted", "stopped by SIGTERM", 1), file=sys.stderr)
        sys.exit(143)
    if rc == 130:
        print(INTERRUPTED, file=sys.stderr)
    sys.exit(rc)


def _main() -> int:
    try:  # a Ctrl-C this early (CI caught one inside this import) is still one line, not a traceback
        import sqlite3
    except KeyboardInterrupt:
        return 130
    try:
        rc = app(standalone_mode=False)
    except PelabError as e:
        print(f"pelab: error: {e}", file=sys.stderr)
        sys.exit(2)
    except TyperException as e:  # click's usage errors: bad option, missing argument
        if type(e).__name__ == "NoArgsIsHelpError":  # `pelab` alone: the help is already printed (cf. typer #1278)
            sys.exit(2)
        print(f"pelab: error: {usage_message(e)}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # the machine's errors: disk full, read-only, a file where a folder goes
        print(f"pelab: error: {environment_message(e)}", file=sys.stderr)
        sys.exit(2)
    except sqlite3.Error as e:
        print(f"pelab: error: {database_message(e)}", file=sys.stderr)
        sys.exit(2)
    except MemoryError:
        print("pelab: error: out of memory; lower the sizes (d, batch, length) or free memory", file=sys.stderr)
        sys.exit(2)
    except (Abort, KeyboardInterrupt):
        rc = 130
    except Exception:
        # A Ctrl-C that landed inside a lazy import (numpy's, scipy's) leaves that module half-imported, and the
        # next import of it fails (ImportError, RecursionError) far from the interrupt: after a Ctrl-C, any
        # error is the interrupt's, and ends as one (exit 130, one line).
        if not interrupts.pending():
            raise
        rc = 130
    return rc if isinstance(rc, int) else 0
