"""What every claim reads: the study folder, its runs, the floor and margin, and the report's worker processes,
which measure stored models (``pelab.analysis.measures``) side by side while this process decides.
"""

from __future__ import annotations

import copy
import functools
import json
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from pelab import forkserver, plugins
from pelab.errors import PelabError
from pelab.report.progress import PRETRAINED, measure_cost
from pelab.study.folder import StudyFolder
from pelab.study.grid import Study


def measure_job(folder: str, name: str, run_id: str, at_init: bool) -> dict[str, Any]:
    """One measure on one stored model; a top-level function, so worker processes can run it."""
    from pelab.analysis import AnalysisInput, load_trained
    from pelab.analysis.measures import MEASURES

    model, run = load_trained(Path(folder), run_id)
    inputs = AnalysisInput.for_model(model, run)
    if at_init:
        inputs = replace(inputs, model=inputs.initial_model())
    return MEASURES[name](inputs)


#: What a claim says of the arms ``ReportContext.unmeasured`` left out, with how many.
NOT_MEASURED = (
    "{n} arm(s) that learned kept no checkpoint (the study ran with --no-checkpoints), so their models were not "
    "measured and take no part here; a study that keeps checkpoints (the default of `pelab study`) measures them"
)

#: Measures of stored models already computed in this process, by study folder, measure key and the checkpoint's
#: identity on disk. A sequential study reads the same models at every look and again in its report, in one
#: process; a run's checkpoint never changes under its run id (a replaced or rewritten file has another inode,
#: size or mtime, and the memo misses), so a measure is computed once per study, not once per look.
_MEMO: dict[tuple[str, str, tuple[int, int, int]], dict[str, Any]] = {}


#: The sha256 of each checkpoint read in this process, by path and identity on disk (``_stamp``): a measure stored in
#: the database is keyed by its model's digest, and a report reads the same checkpoint for several measures.
_DIGESTS: dict[tuple[str, tuple[int, int, int]], str] = {}


#: The code a stored model's measure depends on, besides its weights: the measures themselves, the model they load
#: (positions, combiners, embeddings, frozen vectors, the registry that names them) and the tasks whose held-out
#: sequences they read. Paths relative to the ``pelab`` package; a folder stands for every ``.py`` under it.
MEASURING_CODE = (
    "analysis", "positions", "tasks", "weights", "checkpoint.py", "combine.py", "config.py", "embedding.py",
    "frozen.py", "model.py", "registry.py",
)  # fmt: skip
#: The libraries whose numbers a measure is made of (the probes' folds are scikit-learn's).
MEASURING_LIBRARIES = ("torch", "numpy", "scikit-learn", "scipy")


@functools.lru_cache(maxsize=8)
def _code_digest(plugin_hashes: tuple[tuple[str, str], ...]) -> str:
    import hashlib

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for entry in MEASURING_CODE:
        path = root / entry
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    import inspect
    from importlib.metadata import PackageNotFoundError, version

    for step in (measure_job, StudyFolder.load_trained):  # how a stored model is loaded and measured
        h.update(inspect.getsource(step).encode() + b"\0")
    for lib in MEASURING_LIBRARIES:
        try:
            h.update(f"{lib} {version(lib).split('+')[0]}\0".encode())  # a +cpu or +cu build computes the same
        except PackageNotFoundError:
            h.update(f"{lib} none\0".encode())
    for name, sha in plugin_hashes:
        h.update(f"plugin {name} {sha}\0".encode())
    return h.hexdigest()


def measuring_code() -> str:
    """The sha256 of the code that measures a stored model (``MEASURING_CODE``, ``measure_job``), of the versions
    of the libraries it computes with (``MEASURING_LIBRARIES``) and of the plugins loaded now: a
    measure kept in the database counts only under the same code. The rules' sha256 does not cover it, and a
    measure kept by a pelab whose probe or model changed since would otherwise be read as if this pelab took it
    (where the weights are gone, the claim would decide on it)."""
    return _code_digest(tuple(sorted((p.name, p.sha256) for p in plugins.loaded().values())))


