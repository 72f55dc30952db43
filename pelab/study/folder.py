"""A study folder's layout, in one place: its results store, its lock, its checkpoints, and loading a trained
model back from them. Everything else asks a ``StudyFolder`` for a path instead of spelling it.

```
OUT/
  results.sqlite            every run's config, status, metrics and learning curve (pelab.study.store)
  study.lock                held by the one pelab command that writes this folder
  protocol.json, sequential.json   the frozen protocol and a sequential study's rounds (pelab.study.protocol, .design)
  checkpoints/<run_id>.safetensors   weights, with --checkpoints (and the runs the report analyses)
  analyses/, figures/       written by the report
  report.html, report.md, claims.json, claims.md
```

A study folder is untrusted input: it is what a researcher sends a reviewer. ``StudyFolder.check`` refuses, in one
line, a folder where any name pelab keeps is a link, a FIFO, a device or a socket (anywhere under its own folders
too), before a command reads or writes it; the files themselves are then opened by ``pelab.files.open_regular``
(or checked by ``check_regular`` where SQLite opens them), so nothing outside the folder is read or written.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pelab.config import ModelConfig, RunConfig
from pelab.errors import PelabError, visible
from pelab.files import check_regular, nested_past, read_file, real_folder, refusal
from pelab.study.store import DB_FILES, DB_NAME, LOCK_NAME, RUN_ID, Store, StudyLock

if TYPE_CHECKING:
    from pelab.model import Transformer
    from pelab.study.design import Design
    from pelab.study.grid import Study

#: Temporary files of writes that a kill interrupted, in the folders pelab owns whole (``FOLDERS``):
#: ``pelab.files.atomic_path``'s ``.NAME.XXXX.tmp`` (XXXX: ``tempfile``'s random letters), and the names older pelab
#: versions used (``.tmpXXXX``, ``<run id>.safetensors.tmp<pid>``, the Ray backend's ``<run id>.safetensors.part``).
#: They are removed while the lock is held, so no writer of the folder is alive.
LEFTOVER = re.compile(r"\..+\.[a-z0-9_]+\.tmp|\.tmp[a-z0-9_]+|[0-9a-f]{16}\.safetensors\.(tmp\d+|part)")
CHECKPOINTS = "checkpoints"
#: The files pelab keeps at the top of a study folder (what each is, for the one line that refuses a link there)
#: and the folders it owns whole; ``StudyFolder.check`` refuses a link or a special file at any of them.
FILES = {
    **{DB_NAME + s: "a results database" + (" file" if s else "") for s in DB_FILES},
    LOCK_NAME: "a lock file",
    "sequential.json": "a sequential record",
    "protocol.json": "a protocol record",
    "report.html": "a report page",
    "report.md": "a report page",
    "claims.json": "a claims record",
    "claims.md": "a claims record",
}
FOLDERS = (CHECKPOINTS, "analyses", "figures")
#: At the top of a study folder, which is the user's too, only ``atomic_path``'s temporary names of the files pelab
#: keeps there are its leftovers: a user's own ``notes.tmp`` beside them is not pelab's to delete.
TOP_LEFTOVER = re.compile(r"\.(" + "|".join(re.escape(n) for n in FILES) + r")\.[a-z0-9_]+\.tmp")


def checkpoint_file(checkpoints: str | Path, run_id: str) -> Path:
    """Where a run's weights go in a checkpoints folder (backends get the folder, not the study). A run id is 16
    hex digits (``RunConfig.run_id``); anything else (``<id>/../../outside``, from a received database) is refused,
    so no path is made from it."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise PelabError(f"run: '{visible(str(run_id)[:80])}' is not a run id; allowed: 16 hexadecimal digits")
    return Path(checkpoints) / f"{run_id}.safetensors"


#: How deep a record pelab writes nests below its top (sequential.json: 2); past it a received record is refused
#: before the code that reads it recurses.
MAX_RECORD_DEPTH = 32


