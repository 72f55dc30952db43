"""What a finished run hands back, typed: the store, the backends, the driver and the console read it without
importing torch or the model (only training makes one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

#: Accuracy at each evaluated size is stored flat among a run's metrics as ``acc_at_<n>`` (results.sqlite
#: and every frame read from it); these two are the only places that spell or parse the key.
_SIZE_KEY = re.compile(r"^(?:m\.)?acc_at_(\d+)$")


def same_computation(rows: list[dict]) -> list[dict]:
    """Rows of one training computation (``records.ENGINE``): where a folder holds runs of the current one and
    of an older one (a resume cut short), the older are left out, never averaged in (the CLI says how many)."""
    current = [r for r in rows if isinstance(r.get("versions"), dict) and r["versions"].get("engine") == ENGINE]
    return current if current else rows


def trained_on(row: Mapping[str, Any]) -> str | None:
    """The kind of machine whose kernels made a stored run's numbers, as the run recorded it (``versions.cpu``, or
    ``versions.gpu`` for a run on CUDA; ``pelab.device.device_kind``); None for a run from before pelab recorded it.
    A run is bit for bit again only on its own kind (`pelab verify`)."""
    versions = row.get("versions")
    versions = versions if isinstance(versions, dict) else {}
    kind = versions.get("gpu" if str(row.get("device", "cpu")).startswith("cuda") else "cpu")
    return str(kind) if kind is not None else None


def size_metric(n: int) -> str:
    """The metric key of accuracy at problem size n."""
    return f"acc_at_{n}"


def sizes_in(keys: Iterable[str]) -> list[tuple[int, str]]:
    """(size, key) for each accuracy-at-size key among ``keys`` (bare, or a frame's ``m.`` column), smallest
    size first."""
    found = ((_SIZE_KEY.match(k), k) for k in keys)
    return sorted((int(m.group(1)), k) for m, k in found if m)


#: The training computation, stored with every run (``versions["engine"]``). "stacked-1": every run trains
#: through ``pelab.stacked`` (a run alone is a stack of one); runs stored before it (no "engine") trained one at a
#: time, a computation whose numbers differ by round-off that training amplifies. Results of two computations are
#: never mixed in one comparison: ``pelab study`` trains a run stored by another computation again.
#: "stacked-2" (2026-11-28): as stacked-1, with subnormal floats flushed to zero on the CPU while a run trains
#: (``train.flushed_subnormals``), 3.35x faster per step for a masked byte model at d=128; its numbers differ
#: from stacked-1's only where a subnormal arose.
ENGINE = "stacked-2"


class RunResult(BaseModel):
    """What a run produced; every number in a report traces back to one of these."""

    run_id: str
    status: Literal["done", "diverged", "failed"]
    reason: str | None = None
    metrics: dict[str, float] = Field(default_factory=dict)  # at the training size, plus acc_at_N per size
    evals: dict[str, dict[str, float]] = Field(default_factory=dict)  # size -> metrics
    curve: list[dict[str, float]] = Field(default_factory=list)  # step, loss, acc (training batches)
    params: int = 0
    flops_per_token: int = 0
    tokens_per_s: float = 0.0
    seconds: float = 0.0
    device: str = "cpu"
    threads: int = 1
    versions: dict[str, str] = Field(default_factory=dict)
    host: str = ""  # where it trained: set by the study backend (hostname, or the Ray node's address)
