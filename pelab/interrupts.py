"""Ctrl-C that cannot be lost.

Python raises KeyboardInterrupt wherever the main thread happens to be when SIGINT lands; when that is inside a
weakref callback or a ``__del__`` (the garbage collector runs them at any allocation), Python prints "Exception
ignored in ..." and carries on, so a report pressed with Ctrl-C could run to its end and exit 0 (seen in CI).
The command's handler therefore also remembers the signal, and every file pelab writes asks first: a Ctrl-C the
interpreter swallowed stops the command at its next write instead, still before anything half-done is stored, and
the swallowed one prints nothing (the command ends with its one line, never a traceback).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_pending: list[int] = []


def pending() -> bool:
    """Whether a Ctrl-C reached this command (and may have been swallowed)."""
    return bool(_pending)


def check() -> None:
    """Raise the Ctrl-C the interpreter may have swallowed; a no-op when none came (or outside the command)."""
    if _pending:
        raise KeyboardInterrupt


@contextmanager
def remembered() -> Iterator[None]:
    """Within the block, SIGINT in this process raises KeyboardInterrupt as usual and is also remembered; a
    process forked from this one (whose own handlers are set by its starter) is left as it would have been."""
    main_pid = os.getpid()

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != main_pid:
            signal.default_int_handler(signum, frame)
        _pending.append(signum)
        raise KeyboardInterrupt

    def unraisable(info: sys.UnraisableHookArgs) -> None:
        if info.exc_type is not None and issubclass(info.exc_type, KeyboardInterrupt) and _pending:
            return  # remembered, and raised at the next write: no "Exception ignored ... Traceback" on stderr
        hook(info)

    previous, hook = signal.signal(signal.SIGINT, interrupt), sys.unraisablehook
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = hook
        _pending.clear()
