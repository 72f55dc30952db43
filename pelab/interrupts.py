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
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_pending: list[int] = []


def pending() -> bool:
    """Whether a Ctrl-C reached this command (and may have been swallowed)."""
    return bool(_pending)


def check() -> None:
    """Raise the Ctrl-C the interpreter may have swallowed; a no-op when none came (or outside the command)."""
    if _pending:
        raise KeyboardInterrupt


def _importing(frame: FrameType | None) -> bool:
    """Whether the main thread is inside an import (a frame of importlib's own machinery on its stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


#: How long a Ctrl-C that landed inside an import waits before it is tried again (seconds).
RETRY = 0.02


@contextmanager
def remembered() -> Iterator[None]:
    """Within the block, SIGINT in this process raises KeyboardInterrupt as usual and is also remembered; a
    process forked from this one (whose own handlers are set by its starter) is left as it would have been.

    A Ctrl-C that lands inside an import is held until the import is done (tried again every ``RETRY`` s on
    SIGALRM, whose handler is set only then and put back after): raised there, it can reach a C++ extension's
    module initialisation through a pybind11 callback, where it cannot unwind and the process aborts (CI saw
    exit -6 with pybind11's "At: <frozen importlib...>(940): exec_module" on stderr), or leave a module
    half-imported so that a later import fails far from the interrupt."""
    main_pid = os.getpid()
    alarm: list[Any] = []  # the SIGALRM handler this block replaced, while a held Ctrl-C waits

    def held(signum: int, frame: FrameType | None) -> None:
        if _importing(frame):
            signal.setitimer(signal.ITIMER_REAL, RETRY)
            return
        signal.signal(signal.SIGALRM, alarm.pop())
        raise KeyboardInterrupt

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != main_pid:
            signal.default_int_handler(signum, frame)
        _pending.append(signum)
        if _importing(frame):
            if not alarm:
                alarm.append(signal.signal(signal.SIGALRM, held))
            signal.setitimer(signal.ITIMER_REAL, RETRY)
            return
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
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, alarm.pop())
        sys.unraisablehook = hook
        _pending.clear()


#: One entry while a ``deferred`` block runs (main thread only): a block inside it changes nothing.
_deferring: list[bool] = []


@contextmanager
def deferred() -> Iterator[None]:
    """Within the block, a Ctrl-C waits until the block ends and then arrives as it would have, to whatever
    handler was there before (``remembered``'s, Python's, or a caller's own).

    For steps that must not stop halfway: starting a worker from the fork server connects to the server, sends it
    file descriptors, then writes the pickled task, and a KeyboardInterrupt between those steps left the server
    reading a connection that closed early, so the server printed an ``EOFError`` traceback after pelab's one
    line (CI caught it once). Blocking SIGINT with ``pthread_sigmask`` would not do: the kernel hands a process's
    signal to any thread that does not block it (torch's, the pool's), and CPython runs the handler in the main
    thread anyway. Outside the main thread (where no handler can be set) the block changes nothing; nor does it
    where the handler was set from C (``getsignal`` is None: it could not be put back).

    A second Ctrl-C in the block goes through at once: a start that hangs (a fork server that stopped answering)
    is stopped by pressing again, as a person would."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None or _deferring:
        yield  # in a deferred block already (a worker's start inside the driver's): the outer one holds it
        return
    came: list[int] = []

    def wait(signum: int, frame: FrameType | None) -> None:
        came.append(signum)
        if len(came) > 1:  # pressed again: the previous handler takes it now, and the block's end adds nothing
            signal.signal(signal.SIGINT, previous)
            came.clear()
            signal.raise_signal(signal.SIGINT)

    signal.signal(signal.SIGINT, wait)
    _deferring.append(True)
    try:
        yield
    finally:
        _deferring.pop()
        signal.signal(signal.SIGINT, previous)
        if came:
            signal.raise_signal(signal.SIGINT)
