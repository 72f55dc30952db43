"""`pelab run`: train and evaluate one model."""

from __future__ import annotations

from typing import Annotated

import typer

from pelab.cli.app import PluginOption, app, console
from pelab.errors import check_range


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
    plugin: PluginOption = None,
) -> None:
    """Train and evaluate one model; print its result."""
    from pelab.config import RunConfig, build
    from pelab.plugins import load_named
    from pelab.train import autocast, train_run

    load_named(plugin)  # its schemes, combiners and tasks, by name like pelab's own

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
