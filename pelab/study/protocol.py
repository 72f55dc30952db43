"""The protocol a study folder's runs were trained under, fixed once (SCIENCE.md, "Frozen protocols, fresh seeds").

When a study folder's runs are first trained (``driver.run_study``, before the first run starts), pelab writes
``protocol.json`` there: what decides a verdict, fixed before any of those runs exists.

* ``rules``: the sha256 of the source of every file that decides a verdict (``RULE_FILES``: ``pelab/rules/*.py``,
  ``pelab/study/sequential.py``, ``pelab/study/design.py`` and every ``pelab/report/claims/*.py``), hashed in path
  order as "relative path NUL text NUL", and how many files that is;
* ``commit``: the git commit of the checkout the package sits in (``git rev-parse HEAD``), or "not a git checkout",
  and whether those files match that commit (``rules_match_commit``: False where they carry uncommitted edits; None
  where there is no checkout);
* ``pelab``: the package's version; ``study``: the sha256 of the study file's text (the preset) and its name;
* ``confirmatory``: every ``confirmatory = true`` grid of the study (``pelab.study.grid``), its seeds and its arms;
* ``fixed``: when (UTC, to the second).

It is written once. A later training of the same folder keeps it, and where the rules or the study file have changed
since (or the commit, or the confirmatory grids), appends what they are now, with the date, to ``later``: no history
is lost. ``pelab report`` never writes it.

The report reads it back (``protocol_line``): the protocol in one line, and plainly whether the rules or the study
file changed since. A comparison is *confirmatory* (``confirmatory_runs``, ``is_confirmatory``) when every run of both
of its arms is a run of a confirmatory grid of the study, declared confirmatory, with that run's seed, by the protocol
(its first entry or a later one) before the run finished training, and read by the very rules that entry recorded;
every other comparison is *exploratory* (trained before the protocol was fixed, from an exploratory grid, or read by
rules changed since). A folder trained before pelab wrote protocols has none: every comparison in it is exploratory.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pelab
from pelab.errors import PelabError
from pelab.files import read_file, write_atomic
from pelab.study.grid import Study

RECORD = "protocol.json"
FORMAT = 1
#: Every file whose text decides a verdict, as globs relative to the package's folder.
RULE_FILES = ("rules/*.py", "study/sequential.py", "study/design.py", "report/claims/*.py")
NOT_GIT = "not a git checkout"
#: Largest protocol read (bytes): one entry is a few KB, so even thousands of later trainings stay far below it; a
#: received folder's 3 GB protocol.json is refused, not read into memory.
MAX_PROTOCOL_BYTES = 1 << 24
#: How long ``git rev-parse`` may take before the checkout is said to be none.
GIT_SECONDS = 10


def package_root() -> Path:
    return Path(pelab.__file__).resolve().parent


def rule_files(root: Path | None = None) -> list[Path]:
    """The files ``rules_sha256`` hashes, in the order it hashes them (by path relative to ``root``)."""
    root = root or package_root()
    found = {p for pattern in RULE_FILES for p in root.glob(pattern) if p.is_file()}
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def rules_sha256(root: Path | None = None) -> str:
    """sha256 over every rule file, "relative path NUL text NUL" in path order: one edit anywhere in what decides a
    verdict changes it, and a file added or removed does too."""
    root = root or package_root()
    h = hashlib.sha256()
    for f in rule_files(root):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=GIT_SECONDS, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit(root: Path | None = None) -> tuple[str, bool | None]:
    """The commit of the checkout the package sits in and whether the rule files match it (None: no checkout)."""
    root = root or package_root()
    head = _git(root, "rev-parse", "HEAD")
    if head is None or head.returncode != 0 or not head.stdout.strip():
        return NOT_GIT, None
    files = [f.relative_to(root).as_posix() for f in rule_files(root)]
    diff = _git(root, "diff", "--quiet", "HEAD", "--", *files)
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "--", *files)
    clean = diff is not None and diff.returncode == 0 and untracked is not None and not untracked.stdout.strip()
    return head.stdout.strip(), clean


def confirmatory_grids(study: Study) -> list[dict[str, Any]]:
    """Each ``confirmatory = true`` grid of the study: its name, its seeds and its arms (``RunConfig.arm_id``)."""
    out = []
    for g in study.grids:
        if not g.confirmatory:
            continue
        arms = sorted({r.arm_id for r in study.runs if g.name in study.membership.get(r.run_id, [])})
        out.append({"grid": g.name, "seeds": list(g.seeds or []), "arms": arms})
    return out


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def entry(study: Study, root: Path | None = None, when: str | None = None) -> dict[str, Any]:
    """What the protocol says of this checkout and this study now."""
    commit, clean = git_commit(root)
    return {
        "date": when or now_utc(),
        "rules": {"sha256": rules_sha256(root), "files": len(rule_files(root))},
        "commit": commit,
        "rules_match_commit": clean,
        "pelab": pelab.__version__,
        "study": {"sha256": text_sha256(study.source), "name": study.name},
        "confirmatory": confirmatory_grids(study),
    }


def read_protocol(folder: Path) -> dict[str, Any] | None:
    """``protocol.json`` of a study folder, or None where there is none (trained before pelab wrote protocols)."""
    path = Path(folder) / RECORD
    if not os.path.lexists(path):
        return None
    # a received folder is untrusted: never through a link, never a FIFO or a folder taken for "no protocol"
    data = read_file(path, "a protocol record", MAX_PROTOCOL_BYTES)
    try:
        record = json.loads(data)
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise ValueError(f"format {record.get('format') if isinstance(record, dict) else None!r}")
        for e in entries(record):  # what the report's protocol line prints, of every entry (``_since``): text
            if not all(
                isinstance(x, str) for x in (e["date"], e["commit"], e["rules"]["sha256"], e["study"]["sha256"])
            ):
                raise TypeError("an entry's date, commit and sha256s must be text")
            list(e["confirmatory"])
    except RecursionError:
        raise PelabError(f"out: {path} is not a protocol pelab wrote (JSON nested too deep)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PelabError(f"out: {path} is not a protocol pelab wrote ({type(e).__name__}: {e})") from None
    return record


def entries(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The protocol's entries in order: the one fixed first, then each later change."""
    first = {k: v for k, v in record.items() if k not in ("format", "later", "fixed")}
    return [{**first, "date": record["fixed"]}, *record.get("later", [])]


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    keys = ("commit", "rules_match_commit", "pelab", "confirmatory")
    return (
        a["rules"]["sha256"] == b["rules"]["sha256"]
        and a["study"]["sha256"] == b["study"]["sha256"]
        and all(a.get(k) == b.get(k) for k in keys)
    )


