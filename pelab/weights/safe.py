"""A safetensors file checked against its real length before any library reads it.

The format is 8 bytes of header length (little-endian), a JSON header naming each tensor's
dtype, shape and byte range, then the bytes. A damaged or hostile file can claim a header of
2⁶⁰ bytes, shapes its bytes do not hold, or ranges past its end; a FIFO in its place would
block a reader for ever. ``header`` checks all of it with the file's own length (``fstat``),
reading nothing the file does not hold, and refuses in one PelabError naming the file.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pelab.errors import PelabError

if TYPE_CHECKING:
    from torch import Tensor

#: Bytes per element of each dtype safetensors writes.
DTYPES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2,
    "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}  # fmt: skip
#: safetensors' own limit on the header (100 MB).
MAX_HEADER = 100_000_000


def _nonneg_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def header(path: str | Path, what: str = "model", follow: bool = True, exact: bool = False) -> dict[str, dict]:
    """The header of the safetensors file at ``path`` (``__metadata__`` included), every tensor's byte range
    checked against the file's length. ``follow``: read through a link (a hub cache's snapshot links to its
    blobs); else a link is refused. ``exact``: the file ends where its last tensor does, as safetensors writes it
    (a pelab checkpoint made sparse to 10 GB is damaged, not a model to load). Anything wrong: PelabError
    ``"{what}: {path} ..."``."""

    def bad(why: str) -> PelabError:
        return PelabError(f"{what}: {path} is not a safetensors file pelab can read: {why}")

    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise bad("a loop of symbolic links" if e.errno == errno.ELOOP else (e.strerror or str(e))) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise bad("it is not a regular file (a FIFO, a device or a folder)")
        size = st.st_size
        if size < 8:
            raise bad(f"{size} bytes, too short to hold a header" if size else "it is empty")
        with os.fdopen(fd, "rb", closefd=False) as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8 or n > MAX_HEADER:
                raise bad(f"its header claims {n} bytes, but the file holds {size}")
            raw = f.read(n)
    except OSError as e:
        raise bad(e.strerror or str(e)) from None
    finally:
        os.close(fd)
    try:
        head = json.loads(raw)
    except (ValueError, RecursionError):
        raise bad("its header is not JSON") from None
    if not isinstance(head, dict):
        raise bad("its header is not a JSON object")
    data = size - 8 - n
    last = 0
    for name, entry in head.items():
        if name == "__metadata__":
            if not (isinstance(entry, dict) and all(isinstance(v, str) for v in entry.values())):
                raise bad("__metadata__ is not a map of strings")
            continue
        if not isinstance(entry, dict):
            raise bad(f"tensor {name[:80]!r} has no description")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in DTYPES:
            raise bad(f"tensor {name[:80]!r} has dtype {str(dtype)[:20]!r}; allowed: {', '.join(DTYPES)}")
        if not (isinstance(shape, list) and len(shape) <= 16 and all(_nonneg_int(d) for d in shape)):
            raise bad(f"tensor {name[:80]!r} has a shape that is not a list of sizes")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_nonneg_int(o) for o in offsets)):
            raise bad(f"tensor {name[:80]!r} has data_offsets that are not two byte positions")
        begin, end = offsets
        if not begin <= end <= data:
            raise bad(f"tensor {name[:80]!r} lies at bytes {begin}..{end}, past the {data} bytes of data")
        if end - begin != math.prod(shape) * DTYPES[dtype]:
            raise bad(f"tensor {name[:80]!r} of shape {shape} takes {end - begin} bytes, not {math.prod(shape)} "
                      f"x {DTYPES[dtype]}")  # fmt: skip
        last = max(last, end)
    if exact and data != last:
        raise bad(f"{data - last:,} bytes follow its last tensor")
    return head


def tensors(head: dict[str, dict]) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape, from a checked ``header``."""
    return {k: tuple(v["shape"]) for k, v in head.items() if k != "__metadata__"}


def is_whole(path: str | Path) -> bool:
    """Whether ``path`` is a safetensors file whose header and byte ranges hold (a link is not)."""
    try:
        header(path, follow=False, exact=True)
    except PelabError:
        return False
    return True


def read_id_cache(
    path: Path,
    spec: dict[str, tuple[str, int | None]],
    ids: tuple[str, ...],
    check: Callable[[dict[str, Tensor]], None] | None = None,
) -> dict[str, Tensor] | None:
    """A cache of 1-D tensors of MiniLM word-piece ids (the word-piece tasks' tokenised corpora) at ``path``; None
    when absent, or damaged (then one line says so, and the caller makes it again): not a whole safetensors file
    (``header``), other tensors than ``spec`` names, a tensor not 1-D of its dtype (or not of its fixed length),
    ids in the tensors ``ids`` names outside MiniLM's vocabulary, or what ``check`` (a callable on the loaded
    tensors) raises ValueError for. One reader for every such cache, so a damage check added is added to all."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from pelab.files import damaged
    from pelab.weights import VOCAB_SIZE

    if not os.path.lexists(path):
        return None
    try:
        head = header(path, what="cache", follow=False)
        names = sorted(k for k in head if k != "__metadata__")
        if names != sorted(spec):
            raise ValueError(f"it holds {', '.join(names)[:80] or 'no tensors'}, not {', '.join(spec)}")
        for k, (dtype, length) in spec.items():
            shape = head[k]["shape"]
            if head[k]["dtype"] != dtype or len(shape) != 1 or (length is not None and shape != [length]):
                raise ValueError(f"its {k} is not 1-D {dtype}" + (f" of {length}" if length is not None else ""))
        cached = load_file(path)
        if any(len(cached[k]) and not (0 <= int(cached[k].min()) and int(cached[k].max()) < VOCAB_SIZE) for k in ids):
            raise ValueError(f"ids outside MiniLM's vocabulary (0..{VOCAB_SIZE - 1})")
        if check is not None:
            check(cached)
    except (PelabError, SafetensorError, OSError, ValueError, RuntimeError) as e:
        damaged(path, str(e).removeprefix(f"cache: {path} is not a safetensors file pelab can read: ")[:200])
        return None
    return cached


def write_cache(path: Path, tensors: dict) -> None:
    """Store ``tensors`` at ``path`` whole or not at all, whichever process writes it first; where it cannot be
    written (a read-only home, a folder in the way) every process computes it for itself."""
    from safetensors.torch import save_file

    from pelab.files import atomic_path

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            save_file(tensors, str(tmp))
    except (OSError, PelabError):
        pass
