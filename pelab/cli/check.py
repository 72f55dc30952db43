"""`pelab check`: pelab's own conformance checks (``pelab.conformance``) on a plugin's classes, or on any class
registered by name, as a table of passed and failed checks."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pelab.cli.app import app, console

STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow", "n/a": "dim"}


@app.command()
def check(
    plugins: Annotated[
        list[str] | None, typer.Argument(help="plugin files or dotted modules: every class each registers is checked")
    ] = None,
    scheme: Annotated[list[str] | None, typer.Option(help="also check this position scheme by name")] = None,
    combine: Annotated[list[str] | None, typer.Option(help="also check this combiner by name")] = None,
    task: Annotated[list[str] | None, typer.Option(help="also check this task by name")] = None,
) -> None:
    """The checks pelab's own schemes, combiners and tasks pass, on yours: exit 0 when all pass, 1 when a check
    fails, 2 when a file does not load."""
    from pelab.combine import COMBINERS
    from pelab.conformance import FAILED, check_classes
    from pelab.errors import PelabError
    from pelab.plugins import load_named
    from pelab.positions import SCHEMES
    from pelab.tasks import TASKS

    classes: list[tuple[str, str]] = []
    for p in load_named(plugins):  # named here: asked for
        console.print(f"plugin {escape(p.describe())}", highlight=False)
        classes += list(p.provides)
    for field, names, registry in (("position", scheme, SCHEMES), ("combine", combine, COMBINERS),
                                   ("task", task, TASKS)):  # fmt: skip
        classes += [(field, registry.lookup(n).name) for n in names or []]
    classes = list(dict.fromkeys(classes))  # a file or a name given twice is checked once
    if not classes:
        raise PelabError("check: name a plugin file (pelab check my_pe.py) or a class (--scheme rotary)")
    with console.status("checking"):
        results = check_classes(classes)
    t = Table(title="pelab check: the properties pelab's own classes pass", title_justify="left")
    for col in ("class", "check", "result", "detail"):
        t.add_column(col)
    for r in results:
        t.add_row(f"{r.kind} {escape(r.name)}", r.check, f"[{STYLE[r.status]}]{r.status}[/]", escape(r.detail))
    console.print(t)
    failed = [r for r in results if r.status == FAILED]
    counts = {s: sum(r.status == s for r in results) for s in STYLE}
    console.print(
        ", ".join(f"{n} {s}" for s, n in counts.items() if n or s in ("passed", "failed"))
        + (f" ({', '.join(f'{r.name}: {r.check}' for r in failed)})" if failed else ""),
        highlight=False,
    )
    if failed:
        raise typer.Exit(1)
