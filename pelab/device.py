"""Pick where tensors live: CUDA when present, CPU otherwise, overridable by name."""

from __future__ import annotations

import torch

from pelab.errors import PelabError


def check_device_name(name: str) -> None:
    """Only the spelling: for a device on another machine (a Ray node), whether it exists is its business."""
    if name not in ("auto", "cpu", "cuda") and not (name.startswith("cuda:") and name[5:].isdigit()):
        raise PelabError(f"device: unknown value {name!r}; allowed: auto, cpu, cuda, cuda:N")


def resolve_device(name: str | None = "auto") -> torch.device:
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    check_device_name(name)
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise PelabError(f"device: {name!r} asked for but CUDA is not available; allowed here: auto, cpu")
    return torch.device(name)
