"""The commands that look at encodings and claims without training: list, show, params, claims."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pelab.cli.app import PluginOption, app, check_image, check_sizes, console, parse_grid
from pelab.errors import PelabError, check_range


@app.command("list")
def list_cmd(plugin: PluginOption = None) -> None:
    """Every position scheme, combiner and task, one line each (a plugin's too, marked, with --plugin)."""
    from pelab.combine import COMBINERS
    from pelab.plugins import load_named
    from pelab.positions import SCHEMES
    from pelab.tasks import TASKS

    for p in load_named(plugin):
        console.print(f"plugin {escape(p.describe())}: {', '.join(f'{f} {n}' for f, n in p.provides)}")

    def named(reg: dict, name: str) -> str:  # a plugin's class says whose it is
        origin = getattr(reg, "origins", {}).get(name)
        return name if origin is None else f"{name} ({origin.plugin})"

    t = Table(title="position schemes", title_justify="left")
    t.add_column("name", style="bold")
    t.add_column("acts at")
    t.add_column("description")
    for name, cls in SCHEMES.items():
        t.add_row(escape(named(SCHEMES, name)), ", ".join(cls.hooks) or "nowhere", escape(cls.description))
    t.add_row("segment", "input", "token-type embeddings (n_segments > 0), combined by the same combiner")
    console.print(t)
    t = Table(title="combiners", title_justify="left")
    t.add_column("name", style="bold")
    t.add_column("description")
    for name, cls in COMBINERS.items():
        t.add_row(escape(named(COMBINERS, name)), escape(cls.description))
    console.print(t)
    t = Table(title="tasks", title_justify="left")
    t.add_column("name", style="bold")
    t.add_column("kind")
    t.add_column("order matters for")
    t.add_column("claims")
    for name, cls in TASKS.items():
        t.add_row(escape(named(TASKS, name)), cls.kind, escape(cls.order), " ".join(cls.claims))
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
    from pelab.positions import with_tables

    position = build(PositionConfig, scheme=scheme, layout=layout)
    table = scheme_table(position, d, length, parse_grid(grid), max_len=max_len)
    if table is None:
        raise PelabError(
            f"scheme: {scheme} has no input table (it acts inside attention); schemes with one: {with_tables()}"
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
