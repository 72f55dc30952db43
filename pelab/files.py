"""Files a study folder keeps are written whole or not at all, and caches are read with suspicion.

A kill -9 or a full disk in the middle of a write must never leave a half file where a
good one was: every such file is written to a temporary file in the same folder, flushed
to disk, then moved over the old one with ``os.replace`` (atomic on POSIX and Windows).
Only a regular file (or nothing, or a link, which is replaced, never followed) is written
over; the new file gets the mode a plain ``open`` would give it.

A cache (anything pelab can compute again) that is damaged is reported in one line and
computed again (``read_json_cache``): never fatal.

A study folder is untrusted input (it is what a researcher sends a reviewer), so the files pelab keeps in one are
opened by ``open_regular`` alone: never through a symbolic link (``O_NOFOLLOW``, and the descriptor checked to be
the regular file ``lstat`` saw), never blocking on a FIFO; anything else is refused in one line naming the path and
what it is. Files a library opens by name (SQLite's database and its -wal and -shm) are checked first with
``check_regular``, folders made with ``real_folder`` (never a link) or ``make_dirs`` (no stray folder for a ``..``).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pelab import interrupts
from pelab.errors import PelabError, visible

#: The names ``atomic_path`` gives its temporary files (``.NAME.XXXXXXXX.tmp``), so a later run can tell what
#: an interrupted write left behind.
TEMP = re.compile(r"^\..+\.[^.]+\.tmp$")


def kind_of(mode: int) -> str:
    """What a file of this mode is, in words ("a FIFO (named pipe)")."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def umask() -> int:
    """This process's umask, read without changing it where Linux says it (/proc), else by setting it back."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def target_mode(path: Path) -> int:
    """The mode ``open(path, "w")`` leaves: an existing regular file's own, else 0o666 less the umask. A target
    that is a folder, a device, a FIFO or a socket is refused in one line (a link is replaced, not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0o666 & ~umask()
    if stat.S_ISLNK(st.st_mode):
        return 0o666 & ~umask()
    if not stat.S_ISREG(st.st_mode):
        raise PelabError(f"{path}: is {kind_of(st.st_mode)}; pelab writes only regular files; choose another path")
    return stat.S_IMODE(st.st_mode)


def refusal(path: str | Path, mode: int, what: str, advice: str = "remove it") -> PelabError:
    """The one line for a path in a study folder that is not the regular file (or folder) pelab keeps there."""
    if stat.S_ISLNK(mode):
        return PelabError(
            f"{path}: is a symbolic link, not {what}; pelab never reads or writes a study folder's files through a "
            "link; remove the link"
        )
    return PelabError(f"{path}: is {kind_of(mode)}, not {what}; {advice}")


def check_regular(path: str | Path, what: str, advice: str = "remove it") -> os.stat_result | None:
    """``path``'s ``lstat`` when it is a regular file, None when nothing is there; a link (dangling or not), a
    folder, a FIFO, a device or a socket is refused (``refusal``). For a file a library opens by name (SQLite)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise refusal(path, st.st_mode, what, advice)
    return st


def one_link(path: str | Path, st: os.stat_result) -> None:
    """Refuse a file pelab writes in place (its lock, its database) that has more than one hard link: the write
    would change every other name of it too (a received ``study.lock`` hard-linked to a file outside the folder
    once had that file truncated and overwritten with pelab's pid)."""
    if st.st_nlink > 1:
        raise PelabError(
            f"{path}: has {st.st_nlink} hard links, so pelab writing it in place would change the other names of it "
            "too; replace it with a copy of its own (cp, not ln)"
        )


def open_regular(path: str | Path, flags: int, what: str, advice: str = "remove it") -> int:
    """A descriptor of the regular file at ``path``: the one way pelab opens a study folder's files (its lock, its
    records, its checkpoints). Never through a link (``O_NOFOLLOW``: a planted ``study.lock -> /etc/passwd`` is
    refused, not truncated), never blocking on a FIFO (``O_NONBLOCK``, cleared once the file is known to be
    regular), and the opened file is the one ``lstat`` saw (a swap in between is refused too). ``flags``: the
    access, with ``O_CREAT`` to make a missing file (0o666 less the umask). Anything but a regular file:
    PelabError ``"{path}: is ..., not {what}; {advice}"``. Opened for writing, a file with more than one hard link
    is refused too (``one_link``)."""
    before = check_regular(path, what, advice)  # a device is never opened: opening one can act
    safe = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | safe, 0o666)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR) and os.path.lexists(path):
            check_regular(path, what, advice)  # a link or a special file put there meanwhile: its own line
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refusal(path, st.st_mode, what, advice)
        if before is not None and (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise PelabError(f"{path}: was replaced while pelab opened it; run the same command again")
        if flags & (os.O_WRONLY | os.O_RDWR):
            one_link(path, st)  # before a byte is written through it
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(path: str | Path, what: str, limit: int) -> bytes:
    """The bytes of a study folder's regular file (``open_regular``); past ``limit`` bytes it is refused (a 10 GB
    sparse record is not read into memory)."""
    fd = open_regular(path, os.O_RDONLY, what)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise PelabError(f"{path}: holds {size:,} bytes, more than {what} ever does ({limit:,}); remove it")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit + 1)
    finally:
        os.close(fd)


