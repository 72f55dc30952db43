"""What an analysis looks at: a trained model (with the run that made it) or an encoding alone.

``AnalysisInput`` is one of three things:

* a trained model: the ``Transformer`` and the ``RunConfig`` that trained it, so an
  analysis can rebuild the model at initialisation (same seed, same code path as
  ``train_run``) and draw fresh held-out sequences from the run's task;
* a scheme alone: a ``PositionConfig`` with a width d and a number of positions L
  (the table is built through the model, exactly as `pelab show` draws it);
* a table a user gives (positions x dimensions, e.g. a CSV written by `pelab show --csv`).

``load_trained(db_dir, run_id)`` reads a run's config from a study's results store and
its weights from ``db_dir/checkpoints/<run_id>.safetensors`` (written by
``pelab study FILE --out DIR --checkpoints``); ``AnalysisInput.for_model(*load_trained(...))``.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from pelab.config import PositionConfig, RunConfig
from pelab.errors import PelabError
from pelab.files import write_atomic
from pelab.model import Transformer

#: Seeds held-out analysis data apart from training data (seeded by ``seed``) and
#: evaluation data (seeded by ``1_000_003 * (seed + 1) + n``).
HELD_OUT_SEED = 7_919_000

#: Decorator: one BLAS thread. The analyses do linear algebra on small matrices, where BLAS
#: threads only cost; on a 2-core machine a 1300 x 32 SVD took 0.4 s with two OpenBLAS
#: threads and 1 ms with one.
one_blas_thread = threadpool_limits.wrap(limits=1, user_api="blas")


@dataclass(frozen=True, eq=False)
class AnalysisInput:
    """A trained model, a position scheme, or a user's table; see the module docstring."""

    d: int  # width of the layer-1 input (trained model) or of the table (scheme, user table)
    length: int  # positions analysed: the run's training sequence length, or L
    position: PositionConfig | None = None  # None only for a user's table
    model: Transformer | None = None
    run: RunConfig | None = None
    run_id: str | None = None
    table: np.ndarray | None = None  # a user's (length, d) table
    table_name: str | None = None
    grid: tuple[int, int] | None = None
    seed: int = 0
    vocab: int = 16  # tokens in the random token table that scheme-only geometry compares against

    # --- construction ---------------------------------------------------------------
    @classmethod
    def for_scheme(
        cls, position: PositionConfig, d: int, length: int, grid: tuple[int, int] | None = None, seed: int = 0
    ) -> AnalysisInput:
        if d < 2 or length < 2:
            raise PelabError(f"{'d' if d < 2 else 'length'}: must be at least 2")
        return cls(d=d, length=length, position=position, grid=grid, seed=seed)

    @classmethod
    def for_table(cls, table: np.ndarray, name: str) -> AnalysisInput:
        table = np.asarray(table, dtype=np.float64)
        if table.ndim != 2 or table.shape[0] < 2 or table.shape[1] < 1 or not np.isfinite(table).all():
            raise PelabError(f"table: {name} must be a finite 2-D table (positions x dimensions), at least 2 rows")
        return cls(d=table.shape[1], length=table.shape[0], table=table, table_name=name)

    @classmethod
    def for_model(cls, model: Transformer, run: RunConfig) -> AnalysisInput:
        """A trained model and the run that made it; the model is moved to the CPU in eval mode."""
        from pelab.tasks import make_task

        task = make_task(run.task)
        model = model.cpu().eval()
        return cls(
            d=model.cfg.widths().model,
            length=task.seq_len(task.n),
            position=model.cfg.position,
            model=model,
            run=run,
            run_id=run.run_id,
            grid=model.cfg.grid,
            seed=run.seed,
            vocab=model.cfg.vocab_size or 16,
        )

    # --- what analyses ask -----------------------------------------------------------
    @property
    def label(self) -> str:
        if self.run is not None:
            m = self.run.model
            return f"run {self.run_id} ({self.run.task.name}, {m.position.scheme} + {m.combine}, d={m.d})"
        if self.table is not None:
            return f"table {self.table_name} ({self.length} x {self.d})"
        assert self.position is not None
        return f"{self.position.scheme} (d={self.d}, {self.length} positions)"

    @property
    def scheme(self) -> str | None:
        return self.position.scheme if self.position is not None else None

    def require_model(self, analysis: str) -> tuple[Transformer, RunConfig]:
        if self.model is None or self.run is None:
            raise PelabError(f"{analysis}: needs a trained model; pass --run RUN_ID --db STUDY_DIR")
        return self.model, self.run

    def position_table(self) -> np.ndarray | None:
        """(length, width) float64: the user's table, the trained model's, or the scheme's; None if it has none.

        For a trained model this is the scheme's raw table at positions 0..length-1 (width
        d_position for concat combiners), before any gate or projection of the combiner.
        """
        if self.table is not None:
            return self.table
        if self.model is not None:
            if "position" not in self.model.embed.combiner.widths.sides:
                return None
            with torch.no_grad():
                t = self.model.scheme.table(torch.arange(self.length))
            return None if t is None else t.detach().double().cpu().numpy()
        from pelab.tables import scheme_table

        assert self.position is not None
        t = scheme_table(self.position, self.d, self.length, self.grid, seed=self.seed, max_len=max(512, self.length))
        return None if t is None else t.numpy()

    def initial_model(self) -> Transformer:
        """The trained model's starting point: same seed, same construction as ``train_run``."""
        _, run = self.require_model("initial model")
        state = torch.random.get_rng_state()
        try:
            torch.manual_seed(run.seed)
            return Transformer(run.model).eval()
        finally:
            torch.random.set_rng_state(state)

    def held_out(self, size: int, offset: int = 0):  # -> Batch
        """``size`` fresh test-split sequences from the run's task, on a seed of their own."""
        from pelab.tasks import make_task

        _, run = self.require_model("held-out data")
        gen = torch.Generator().manual_seed(HELD_OUT_SEED + 1000 * run.seed + offset)
        return make_task(run.task).batch("test", size, gen)


def float64_copy(model: Transformer) -> Transformer:
    """A float64 copy in eval mode, so identities hold to round-off (~1e-15), not float32's ~1e-7."""
    return copy.deepcopy(model).double().eval()


def load_trained(db_dir: str | Path, run_id: str) -> tuple[Transformer, RunConfig]:
    """A finished run of a study: (model with its trained weights, the run's config); see
    ``StudyFolder.load_trained``, which owns where a study keeps them."""
    from pelab.study.folder import StudyFolder

    return StudyFolder(db_dir).load_trained(run_id)


def read_table(path: str | Path) -> np.ndarray:
    """A user's table: CSV (one row per position, as `pelab show --csv` writes) or .npy (no pickles)."""
    path = Path(path)
    if not path.is_file():
        raise PelabError(f"table: no file {path}")
    try:
        if path.suffix == ".npy":
            table = np.load(path, allow_pickle=False)
        else:
            table = np.loadtxt(path, delimiter=",", ndmin=2)
        return np.asarray(table, dtype=np.float64)
    except (ValueError, TypeError, OSError) as e:
        raise PelabError(f"table: cannot read {path} as a numeric table ({e})") from None


# --- writing results ------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """Numbers and containers as plain JSON: numpy scalars and arrays unwrapped, non-finite floats as null."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray | torch.Tensor):
        return jsonable(value.tolist())
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer | int):
        return int(value)
    if isinstance(value, np.floating | float):
        return float(value) if math.isfinite(value) else None
    return value


def write_json(out: Path, name: str, result: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    return write_atomic(path, json.dumps(jsonable(result), indent=2, allow_nan=False) + "\n")