def record_protocol(folder: Path, study: Study, root: Path | None = None, when: str | None = None) -> dict[str, Any]:
    """Fix the protocol of a folder whose runs are about to train: write it the first time; afterwards keep it, and
    append what has changed since (rules, study file, commit, confirmatory grids) to ``later``. Returns it."""
    now = entry(study, root, when)
    old = read_protocol(folder)
    if old is None:
        record = {"format": FORMAT, "fixed": now.pop("date"), **now, "later": []}
    else:
        if _same(entries(old)[-1], now):
            return old
        record = {**old, "later": [*old.get("later", []), now]}
    write_atomic(Path(folder) / RECORD, json.dumps(record, indent=1))
    return record


# --- reading it back ----------------------------------------------------------------------
def _short(sha: str) -> str:
    return f"{sha[:12]}…"


def changes(record: Mapping[str, Any], study: Study, root: Path | None = None) -> list[str]:
    """What changed since the runs were trained, in plain sentences: the rules (the hashed files' text now against
    the protocol's last entry), the study file (its text now against the last entry's)."""
    last = entries(record)[-1]
    said = []
    if rules_sha256(root) != last["rules"]["sha256"]:
        said.append(
            f"the rules changed since these runs were trained (now sha256 {_short(rules_sha256(root))}): the verdicts "
            "below are read by newer rules"
        )
    if text_sha256(study.source) != last["study"]["sha256"]:
        said.append(
            f"the study file changed since these runs were trained (now sha256 {_short(text_sha256(study.source))}): "
            "the runs were trained under the protocol's, and its changes since were made after"
        )
    return said


def protocol_line(record: Mapping[str, Any] | None, study: Study, root: Path | None = None) -> str:
    """The protocol in one line, for the report's method line: "protocol: rules sha256 ab12… (commit 1a2b3c4), study
    file sha256 cd34…, fixed on 2026-11-27", its later changes, and, plainly, what changed since."""
    if record is None:
        return (
            "protocol: none recorded (these runs were trained before pelab wrote protocols, or by another tool): every "
            "comparison here is exploratory"
        )
    first = entries(record)[0]
    commit = first["commit"]
    where = f"commit {commit[:7]}" if commit != NOT_GIT else NOT_GIT
    if first.get("rules_match_commit") is False:
        where += ", with uncommitted edits to the rules"
    text = (
        f"protocol: rules sha256 {_short(first['rules']['sha256'])} ({where}), study file sha256 "
        f"{_short(first['study']['sha256'])}, pelab {first['pelab']}, fixed on {first['date'][:10]}"
    )
    later = record.get("later", [])
    if later:
        moved = [
            what
            for what, key in (("rules", "rules"), ("study file", "study"))
            if any(e[key]["sha256"] != first[key]["sha256"] for e in later)
        ]  # a resume on a later commit is recorded too: say which, if any, of the two a verdict rests on moved
        text += f"; {len(later)} later training(s), the last on {later[-1]['date'][:10]}, " + (
            f"under changed {' and '.join(moved)} (rules sha256 {_short(later[-1]['rules']['sha256'])}, study "
            f"file sha256 {_short(later[-1]['study']['sha256'])}, {_since(later)})"
            if moved
            else "under the same rules and study file (a resume on another commit)"
        )
    n = len(entries(record)[-1]["confirmatory"])
    text += f"; {n} confirmatory grid(s) declared" if n else "; no confirmatory grid: every comparison is exploratory"
    said = changes(record, study, root)
    return text + ("; " + "; ".join(said) if said else "")