def sequential_problem(record: Any, max_seeds: int, fixed: Mapping[str, Sequence[int]] | None = None) -> str | None:
    """Why a parsed sequential.json cannot be a record pelab wrote for a study capped at ``max_seeds`` seeds per arm
    (None when it can): nested past MAX_RECORD_DEPTH, no list of rounds, more rounds than the cap allows (each adds
    a seed), or a round's seed count that is not an integer in 0..max_seeds (0..its own seeds' count for an arm of
    a grid with its own seeds, ``fixed``; the design leaves those as they are). ``pelab.study.design`` trusts the
    counts: one past the cap was a KeyError, 50,000,000 built 50M configs."""
    if nested_past(record, MAX_RECORD_DEPTH) is not None:
        return f"nested more than {MAX_RECORD_DEPTH} deep"
    rounds = record.get("rounds") if isinstance(record, dict) else None
    if not isinstance(rounds, list):
        return "no list of rounds"
    if len(rounds) > max_seeds:
        return f"{len(rounds):,} rounds, more than a study of at most {max_seeds} seeds per arm can have"
    for i, r in enumerate(rounds, start=1):
        seeds = r.get("seeds") if isinstance(r, dict) else None
        if not isinstance(seeds, dict):
            return f"round {i} has no map of arm -> seed count"
        for arm, n in seeds.items():
            most = max(max_seeds, len((fixed or {}).get(arm, ())))
            if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= most:
                said = f"{str(n)[:20]!r} seeds"
                return f"round {i} gives arm {str(arm)[:20]!r} {said}; allowed: an integer in 0..{most}"
    return None


#: (path, inode, size, mtime) -> whether a checkpoint is whole and the model its header names: the report asks of
#: every run many times, and a header is read once per version of the file.
_NAMED: dict[tuple[str, int, int, int], tuple[bool, ModelConfig | None, dict[str, tuple[int, ...]]]] = {}


def _checkpoint_model(path: Path) -> tuple[bool, ModelConfig | None, dict[str, tuple[int, ...]]]:
    """Whether a checkpoint is whole (``pelab.weights.safe.header``: not a link, a FIFO, cut short or padded), the
    model its header names (``pelab_model_config``, as ``pelab.checkpoint.save`` writes it), validated without
    building it (None where it names none pelab can validate), and the tensors (name, shape) it declares."""
    from pelab.weights.safe import header, tensors

    try:
        st = os.lstat(path)
    except OSError:
        return False, None, {}
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _NAMED:
        try:
            head = header(path, follow=False, exact=True)
        except PelabError:
            _NAMED[key] = (False, None, {})
            return _NAMED[key]
        meta = head.get("__metadata__") or {}
        try:
            named = ModelConfig(**json.loads(meta["pelab_model_config"]))
        except (PelabError, ValueError, TypeError, KeyError, RecursionError):
            named = None
        _NAMED[key] = (True, named, tensors(head))
    return _NAMED[key]


@functools.lru_cache(maxsize=256)
def _tensor_shapes(config: str) -> dict[str, tuple[int, ...]]:
    """The tensors (name, shape) a model of this config holds: built once per config, as a report loading it
    would, with the global generator left as it was."""
    import torch

    from pelab.model import Transformer

    with torch.random.fork_rng(), torch.no_grad():
        model = Transformer(ModelConfig(**json.loads(config)))
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def _check_tree(top: Path) -> None:
    """Every entry below ``top`` a real folder or a regular file (links are refused, never followed)."""
    stack = [top]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif not entry.is_file(follow_symlinks=False):
                    raise refusal(entry.path, os.lstat(entry.path).st_mode, "a file pelab wrote")


