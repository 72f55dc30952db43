"""`pelab analyze`: look inside an encoding or a trained model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from pelab.cli.app import PluginOption, TrustOption, app, check_sizes, console, folder_plugins, parse_grid
from pelab.errors import PelabError, check_range, visible


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
    plugin: PluginOption = None,
    trust_plugins: TrustOption = False,
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
        from pelab.study.folder import StudyFolder

        StudyFolder(db).check()  # a link where pelab keeps a file (its database, a checkpoint): one line
        folder_plugins(db, plugin, trust_plugins)  # the study's plugins, confirmed, before its runs are read
        inputs = AnalysisInput.for_model(*load_trained(db, run_id))
    elif table is not None:
        if position is not None:
            raise PelabError("table: give either --table or --position, not both")
        inputs = AnalysisInput.for_table(read_table(table), table.name)
    else:
        from pelab.plugins import load_named

        load_named(plugin)  # a plugin's scheme, analysed alone
        pos = build(PositionConfig, scheme=position or "sinusoidal", layout=layout)
        width, positions = 512 if d is None else d, 128 if length is None else length
        inputs = AnalysisInput.for_scheme(pos, width, positions, parse_grid(grid), seed=seed)
    with console.status(f"analysing {escape(visible(inputs.label))}"):  # a spinner's text skips render_str
        results = run_analyses(what, inputs, out)
    for name, res in results.items():
        if isinstance(res, str):
            console.print(f"[yellow]{name}[/]: skipped: {escape(res)}")
        else:
            console.print(f"[bold]{name}[/]: {escape(res['summary'])}")
            console.print(f"  wrote {escape(', '.join(res['files']))} in {escape(str(out))}")
