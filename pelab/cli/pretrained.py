"""`pelab pretrained`: what a pretrained model's positions encode, and C9 on MiniLM's frozen word vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from pelab.cli.app import app, console
from pelab.errors import check_range

#: `pelab pretrained --seeds`: C9's seeds per arm (each a training run)
MAX_PRETRAINED_SEEDS = 1000


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
    corpus: Annotated[
        str | None, typer.Option(help="C9's text: prose (the default), code, or a text file or folder")
    ] = None,
    seeds: Annotated[int, typer.Option(help="C9: seeds per arm (paired across arms)")] = 3,
    steps: Annotated[int, typer.Option(help="C9: optimiser steps per run (default: the full preset's)")] = 1500,
    skip_c9: Annotated[bool, typer.Option("--skip-c9", help="only analyse the tables; train nothing")] = False,
) -> None:
    """What a pretrained model's positions encode (C16, C11, C1, geometry) beside a sinusoidal table of
    its size: MiniLM (pelab[pretrained]) by default, or local folders of BERT, RoBERTa, DistilBERT,
    ELECTRA, GPT-2, OPT, ViT and ViT-MAE models (--model, read with safetensors, never downloaded),
    several side by side. With MiniLM, also frozen word vectors + positions added or concatenated (C9:
    the full preset's C9 grids, word-piece language models, run by the study driver into OUT/c9)."""
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