class StudyFolder:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def db(self) -> Path:
        return self.root / DB_NAME

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    @property
    def analyses(self) -> Path:
        return self.root / "analyses"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    def checkpoint(self, run_id: str) -> Path:
        return checkpoint_file(self.checkpoints, run_id)

    def folder(self, name: str) -> Path:
        """One of the folders pelab owns here (``FOLDERS``), made when missing; a link there is refused."""
        return real_folder(self.root / name)

    def check(self) -> None:
        """Refuse, in one PelabError naming the path, a folder whose files pelab could be led to read or write
        outside it: a link (dangling or not) or a FIFO, device or socket at any name in ``FILES``, at one of
        ``FOLDERS`` or anywhere below them. Nothing is opened; a folder that is not there passes."""
        for name, what in FILES.items():
            check_regular(self.root / name, what, "move it away" if name.startswith(DB_NAME) else "remove it")
        for name in FOLDERS:
            try:
                st = os.lstat(self.root / name)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise refusal(self.root / name, st.st_mode, "a folder", "move it away")
            _check_tree(self.root / name)

    def has_checkpoint(self, run_id: str, model: ModelConfig | None = None) -> bool:
        """Whether the run's weights are there and whole: a damaged checkpoint (truncated, garbage, a link)
        counts as missing (``pelab.weights.safe``). With ``model`` (the run's stored ``RunConfig.model``), the
        model its header names must be that one too, read from the header alone: a 591-byte file naming d=2048
        and 24 layers once had a report worker build 5 GB of model before ``load`` refused it, and the refusal
        ended the whole report."""
        path = self.checkpoint(run_id)
        if not os.path.lexists(path):
            return False
        whole, named, declared = _checkpoint_model(path)
        if not whole or model is None:
            return whole
        # the header's model must be the run's, and its tensors that model's: the right header over another model's
        # weights (or over one tensor declared 4 GB) once ended the whole report when ``load`` refused it
        return named == model and declared == _tensor_shapes(model.canonical_json())

    def load_design(self, study: Study) -> tuple[Study, Design | None]:
        """``pelab.study.design.load_design``, after checking the folder's sequential.json against ``study``'s
        ``[sequential]`` (``sequential_problem``): a received record is untrusted, and the design code reads its
        counts as they are. A record that does not hold together: one PelabError naming the file."""
        from pelab.study.design import MAX_RECORD_BYTES, RECORD, load_design

        path = self.root / RECORD
        if study.sequential is not None and os.path.lexists(path):
            data = read_file(path, "a sequential record", MAX_RECORD_BYTES)  # never through a link, never a FIFO
            try:
                why = sequential_problem(json.loads(data), study.sequential.max_seeds, study.fixed)
            except RecursionError:
                why = "JSON nested too deep"
            except ValueError as e:
                why = f"not JSON: {str(e).splitlines()[0][:80]}"
            if why is not None:
                raise PelabError(f"out: {path} is not a sequential record pelab wrote ({why}); move it away")
        return load_design(self.root, study)

    def lock(self) -> StudyLock:
        return StudyLock(self.root)

    def store(self, create: bool = True) -> Store:
        return Store(self.root, create=create)

    def remove_leftovers(self) -> int:
        """Delete temporary files left by interrupted writes, by the names pelab's writers give them: at the top
        (``TOP_LEFTOVER``) and anywhere in the folders pelab owns (``LEFTOVER``), never elsewhere in the folder
        (a user's ``data/x.tmp`` was deleted once); links are never followed. How many."""
        found = [self.root / e.name for e in os.scandir(self.root) if e.is_file(follow_symlinks=False)
                 and TOP_LEFTOVER.fullmatch(e.name)] if self.root.is_dir() else []  # fmt: skip
        for name in FOLDERS:
            top = self.root / name
            if not top.is_dir() or top.is_symlink():
                continue
            for folder, _, files in os.walk(top):
                found += [Path(folder, f) for f in files if LEFTOVER.fullmatch(f)]
        for path in found:
            path.unlink(missing_ok=True)
        return len(found)

    def load_trained(self, run_id: str) -> tuple[Transformer, RunConfig]:
        """A finished run: (model with its trained weights, the run's config). ``run_id`` may be a unique
        prefix of the id. Wrap the pair with ``AnalysisInput.for_model``."""
        from pelab.checkpoint import load

        with self.store(create=False) as store:
            rows = store.rows(quiet=True)  # the command that reads them for itself says what it left out
        matches = [r for r in rows if r["run_id"].startswith(run_id)]
        if not matches:
            stored = ", ".join(r["run_id"] for r in rows[:6]) + (", ..." if len(rows) > 6 else "")
            raise PelabError(f"run: no run {run_id!r} in {self.root}; stored: {stored or 'none'}")
        if len(matches) > 1:
            raise PelabError(f"run: {run_id!r} matches {len(matches)} runs in {self.root}; give more of the id")
        row = matches[0]
        rid = row["run_id"]
        if row["status"] != "done":
            raise PelabError(f"run: {rid} ended {row['status']} ({row['reason']}); only finished runs have weights")
        path = self.checkpoint(rid)
        if not os.path.lexists(path):
            raise PelabError(
                f"run: no weights for {rid} ({path} is missing); the study must be run with --checkpoints "
                f"to save them: pelab study FILE --out {self.root} --checkpoints"
            )
        cfg = RunConfig.model_validate(row["config"])
        try:
            model = load(path)
        except PelabError:
            raise
        except (ValueError, RuntimeError) as e:
            raise PelabError(f"run: cannot read {path}: {e}") from None
        if model.cfg != cfg.model:
            raise PelabError(f"run: {path} holds a different model than run {rid} describes")
        return model.eval(), cfg