def real_folder(path: str | Path) -> Path:
    """A folder inside a study folder (checkpoints/, analyses/, figures/), made when missing; a link in its place
    is refused, never followed (files written through it would land outside the study folder), as is a file."""
    path = Path(path)
    try:
        os.mkdir(path)
        return path
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise refusal(path, st.st_mode, "a folder", "move it away")
    return path


def make_dirs(path: str | Path) -> Path:
    """``mkdir -p`` that leaves no stray folder: a ``..`` after a folder that does not exist is refused, as the OS
    would refuse to open such a path, where ``Path.mkdir(parents=True)`` makes that folder on its way (``--out
    a/nosuch/../dd`` once left ``a/nosuch`` behind). Links of the path the user gave are followed, as the OS does."""
    path = Path(path)
    parts = path.parts
    for i, part in enumerate(parts):
        if part == ".." and i > 0:
            before = Path(*parts[:i])
            if not before.is_dir():
                raise PelabError(
                    f"{path}: {before} does not exist, so the '..' after it leads nowhere; write the path without it"
                )
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for a library that writes files itself (safetensors, matplotlib); when
    the block ends without error it is flushed to disk and moved over ``path``, otherwise it is deleted. A link
    at ``path`` is replaced, never followed; a folder, device or FIFO there is refused (PelabError). An error of
    the machine (a full disk) names ``path``, not the temporary file."""
    interrupts.check()  # a Ctrl-C the interpreter swallowed stops here, before anything is written
    path = Path(path)
    mode = target_mode(path)
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:  # a read-only disk or folder: the user's path, not the temporary name, is what to fix
        if e.errno is None:
            raise
        raise OSError(e.errno, e.strerror or os.strerror(e.errno), str(path)) from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, mode)  # mkstemp makes it 0600; a plain open would give the umask's mode
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        target_mode(path)  # still nothing special there (a FIFO planted meanwhile is not replaced)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if e.filename in (None, name, str(tmp)) and e.errno is not None:
            raise OSError(e.errno, e.strerror or os.strerror(e.errno), str(path)) from e
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically; a link at ``path`` is replaced, never followed."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


# --- caches -----------------------------------------------------------------------------------------------
#: Largest cache file read back (bytes): past it the file is taken for damaged rather than read into memory.
MAX_CACHE_BYTES = 1 << 28


def damaged(path: str | Path, why: str) -> None:
    """The one line a damaged cache gets (on stderr) before it is computed again; the damaged file goes (a link
    or a FIFO too, never what a link points to), so the new one can take its place."""
    print(f"pelab: cache {visible(path)} was damaged ({visible(why)}); recomputing", file=sys.stderr, flush=True)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass  # gone already, or not ours to remove: the write that follows says so


def read_regular(path: str | Path, limit: int = MAX_CACHE_BYTES, follow: bool = False) -> bytes:
    """A regular file's bytes, never blocking on a FIFO; a link at ``path`` is refused unless ``follow`` (OSError
    ELOOP), as are a special file and a file over ``limit`` bytes (ValueError)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"it is {kind_of(st.st_mode)}")
        if st.st_size > limit:
            raise ValueError(f"{st.st_size} bytes, more than {limit}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit + 1)
    finally:
        os.close(fd)


def cache_dir() -> Path:
    """$PELAB_CACHE, else $XDG_CACHE_HOME/pelab, else ~/.cache/pelab: what pelab can compute again."""
    if os.environ.get("PELAB_CACHE"):
        return Path(os.environ["PELAB_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pelab"


def nested_past(value: Any, limit: int) -> str | None:
    """Where a parsed JSON or TOML value nests more than ``limit`` lists or maps below its top (``a.b[3]``), or None:
    walked without recursion, so a received record is refused before code that recurses over it (``json``'s
    encoder, a reader of its fields) meets the depth."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        where, v, depth = stack.pop()
        if depth > limit:
            return where
        if isinstance(v, dict):
            stack += [(f"{where}.{k}" if where else str(k), x, depth + 1) for k, x in v.items()]
        elif isinstance(v, list):
            stack += [(f"{where}[{i}]", x, depth + 1) for i, x in enumerate(v)]
    return None


def read_json_cache(path: str | Path, check: Callable[[Any], object] | None = None) -> Any | None:
    """A cache file's JSON, or None when it is absent or damaged (then one line says so, and the caller computes
    it again): a link, a special file, empty, truncated, not JSON, nested too deep, or failing ``check`` (which
    raises, or returns a reason string, for valid JSON of the wrong shape or of another version)."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    try:
        data = read_regular(path)
        if not data.strip():
            raise ValueError("empty")
        value = json.loads(data)
        why = check(value) if check is not None else None
    except OSError as e:
        damaged(path, "a symbolic link" if e.errno == errno.ELOOP else (e.strerror or str(e)))
        return None
    except RecursionError:
        damaged(path, "nested too deep")
        return None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        damaged(path, first[:200] if not isinstance(e, KeyError) else f"no {first}")
        return None
    if isinstance(why, str):
        damaged(path, why)
        return None
    return value
