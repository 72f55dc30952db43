"""`pelab verify`: whether a study folder's numbers are the ones its models give.

Every number of a report is computed from the folder's database, and the database is a file anyone can edit: a
received study whose arm had 0.25 added to its accuracies turned C6 round without a warning. The weights are what a
forger cannot fake cheaply, so this recomputes, from each finished run's checkpoint, everything its record says of
the trained model (test metrics at every size, validation metrics, the last point of the held-out curve, parameters
and FLOPs) and every measure an earlier report kept of it, and compares. Runs whose weights did not travel can be
trained again (``retrain``): the same config, seed and thread count give the same numbers bit for bit on the same
kind of CPU, and numbers that drift elsewhere, shown rather than judged (docs/study.md has what two CPU kinds gave).

A study folder is untrusted input here too: it is read as `pelab report` reads it (no link followed, damaged
checkpoints counted as missing, rows that do not hold together left out and counted), and nothing in it is written.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pelab.report.progress import OnProgress

#: A check estimated shorter than this (in seconds at the reference CPU's speed) runs in this process: worker
#: processes cost more to start than they save (quick's 64 runs: 9 s alone, 14 s on two workers).
ALONE_SECONDS = 30.0

#: The largest difference allowed between a stored number and the one recomputed, relative to the larger of the
#: two (or to 1 for numbers below 1: an accuracy of 0 and one of 1e-9 agree). Bit for bit on the machine that
#: trained; ``bench/verify_isa.py`` measures how far evaluation moves when another CPU's kernels compute it.
TOLERANCE = 1e-5


@dataclass
class Difference:
    """One number that is not what the model gives: where in the record, stored and recomputed."""

    where: str
    stored: Any
    recomputed: Any


@dataclass
class Checked:
    """One finished run, recomputed: how (from its weights, or trained again), how many numbers were compared,
    the largest relative difference among them and the differences beyond the tolerance. A run recomputed where
    its numbers may drift (trained again on another kind of machine than its own, evaluated on another kind of
    device: ``elsewhere`` names where they were made) has differences that are a measurement, not a finding;
    ``headline`` is its main number, stored and recomputed."""

    run_id: str
    arm: str
    how: str
    compared: int = 0
    largest: float = 0.0
    differences: list[Difference] = field(default_factory=list)
    elsewhere: str | None = None
    headline: tuple[str, float, float] | None = None


@dataclass
class Verification:
    """What ``verify`` found: the runs checked, and the runs it could not check, by reason, of the ``stored`` runs
    whose rows hold together."""

    checked: list[Checked] = field(default_factory=list)
    unchecked: dict[str, list[str]] = field(default_factory=dict)
    stored: int = 0

    @property
    def differing(self) -> list[Checked]:
        """The runs with a number that must have matched and did not."""
        return [c for c in self.checked if c.differences and c.elsewhere is None]

    @property
    def drifted(self) -> list[Checked]:
        """The runs recomputed on another kind of machine than their own whose numbers moved past the tolerance."""
        return [c for c in self.checked if c.differences and c.elsewhere is not None]

    def leave(self, why: str, run_id: str) -> None:
        self.unchecked.setdefault(why, []).append(run_id)


def relative(a: float, b: float) -> float:
    """|a − b| over the larger of |a|, |b| and 1: a loss of 2.0 against 2.00002 is 0.00002 / 2.00002, an accuracy
    of 0 against 1e-9 is 1e-9. Equal non-finite numbers (NaN and NaN, inf and inf) are 0 apart; a finite against a
    non-finite number is infinitely apart."""
    if math.isnan(a) and math.isnan(b) or a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(1.0, abs(a), abs(b))


def numbers(value: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf of a record's JSON value with its path (``evals.64.acc``, ``value.rows[3]``), in order."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from numbers(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from numbers(v, f"{where}[{i}]")
    else:
        yield where, value


def compare(stored: Any, recomputed: Any, tol: float, into: Checked, prefix: str) -> None:
    """Add to ``into`` every leaf of ``stored`` that ``recomputed`` does not give back within ``tol`` (a number)
    or exactly (anything else), and every leaf one has and the other lacks."""
    ours = dict(numbers(recomputed, prefix))
    theirs = dict(numbers(stored, prefix))
    for where in list(theirs) + [w for w in ours if w not in theirs]:
        a, b = theirs.get(where, _MISSING), ours.get(where, _MISSING)
        into.compared += 1
        if _is_number(a) and _is_number(b):
            gap = relative(float(a), float(b))
            into.largest = max(into.largest, gap)
            if gap <= tol:
                continue
        elif a == b and type(a) is type(b):
            continue
        into.differences.append(Difference(where, _shown(a), _shown(b)))


class _Missing:
    def __repr__(self) -> str:
        return "(none)"


_MISSING = _Missing()


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _shown(x: Any) -> Any:
    return "(none)" if x is _MISSING else x


def arm_label(config: dict[str, Any]) -> str:
    """A run's arm in a few words: task, width, scheme, combiner, rate, seed."""
    m, t = config["model"], config["train"]
    return (
        f"{config['task']['name']} d={m['d']} {m['position']['scheme']} {m['combine']} lr={t['lr']:g} "
        f"seed {config['seed']}"
    )


