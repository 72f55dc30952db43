"""A study folder's layout, in one place: its results store, its lock, its checkpoints, and loading a trained
model back from them. Everything else asks a ``StudyFolder`` for a path instead of spelling it.

```
OUT/
  results.sqlite            every run's config, status, metrics and learning curve (pelab.study.store)
  study.lock                held by the one pelab command that writes this folder
  checkpoints/<run_id>.safetensors   weights, with --checkpoints (and the runs the report analyses)
  analyses/, figures/       written by the report
  report.html, report.md, claims.json, claims.md
```
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pelab.config import RunConfig
from pelab.errors import PelabError
from pelab.study.store import DB_NAME, Store, StudyLock

if TYPE_CHECKING:
    from pelab.model import Transformer

#: Temporary files of writes that a kill interrupted: ``pelab.files.atomic_path``'s ``.NAME.XXXX.tmp``, and
#: the names older pelab versions used (``NAME.safetensors.tmp<pid>``, ``.tmp*``, the Ray backend's ``.part``).
#: They are removed while the lock is held, so no writer of the folder is alive.
LEFTOVER = re.compile(r"^\.tmp.*|.*\.tmp\d*|.*\.safetensors\.part")
CHECKPOINTS = "checkpoints"


def checkpoint_file(checkpoints: str | Path, run_id: str) -> Path:
    """Where a run's weights go in a checkpoints folder (backends get the folder, not the study)."""
    return Path(checkpoints) / f"{run_id}.safetensors"


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

    def has_checkpoint(self, run_id: str) -> bool:
        """Whether the run's weights are there and whole: a damaged checkpoint (truncated, garbage, a link)
        counts as missing (``pelab.weights.safe``)."""
        from pelab.weights.safe import is_whole

        return os.path.lexists(self.checkpoint(run_id)) and is_whole(self.checkpoint(run_id))

    def lock(self) -> StudyLock:
        return StudyLock(self.root)

    def store(self, create: bool = True) -> Store:
        return Store(self.root, create=create)

    def remove_leftovers(self) -> int:
        """Delete temporary files left by interrupted writes (links are never followed); how many."""
        removed = 0
        for folder, _, files in os.walk(self.root):
            for name in files:
                if LEFTOVER.fullmatch(name):
                    Path(folder, name).unlink(missing_ok=True)
                    removed += 1
        return removed

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
        if not path.exists():
            raise PelabError(
                f"run: no weights for {rid} ({path} is missing); the study must be run with --checkpoints "
                f"to save them: pelab study FILE --out {self.root} --checkpoints"
            )
        cfg = RunConfig.model_validate(row["config"])
        try:
            model = load(path)
        except (ValueError, RuntimeError) as e:
            raise PelabError(f"run: cannot read {path}: {e}") from None
        if model.cfg != cfg.model:
            raise PelabError(f"run: {path} holds a different model than run {rid} describes")
        return model.eval(), cfg
