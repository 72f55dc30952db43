"""`pelab verify`: recompute a study folder's numbers from its models (``pelab.report.verify``)."""

from __future__ import annotations

import math
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from pelab.cli.app import PluginOption, TrustOption, app, console
from pelab.cli.report import _told
from pelab.errors import PelabError, check_range, visible
from pelab.report.verify import TOLERANCE

if TYPE_CHECKING:
    from pelab.report.verify import Difference, Verification

#: Exit codes: every run checked and every number matched; a number did not match; nothing differed, but some runs
#: or the design could not be checked (no weights and not trained again, not stored, a design protocol.json did not
#: fix) or were trained again on another kind of machine and moved. An error of pelab's own is a traceback (1 too):
#: a run whose recomputation fails is listed as unchecked, never as a difference.
MATCHED, DIFFERS, INCOMPLETE = 0, 1, 3

#: Differences and moved runs printed, one line each, and run ids named in an unchecked reason's line; the rest are
#: counted (``--json`` has them all).
SHOWN, IDS = 20, 5


@app.command()
def verify(
    out: Annotated[Path, typer.Argument(help="study folder")],
    retrain: Annotated[
        list[str] | None,
        typer.Option("--retrain", help="a stored run's id (or unique prefix) to train again and compare (repeatable)"),
    ] = None,
    retrain_some: Annotated[
        int,
        typer.Option(
            "--retrain-some",
            help="train again this many stored runs drawn at random, those the weights cannot check first",
        ),
    ] = 0,
    draw: Annotated[
        int | None, typer.Option(help="the seed of --retrain-some's draw (default: a fresh one, printed)")
    ] = None,
    tol: Annotated[
        float,
        typer.Option(help="largest difference allowed: relative to the larger number above 1, absolute below"),
    ] = TOLERANCE,
    device: Annotated[
        str, typer.Option(help="where to recompute: cpu (default), cuda, cuda:N (a study trained on a GPU)")
    ] = "cpu",
    json_out: Annotated[
        Path | None, typer.Option("--json", help="also write everything found here: every difference and run id")
    ] = None,
    plugin: PluginOption = None,
    trust_plugins: TrustOption = False,
) -> None:
    """Recompute a study's numbers from its checkpoints (and, with --retrain, by training again) and compare them
    with its database: exit 0 when every run was checked and matched, 1 when a number differs, 3 when nothing
    differed but some runs, or the design, could not be checked, or runs trained again elsewhere moved. Not checked
    without training again: a curve's earlier points and the training loss, and whether the weights are what the
    config trains."""
    from pelab.device import check_device_name
    from pelab.plugins import confirm_recorded
    from pelab.report.verify import private_database
    from pelab.report.verify import verify as run_verify
    from pelab.study.folder import StudyFolder
    from pelab.study.store import DB_NAME, Store

    if not (math.isfinite(tol) and 0 <= tol < 1):
        raise PelabError(f"tol: expected a number from 0 to below 1 (got {tol!r})")
    check_range("retrain-some", retrain_some, 0, 1_000_000)
    if draw is not None and not retrain_some:
        raise PelabError("draw: the seed of --retrain-some's draw; give --retrain-some N with it")
    check_device_name(device)
    StudyFolder(out).check()  # a received folder with a link or a FIFO where pelab keeps a file: one line
    if not (out / DB_NAME).is_file():
        raise PelabError(f"out: {out} holds no pelab study (no {DB_NAME})")
    with private_database(out) as copy:  # one copy of the database, for this command and for verify: none written
        with Store(copy, create=False) as store:
            confirm_recorded(store.plugin_records(), plugin, trust_plugins, f"the study in {out}")  # before its rows
            stored = sorted(r["run_id"] for r in store.rows(quiet=True))
        named = [_one(prefix, stored, out) for prefix in retrain or []]  # a bad id: one line before any work
        seed = (draw if draw is not None else secrets.randbelow(2**31)) if retrain_some else 0
        found, seconds = _told(
            "runs", "recomputing the stored runs' numbers",
            lambda on: run_verify(out, tol=tol, retrain=named, retrain_some=retrain_some, draw=seed, device=device,
                                  on_run=on, db=copy),
            "verify",
        )  # fmt: skip
    if retrain_some:
        console.print(f"verify: trained again {len(found.drawn)} run(s) drawn at random (--draw {seed})")
    if json_out is not None:
        import json

        from pelab.files import write_atomic

        write_atomic(json_out, json.dumps(found.as_dict(), indent=1, default=str) + "\n")
    raise typer.Exit(_say(found, tol, seconds))