def from_weights(folder: Path, row: dict[str, Any], tol: float, device: Any) -> Checked:
    """Recompute a finished run's record from its checkpoint: ``train.end_metrics`` (the function the run stored
    them with: the same windows by the same generators), the curve's last held-out point, parameters and FLOPs."""
    import torch

    from pelab.study.folder import StudyFolder
    from pelab.tasks import make_task
    from pelab.train import curve_val_loss, end_metrics

    model, cfg = StudyFolder(folder).load_trained(row["run_id"])
    model = model.to(device)
    task = make_task(cfg.task)
    out = Checked(row["run_id"], arm_label(row["config"]), "weights", elsewhere=elsewhere(row, device, False))
    with torch.no_grad():
        metrics, evals = end_metrics(cfg, model, task, device)
        key = headline(row["metrics"])
        if key in metrics:
            out.headline = (key, float(row["metrics"][key]), float(metrics[key]))
        stored = {k: v for k, v in row["metrics"].items() if k != "train_loss"}
        compare(stored, metrics, tol, out, "metrics")
        compare(row["evals"], evals, tol, out, "evals")
        compare(row["params"], model.num_parameters(), 0.0, out, "params")
        compare(row["flops_per_token"], model.flops_per_token(task.seq_len(task.n)), 0.0, out, "flops_per_token")
        last = row["curve"][-1] if row["curve"] else {}
        if "val_loss" in last:  # a language model's curve reads held-out loss; its last point is the final model's
            compare(last["val_loss"], curve_val_loss(model, task, cfg, device), tol, out, "curve[-1].val_loss")
    return out


def measures_from_weights(
    folder: Path, run_id: str, stored: dict[str, dict[str, Any]], tol: float, into: Checked
) -> None:
    """Take again every measure an earlier report kept of this run's checkpoint (``Store.stored_measures``, only
    those taken on the checkpoint there now) and compare: a report reads a kept measure instead of measuring."""
    from pelab.report.context import measure_job

    for key, value in stored.items():
        _, name, _, at_init = json.loads(key)
        compare(value, measure_job(str(folder), name, run_id, at_init), tol, into, f"measure {name}")


def elsewhere(row: dict[str, Any], device: Any, retrain: bool) -> str | None:
    """None where recomputing ``row`` on ``device`` must give its numbers within the tolerance: training again
    needs the kind of machine that trained it (``pelab.device.device_kind``: bit for bit there, a drift elsewhere);
    evaluating fp32 weights needs only the same kind of device (other kernels move it by about 1e-7,
    bench/verify_isa.py), bf16 the same kind of machine. Otherwise where its numbers were made, as a person reads it."""
    from pelab.device import device_kind
    from pelab.records import trained_on

    made_on = str(row.get("device", "cpu"))
    if made_on.split(":")[0] != device.type:
        return f"{made_on}, recomputed on {device.type}"
    if not retrain and row["config"]["train"].get("precision", "fp32") == "fp32":
        return None
    recorded = trained_on(row)
    if recorded is None:
        return f"a {device.type.upper()} it did not record"
    return None if recorded == device_kind(device) else recorded


def headline(metrics: dict[str, Any]) -> str:
    """A run's main number: bits per byte for a language model, else held-out loss."""
    return "bpb" if "bpb" in metrics else "loss"


def retrained(row: dict[str, Any], tol: float, device: Any) -> Checked:
    """Train a stored run again from its config, alone, at the thread count it recorded, and compare every number
    of its record that training gives: its status; for a finished run its metrics (training loss too), evals,
    whole curve, parameters and FLOPs; for one that diverged its reason (the step) and curve. A run trained in a
    stack gives the same numbers alone (``pelab.stacked``)."""
    from pelab.config import RunConfig
    from pelab.train import train_run

    cfg = RunConfig.model_validate(row["config"])
    result = train_run(cfg, device=str(device), threads=int(row["threads"]) or None)
    out = Checked(row["run_id"], arm_label(row["config"]), "trained again", elsewhere=elsewhere(row, device, True))
    key = headline(row["metrics"])
    if key in result.metrics and key in row["metrics"]:  # a run that did not finish has no main number
        out.headline = (key, float(row["metrics"][key]), float(result.metrics[key]))
    if result.status != row["status"]:  # a seed said to diverge that trains to the end, or the other way round
        out.differences.append(Difference("status", row["status"], f"{result.status} ({result.reason})"))
        return out
    if result.status != "done":  # it ended so again: at the same step, after the same curve
        compare(row.get("reason"), result.reason, tol, out, "reason")
        compare(row["curve"], result.curve, tol, out, "curve")
        return out
    compare(row["metrics"], result.metrics, tol, out, "metrics")
    compare(row["evals"], result.evals, tol, out, "evals")
    compare(row["curve"], result.curve, tol, out, "curve")
    compare(row["params"], result.params, 0.0, out, "params")
    compare(row["flops_per_token"], result.flops_per_token, 0.0, out, "flops_per_token")
    return out


