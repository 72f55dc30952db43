"""The one fork server every pelab worker process comes from: the study's runs and the report's measures.

Why one: a terminal's Ctrl-C is a SIGINT to the whole process group, workers included, and a child forked
from the server restores the signal handlers the server had *before* it started serving. Left alone that is
Python's KeyboardInterrupt, so a child hit while it is still unpickling its task (importing modules) printed
a traceback, before any of our code could decide what Ctrl-C means (CI caught it once in a few hundred
interrupts). The server therefore preloads ``pelab.forkserver_preload``, which ignores SIGINT in the server,
so every child starts ignoring it; each worker then chooses: a run keeps ignoring it (the driver stops
the study), a report worker exits at once and quietly.
"""

from __future__ import annotations

from multiprocessing.context import BaseContext, ForkServerContext, ForkServerProcess

from pelab import interrupts

#: Imported once by the server, so that no worker pays for them. torch._dynamo is imported lazily by the
#: first optimizer a process builds and costs about 2 s: more than a small run's training.
#: ``pelab.forkserver_preload`` must come first (the others take seconds to import).
PRELOAD = ["pelab.forkserver_preload", "pelab.train", "torch._dynamo"]


class _Process(ForkServerProcess):
    """A worker whose start is one step for Ctrl-C (``pelab.interrupts.deferred``): a start cut short between
    connecting to the server and writing the task made the server or the half-started child print a traceback."""

    def start(self) -> None:
        with interrupts.deferred():
            super().start()


class _Context(ForkServerContext):
    Process = _Process


#: Shares the one fork server of ``multiprocessing.forkserver`` with the standard context; only its processes
#: start differently.
_CONTEXT = _Context()


def context() -> BaseContext:
    """The forkserver context with pelab's preload and uninterruptible starts. The preload only counts for the
    server's first start in this process, so every pelab pool must come from here (ProcessPoolExecutor starts its
    workers with ``mp_context.Process`` too)."""
    _CONTEXT.set_forkserver_preload(PRELOAD)
    return _CONTEXT
