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

import multiprocessing as mp
from multiprocessing.context import BaseContext

#: Imported once by the server, so that no worker pays for them. torch._dynamo is imported lazily by the
#: first optimizer a process builds and costs about 2 s: more than a small run's training.
#: ``pelab.forkserver_preload`` must come first (the others take seconds to import).
PRELOAD = ["pelab.forkserver_preload", "pelab.train", "torch._dynamo"]


def context() -> BaseContext:
    """The forkserver context with pelab's preload. The preload only counts for the server's first start in
    this process, so every pelab pool must come from here."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx
