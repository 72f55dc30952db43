"""What a finished run hands back, typed: the store, the backends, the driver and the console read it without
importing torch or the model (only training makes one).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


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
