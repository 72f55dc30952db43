"""`pelab check`: pelab's own conformance checks (``pelab.conformance``) on a plugin's classes, or on any class
registered by name, as a table of passed and failed checks."""

from __future__ import annotations

from typing import Annotated, Any

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
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="build with this model setting, as a study file writes it: model.position.NAME=VALUE "
            "(a scheme's option) or model.NAME=VALUE; repeat for several",
        ),  # fmt: skip
    ] = None,
) -> None:
    """The checks pelab's own schemes, combiners and tasks pass, on yours: exit 0 when all pass, 1 when a check
    fails, 2 when a file does not load."""
    from pelab.combine import COMBINERS
    from pelab.conformance import FAILED, check_classes, settings_problem
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
    settings = model_settings(set_ or [], [n for f, n in classes if f == "position"])
    if settings and (why := settings_problem(classes, settings)) is not None:
        raise PelabError(f"check --set: {' '.join(set_ or [])}: {why}")
    with console.status("checking"):
        results = check_classes(classes, settings)
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


#: What ``--set`` may not change: the checks' own tiny model and the class under check.
CHECKS_OWN = ("d", "n_heads", "n_layers", "vocab_size", "n_outputs", "max_len", "grid", "kind", "combine")


def model_settings(items: list[str], schemes: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as a nested ``model`` table; VALUE is read as TOML (``8``, ``0.5``, ``"train"``,
    ``true``), or as a bare string. One line names a key that is not the model's or that no scheme here declares."""
    import tomllib

    from pelab.errors import PelabError
    from pelab.positions import SCHEMES

    out: dict[str, Any] = {}
    seen: set[str] = set()
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.startswith("model.") or key.count(".") > 2 or key in ("model.", "model.position."):
            raise PelabError(
                f"check --set: {item!r:.80} is not model.NAME=VALUE or model.position.NAME=VALUE (the checks build "
                "their own tasks and budgets)"
            )
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        if key in seen:
            raise PelabError(f"check --set: {key} is given twice; give each setting once")
        seen.add(key)
        parts = key.split(".")[1:]
        if parts[0] in CHECKS_OWN or (parts[0] == "position" and len(parts) == 1):
            raise PelabError(
                f"check --set: {key} is the checks' own; allowed: a scheme's options or other model settings"
            )
        if parts[0] == "position" and len(parts) == 2:
            if parts[1] == "scheme":
                raise PelabError("check --set: model.position.scheme is the class under check; name it with --scheme")
            declared = sorted({o for s in schemes for o in SCHEMES[s].Options.model_fields})
            if parts[1] not in declared:
                raise PelabError(
                    f"check --set: {key}: no scheme checked here declares {parts[1]} "
                    f"(allowed: {', '.join(declared) or 'none'})"
                )
            out.setdefault("position", {})[parts[1]] = value
        elif len(parts) == 1:
            out[parts[0]] = value
        else:
            raise PelabError(f"check --set: {key} is not a model setting (model.NAME or model.position.NAME)")
    return out
