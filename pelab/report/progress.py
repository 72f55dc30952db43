"""How far a report has got: every measure of a stored model, every claim and the writing, each counted as it ends,
with the time left at the pace so far.

The report of the default study takes most of a minute (the full preset's, three), and a spinner said nothing of
how long. Items differ in cost by tens of times (a language model's layer probes against a small model's subspace
overlap), so the time left is weighted by each item's rough relative cost (``COST``) and corrected by the pace
measured as the report goes (``pelab.study.progress.Pace``, as the study's runs are). Measures end on the report's
worker processes, whose futures call ``finished`` from their own thread: the counts are kept under a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pelab.study.progress import Pace

#: Rough relative cost of one measure of one stored model, by name (``pelab.analysis.measures``), measured on
#: quick's folder: a language model's layer probes (T = 64, three layers' inputs) take ~2.2 s; a small model's
#: input probes ~0.2 s; cross shares, overlaps and collision counts 0.03-0.2 s. Unknown names cost 1.
COST = {"layer_probes": 10.0, "input_probes": 1.0, "cross_share": 0.5, "overlap": 0.2, "collisions": 0.2}
#: One claim's own work in this process (its tables and figures), and the pages, figures and forests after them.
CLAIM, WRITING, PRETRAINED = 1.0, 25.0, 5.0

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
            self.pace.costs[key] = cost
            self.pace.total += cost
            self._tell()

    def finished(self, key: str) -> None:
        with self.lock:
            if key not in self.pace.costs:  # never expected, or finished already
                return
            self.pace.finished(key)
            self.done += 1
            self._tell()

    def _tell(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.done, len(self.known), self.pace.text())


def measure_cost(name: str) -> float:
    return COST.get(name, 1.0)


__all__ = ["COST", "OnProgress", "ReportWork", "measure_cost"]