def verify(
    folder: str | Path,
    tol: float = TOLERANCE,
    retrain: list[str] | None = None,
    device: str | None = "auto",
    on_run: OnProgress | None = None,
    workers: int | None = None,
) -> Verification:
    """Check every finished run of the study in ``folder`` whose weights are there and whole against them (with
    its kept measures), and train again the runs named in ``retrain`` (run ids, finished or not), whatever their
    weights. A run that is neither, and a run of the study's design that the database lacks, is listed as
    unchecked, with why. Reads only; writes nothing in the folder."""
    from pelab.config import RunConfig
    from pelab.records import ENGINE
    from pelab.report.context import checkpoint_digest, measuring_code, report_pool
    from pelab.report.progress import LOAD, measure_cost
    from pelab.study.estimate import eval_seconds, run_seconds
    from pelab.study.folder import StudyFolder
    from pelab.study.progress import Pace
    from pelab.study.store import Store

    folder = Path(folder)
    study = StudyFolder(folder)
    with Store(folder, create=False) as store:
        stored = store.rows(quiet=True)
        excluded = list(store.excluded)
        kept = store.stored_measures(measuring_code())
        design = store.study()
    found = Verification(stored=len(stored))
    for run_id, _ in excluded:
        found.leave("its row does not hold together (`pelab results` says why)", run_id)
    if design is not None:  # a seed whose row is gone (a bad seed dropped) changes a verdict as an edit does
        have = {r["run_id"] for r in stored} | {run_id for run_id, _ in excluded}
        for run in study.load_design(design)[0].runs:
            if run.run_id not in have:
                found.leave("in the study's design, not in its database (a study not finished, or a row removed)",
                            run.run_id)  # fmt: skip
    again = set(retrain or ())
    plan: list[tuple[str, dict[str, Any]]] = []
    for r in stored:
        if r["status"] != "done" and r["run_id"] not in again:
            found.leave(f"ended {r['status']} (train it again with --retrain: it must end so again)", r["run_id"])
            continue
        engine = (r["versions"] or {}).get("engine") if isinstance(r["versions"], dict) else None
        if r["run_id"] in again:
            plan.append(("retrain", r))
        elif engine != ENGINE:
            found.leave("trained by an older computation (the report leaves it out)", r["run_id"])
        elif not os.path.lexists(study.checkpoint(r["run_id"])):
            found.leave("no checkpoint (name it with --retrain, or --retrain-some)", r["run_id"])
        elif not study.has_checkpoint(r["run_id"], RunConfig.model_validate(r["config"]).model):
            found.leave("a damaged checkpoint, or one of another model", r["run_id"])
        else:
            plan.append(("weights", r))
    costs, jobs = {}, []
    for how, r in plan:
        cfg = RunConfig.model_validate(r["config"])
        digest = checkpoint_digest(folder, r["run_id"]) if how == "weights" else None
        mine = {k: v for (run, k), (ck, v) in kept.items() if run == r["run_id"] and ck == digest}
        jobs.append((str(folder), how, r, tol, device, mine))
        m = cfg.model
        costs[r["run_id"]] = (run_seconds(cfg) if how == "retrain" else LOAD + eval_seconds(cfg, whole=True)) + sum(
            measure_cost(json.loads(k)[1], cfg.task.length, m.d, m.n_layers) for k in mine
        )
    pace = Pace(costs)
    if workers is None and pace.total < ALONE_SECONDS:
        workers = 1  # worker processes start in about as long as this whole check takes in one
    by_id: dict[str, Checked] = {}
    with report_pool(workers) as pool:  # one process per core, as the report measures; none on one core
        done = (check_one(*job) for job in jobs) if pool is None else _as_done(pool, jobs)
        for i, checked in enumerate(done, 1):
            by_id[checked.run_id] = checked
            pace.finished(checked.run_id)
            if on_run is not None:
                on_run(i, len(plan), pace.text())
    found.checked = [by_id[r["run_id"]] for _, r in plan]  # in the folder's order, whichever finished first
    return found


def _as_done(pool: Executor, jobs: list[tuple]) -> Iterator[Checked]:
    """Each job's result as it finishes; an error in one (a run's own) is raised here, as in the loop without a
    pool."""
    futures = [pool.submit(check_one, *job) for job in jobs]
    for future in as_completed(futures):
        yield future.result()


def check_one(
    folder: str, how: str, row: dict[str, Any], tol: float, device: str | None, kept: dict[str, dict[str, Any]]
) -> Checked:
    """One run of ``verify``'s plan, a top-level function so the report's worker processes can run it: trained
    again, or recomputed from its weights with the measures kept of them."""
    from pelab.device import resolve_device

    dev = resolve_device(device)
    if how == "retrain":
        return retrained(row, tol, dev)
    checked = from_weights(Path(folder), row, tol, dev)
    measures_from_weights(Path(folder), row["run_id"], kept, tol, checked)
    return checked


__all__ = ["TOLERANCE", "Checked", "Difference", "Verification", "compare", "relative", "verify"]
