"""Files a study folder keeps are written whole or not at all.

A kill -9 or a full disk in the middle of a write must never leave a half file where a
good one was: every such file is written to a temporary file in the same folder, flushed
to disk, then moved over the old one with ``os.replace`` (atomic on POSIX and Windows).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The names ``atomic_path`` gives its temporary files (``.NAME.XXXXXXXX.tmp``), so a later run can tell what
#: an interrupted write left behind.
TEMP = re.compile(r"^\..+\.[^.]+\.tmp$")


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for a library that writes files itself (safetensors, matplotlib); when
    the block ends without error it is flushed to disk and moved over ``path``, otherwise it is deleted. A link
    at ``path`` is replaced, never followed."""
    path = Path(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically; a link at ``path`` is replaced, never followed."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return path
