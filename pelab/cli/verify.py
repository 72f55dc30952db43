"""`pelab verify`: recompute a study folder's numbers from its models (``pelab.report.verify``)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pelab.cli.app import PluginOption, TrustOption, app, console, folder_plugins
from pelab.cli.report import _told
from pelab.errors import PelabError, check_range, visible
from pelab.report.verify import TOLERANCE

if TYPE_CHECKING:
    from pelab.report.verify import Verification

#: Exit codes: every stored run checked and every number matched; a number did not match; nothing differed, but
#: some runs could not be checked (no weights, not trained again, in the design but not stored) or were recomputed on
#: another kind of machine and moved.
MATCHED, DIFFERS, INCOMPLETE = 0, 1, 3

#: Differences printed in full; the rest are counted.
SHOWN = 20


@app.command()
def verify(
    out: Annotated[Path, typer.Argument(help="study folder")],
    retrain: Annotated[
        list[str] | None,
        typer.Option("--retrain", help="a stored run's id (or unique prefix) to train again and compare (repeatable)"),
    ] = None,
    retrain_some: Annotated[
        int, typer.Option("--retrain-some", help="train again this many stored runs drawn at random, and compare")
    ] = 0,
    draw: Annotated[
        int | None, typer.Option(help="the seed of --retrain-some's draw (default: a fresh one, printed)")
    ] = None,
    tol: Annotated[
        float, typer.Option(help="largest relative difference allowed between a stored and a recomputed number")
    ] = TOLERANCE,
    plugin: PluginOption = None,
    trust_plugins: TrustOption = False,
) -> None:
    """Recompute a study's numbers from its checkpoints (and, with --retrain, by training again) and compare them
    with its database: exit 0 when every run was checked and matched, 1 when a number differs, 3 when nothing
    differed but some runs could not be checked."""
    import math
    import random

    from pelab.report.verify import verify as run_verify
    from pelab.study.folder import StudyFolder
    from pelab.study.store import DB_NAME, Store

    if not (math.isfinite(tol) and 0 <= tol < 1):
        raise PelabError(f"tol: expected a number from 0 to below 1 (got {tol!r})")
    check_range("retrain-some", retrain_some, 0, 1_000_000)
    StudyFolder(out).check()  # a received folder with a link or a FIFO where pelab keeps a file: one line
    if not (out / DB_NAME).is_file():
        raise PelabError(f"out: {out} holds no pelab study (no {DB_NAME})")
    with Store(out, create=False) as store:  # a damaged or foreign database is refused in one line
        stored = sorted(r["run_id"] for r in store.rows(quiet=True))
    folder_plugins(out, plugin, trust_plugins)  # its plugins' code runs only when confirmed
    named = [_one(prefix, stored, out) for prefix in retrain or []]
    if retrain_some:
        seed = draw if draw is not None else secrets.randbelow(2**31)
        pool = [r for r in stored if r not in named]
        picked = random.Random(seed).sample(pool, min(retrain_some, len(pool)))
        console.print(f"verify: training again {len(picked)} run(s) drawn at random (--draw {seed})")
        named += picked
    found, seconds = _told(
        "runs", "recomputing the stored runs' numbers",
        lambda on: run_verify(out, tol=tol, retrain=named, on_run=on), "verify",
    )  # fmt: skip
    raise typer.Exit(_say(found, tol, seconds))


def _one(prefix: str, stored: list[str], out: Path) -> str:
    matches = [r for r in stored if r.startswith(prefix)]
    if len(matches) != 1:
        what = "no stored run" if not matches else f"{len(matches)} stored runs"
        raise PelabError(f"retrain: {what} in {out} match {prefix!r}; give a stored run's id")
    return matches[0]


def _say(found: Verification, tol: float, seconds: float) -> int:
    """The outcome: counts, then every difference (the first ``SHOWN`` in full), how far runs trained again
    elsewhere moved, then what was not checked."""
    import math

    from pelab.report.verify import relative

    weights = sum(c.how == "weights" for c in found.checked)
    again = len(found.checked) - weights
    numbers = sum(c.compared for c in found.checked)
    largest = max((c.largest for c in found.checked), default=0.0)
    unchecked = sum(len(v) for v in found.unchecked.values())
    console.print(
        f"verify: {len(found.checked)} of {found.stored} stored run(s) checked ({weights} from their weights, "
        f"{again} trained again) in {seconds:.0f} s"
    )
    console.print(
        f"verify: {numbers:,} numbers compared; largest relative difference {largest:.1e} (tolerance {tol:.0e})"
    )
    if found.differing:
        table = Table("run", "arm", "number", "stored", "recomputed", title="numbers that are not what the model gives")
        rows = [(c, d) for c in found.differing for d in c.differences]
        for c, d in rows[:SHOWN]:
            table.add_row(*(escape(visible(str(x))) for x in (c.run_id, c.arm, d.where, d.stored, d.recomputed)))
        console.print(table)
        more = f" ({len(rows) - SHOWN} more not shown)" if len(rows) > SHOWN else ""
        console.print(
            f"[red]verify: {len(rows)} number(s) in {len(found.differing)} run(s) differ from what their models "
            f"give{more}: this folder's database is not the record of its models[/]"
        )
    if found.drifted:
        table = Table("run", "arm", "how", "made on", "main number: stored → again", "largest difference",
                      title="recomputed on another kind of machine than its own: how far each run moved")  # fmt: skip
        for c in found.drifted:
            name, was, now = c.headline or ("?", math.nan, math.nan)
            moved = f"{name} {was:.4f} → {now:.4f} ({relative(was, now):.1e})"
            cells = (c.run_id, c.arm, c.how, c.elsewhere, moved, f"{c.largest:.1e}")
            table.add_row(*(escape(visible(str(x))) for x in cells))
        console.print(table)
        console.print(
            f"[yellow]verify: {len(found.drifted)} run(s) recomputed on another kind of machine moved past the "
            f"tolerance;\nnumbers are bit for bit on one kind only: read the drift against the spread of the "
            f"comparisons it feeds (docs/study.md)[/]"
        )
    for why, ids in found.unchecked.items():
        first = ", ".join(visible(i) for i in ids[:3]) + (", ..." if len(ids) > 3 else "")
        console.print(f"[yellow]verify: {len(ids)} run(s) not checked: {escape(why)} ({escape(first)})[/]")
    if found.differing:
        return DIFFERS
    if unchecked or found.drifted:
        return INCOMPLETE
    console.print("[green]verify: every number matches its model[/]")
    return MATCHED
