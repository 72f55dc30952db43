"""The results store: one SQLite database per study folder, written by the driver alone.

WAL mode, one transaction per finished run, keyed by the run id (the hash of the
run's canonical config): a row is either whole or absent, whatever kills the driver.
A lock file held with ``flock`` keeps a second driver out; the kernel drops it when
the holder dies, even by SIGKILL, so a crash never leaves a stale lock.
"""

from __future__ import annotations

import fcntl
import functools
import json
import math
import os
import re
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pydantic import ValidationError

import pelab
from pelab.config import RunConfig, loaded_plugins
from pelab.errors import PelabError, visible
from pelab.files import check_regular, make_dirs, one_link, open_regular
from pelab.records import RunResult

if TYPE_CHECKING:
    from pelab.study.grid import Study

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    metrics TEXT NOT NULL,
    evals TEXT NOT NULL,
    curve TEXT NOT NULL,
    params INTEGER,
    flops_per_token INTEGER,
    tokens_per_s REAL,
    seconds REAL,
    device TEXT,
    threads INTEGER,
    versions TEXT,
    finished_at TEXT NOT NULL,
    host TEXT
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS measures (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    checkpoint TEXT NOT NULL,
    value TEXT NOT NULL,
    code TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, key)
);
"""

COLUMNS = (
    "run_id", "config", "status", "reason", "metrics", "evals", "curve", "params", "flops_per_token",
    "tokens_per_s", "seconds", "device", "threads", "versions", "finished_at", "host",
)  # fmt: skip
DB_NAME = "results.sqlite"
#: SQLite's own files beside the database (WAL mode's log and shared index; the rollback journal of older folders).
DB_FILES = ("", "-wal", "-shm", "-journal")


class Store:
    def __init__(self, folder: str | Path, create: bool = True) -> None:
        self.folder = Path(folder)
        path = self.folder / DB_NAME
        self.path = path
        # SQLite opens the database and its -wal, -shm and -journal by name, following links: each is checked first
        # (a link, dangling or not, a folder or a FIFO: one line), so nothing outside the folder is read or written.
        self._check()
        if not create and not path.exists():
            raise PelabError(f"out: {self.folder} holds no pelab study (no {DB_NAME})")
        make_dirs(self.folder)
        #: rows ``rows`` left out (run id, why), as of its last call
        self.excluded: list[tuple[str, str]] = []
        if not create and path.stat().st_size == 0:  # a reading command never makes a database of a received file
            raise PelabError(
                f"out: {path} is empty, not a pelab results database; move it away or choose another --out"
            )
        try:
            self.conn = sqlite3.connect(path, timeout=30)
            self._check()  # planted while SQLite opened it: the connection goes, unused
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not create and not {"runs", "meta"} <= tables:  # the schema below would make one of it
                self.conn.close()
                lacks = " and ".join(t for t in ("runs", "meta") if t not in tables)
                raise PelabError(f"out: {path} is not a pelab results database (no table {lacks}); move it away or "
                                 "choose another --out")  # fmt: skip
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.executescript(SCHEMA)
            columns = {r[1] for r in self.conn.execute("PRAGMA table_info(runs)")}
            columns |= {f"meta.{r[1]}" for r in self.conn.execute("PRAGMA table_info(meta)")}
            missing = [c for c in (*COLUMNS, "meta.key", "meta.value") if c not in columns and c != "host"]
            if missing:
                self.conn.close()
                raise PelabError(
                    f"out: {path} is not a pelab results database (no column {missing[0]!r}); choose another --out"
                )
            if "host" not in columns:  # a study started before runs recorded where they ran
                with self.conn:
                    self.conn.execute("ALTER TABLE runs ADD COLUMN host TEXT")
            kept = {r[1] for r in self.conn.execute("PRAGMA table_info(measures)")}
            if "code" not in kept and {"run_id", "key", "checkpoint", "value"} <= kept:  # kept before measures
                with self.conn:  # named their code: those rows match no code (measured again where weights are)
                    self.conn.execute("ALTER TABLE measures ADD COLUMN code TEXT NOT NULL DEFAULT ''")
        except sqlite3.Error as e:
            raise PelabError(self.problem(e)) from None
        except PelabError:
            self.conn.close()
            raise

    def _check(self) -> None:
        for suffix in DB_FILES:
            st = check_regular(f"{self.path}{suffix}", "a results database file" if suffix else "a results database",
                               "move it away")  # fmt: skip
            if st is not None:  # SQLite writes them in place (a report keeps its measures there)
                one_link(f"{self.path}{suffix}", st)

    def problem(self, e: sqlite3.Error) -> str:
        """One line for a database error: what is wrong with which file, and what to do."""
        text = str(e)
        if "readonly" in text or "unable to open" in text:
            return f"out: cannot write {self.path} ({text}); make {self.folder} writable or choose another --out"
        if "disk is full" in text:
            return f"out: the disk holding {self.path} is full; free some space and run the same command again"
        if "not a database" in text or "malformed" in text:
            return f"out: {self.path} is damaged or not a pelab database ({text}); move it away or choose another --out"
        return f"out: {self.path}: {text}"

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- meta ------------------------------------------------------------------------
    def set_meta(self, **values: str) -> None:
        with self.conn:
            self.conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(values.items()))

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def study(self) -> Study | None:
        """The study file stored with the runs, parsed; None when none was stored. Stored text that no longer
        parses is damage to the database, not a mistake in a study file: one PelabError says so."""
        from pelab.study.grid import parse_study

        source = self.meta("study")
        if not source:
            return None
        try:
            if not isinstance(source, str):
                raise PelabError(f"a stored {type(source).__name__}, not text")
            return parse_study(source, recorded=self.plugin_records())
        except PelabError as e:
            if str(e).startswith("plugins:"):  # its plugins are not confirmed (pelab.plugins): not damage
                raise
            raise PelabError(
                f"results database: the study text stored in {self.path} is damaged "
                f"({str(e).removeprefix('study file: ')}); run `pelab study` with its study file and "
                f"--out {self.folder} to store it again"
            ) from None

    def record_plugins(self, records: list[dict[str, Any]]) -> None:
        """The plugins the study's runs need now (``meta["plugins"]``), and every other version of a plugin this
        folder recorded before (``meta["plugins_earlier"]``, kept source and all): a study resumed after its plugin
        was edited keeps the old code's runs (left out of its reports, which say so), and the code they were made
        with stays beside them instead of being overwritten."""
        now = {(r.get("name"), r.get("sha256")) for r in records}
        try:
            before = self.plugin_records() + self.earlier_plugin_records()
        except PelabError:  # a damaged record is not carried on
            before = []
        earlier, seen = [], set(now)
        for r in before:
            key = (r.get("name"), r.get("sha256"))
            if key not in seen:
                seen.add(key)
                earlier.append(r)
        self.set_meta(plugins=json.dumps(records), **({"plugins_earlier": json.dumps(earlier)} if earlier else {}))

    def earlier_plugin_records(self) -> list[dict[str, Any]]:
        """Versions of the study's plugins that runs in this folder were made with before (``record_plugins``)."""
        return self._records("plugins_earlier")

    def plugin_records(self) -> list[dict[str, Any]]:
        """The plugins the stored study's runs need (``Study.plugins``, written by ``run_study``): their names,
        files, hashes, versions and kept source; empty for a study of pelab's own classes."""
        return self._records("plugins")

    def _records(self, key: str) -> list[dict[str, Any]]:
        try:
            records = json.loads(self.meta(key) or "[]")
        except (ValueError, RecursionError):
            raise PelabError(f"results database: the plugins recorded in {self.path} are damaged") from None
        if not isinstance(records, list) or not all(isinstance(r, dict) and "name" in r for r in records):
            raise PelabError(f"results database: the plugins recorded in {self.path} are damaged")
        return records

    # --- runs ------------------------------------------------------------------------
    def finished_ids(self, statuses: tuple[str, ...] = ("done", "diverged"), engine: str | None = None) -> set[str]:
        """Runs stored with one of ``statuses``; with ``engine``, only those trained by that computation
        (``records.ENGINE``; rows from before it was recorded have none)."""
        marks = ",".join("?" * len(statuses))
        rows = self.conn.execute(f"SELECT run_id, versions FROM runs WHERE status IN ({marks})", statuses)
        return {r[0] for r in rows if engine is None or engine_of(r[1]) == engine}

    def forget(self, run_ids: list[str]) -> None:
        """Drop these runs' rows, in one transaction, so the next study trains them again (a run whose checkpoint
        was damaged: ``pelab study`` remakes both from the same config and seed)."""
        try:
            with self.conn:
                self.conn.executemany("DELETE FROM runs WHERE run_id = ?", [(r,) for r in run_ids])
                self.conn.executemany("DELETE FROM measures WHERE run_id = ?", [(r,) for r in run_ids])
        except sqlite3.OperationalError as e:
            raise PelabError(self.problem(e)) from None

    # --- measures of stored models ---------------------------------------------------------
    def stored_measures(self, code: str) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
        """Every measure of a stored model that an earlier report or look kept with the same measuring ``code``
        (``pelab.report.context.measuring_code``), by (run id, measure key): (the sha256 of the checkpoint it was
        taken on, its value). One query per report, not one per model. A measure taken by other code is not this
        pelab's measure and is left out. A received folder's table is untrusted input: a value that does not hold
        together (``measure_problem``) is left out, and so measured again, never believed and never a crash; so is
        a table of another shape."""
        try:
            rows = self.conn.execute(
                "SELECT run_id, key, checkpoint, value FROM measures WHERE code = ?", (code,)
            ).fetchall()
        except sqlite3.Error:
            return {}
        out: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        for run_id, key, checkpoint, text in rows:
            if not all(isinstance(x, str) for x in (run_id, key, checkpoint, text)):
                continue
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if measure_problem(value) is None:
                out[(run_id, key)] = (checkpoint, value)
        return out

    def finished_stamp(self) -> str:
        """Each finished run as stored now (a run trained again under its id is another row, with other weights),
        as one sha256: what ``pelab report --keep-measures`` measured (meta ``measures_kept``). A study carried
        without its weights (docs/make_results.py --carry) is refused unless it is still what the folder holds: a
        run that finished after the measures were taken would travel without them. The measuring code is not in
        it: the measures name their own (``put_measure``)."""
        import hashlib

        rows = self.conn.execute("SELECT run_id, finished_at FROM runs WHERE status = 'done' ORDER BY run_id")
        return hashlib.sha256(json.dumps([list(r) for r in rows]).encode()).hexdigest()

    def measured_runs(self, code: str | None = None) -> set[str]:
        """The runs with a measure kept by this measuring ``code`` (any code: None); none where the table cannot be
        read."""
        query, args = "SELECT DISTINCT run_id FROM measures", ()
        if code is not None:
            query, args = query + " WHERE code = ?", (code,)
        try:
            return {r for (r,) in self.conn.execute(query, args) if isinstance(r, str)}
        except sqlite3.Error:
            return set()

    def put_measure(self, run_id: str, key: str, checkpoint: str, value: dict[str, Any], code: str) -> bool:
        """Keep one measure, taken by the measuring ``code``, for the next report (one transaction). A measure is a
        cache: a database that cannot take it (read-only, full) leaves the report as it was, measured in this
        process; False then."""
        text = json.dumps(value, allow_nan=True, default=_plain)
        try:
            with self.conn:
                self.conn.execute(
                    "INSERT OR REPLACE INTO measures (run_id, key, checkpoint, value, code) VALUES (?, ?, ?, ?, ?)",
                    (run_id, key, checkpoint, text, code),
                )
        except sqlite3.Error:
            return False
        return True

    def write(self, cfg: RunConfig, result: RunResult) -> None:
        """One run, in one transaction."""
        if cfg.run_id != result.run_id:
            raise RuntimeError(f"result {result.run_id} does not belong to run {cfg.run_id}")
        try:
            self._write(cfg, result)
        except sqlite3.OperationalError as e:
            raise PelabError(self.problem(e)) from None

    def _write(self, cfg: RunConfig, result: RunResult) -> None:
        with self.conn:  # a run trained again (an older engine's, a damaged checkpoint's) is other weights:
            try:  # its measures go (a received table of another shape keeps nothing to read: no matter)
                self.conn.execute("DELETE FROM measures WHERE run_id = ?", (result.run_id,))
            except sqlite3.OperationalError:
                pass
            self.conn.execute(
                f"INSERT OR REPLACE INTO runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                (
                    result.run_id,
                    cfg.canonical_json(),
                    result.status,
                    result.reason,
                    json.dumps(result.metrics),
                    json.dumps(result.evals),
                    json.dumps(result.curve),
                    result.params,
                    result.flops_per_token,
                    result.tokens_per_s,
                    result.seconds,
                    result.device,
                    result.threads,
                    json.dumps(result.versions),
                    datetime.now(UTC).isoformat(timespec="seconds"),
                    result.host or None,
                ),
            )

    def rows(self, quiet: bool = False) -> list[dict[str, Any]]:
        """Every stored run whose row holds together (``row_problem``), JSON fields parsed. A row that does not
        (damaged, edited by hand, written by a newer pelab) is left out, listed in ``self.excluded`` and, unless
        ``quiet``, counted in one line on stderr: never averaged in, never a traceback."""
        cur = self.conn.execute("SELECT * FROM runs ORDER BY run_id")
        names = [c[0] for c in cur.description]
        out, self.excluded = [], []
        for r in cur.fetchall():
            row = dict(zip(names, r, strict=True))
            why = row_problem(row)
            if why is None:
                out.append(row)
            else:
                self.excluded.append((str(row.get("run_id"))[:80], why))
        if self.excluded and not quiet:
            other = [(r, w) for r, w in self.excluded if w.startswith(PLUGIN_PROBLEM)]
            damaged = [(r, w) for r, w in self.excluded if not w.startswith(PLUGIN_PROBLEM)]
            if damaged:  # stored text: shown, never acted on by a terminal
                run, why = (visible(x) for x in damaged[0])
                print(f"pelab: warning: results database: {len(damaged)} stored run(s) left out, damaged or "
                      f"edited by hand (the first, {run}: {why})", file=sys.stderr, flush=True)  # fmt: skip
            if other:
                run, why = (visible(x) for x in other[0])
                print(f"pelab: warning: results database: {len(other)} stored run(s) left out, made by plugin code "
                      f"that is not loaded now (the first, {run}: {why})", file=sys.stderr, flush=True)  # fmt: skip
        return out


