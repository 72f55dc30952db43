"""What every command shares: the Typer app, the console, and the checks of sizes, images and grids."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import rich.console
import typer
from rich.text import Text

from pelab.errors import PelabError, visible


class Console(rich.console.Console):
    """The command's console: every string it renders (markup, a table's cells and title, a plain line) has its
    control characters made visible first (``errors.visible``), so a study, grid or arm name, a path or a stored
    failure reason prints as text and can never recolour the screen or set the window title. Rich's own styles
    and cursor moves are added after, so they still work."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible(text, lines=True), **kwargs)


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


PRESETS = ("quick", "full", "gpu")


def preset_path(name: str) -> Path:
    from importlib.resources import files

    if name not in PRESETS:
        raise PelabError(f"preset: unknown value {name!r}; allowed: {', '.join(PRESETS)}")
    return Path(str(files("pelab") / "presets" / f"{name}.toml"))


#: ``--plugin`` and ``--trust-plugins``, shared by the commands that read configs (``pelab.plugins``).
PluginOption = Annotated[
    list[str] | None,
    typer.Option(
        "--plugin",
        help="your own plugin: a .py file or a dotted module whose position schemes, combiners and tasks pelab "
        "uses by name (repeatable); naming it is what lets pelab run it",
    ),
]
TrustOption = Annotated[
    bool,
    typer.Option(
        "--trust-plugins",
        help="run the plugins a study file or study folder names (pelab says which file and hash it runs); without "
        "it pelab runs only the plugins --plugin names",
    ),
]


def folder_plugins(out: Path, named: list[str] | None, trust: bool) -> None:
    """Before a command reads a study folder's runs: its recorded plugins, confirmed on the command line (the same
    code by --plugin, or --trust-plugins) and loaded; otherwise one line says how, and none of their code runs."""
    from pelab.plugins import confirm_recorded
    from pelab.study.store import Store

    with Store(out, create=False) as store:
        records = store.plugin_records()
    confirm_recorded(records, named, trust, f"the study in {out}")
