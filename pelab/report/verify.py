"""`pelab verify`: whether a study folder's numbers are the ones its models give.

Every number of a report is computed from the folder's database, and the database is a file anyone can edit: a
received study whose arm had 0.25 added to its accuracies turned C6 round without a warning. The weights are what a
forger cannot fake as cheaply, so this recomputes, from each finished run's checkpoint, everything its record says
of the trained model (test metrics at every size, validation metrics, the last point of the held-out curve,
parameters and FLOPs) and every measure a report would read of it, and compares. Training again (``retrain``) checks
what the weights cannot: that they are what the config trains (the same config, seed and thread count give the same
numbers and weights bit for bit on one kind of machine), the whole curve, and the runs whose weights did not travel.

A study folder is untrusted input here too: its database is read from a private copy (SQLite writes to a database
it opens, and a received folder may be read-only), checkpoints are read without following a link, and nothing in
the folder is written. The kind of machine a run recorded is the folder's own word: it decides only whether a run
trained again must match bit for bit, never whether its weights are checked.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pelab.config import RunConfig
    from pelab.model import Transformer
    from pelab.report.progress import OnProgress

#: A check estimated shorter than this (in seconds at the reference CPU's speed) runs in this process: worker
#: processes cost more to start than they save (quick's 64 runs: 9 s alone, 14 s on two workers).
ALONE_SECONDS = 30.0

#: The largest difference allowed between a stored number and the one recomputed: relative to the larger of the two
#: for numbers above 1, absolute below (an accuracy of 0 and one of 1e-9 agree). Bit for bit on the machine that
#: trained; ``bench/verify_isa.py`` measures how far evaluation moves when another CPU's kernels compute it.
TOLERANCE = 1e-5

#: The tolerance of a run evaluated in bf16 (at least): its numbers round coarser. bench/verify_isa.py on a bf16 study
#: (4 runs, this machine's stand-ins for other CPUs) moved them by up to 1.0e-5 (PyTorch's kernels unvectorised),
#: at the fp32 tolerance itself; this is 100 times that, still below the smallest causal per-seed spread (0.15%).
BF16_TOLERANCE = 1e-3

#: A run that recorded more threads than this is not trained again (its thread count is the folder's own word).
MOST_THREADS = 1024


@dataclass
class Difference:
    """One number that is not what the model gives: where in the record, stored and recomputed."""

    where: str
    stored: Any
    recomputed: Any


@dataclass
class Checked:
    """One run, recomputed: from its weights, trained again, or both (``trained``); how many numbers were compared,
    the largest difference among them and the differences past the tolerance. ``drift`` names where a run trained
    again on another kind of machine than its own was made: its training differences are then a measurement, shown
    with the number that moved most, not a finding (its weights' numbers are judged all the same)."""

    run_id: str
    arm: str
    trained: bool = False
    compared: int = 0
    largest: float = 0.0
    differences: list[Difference] = field(default_factory=list)
    drift: str | None = None
    moved: list[Difference] = field(default_factory=list)
    not_trained: str | None = None


@dataclass
class Verification:
    """What ``verify`` found: the runs checked, the runs it could not check by reason, the design's problems (each
    leaves the verdicts unchecked as a missing run does), notes that change nothing, and how many runs the folder
    holds or its design names (``runs``)."""

    checked: list[Checked] = field(default_factory=list)
    unchecked: dict[str, list[str]] = field(default_factory=dict)
    design: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    protocol: str = ""
    runs: int = 0
    drawn: list[str] = field(default_factory=list)
    sha256: dict[str, str] = field(default_factory=dict)

    @property
    def differing(self) -> list[Checked]:
        """The runs with a number that must have matched and did not."""
        return [c for c in self.checked if c.differences]

    @property
    def drifted(self) -> list[Checked]:
        """The runs trained again on another kind of machine whose training moved past the tolerance."""
        return [c for c in self.checked if c.moved]

    def leave(self, why: str, run_id: str) -> None:
        self.unchecked.setdefault(why, []).append(run_id)

    def as_dict(self) -> dict[str, Any]:
        """Everything found, for ``--json``: every run checked, every difference, every unchecked id."""
        return {
            "runs": self.runs,
            "protocol": self.protocol,
            "sha256": self.sha256,
            "design": self.design,
            "notes": self.notes,
            "checked": [
                {
                    "run_id": c.run_id,
                    "arm": c.arm,
                    "trained_again": c.trained,
                    "compared": c.compared,
                    "largest": c.largest,
                    "drift": c.drift,
                    "not_trained_again": c.not_trained,
                    "differences": [vars(d) for d in c.differences],
                    "moved": [vars(d) for d in c.moved],
                }
                for c in self.checked
            ],  # fmt: skip
            "unchecked": self.unchecked,
            "drawn": self.drawn,
        }


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


def compare(stored: Any, recomputed: Any, tol: float, into: Checked, prefix: str, moved: bool = False) -> None:
    """Add to ``into`` every leaf of ``stored`` that ``recomputed`` does not give back within ``tol`` (a number)
    or exactly (anything else), and every leaf one has and the other lacks: as differences, or (``moved``, a run
    trained again elsewhere) as how far it moved."""
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
        (into.moved if moved else into.differences).append(Difference(where, _shown(a), _shown(b)))


class _Missing:
    def __repr__(self) -> str:
        return "(none)"


_MISSING = _Missing()


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _shown(x: Any) -> Any:
    return "(none)" if x is _MISSING else x


def arm_label(cfg: RunConfig) -> str:
    """A run's arm in a few words: task, width, scheme, combiner, rate, seed."""
    m = cfg.model
    return f"{cfg.task.name} d={m.d} {m.position.scheme} {m.combine} lr={cfg.train.lr:g} seed {cfg.seed}"


@contextlib.contextmanager
def private_database(folder: Path) -> Iterator[Path]:
    """A folder holding a copy of ``folder``'s database with its -wal (whose -shm SQLite rebuilds) and its rollback
    journal, so the copy reads as the folder would: opening a database writes to it (its journal mode, a table a
    newer pelab added, a received -wal merged or a hot journal rolled back), and verify leaves a received folder as
    it came, read-only ones included. The folder is checked first
    (``StudyFolder.check``: no link, no FIFO where pelab keeps a file)."""
    from pelab.files import check_regular
    from pelab.study.folder import StudyFolder
    from pelab.study.store import DB_NAME

    StudyFolder(folder).check()
    with tempfile.TemporaryDirectory(prefix="pelab-verify-") as tmp:
        for suffix in ("", "-wal", "-journal"):  # a hot journal rolls the database back when it is opened in place
            src = folder / (DB_NAME + suffix)
            if os.path.lexists(src):
                check_regular(src, "a file of the database", "move it away")  # never through a link, never a FIFO
                shutil.copyfile(src, Path(tmp) / (DB_NAME + suffix))
        yield Path(tmp)


def stored_weights(folder: Path, run_id: str, cfg: RunConfig) -> Transformer:
    """A run's trained model from its checkpoint (``pelab.checkpoint.load``: never through a link), which must be
    the model its config describes; read without opening the folder's database."""
    from pelab.checkpoint import load
    from pelab.errors import PelabError
    from pelab.study.folder import StudyFolder

    model = load(StudyFolder(folder).checkpoint(run_id))
    if model.cfg != cfg.model:
        raise PelabError(f"run: the checkpoint of {run_id} holds a different model than the run describes")
    return model.eval()


def take_measure(model: Transformer, cfg: RunConfig, name: str, at_init: bool) -> dict[str, Any]:
    """One measure of a model in memory, as ``pelab.report.context.measure_job`` takes it of a stored one."""
    from pelab.analysis import AnalysisInput
    from pelab.analysis.measures import MEASURES

    inputs = AnalysisInput.for_model(model, cfg)
    if at_init:
        inputs = replace(inputs, model=inputs.initial_model())
    return MEASURES[name](inputs)


def record_of(model: Transformer, cfg: RunConfig, row: dict[str, Any], tol: float, device: Any, into: Checked,
              measures: dict[str, tuple[str, bool, Any]], moved: bool = False) -> None:  # fmt: skip
    """Compare with ``row`` everything its record says of ``model``: ``train.end_metrics`` (the function the run
    stored them with: the same windows by the same generators), the curve's last held-out point, parameters,
    FLOPs, and the kept ``measures`` ({key: (name, at_init, value)})."""
    import torch

    from pelab.tasks import make_task
    from pelab.train import curve_val_loss, end_metrics

    model = model.to(device)
    task = make_task(cfg.task)
    with torch.no_grad():
        metrics, evals = end_metrics(cfg, model, task, device)
        stored = {k: v for k, v in row["metrics"].items() if k != "train_loss"}
        compare(stored, metrics, tol, into, "metrics", moved)
        compare(row["evals"], evals, tol, into, "evals", moved)
        compare(row["params"], model.num_parameters(), 0.0, into, "params", moved)
        flops = model.flops_per_token(task.seq_len(task.n))
        compare(row["flops_per_token"], flops, 0.0, into, "flops_per_token", moved)
        last = row["curve"][-1] if row["curve"] else {}
        if "val_loss" in last:  # a language model's curve reads held-out loss; its last point is the final model's
            compare(last["val_loss"], curve_val_loss(model, task, cfg, device), tol, into, "curve[-1].val_loss", moved)
    for name, at_init, value in measures.values():
        compare(value, take_measure(model, cfg, name, at_init), tol, into, f"measure {name}", moved)


def unjudged(row: dict[str, Any], device: Any) -> str | None:
    """Where training ``row``'s config again on ``device`` need not give its numbers bit for bit: None on the kind
    of machine it recorded training on (``pelab.device.device_kind``); otherwise that place, as a person reads it.
    The kind is the folder's own word, so it is asked only of training again: weights are judged everywhere."""
    from pelab.device import device_kind
    from pelab.records import trained_on

    made_on = str(row.get("device", "cpu"))
    if made_on.split(":")[0] != device.type:
        return f"{made_on}, trained again on {device.type}"
    if device.type != "cpu":  # CUDA's training kernels are not deterministic: bit for bit is a CPU's promise
        return f"{made_on} (training on a GPU is not bit for bit)"
    recorded = trained_on(row)
    if recorded is None:
        return f"a {device.type.upper()} it did not record"
    return None if recorded == device_kind(device) else recorded


def retrain_one(folder: Path, row: dict[str, Any], cfg: RunConfig, tol: float, device: Any, into: Checked,
                measures: dict[str, tuple[str, bool, Any]], has_weights: bool) -> str | None:  # fmt: skip
    """Train a stored run again from its config, alone, at the thread count it recorded, and compare what training
    gives: its status; for a run that diverged, its reason (the step) and curve; for a finished one, its whole
    record (training loss and curve too), its kept measures on the new model, and, where its checkpoint is there,
    the new weights against it bit for bit. On another kind of machine the differences are how far it moved
    (``Checked.moved``). Returns why it could not be judged, or None."""
    import torch

    from pelab.checkpoint import load
    from pelab.train import train_run

    threads = int(row["threads"] or 0) or None
    if threads is not None and threads > MOST_THREADS:
        return f"it records {threads} threads, past {MOST_THREADS}: not trained again"
    if row["status"] == "failed":  # a machine's failure (a full disk, a killed worker), not the config's
        return f"it failed when it trained ({str(row.get('reason'))[:80]}), which says nothing of its config"
    elsewhere = unjudged(row, device)
    into.trained, into.drift = True, elsewhere
    moved = elsewhere is not None
    with tempfile.TemporaryDirectory(prefix="pelab-verify-") as tmp:
        result = train_run(cfg, device=str(device), threads=threads, checkpoint=Path(tmp) / "model.safetensors")
        if result.status == "failed":
            return f"training it again failed here ({str(result.reason)[:80]})"
        if result.status != row["status"]:  # said to diverge and trains to the end, or the other way round
            compare(row["status"], result.status, tol, into, "status", moved)
            return None
        if result.status != "done":  # it ended so again: at the same step, after the same curve
            compare(row.get("reason"), result.reason, tol, into, "reason", moved)
            compare(row["curve"], result.curve, tol, into, "curve", moved)
            return None
        compare(row["metrics"].get("train_loss"), result.metrics.get("train_loss"), tol, into, "metrics.train_loss",
                moved)  # fmt: skip
        compare(row["curve"], result.curve, tol, into, "curve", moved)
        again = load(Path(tmp) / "model.safetensors")
        if has_weights and not moved:  # the stored weights are what this config trains, or another model
            stored = stored_weights(folder, row["run_id"], cfg).state_dict()
            if all(torch.equal(t, stored[k]) for k, t in again.state_dict().items()):
                return None  # the very weights whose record was just checked: their numbers again would be the same
            into.differences.append(Difference("weights", "the stored checkpoint", "not what its config trains"))
        record_of(again, cfg, row, tol, device, into, measures, moved)
    return None


def check_one(folder: str, row: dict[str, Any], tol: float, device: str, retrain: bool, has_weights: bool,
              measures: dict[str, tuple[str, bool, Any]], twins: list[str]) -> Checked | str:  # fmt: skip
    """One run of ``verify``'s plan, a top-level function so the report's worker processes can run it: recomputed
    from its weights (where they are there), trained again (``retrain``), or both. Returns why it could not be
    checked instead where recomputing it failed (a received row can be malformed in ways no check foresaw)."""
    from pelab.config import RunConfig
    from pelab.device import resolve_device

    try:
        cfg = RunConfig.model_validate(row["config"])
        tol = tol if cfg.train.precision == "fp32" else max(tol, BF16_TOLERANCE)
        out = Checked(row["run_id"], arm_label(cfg))
        dev = resolve_device(device)
        for twin in twins:  # seeds of one arm never train to the same weights: one file copied over another
            out.differences.append(Difference("checkpoint", "this run's own weights", f"the same file as run {twin}"))
        if has_weights:
            record_of(stored_weights(Path(folder), row["run_id"], cfg), cfg, row, tol, dev, out, measures)
        if retrain:
            why = retrain_one(Path(folder), row, cfg, tol, dev, out, {} if has_weights else measures, has_weights)
            if why is not None and not has_weights:
                return why
            out.not_trained = why  # its weights were checked; training it again was not
        return out
    except KeyboardInterrupt:
        raise
    except Exception as e:
        return f"recomputing it failed here ({type(e).__name__}: {str(e)[:80]})"


def kept_measures(kept: dict[tuple[str, str], tuple[str, Any]], run_id: str, digest: str | None, weights_gone: bool
                  ) -> tuple[dict[str, tuple[str, bool, Any]], int]:  # fmt: skip
    """The measures a report would read of this run (``ReportContext._recall``): its own keys, spelled as the report
    spells them, taken on the checkpoint file there now (whole or not: the report compares the file's sha256), or
    any where the file is gone; {key: (name, at_init, value)}, and how many kept rows no report reads (left out,
    never measured)."""
    from pelab.analysis.measures import MEASURES
    from pelab.report.context import _measure_key

    readable = {_measure_key(name, run_id, at_init): (name, at_init) for name in MEASURES for at_init in (False, True)}
    out, ignored = {}, 0
    for (run, key), (taken_on, value) in kept.items():
        if run != run_id:
            continue
        if key not in readable:  # the report looks a measure up by this exact text: any other is never read
            ignored += 1
        elif weights_gone or taken_on == digest:
            out[key] = (*readable[key], value)
    return out, ignored


def verify(
    folder: str | Path,
    tol: float = TOLERANCE,
    retrain: list[str] | None = None,
    retrain_some: int = 0,
    draw: int = 0,
    device: str = "cpu",
    on_run: OnProgress | None = None,
    workers: int | None = None,
    db: Path | None = None,
) -> Verification:
    """Check every finished run of the study in ``folder`` whose weights are there and whole against them (with the
    measures a report would read of them), and train again the runs named in ``retrain`` (run ids, finished or not)
    and ``retrain_some`` more drawn by ``draw`` (the runs the weights cannot check first). A run that is neither,
    and a run of the study's design that the database lacks, is listed as unchecked, with why; a design that is not
    the one protocol.json fixed is said. ``on_run`` is told (done, of how many, time left) after each run.
    ``workers``: processes (default one per core, ``report_pool``). ``db``: a private copy of the folder's database
    already made (``private_database``), else one is made. Reads only; writes nothing in the folder."""
    import random

    from pelab.config import RunConfig
    from pelab.device import resolve_device
    from pelab.records import same_computation
    from pelab.report.context import checkpoint_digest, measuring_code, report_pool
    from pelab.report.progress import LOAD, measure_cost
    from pelab.study.estimate import eval_seconds, run_seconds
    from pelab.study.folder import StudyFolder
    from pelab.study.progress import Pace
    from pelab.study.protocol import changes, entries, protocol_line, read_protocol
    from pelab.study.store import Store

    folder = Path(folder)
    study = StudyFolder(folder)
    here = resolve_device(device).type
    with contextlib.nullcontext(db) if db else private_database(folder) as copy, Store(copy, create=False) as store:
        stored = store.rows(quiet=True)
        excluded = list(store.excluded)
        kept = store.stored_measures(measuring_code())
        design = store.study()
    found = Verification()
    for run_id, _ in excluded:
        found.leave("its row does not hold together (`pelab results` says why)", run_id)
    missing = []
    if design is not None:  # a seed whose row is gone (a bad seed dropped) changes a verdict as an edit does
        record = read_protocol(folder)
        found.protocol = protocol_line(record, design)
        if record is None:
            found.design.append("no protocol.json: the design cannot be checked against a record made before training")
        else:
            for change in changes(record, design):  # the rules' change is about reading, not about these runs
                (found.notes if change.startswith("the rules") else found.design).append(change)
            first, last = entries(record)[0], entries(record)[-1]
            found.sha256 = {"rules": last["rules"]["sha256"], "study": last["study"]["sha256"],
                            "first study": first["study"]["sha256"]}  # fmt: skip
        ids: set[str] | None = {run.run_id for run in study.load_design(design)[0].runs}
        have = {r["run_id"] for r in stored} | {run_id for run_id, _ in excluded}
        missing = [run_id for run_id in sorted(ids) if run_id not in have]
        for run_id in missing:
            found.leave("in the study's design, not in its database (a study not finished, or a row removed)", run_id)
    else:
        ids = None
    found.runs = len(stored) + len(excluded) + len(missing)
    configs = {r["run_id"]: RunConfig.model_validate(r["config"]) for r in stored}  # rows that hold together validate
    ours = [r for r in stored if ids is None or r["run_id"] in ids]  # the report reads the design's rows alone
    read = {r["run_id"] for r in same_computation([r for r in ours if r["status"] == "done"])}
    # a finished row outside the design: the report never reads it; checked as it stands, never called an older one
    read |= {r["run_id"] for r in stored if r["status"] == "done" and ids is not None and r["run_id"] not in ids}
    ok = {r["run_id"]: (
        r["status"] == "done" and r["run_id"] in read and os.path.lexists(study.checkpoint(r["run_id"]))
        and study.has_checkpoint(r["run_id"], configs[r["run_id"]].model)
    ) for r in stored}  # fmt: skip
    again = set(retrain or ())
    if retrain_some:  # what the weights cannot check first: a forger removes the checkpoints of the runs edited
        rng = random.Random(draw)
        pool = [r["run_id"] for r in ours if r["run_id"] not in again and r["status"] != "failed"]
        first = [r for r in pool if not ok[r]]
        rest = [r for r in pool if ok[r]]
        found.drawn = rng.sample(first, min(retrain_some, len(first)))
        found.drawn += rng.sample(rest, min(retrain_some - len(found.drawn), len(rest)))
        again |= set(found.drawn)
    # the file's sha256 wherever there is a file, whole or not: the report reads a kept measure by it
    digests = {r["run_id"]: checkpoint_digest(folder, r["run_id"]) for r in stored}
    same_file: dict[str | None, list[str]] = defaultdict(list)
    for r in stored:
        if ok[r["run_id"]]:
            same_file[digests[r["run_id"]]].append(r["run_id"])
    trained_by = {r["run_id"]: _training(r["config"]) for r in stored}
    jobs, costs, ignored = [], {}, 0
    for r in stored:
        rid, status = r["run_id"], r["status"]
        if rid not in again and not ok[rid]:
            if status == "failed":
                found.leave("failed when it trained (a machine's failure: nothing of its config to check)", rid)
            elif status != "done":
                found.leave(f"ended {status} (train it again with --retrain: it must end so again)", rid)
            elif rid not in read:
                found.leave("trained by an older computation (the report leaves it out)", rid)
            elif not os.path.lexists(study.checkpoint(rid)):
                found.leave("no checkpoint (train it again: --retrain, or --retrain-some)", rid)
            else:
                found.leave("a damaged checkpoint, or one of another model", rid)
            continue
        cfg = configs[rid]
        made_on = str(r.get("device", "cpu")).split(":")[0]
        if cfg.train.precision != "fp32" and made_on != here and ok[rid] and rid not in again:
            # bf16 rounds differently on another kind of device (unmeasured): told where to check, never accused
            found.leave(f"evaluated in {cfg.train.precision} on {made_on}: run verify there (--device)", rid)
            continue
        gone = not os.path.lexists(study.checkpoint(rid))
        measures, skipped = kept_measures(kept, rid, digests[rid], gone)
        ignored += skipped
        # seeds, rates or budgets never train to one file: a copy over another run's (evaluation settings may)
        twins = [o for o in same_file[digests[rid]] if trained_by[o] != trained_by[rid]] if ok[rid] else []
        jobs.append((str(folder), r, tol, device, rid in again, ok[rid], measures, twins))
        m = cfg.model
        costs[rid] = (
            (run_seconds(cfg) if rid in again else 0.0)
            + LOAD
            + eval_seconds(cfg, whole=True)
            + sum(measure_cost(name, cfg.task.length, m.d, m.n_layers) for name, _, _ in measures.values())
        )
    if ignored:
        found.notes.append(f"{ignored} kept measure(s) no report reads (another run's, or no measure): left out")
    pace = Pace(costs)
    if workers is None and pace.total < ALONE_SECONDS:
        workers = 1  # worker processes start in about as long as this whole check takes in one
    results: dict[str, Checked | str] = {}
    with report_pool(workers) as pool:  # one process per core, as the report measures; none on one core
        done = ((job[1]["run_id"], check_one(*job)) for job in jobs) if pool is None else _as_done(pool, jobs)
        for i, (rid, outcome) in enumerate(done, 1):
            results[rid] = outcome
            pace.finished(rid)
            if on_run is not None:
                on_run(i, len(jobs), pace.text())
    for job in jobs:  # in the folder's order, whichever finished first
        outcome = results[job[1]["run_id"]]
        if isinstance(outcome, str):
            found.leave(outcome, job[1]["run_id"])
        else:
            found.checked.append(outcome)
    return found


def _training(config: dict[str, Any]) -> tuple:
    """What decides a run's trained weights besides its model: its seed and training settings (not how it is
    evaluated). Two runs that differ here never train to one file."""
    t = config.get("train", {})
    return config.get("seed"), t.get("lr"), t.get("steps"), t.get("batch_size"), json.dumps(config.get("task"))


def _as_done(pool: Executor, jobs: list[tuple]) -> Iterator[tuple[str, Checked | str]]:
    """Each job's outcome as it finishes."""
    futures = {pool.submit(check_one, *job): job[1]["run_id"] for job in jobs}
    for future in as_completed(futures):
        yield futures[future], future.result()


__all__ = ["TOLERANCE", "Checked", "Difference", "Verification", "compare", "relative", "verify"]