#: What a stored run may end as (``RunResult.status``).
STATUSES = ("done", "diverged", "failed")
#: Largest magnitude a stored metric may have: perplexity is capped at e^50 (about 5e21) when it is measured.
MAX_METRIC = 1e24
JSON_FIELDS = ("config", "metrics", "evals", "curve", "versions")


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _version(text: object) -> tuple[int, ...]:
    parts = []
    for p in str(text).split("."):
        digits = "".join(c for c in p[:9] if c.isdigit())
        parts.append(int(digits) if digits and p[:1].isdigit() else 0)
    return tuple(parts)


def _metrics_problem(field: str, metrics: object, finite: bool) -> str | None:
    """Why a map of metric name -> value cannot be averaged (None when it can): not a map of numbers; and, for a
    finished run (``finite``), NaN, inf, a magnitude past MAX_METRIC, an accuracy outside 0..1 or a negative loss."""
    if not isinstance(metrics, dict):
        return f"{field} is a JSON {type(metrics).__name__}, not an object"
    for k, v in metrics.items():
        if not _number(v):
            return f"{field}.{str(k)[:40]} is {str(v)[:40]!r}, not a number"
        if not finite:
            continue
        if not math.isfinite(v) or abs(v) > MAX_METRIC:
            return f"{field}.{str(k)[:40]} is {v:.3g}, not a finite measurement"
        if (k in ("acc", "exact") or k.startswith("acc_")) and not 0 <= v <= 1:
            return f"{field}.{k} is {v:.3g}, outside 0..1"
        if k.endswith("loss") and k != "baseline_loss" and v < 0:
            return f"{field}.{k} is {v:.3g}, below 0"
    return None


