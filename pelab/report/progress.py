"""How far a report has got: every measure of a stored model, every claim and the writing, each counted as it ends,
with the time left at the pace so far.

The report of the default study takes most of a minute (the full preset's, three), and a spinner said nothing of
how long. Items differ in cost by tens of times (a language model's layer probes against a small model's subspace
overlap), so the time left is weighted by each item's rough cost from the model's size (``measure_cost``) and
corrected by the pace measured as the report goes (``pelab.study.progress.Pace``, as the study's runs are).
Measures end on the report's worker processes, whose futures call ``finished`` from their own thread: the counts
are kept under a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pelab.study.progress import Pace

#: Every measure loads its model from its checkpoint first: ~0.12 s on one core, most of a small measure's time.
LOAD = 0.12
#: One cross-validated linear probe (ridge and shrinkage LDA, ``pelab.analysis.probes.classify``) on n samples of
#: width p with K classes costs about PROBE_ARITH · n · p^1.5 + PROBE_CLASS · K seconds on one core (the per-class
#: term is LDA's per-class covariances): least squares over 14 kinds of model in the full preset's folder (d = 16
#: to 256, 11 to 64 positions), each within 30% (a language model's layer probes: 1.8 s against 2.0 s measured).
PROBE_ARITH, PROBE_CLASS = 4.6e-8, 3.9e-3
#: One claim's own work in this process, the pages, figures and forests after the claims, MiniLM's tables (s).
CLAIM, WRITING, PRETRAINED = 1.0, 8.0, 5.0
#: What a report tells its watcher: (items done, items known so far, "about 0:20 left" or "").
OnProgress = Callable[[int, int, str], None]


class ReportWork:
    """The report's items, each expected once (``expect``) and finished once (``finished``); every change is passed
    to ``on_progress``. The total grows while claims plan their measures, so the first lines count few items."""

    def __init__(self, on_progress: OnProgress | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.on_progress = on_progress
        self.pace = Pace({}, clock)
        self.lock = threading.Lock()
        self.known: set[str] = set()
        self.done = 0

    def expect(self, key: str, cost: float) -> None:
        with self.lock:
            if key in self.known:
                return
            self.known.add(key)
            self.pace.add(key, cost)
            self._tell()

    def finished(self, key: str) -> None:
        with self.lock:
            if key not in self.pace.costs:  # never expected, or finished already
                return
            if self.done == 0:  # the pace runs from the first item done: loading the study and starting the workers
                self.pace.restart(key)  # is no item's work, and counted in, it said "4:15 left" of a 0:40 report
            else:
                self.pace.finished(key)
            self.done += 1
            self._tell()

    def _tell(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.done, len(self.known), self.pace.text())


def measure_cost(name: str, length: int, d: int, layers: int) -> float:
    """Rough seconds of one measure of a stored model on one core (``pelab.analysis.measures``), from its sequence
    length, width and depth: only their ratios matter, since the pace measured as the report goes scales them.
    Probes read ``SEQUENCES`` held-out sequences and classify position (``length`` classes); the rest cost little
    beyond loading the model."""
    from pelab.analysis.probes import SEQUENCES

    probe = PROBE_ARITH * SEQUENCES * length * d**1.5 + PROBE_CLASS * length
    if name == "layer_probes":  # position from every layer's input
        return LOAD + probe * (layers + 1)
    if name == "input_probes":  # token and position from the layer-1 input
        return LOAD + probe * 2
    if name == "cross_share":
        return LOAD + 4e-5 * length * d
    return LOAD


__all__ = ["OnProgress", "ReportWork", "measure_cost"]