def _since(later: Sequence[Mapping[str, Any]]) -> str:
    """ "recorded since 2026-11-29 13:09 UTC, commit 6857f79": the first later entry with the last one's rules and
    study file, where the design a redesigned study's verdicts read was fixed (full's line named only the first
    design's commit, which declared other seeds)."""

    def files(e: Mapping[str, Any]) -> tuple[str, str]:
        return e["rules"]["sha256"], e["study"]["sha256"]

    # the first of the stretch of entries that ends the list: an earlier stretch under the same files is another epoch
    start = len(later) - 1
    while start > 0 and files(later[start - 1]) == files(later[-1]):
        start -= 1
    e = later[start]
    when = e["date"][:16].replace("T", " ")
    commit = e["commit"]
    return f"recorded since {when} UTC" + (f", commit {commit[:7]}" if commit != NOT_GIT else "")


def confirmatory_runs(
    record: Mapping[str, Any] | None, study: Study, finished: Mapping[str, str], root: Path | None = None
) -> frozenset[str]:
    """The runs a comparison may call confirmatory: each a run of a ``confirmatory = true`` grid of ``study``, whose
    arm and seed a protocol entry declared confirmatory at or before the run finished training (``finished``: run id
    -> its stored ``finished_at``, UTC ISO), where that entry's rules are the rules read now. Empty without a
    protocol."""
    if record is None:
        return frozenset()
    rules_now = rules_sha256(root)
    declared: dict[tuple[str, int], str] = {}  # (arm, seed) -> when an entry with today's rules first declared it
    for e in entries(record):
        if e["rules"]["sha256"] != rules_now:
            continue
        for g in e["confirmatory"]:
            for arm in g["arms"]:
                for seed in g["seeds"]:
                    declared.setdefault((str(arm), int(seed)), str(e["date"]))
    grids = {g.name for g in study.grids if g.confirmatory}
    out = set()
    for run in study.runs:
        date = declared.get((run.arm_id, run.seed))
        done = finished.get(run.run_id)
        in_grid = bool(grids & set(study.membership.get(run.run_id, [])))
        if in_grid and date is not None and done is not None and _utc(done) >= _utc(date):
            out.add(run.run_id)
    return frozenset(out)


def _utc(text: str) -> datetime:
    """An ISO time as an aware UTC datetime (a stored time without a zone is read as UTC, as pelab writes them)."""
    t = datetime.fromisoformat(str(text))
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


# --- which comparisons are confirmatory, while a report is read ----------------------------
_CONFIRMATORY: ContextVar[frozenset[str]] = ContextVar("pelab_confirmatory", default=frozenset())


@contextmanager
def reading_protocol(runs: Iterable[str]) -> Iterator[None]:
    """Inside, ``is_confirmatory`` calls a comparison confirmatory when all its runs are among ``runs``
    (``confirmatory_runs``)."""
    token = _CONFIRMATORY.set(frozenset(runs))
    try:
        yield
    finally:
        _CONFIRMATORY.reset(token)


def is_confirmatory(comparison: Any) -> bool:
    """Whether a comparison (a ``rules.Comparison``, or anything with ``run_ids()``, or a sequence of run ids) is
    confirmatory in the report being read (``reading_protocol``): every run of both arms confirmatory. False outside a
    report, and for a comparison without runs."""
    runs: Sequence[str] = comparison.run_ids() if hasattr(comparison, "run_ids") else list(comparison)
    allowed = _CONFIRMATORY.get()
    return bool(runs) and all(r in allowed for r in runs)


def reading(comparison: Any) -> str:
    """ "confirmatory" or "exploratory" (``is_confirmatory``): what a claims.json row and a table say."""
    return "confirmatory" if is_confirmatory(comparison) else "exploratory"