def checkpoint_digest(folder: Path, run_id: str) -> str | None:
    """The sha256 of a run's checkpoint file, read without following a link; None where it cannot be read (no
    checkpoint: the measure then fails as it always did, with its own one line)."""
    import hashlib

    from pelab.files import open_regular

    stamp = _stamp(folder, run_id)
    if stamp is None:
        return None
    path = StudyFolder(folder).checkpoint(run_id)
    known = _DIGESTS.get((str(path), stamp))
    if known is not None:
        return known
    try:
        fd = open_regular(path, os.O_RDONLY, "a checkpoint")
    except (PelabError, OSError):
        return None
    with os.fdopen(fd, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    _DIGESTS[(str(path), stamp)] = digest
    return digest


def _stamp(folder: Path, run_id: str) -> tuple[int, int, int] | None:
    """The checkpoint's identity on disk (inode, size, mtime in ns); None when it cannot be read."""
    try:
        st = os.lstat(StudyFolder(folder).checkpoint(run_id))  # a link is never followed (nor loaded)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _worker_init(carried: list[dict[str, Any]] | None = None) -> None:
    """Each report worker: torch on one thread, and Ctrl-C (which a terminal sends to the whole group) ends it
    at once and quietly: the driver alone says "interrupted" and exits 130. A write it was making is left as a
    temp file, never as a part of its target, and the next report removes it. It loads the driver's plugins
    (``pelab.plugins.carried``, hash checked), so it reads their runs' models as the driver would."""
    import signal

    import torch

    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    torch.set_num_threads(1)
    plugins.restore(carried)


def _measure_key(name: str, run_id: str, at_init: bool) -> str:
    return json.dumps(["measure", name, run_id, at_init])


@contextmanager
def report_pool(workers: int | None = None) -> Iterator[Executor | None]:
    """Worker processes for the report's per-seed measures (one per core; none on one core). Started from a
    fork server, so they do not inherit this process's threads; each runs torch on one thread."""
    n = workers if workers is not None else (os.cpu_count() or 1)
    if n < 2:
        yield None
        return
    before = set(mp.active_children())
    pool = ProcessPoolExecutor(
        max_workers=n, mp_context=forkserver.context(), initializer=_worker_init, initargs=(plugins.carried(),)
    )
    try:
        yield pool
    except BaseException:
        # Interrupted: a worker still starting when Ctrl-C came ignored it (pelab.forkserver) and would go on
        # to measure; end every worker this pool started rather than wait for them.
        for child in set(mp.active_children()) - before:
            child.kill()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def protocol_line(ctx: ReportContext) -> str:
    """The report's protocol line (``pelab.study.protocol.protocol_line``): "protocol: rules sha256 ab12… (commit
    1a2b3c4), study file sha256 cd34…, fixed on 2026-11-27", and plainly whether the rules or the study file changed
    since the runs were trained. For the method line and the first screen."""
    from pelab.study.protocol import protocol_line as line

    return line(ctx.protocol, ctx.study)


@dataclass
class ReportContext:
    folder: Path
    study: Study
    rows: list[dict[str, Any]]
    frame: pd.DataFrame
    floor: float = 0.8
    margin: float = 0.01
    analyses: dict[str, Any] = field(default_factory=dict)
    #: every run's row before each tuned arm was reduced to its best rate (``pelab.report.rates``)
    frame_all: pd.DataFrame | None = None
    rate_choices: list[Any] = field(default_factory=list)
    #: stored runs left out because their rows do not hold together (``pelab.study.store.row_problem``)
    excluded: int = 0
    #: worker processes for ``measure_many`` (``report_pool``); None measures in this process
    pool: Executor | None = None
    #: analyses started on ``pool`` beside the claims (``prefetch``), by name, until first read
    pending: dict[str, Future] = field(default_factory=dict)
    #: measures started on ``pool`` ahead of their first read (``submit``), by cache key, until first read
    started: dict[str, Future] = field(default_factory=dict)
    #: a sequential study's design (``pelab.study.design``): the looks of every comparison; None: fixed seeds
    design: Any = None
    #: False at a sequential study's interim look (``decide_claims``): only verdicts are read, so claims skip
    #: what only the report shows (figures, the analyses of one displayed run); no verdict reads those
    display: bool = True
    #: the report's progress (``pelab.report.progress``): measures, claims and writing as they end; None: untold
    work: Any = None
    #: the folder's protocol (``pelab.study.protocol``, protocol.json), None where its runs were trained before pelab
    #: wrote one; and the runs a comparison may call confirmatory under it (``confirmatory_runs``)
    protocol: dict[str, Any] | None = None
    confirmatory: frozenset[str] = frozenset()
    #: analyses of one run's weights not drawn because only its measures were kept (``analyse``), for one line
    undrawn: set[str] = field(default_factory=set)
    #: finished runs of arms that learned, left out of what claims measure: no weights and no kept measure (a study
    #: run with --no-checkpoints; weights deleted before a report kept their measures), for one line
    unmeasurable: set[str] = field(default_factory=set)

    def prefetch(self, name: str, job: Callable[..., Any], *args: Any) -> None:
        """Start ``job(*args)`` on a worker now, so it runs while the claims before its first reader run (and
        while this process waits on their measures); without a pool it runs here, at once."""
        if self.pool is None:
            self.analyses[name] = job(*args)
        else:
            self.pending[name] = self.pool.submit(job, *args)
            self._track(self.pending[name], name, PRETRAINED)

    def prefetched(self, name: str) -> Any:
        """A prefetched analysis, waited for on first read; None when none was started. A job that failed
        raises its error at every read, so no reader mistakes a failure for an analysis that had nothing to
        say (C16 would tell the user MiniLM is not installed)."""
        if name in self.pending:
            self.analyses[name] = self.pending[name].result()  # a failed job raises here, at every read
            del self.pending[name]
        return self.analyses.get(name)

    @property
    def figures(self) -> Path:
        return StudyFolder(self.folder).folder("figures")  # made when missing; a link there is refused

    @property
    def analysis_dir(self) -> Path:
        return StudyFolder(self.folder).folder("analyses")

    def has_checkpoint(self, run_id: str) -> bool:
        """Whether the run's weights are there, whole, and of the model its stored config describes (a checkpoint
        whose header names another model is damaged: counted, never loaded)."""
        cfg = self.configs.get(run_id)
        return StudyFolder(self.folder).has_checkpoint(run_id, cfg.model if cfg is not None else None)

    def measurable(self, run_id: str) -> bool:
        """Whether a run's measures can be read: its weights are there, or they are gone (deleted to save space, a
        folder that travelled as its database alone) and an earlier report kept its measures in the database
        (``Store.stored_measures``). Such a folder decides every claim as it did with its weights; only the figures
        drawn from one run's weights go (``analyse``). Weights there but damaged or other than those measured:
        not measurable (a study trains a damaged one again)."""
        if self.has_checkpoint(run_id):
            return True
        if _stamp(self.folder, run_id) is not None:
            return False
        if run_id not in self._stored_runs and run_id in self._measured_by_other_code:
            raise PelabError(
                f"report: run {run_id}'s weights are gone and its measures were kept by other measuring code than "
                f"this pelab's ({measuring_code()[:12]}); go on with the pelab that kept them "
                "(docs/study.md says how to check), or put back its checkpoint"
            )
        return run_id in self._stored_runs

    def pick_run(self, frame: pd.DataFrame) -> str | None:
        """The lowest-seed finished run of an arm that has a checkpoint: the one analyses look at."""
        done = frame[frame.status == "done"].sort_values("seed")
        for run_id in done.run_id:
            if self.has_checkpoint(run_id):
                return str(run_id)
        return None

    def learned_runs(self, arm: pd.DataFrame) -> list[str]:
        """Every finished, ``measurable`` run of an arm that learned its task (mean accuracy at the floor or
        above), lowest seed first; empty when the arm did not learn: analyses that feed a verdict read these."""
        from pelab.report.evidence import side

        done = arm[arm.status == "done"].sort_values("seed")
        if done.empty or not side(done, "arm").learned(self.floor):  # one test, language models included
            return []
        runs = [str(r) for r in done.run_id]
        self.unmeasurable.update(r for r in runs if not self.measurable(r))
        return [r for r in runs if self.measurable(r)]

    def unmeasured(self, arm: pd.DataFrame) -> bool:
        """Whether an arm learned its task but none of its finished runs can be measured (no weights and no kept
        measures: a study run with ``--no-checkpoints``, as a GPU lease runs one): that says nothing about whether
        it learned. A claim leaves such an arm out of its measured comparisons (``NOT_MEASURED``) rather than call
        it below the floor."""
        from pelab.report.evidence import side

        done = arm[arm.status == "done"]
        if done.empty or not side(done, "arm").learned(self.floor):
            return False
        return not any(self.measurable(str(r)) for r in done.run_id)

    def submit(self, name: str, run_ids: Sequence[str], at_init: bool = False) -> None:
        """Start ``measure`` for these runs on the report's workers without waiting (nothing without a pool). A
        claim's ``plan`` calls this for every model it will read, before any claim runs: the workers then go
        from one measure to the next, claim after claim, instead of idling between one arm's seeds and the
        next arm's while this process decides."""
        if self.pool is None:
            return
        for r in dict.fromkeys(run_ids):
            key = _measure_key(name, r, at_init)
            if key in self.analyses or key in self.started or self._recall(key, r) or not self.has_checkpoint(r):
                continue  # in hand, started, or not measurable here (``measure`` says why, in one line)
            self.started[key] = self.pool.submit(measure_job, str(self.folder), name, r, at_init)
            self._track(self.started[key], key, self._cost(name, r))

    def measure(self, name: str, run_id: str, at_init: bool = False) -> dict[str, Any]:
        """One of ``pelab.analysis.measures`` on a stored checkpoint (or its initialisation); cached. A measure
        started on a worker is waited for; one never started runs here."""
        key = _measure_key(name, run_id, at_init)
        if key not in self.analyses and not self._recall(key, run_id):
            started = self.started.pop(key, None)
            if started is not None:
                self.analyses[key] = started.result()  # its progress is told by the future (``_track``)
            else:
                if not self.has_checkpoint(run_id) and self.measurable(run_id):
                    raise PelabError(
                        f"report: run {run_id}'s weights are gone and its {name!r}{' at init' if at_init else ''} was "
                        f"never kept in {self.folder / 'results.sqlite'}; put back its checkpoint, or delete the run's "
                        "row so that `pelab study` trains it again"
                    )
                if self.work is not None:
                    self.work.expect(key, self._cost(name, run_id))
                self.analyses[key] = measure_job(str(self.folder), name, run_id, at_init)
                if self.work is not None:
                    self.work.finished(key)
            stamp = _stamp(self.folder, run_id)
            if stamp is not None:
                _MEMO[(str(self.folder.resolve()), key, stamp)] = copy.deepcopy(self.analyses[key])
            self._keep(key, run_id)
        return self.analyses[key]

    def _keep(self, key: str, run_id: str) -> None:
        """Store a measure just taken in the study's database, keyed by its checkpoint's sha256, so the next report
        or look (another process: a resumed study, ``pelab report``) reads it instead of measuring again."""
        from pelab.study.store import Store

        digest = checkpoint_digest(self.folder, run_id)
        if digest is None:
            return
        try:
            with Store(self.folder, create=False) as store:
                store.put_measure(run_id, key, digest, self.analyses[key], measuring_code())
        except PelabError:  # the database went (moved away mid-report): the report goes on, measured here
            pass

    def _cost(self, name: str, run_id: str) -> float:
        """``measure_cost`` of this run's model (its actual width and sequence length), for the report's time left."""
        from pelab.tasks import make_task

        cfg = self.configs[run_id]
        task = make_task(cfg.task)
        return measure_cost(name, task.seq_len(task.n), cfg.model.widths().model, cfg.model.n_layers)

    @cached_property
    def configs(self) -> dict[str, Any]:
        """Every run of the study by id (``RunConfig``)."""
        return {r.run_id: r for r in self.study.runs}

    def _track(self, future: Future, key: str, cost: float) -> None:
        """Count a job started on the workers in the report's progress, finished when its future ends (from the
        pool's own thread)."""
        if self.work is not None:
            work = self.work
            work.expect(key, cost)
            future.add_done_callback(lambda _f: work.finished(key))

    @cached_property
    def _stored(self) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
        """The measures earlier reports and looks kept in this study's database (``Store.stored_measures``), read
        once; none where the database cannot be read (the report then measures, as it did before it kept any)."""
        from pelab.study.store import Store

        try:
            with Store(self.folder, create=False) as store:
                return store.stored_measures(measuring_code())
        except PelabError:
            return {}

    @cached_property
    def _measured_by_other_code(self) -> frozenset[str]:
        """The runs with a measure kept in the database by any measuring code (``Store.measured_runs``)."""
        from pelab.study.store import Store

        try:
            with Store(self.folder, create=False) as store:
                return frozenset(store.measured_runs())
        except PelabError:
            return frozenset()

    @cached_property
    def _stored_runs(self) -> frozenset[str]:
        """The runs with a measure kept in the database."""
        return frozenset(r for r, _ in self._stored)

    def _recall(self, key: str, run_id: str) -> bool:
        """Whether the same checkpoint was measured before: in this process (``_MEMO``), or by any earlier report
        or look, stored in the study's database under the checkpoint's sha256 (``Store.stored_measures``). If so,
        it is read from there."""
        stamp = _stamp(self.folder, run_id)
        memo = (str(self.folder.resolve()), key, stamp)
        hit = _MEMO.get(memo) if stamp is not None else None
        stored = self._stored.get((run_id, key))
        if hit is None and stored is not None:
            if stamp is None:  # weights gone: the database is the record of what they measured, as of their losses
                hit = stored[1]
            elif stored[0] == checkpoint_digest(self.folder, run_id):
                hit = _MEMO[memo] = stored[1]
        if hit is not None:
            self.analyses[key] = copy.deepcopy(hit)
            if stamp is not None and (stored is None or stored[0] != checkpoint_digest(self.folder, run_id)):
                self._keep(key, run_id)  # its row went since (deleted by hand): `--keep-measures` promises the row
        return hit is not None

    def measure_many(self, name: str, run_ids: Sequence[str], at_init: bool = False) -> dict[str, dict[str, Any]]:
        """``measure`` for every seed of an arm at once: the missing ones run side by side on the report's
        worker processes (one per core), so no core idles while the report reads stored models."""
        keys = {r: _measure_key(name, r, at_init) for r in dict.fromkeys(run_ids)}
        missing = [r for r, key in keys.items() if key not in self.analyses and not self._recall(key, r)]
        if len(missing) > 1:
            self.submit(name, missing, at_init)
        return {r: self.measure(name, r, at_init) for r in run_ids}

    def analyse(
        self, name: str, run_id: str | None = None, at_init: bool = False, **scheme: Any
    ) -> dict[str, Any] | None:
        """Run (or reuse) one analysis on a stored checkpoint (or, ``at_init``, on the same model before
        training: same seed, same construction) or on a scheme alone."""
        from pelab.analysis import AnalysisInput, analysis, load_trained
        from pelab.config import PositionConfig

        key = json.dumps([name, run_id, at_init, scheme], sort_keys=True, default=str)
        if key in self.analyses:
            return self.analyses[key]
        label = "-".join(str(v) for k, v in sorted(scheme.items()) if k not in ("d", "length", "grid"))
        stem = f"{name}-{run_id}{'-init' if at_init else ''}"
        out = self.analysis_dir / (stem if run_id else f"{name}-{label}-{scheme.get('d')}")
        if run_id is not None and not self.has_checkpoint(run_id) and self.measurable(run_id):
            self.undrawn.add(name)  # its weights are gone, its measures kept: the verdicts stand, this figure goes
            return None
        if run_id is not None:
            model, run = load_trained(self.folder, run_id)
            inputs = AnalysisInput.for_model(model, run)
            if at_init:
                inputs = replace(inputs, model=inputs.initial_model())
        else:
            position = PositionConfig(**{k: v for k, v in scheme.items() if k not in ("d", "length", "grid")})
            inputs = AnalysisInput.for_scheme(position, scheme["d"], scheme["length"], scheme.get("grid"))
        result = analysis(name).run(inputs, out)
        result["folder"] = out  # where its figures are (added after the JSON is written)
        self.analyses[key] = result
        return result