def _curve_problem(curve: list[dict[str, Any]], done: bool) -> str | None:
    """Why a learning curve (a list of maps of numbers, ``_metrics_problem``) cannot be drawn or summed (None when it
    can): each point has a finite ``step``, after the one before, and a ``loss`` (finite for a finished run; a run
    that diverged ends on the loss that did). The report reads both (``stats.curve_auc``, ``figures.curves_plot``):
    a point without them was a KeyError that ended it."""
    last = -math.inf
    for i, point in enumerate(curve):
        step, loss = point.get("step"), point.get("loss")
        if not _number(step) or not math.isfinite(step) or step <= last:
            return f"curve[{i}].step is {str(step)[:40]!r}, not a finite step after the point before"
        if not _number(loss) or (done and not math.isfinite(loss)):
            return f"curve[{i}].loss is {str(loss)[:40]!r}, not a " + ("finite loss" if done else "loss")
        last = step
    return None


#: How ``config_problem`` begins for a run made by plugin code that is not the code loaded now.
PLUGIN_PROBLEM = "made by other plugin code"


def _plain(v: object) -> object:
    """NumPy scalars and arrays as JSON numbers and lists (a measure's numbers come from NumPy and torch)."""
    tolist = getattr(v, "tolist", None)
    if callable(tolist):
        return tolist()
    raise TypeError(f"a measure holds {type(v).__name__}, which is not a number")