def _one(prefix: str, stored: list[str], out: Path) -> str:
    matches = [r for r in stored if r.startswith(prefix)]
    if len(matches) != 1:
        what = "no stored run" if not matches else f"{len(matches)} stored runs"
        raise PelabError(f"retrain: {what} in {out} match {prefix!r}; give a stored run's id")
    return matches[0]


def _line(run_id: str, d: Difference) -> str:
    return escape(visible(f"  {run_id}  {d.where}: stored {d.stored!r}, recomputed {d.recomputed!r}"))


def _say(found: Verification, tol: float, seconds: float) -> int:
    """The outcome: counts, every difference (the first ``SHOWN``), how far runs trained again elsewhere moved,
    what was not checked and the design's problems; one line each, so a run id can be copied from any terminal."""
    trained = sum(c.trained for c in found.checked)
    numbers = sum(c.compared for c in found.checked)
    largest = max((c.largest for c in found.checked), default=0.0)
    console.print(
        f"verify: {len(found.checked)} of {found.runs} run(s) checked ({trained} of them trained again) in "
        f"{seconds:.0f} s; {numbers:,} numbers compared, largest difference {largest:.2g} (tolerance {tol:.2g})"
    )
    if found.protocol:
        console.print(f"verify: {escape(visible(found.protocol))}")
    rows = [(c.run_id, d) for c in found.differing for d in c.differences]
    if rows:
        console.print("[red]verify: numbers that are not what the models give:[/]")
        for run_id, d in rows[:SHOWN]:
            console.print(_line(run_id, d), style="red")
        more = f" ({len(rows) - SHOWN} more: --json)" if len(rows) > SHOWN else ""
        console.print(
            f"[red]verify: {len(rows)} number(s) in {len(found.differing)} run(s) differ{more}: this folder's "
            f"database is not the record of its models[/]"
        )
    if found.drifted:
        console.print(
            f"[yellow]verify: {len(found.drifted)} run(s) trained again on another kind of machine than theirs moved "
            f"past the tolerance\n(bit for bit on one kind only; docs/study.md has how far two CPU kinds moved); the "
            f"number that moved most in each:[/]"
        )
        for c in found.drifted[:SHOWN]:
            d = max(c.moved, key=lambda m: _gap(m))
            console.print(_line(c.run_id, d) + escape(visible(f"  (made on {c.drift})")), style="yellow")
    for c in found.checked:
        if c.not_trained:
            why = escape(visible(c.not_trained))  # a reason can quote a stored row's text
            console.print(f"[yellow]verify: {c.run_id} checked from its weights, not trained again: {why}[/]")
    for why, ids in found.unchecked.items():
        first = ", ".join(visible(i) for i in ids[:IDS]) + (", ... (all: --json)" if len(ids) > IDS else "")
        console.print(f"[yellow]verify: {len(ids)} run(s) not checked: {escape(visible(why))}: {escape(first)}[/]")
    for problem in found.design:
        console.print(f"[yellow]verify: the design: {escape(visible(problem))}[/]")
    for note in found.notes:
        console.print(f"verify: {escape(visible(note))}")
    if found.differing:
        return DIFFERS
    if found.unchecked or found.drifted or found.design:
        return INCOMPLETE
    console.print("[green]verify: every number read from the weights, and every measure a report reads, matches[/]")
    if trained < len(found.checked):
        console.print(
            "verify: checked only by training again (--retrain-some): a curve before its last point, the training "
            "loss, and whether the weights are what the config trains"
        )
    return MATCHED


def _gap(d: Difference) -> float:
    from pelab.report.verify import relative

    try:
        return relative(float(d.stored), float(d.recomputed))
    except (TypeError, ValueError):
        return math.inf
