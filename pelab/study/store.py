"""The results store: one SQLite database per study folder, written by the driver alone.

WAL mode, one transaction per finished run, keyed by the run id (the hash of the
run's canonical config): a row is either whole or absent, whatever kills the driver.
A lock file held with ``flock`` keeps a second driver out; the kernel drops it when
the holder dies, even by SIGKILL, so a crash never leaves a stale lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pelab.config import RunConfig
from pelab.errors import PelabError
from pelab.records import RunResult

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
"""

COLUMNS = (
    "run_id", "config", "status", "reason", "metrics", "evals", "curve", "params", "flops_per_token",
    "tokens_per_s", "seconds", "device", "threads", "versions", "finished_at", "host",
)  # fmt: skip
DB_NAME = "results.sqlite"


class Store:
    def __init__(self, folder: str | Path, create: bool = True) -> None:
        self.folder = Path(folder)
        path = self.folder / DB_NAME
        if not create and not path.exists():
            raise PelabError(f"out: {self.folder} holds no pelab study (no {DB_NAME})")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = path
        try:
            self.conn = sqlite3.connect(path, timeout=30)
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
        except sqlite3.Error as e:
            raise PelabError(self.problem(e)) from None

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

    # --- runs ------------------------------------------------------------------------
    def finished_ids(self, statuses: tuple[str, ...] = ("done", "diverged"), engine: str | None = None) -> set[str]:
        """Runs stored with one of ``statuses``; with ``engine``, only those trained by that computation
        (``records.ENGINE``; rows from before it was recorded have none)."""
        marks = ",".join("?" * len(statuses))
        rows = self.conn.execute(f"SELECT run_id, versions FROM runs WHERE status IN ({marks})", statuses)
        return {r[0] for r in rows if engine is None or engine_of(r[1]) == engine}

    def write(self, cfg: RunConfig, result: RunResult) -> None:
        """One run, in one transaction."""
        if cfg.run_id != result.run_id:
            raise RuntimeError(f"result {result.run_id} does not belong to run {cfg.run_id}")
        try:
            self._write(cfg, result)
        except sqlite3.OperationalError as e:
            raise PelabError(self.problem(e)) from None

    def _write(self, cfg: RunConfig, result: RunResult) -> None:
        with self.conn:
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

    def rows(self) -> list[dict[str, Any]]:
        cur = self.conn.execute("SELECT * FROM runs ORDER BY run_id")
        names = [c[0] for c in cur.description]
        out = []
        for r in cur.fetchall():
            row = dict(zip(names, r, strict=True))
            for k in ("config", "metrics", "evals", "curve", "versions"):
                row[k] = json.loads(row[k]) if row[k] else None
            out.append(row)
        return out


class StudyLock:
    """Exclusive ownership of a study folder for one driver."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / "study.lock"
        self.handle: IO[str] | None = None

    def __enter__(self) -> StudyLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise PelabError(
                f"out: another pelab study (pid {holder}) is running on {self.path.parent}; "
                "wait for it to finish or choose another --out"
            ) from None
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