def measure_problem(value: object) -> str | None:
    """Why a stored measure cannot be what ``pelab.analysis.measures`` returns, or None: an object whose values are
    numbers (NaN and infinities included: a probe on a degenerate model), lists of numbers, or the sentence under
    ``not_applicable``; nothing else a claim would trip on."""
    if not isinstance(value, dict):
        return "not an object"
    for k, v in value.items():
        if k == "not_applicable":
            if not isinstance(v, str):
                return "not_applicable is not a sentence"
        elif isinstance(v, list):
            if not all(_number(x) for x in v):
                return f"{k} holds something other than numbers"
        elif not _number(v):
            return f"{k} is not a number"
    return None


def config_problem(text: str) -> str | None:
    """Why a stored config does not validate here, or None (``_read_config``, memoised per loaded plugins:
    the same text can name a plugin that is loaded later in the process)."""
    return _read_config(text, tuple(sorted(loaded_plugins().items())))[0]


def config_id(text: str) -> str:
    """The run id of a stored config that validates (``config_problem`` is None)."""
    return _read_config(text, tuple(sorted(loaded_plugins().items())))[1]


@functools.lru_cache(maxsize=4096)
def _read_config(text: str, plugins: tuple[tuple[str, str], ...]) -> tuple[str | None, str]:
    """Why a stored config (JSON text of an object) does not validate here (None when it does), and its run id
    ("" when it does not); once per distinct config per process, since the report's workers read every row for
    each model they load."""
    try:
        return None, RunConfig.model_validate(json.loads(text)).run_id
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])[:60]
        if err["type"] == "extra_forbidden":
            return f"config has a setting this pelab does not know ({where}): written by a newer pelab?", ""
        msg = str(err["msg"]).removeprefix("Value error, ")
        if msg.startswith("plugins:"):  # a changed plugin, or one not loaded: another run, not damage
            return f"{PLUGIN_PROBLEM} ({msg.removeprefix('plugins: ')[:160]})", ""
        return f"config is not valid ({where}: {err['msg'][:80]})", ""
    except (ValueError, TypeError, RecursionError) as e:
        return f"config is not valid ({str(e).splitlines()[0][:80] if str(e) else type(e).__name__})", ""


