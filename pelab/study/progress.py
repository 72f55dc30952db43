"""Progress where a terminal is not: plain lines a log file keeps (``pelab study > log``).

Rich draws a live bar on a terminal and nothing at all elsewhere until the work ends, so a study whose output
goes to a file was silent for minutes. ``PlainProgress`` stands in for Rich's ``Progress`` there with the
calls the driver makes (``add_task``, ``update``, ``console``): a line at every tenth of the work and at least
once a minute, with what is done, what failed, and the time left at the pace so far. "At least once a minute" holds
while no run finishes too (a d=160 language model of the full preset trains for minutes): a timer thread says the
line again, with the time left recomputed, when a minute passed without one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType

from rich.console import Console


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class Pace:
    """The time left of a study, weighted by each run's estimated cost (``pelab.study.estimate``).

    Runs are sent costliest first, so a count of runs says little about the time: 16 of 985 runs can be a sixth of
    the work (the full preset's 1,500-step additions go first), and "about 1039 min left" after the first minute
    was a count's answer for a 90-minute study. Here the pace is the work done so far (in estimated seconds) per
    second of wall time, which corrects the estimate for this machine's speed as the study goes."""

    def __init__(self, costs: Mapping[str, float], clock: Callable[[], float] = time.monotonic) -> None:
        self.costs, self.clock = dict(costs), clock
        self.total = sum(self.costs.values())
        self.done = 0.0
        self.start = clock()

    def finished(self, run_id: str) -> None:
        self.done += self.costs.pop(run_id, 0.0)

    def add(self, key: str, cost: float) -> None:
        """More work, learned after the start (a report's claims plan their measures as it goes)."""
        self.costs[key] = cost
        self.total += cost

    def restart(self, key: str) -> None:
        """Start the clock now and leave ``key`` out of the work: what came before it (loading, starting workers) and
        its own work were not done at the pace that follows."""
        self.start = self.clock()
        self.total -= self.costs.pop(key, 0.0)

    def left(self) -> float | None:
        """Seconds left at the pace so far; None before any work is done."""
        elapsed = self.clock() - self.start
        if self.done <= 0 or elapsed <= 0:
            return None
        return (self.total - self.done) * elapsed / self.done

    def text(self) -> str:
        left = self.left()
        return "" if left is None else f"about {_clock(left)} left"


class PlainProgress:
    """One task's progress as lines: '<label>: 40/189 (21%), 2 failed, 1:10 elapsed, about 4:25 left'; a resumed
    task, whose stored work counts in the share, also says how much of what it had to do is done: '(66%; 13 of 560 to
    run)'."""

    def __init__(self, console: Console, every_share: float = 0.1, every_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, estimate: Callable[[], str] | None = None,
                 timer: bool = True) -> None:  # fmt: skip
        self.console = console
        self.every_share, self.every_s, self.clock = every_share, every_s, clock
        #: the caller's weighted estimate, asked again when the timer says a line between runs (``Pace.text``)
        self.estimate = estimate
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._beat, name="pelab-progress", daemon=True) if timer else None
        self.label, self.total, self.done, self.start_done, self.failed = "", 0, 0, 0, ""
        self.left: str | None = None  # a weighted estimate (``Pace``) when the caller has one
        self.start = self.last_time = clock()
        self.last_share = 0.0
        self.last_done_said = 0

    def __enter__(self) -> PlainProgress:
        if self._timer is not None:
            self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._timer is not None and self._timer.is_alive():
            self._timer.join()
        if kind is None and self.total and self.done > self.last_done_said:
            self._say()

    def _beat(self) -> None:
        while not self._stop.wait(min(5.0, self.every_s / 4)):
            self.tick()

    def tick(self) -> None:
        """Say the line again where a minute passed without one and work is left: a study between two long runs is
        not silent in its log, and its time left grows with the wait instead of standing at the last run's."""
        if self.total and self.done < self.total and self.clock() - self.last_time >= self.every_s:
            # the caller's estimate asked again; without one, no time left rather than the last line's, now stale
            self._say(self.estimate() if self.estimate is not None else "")

    def add_task(self, label: str, total: int, completed: int = 0, failed: str = "", left: str | None = None) -> int:
        self.label, self.total, self.done, self.start_done, self.failed = label, total, completed, completed, failed
        self.left = left
        self.last_share = completed / total if total else 1.0
        self.last_done_said = completed
        self.start = self.last_time = self.clock()
        return 0

    def update(
        self,
        task: int,
        advance: int = 0,
        failed: str | None = None,
        left: str | None = None,
        total: int | None = None,
        completed: int | None = None,
    ) -> None:
        """As Rich's ``Progress.update``: ``total`` and ``completed`` set the counts (a report learns its total as
        its claims plan their work), ``advance`` adds to what is done."""
        if total is not None:
            self.total = total
        if completed is not None:
            self.done = completed
        self.done += advance
        if failed is not None:
            self.failed = failed
        if left is not None:
            self.left = left
        share = self.done / self.total if self.total else 1.0
        now = self.clock()
        if share - self.last_share >= self.every_share - 1e-9 or now - self.last_time >= self.every_s:
            self._say()

    def _say(self, left_now: str | None = None) -> None:
        with self._lock:  # the timer thread and the driver's own updates
            self._say_now(left_now)

    def _say_now(self, left_now: str | None) -> None:
        now = self.clock()
        share = self.done / self.total if self.total else 1.0
        ran = self.done - self.start_done
        left = (self.total - self.done) * (now - self.start) / ran if ran else None
        # a resumed study: its stored runs count in the share, so say how far this sitting's own work is
        todo = self.total - self.start_done
        this = f"; {ran} of {todo} to run" if self.start_done and 0 < ran < todo else ""
        parts = [f"{self.label}: {self.done}/{self.total} ({100 * share:.0f}%{this})"]
        if self.failed:
            parts.append(self.console.render_str(self.failed).plain)
        parts.append(f"{_clock(now - self.start)} elapsed")
        given = self.left if left_now is None else left_now
        if given is not None:  # the caller's weighted estimate
            if given and self.done < self.total:
                parts.append(given)
        elif left is not None and self.done < self.total:
            parts.append(f"about {_clock(left)} left")
        self.console.print(", ".join(parts), markup=False, highlight=False)
        self.last_share, self.last_time, self.last_done_said = share, now, self.done
