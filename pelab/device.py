"""Pick where tensors live: CUDA when present, CPU otherwise, overridable by name."""

from __future__ import annotations

import functools
import hashlib
import platform

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


def _cpuinfo(field: str) -> str:
    """The first ``field`` of /proc/cpuinfo (empty where there is none: another system, a sandbox)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.split(":", 1)[0].strip() == field), "")
    except OSError:
        return ""


def cpu_name() -> str:
    """The CPU's model name, as a person reads it (``lscpu``'s "Model name")."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


@functools.cache
def cpu_kind() -> str:
    """What decides a CPU run's last bits: the model name, the vector width PyTorch's kernels use and a digest of
    the instruction sets the CPU offers (which the BLAS dispatches on). Two machines of one kind train a config to
    the same numbers bit for bit at the same thread count; across kinds they drift (``pelab verify``). The model
    name alone is not enough: "Intel(R) Xeon(R) Processor" names several generations."""
    flags = " ".join(sorted(_cpuinfo("flags").split()))
    digest = hashlib.sha256(flags.encode()).hexdigest()[:8] if flags else "unknown"
    return f"{cpu_name()}; {torch.backends.cpu.get_cpu_capability()}; flags {digest}"


def device_kind(device: torch.device) -> str:
    """``cpu_kind`` on a CPU, the GPU's name on CUDA: what a run records of the machine whose kernels made its
    numbers (``versions.cpu`` or ``versions.gpu``)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_kind()