#: What a run id is (``RunConfig.run_id``: the first 16 hex digits of its config's sha256).
RUN_ID = re.compile(r"[0-9a-f]{16}")


#: The metrics every task's evaluation reports for a finished run (``pelab.train``): the held-out loss and accuracy
#: every claim's metric is one of or derives from. A row without one would be counted as a seed by the tables
#: while the means left it out.
FINISHED_METRICS = ("loss", "acc")


def row_problem(row: dict[str, Any]) -> str | None:
    """Why a stored row cannot be used (None when it can); its JSON fields are parsed in place. A run id, a known
    status, parsable JSON of the right type in every field, a config this pelab validates (one from a newer
    pelab does not) whose id is the row's (a received row named ``<id>/../../outside`` once led ``pelab analyze``
    to a checkpoint outside the folder), and, for a finished run, finite metrics in range."""
    if not isinstance(row.get("run_id"), str):
        return "no run id"
    if not RUN_ID.fullmatch(row["run_id"]):
        return "its run id is not 16 hexadecimal digits"
    if row.get("status") not in STATUSES:
        return f"status {str(row.get('status'))[:40]!r} is not one of {', '.join(STATUSES)}"
    for k in JSON_FIELDS:
        text = row.get(k)
        if text is None or text == "":
            row[k] = None
            continue
        if not isinstance(text, str | bytes):
            return f"{k} is a stored {type(text).__name__}, not JSON text"
        try:
            row[k] = json.loads(text)
        except RecursionError:
            return f"{k} is JSON nested too deep"
        except ValueError as e:
            return f"{k} is not valid JSON ({str(e).splitlines()[0][:80]})"
    done = row["status"] == "done"
    versions = row["versions"]
    if versions is not None and not isinstance(versions, dict):
        return f"versions is a JSON {type(versions).__name__}, not an object"
    if versions and _version(versions.get("pelab", "")) > _version(pelab.__version__):
        return (
            f"written by pelab {str(versions['pelab'])[:20]}, newer than this one ({pelab.__version__}); upgrade pelab"
        )
    if not isinstance(row["config"], dict):
        return f"config is a JSON {type(row['config']).__name__}, not an object"
    text = json.dumps(row["config"], sort_keys=True)
    why = config_problem(text)
    if why is not None:
        return why
    if (made := config_id(text)) != row["run_id"]:
        return f"its config is run {made}, not the run id it is stored under"
    why = _metrics_problem("metrics", row["metrics"] if row["metrics"] is not None else {}, done)
    if why is None:
        evals = row["evals"] if row["evals"] is not None else {}
        if not isinstance(evals, dict):
            return f"evals is a JSON {type(evals).__name__}, not an object"
        why = next((w for n, m in evals.items() if (w := _metrics_problem(f"evals.{str(n)[:20]}", m, done))), None)
    if why is None:
        curve = row["curve"] if row["curve"] is not None else []
        if not isinstance(curve, list):
            return f"curve is a JSON {type(curve).__name__}, not a list"
        why = next((w for i, c in enumerate(curve) if (w := _metrics_problem(f"curve[{i}]", c, False))), None)
    if why is None:
        why = _curve_problem(row["curve"] or [], done)
    if why is not None:
        return why
    missing = [k for k in FINISHED_METRICS if k not in (row["metrics"] or {})] if done else []
    if missing:  # every task's evaluation reports them: a run without one would be a seed the means do not count
        return f"metrics has no {missing[0]}, which every finished run reports"
    for k in ("params", "flops_per_token", "threads"):
        v = row.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            return f"{k} is {str(v)[:40]!r}, not a count"
    for k in ("tokens_per_s", "seconds"):
        v = row.get(k)
        if v is not None and (not _number(v) or not math.isfinite(v) or v < 0):
            return f"{k} is {str(v)[:40]!r}, not a finite non-negative number"
    for k in ("reason", "device", "host", "finished_at"):
        v = row.get(k)
        if v is not None and not isinstance(v, str):
            return f"{k} is a stored {type(v).__name__}, not text"
    return None


LOCK_NAME = "study.lock"


class StudyLock:
    """Exclusive ownership of a study folder for one driver. The lock file is opened by ``files.open_regular``: a
    link, a FIFO or a folder in its place is refused in one line, never truncated or written through (a received
    folder's ``study.lock -> /etc/passwd`` once had its target overwritten with pelab's pid)."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / LOCK_NAME
        self.handle: IO[str] | None = None

    def __enter__(self) -> StudyLock:
        make_dirs(self.path.parent)
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, "a lock file")
        handle = os.fdopen(fd, "r+", encoding="ascii", errors="replace")  # a received lock may hold any bytes
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = visible(handle.read(40).strip()[:20]) or "?"
            handle.close()
            raise PelabError(
                f"out: another pelab study (pid {holder}) is running on {self.path.parent}; "
                "wait for it to finish or choose another --out"
            ) from None
        except BaseException:
            handle.close()
            raise
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self.handle = handle
        return self

    def __exit__(self, *exc: object) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def engine_of(versions_json: str | None) -> str | None:
    """The computation a stored row names, or None (older rows, or a versions field that is not an object)."""
    try:
        versions = json.loads(versions_json or "{}")
    except ValueError:
        return None
    return versions.get("engine") if isinstance(versions, dict) else None
