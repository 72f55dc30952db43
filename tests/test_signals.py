"""Signals beyond kill -9 (issue 30, part 4): SIGTERM, what a scheduler or `timeout` sends, stops a study as
Ctrl-C does (workers ended, nothing half-done stored, the lock released, the next `pelab study` resumes), in one
line and exit 143; Ctrl-C while the command's libraries load is one line too, never a traceback."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pelab.study.store import DB_NAME, StudyLock

STUDY = """
name = "sigterm"
seeds = [0]
[task]
name = "reverse"
length = 4
[model]
d = 16
[axes]
"train.steps" = [2, 100000]
"""
# Two workers: the driver sends the costliest group first, so with one the quick run would wait behind the long one.
ARGS = ("--workers", "2", "--threads", "1", "--no-report", "--no-checkpoints")


def start(file: Path, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "pelab", "study", str(file), "--out", str(out), *ARGS]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def stored(out: Path) -> dict[str, str]:
    if not (out / DB_NAME).exists():
        return {}
    try:
        with sqlite3.connect(out / DB_NAME, timeout=1) as conn:
            return dict(conn.execute("SELECT run_id, status FROM runs"))
    except sqlite3.OperationalError:
        return {}


def terminate_when(p: subprocess.Popen, ready, limit: float = 120) -> tuple[str, str]:
    """SIGTERM to the driver alone (as `timeout` sends it), once ``ready()``."""
    end = time.monotonic() + limit
    while not ready():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < end, "never ready"
        time.sleep(0.2)
    time.sleep(1.0)  # the long run is in flight
    p.send_signal(signal.SIGTERM)
    return p.communicate(timeout=60)


def test_sigterm_stops_a_study_as_ctrl_c_does_and_it_resumes(tmp_path: Path) -> None:
    file, out = tmp_path / "s.toml", tmp_path / "o"
    file.write_text(STUDY)
    p = start(file, out)
    stdout, stderr = terminate_when(p, lambda: len(stored(out)) == 1)
    assert p.returncode == 143, (p.returncode, stderr[-2000:])
    assert "Traceback" not in stderr + stdout
    assert [line for line in stderr.splitlines() if line.strip()] == [
        "pelab: stopped by SIGTERM (a study resumes where it stopped: run the same command again)"
    ]
    assert list(stored(out).values()) == ["done"]  # the quick run; nothing of the one in flight
    with StudyLock(out):  # released
        pass
    again = start(file, out)
    guard = threading.Timer(120, again.kill)  # never hang the suite
    guard.start()
    try:
        # the study's name, then its counts: printed once it is resumed
        first = again.stdout.readline() + again.stdout.readline()  # type: ignore[union-attr]
        stdout, stderr = terminate_when(again, lambda: True)
    finally:
        guard.cancel()
    assert "1 already stored, 1 to run" in first and again.returncode == 143, (first, stderr[-2000:])


@pytest.mark.parametrize("delay", [0.1, 0.3, 0.6])
def test_ctrl_c_while_loading_is_one_line(tmp_path: Path, delay: float) -> None:
    file = tmp_path / "s.toml"
    file.write_text(STUDY)
    p = start(file, tmp_path / "o")
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert p.returncode in (130, -signal.SIGINT), (p.returncode, stderr[-2000:])
    assert len(lines) <= 1 and all(line.startswith("pelab: interrupted") for line in lines), lines


class _InterruptedInFinalizer:
    """SIGINT delivered while the garbage collector runs a finalizer: Python prints "Exception ignored" and goes
    on, which is how a Ctrl-C in the report phase once ran the report to its end and exited 0 (CI, stop 32)."""

    def __del__(self) -> None:
        import os

        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs between these bytecodes, inside __del__
            pass


def test_a_ctrl_c_the_interpreter_swallowed_stops_the_next_write(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from pelab import interrupts
    from pelab.files import write_atomic

    write_atomic(tmp_path / "before", "x")  # outside the command's handler: nothing pending, writes as usual
    with interrupts.remembered():
        _InterruptedInFinalizer()  # dropped at once: its __del__ swallows the KeyboardInterrupt
        assert interrupts.pending()
        assert "Traceback" not in capsys.readouterr().err  # swallowed quietly: the command's one line is enough
        with pytest.raises(KeyboardInterrupt):
            write_atomic(tmp_path / "after", "x")
    assert not (tmp_path / "after").exists() and not list(tmp_path.glob(".after*"))
    assert not interrupts.pending()  # the command ended: the next one (a test runner's next call) starts clean
    write_atomic(tmp_path / "again", "x")


def test_a_ctrl_c_inside_an_import_is_raised_once_the_import_is_done(tmp_path: Path, monkeypatch) -> None:
    """CI once saw `pelab study` abort (exit -6, pybind11's "At: <frozen importlib...>: exec_module") when a Ctrl-C
    was raised inside torch's import. The command holds a Ctrl-C that lands inside an import until the import is
    done, then raises it: the module is whole, the interrupt still arrives, and SIGALRM is left as it was."""
    from pelab import interrupts

    (tmp_path / "slow_to_import.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(0.2)\nWHOLE = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(KeyboardInterrupt), interrupts.remembered():
        import slow_to_import  # noqa: F401  # the Ctrl-C lands in here ...

        time.sleep(2)  # ... and is raised here
    assert sys.modules["slow_to_import"].WHOLE
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    monkeypatch.delitem(sys.modules, "slow_to_import")


def test_a_ctrl_c_in_a_deferred_block_arrives_when_it_ends_to_the_handler_that_was_there() -> None:
    """``interrupts.deferred`` (a worker's start from the fork server): the block runs to its end, then the
    signal reaches the handler that was set before it, once; a block without a Ctrl-C changes nothing."""
    import os

    from pelab import interrupts

    seen: list[str] = []

    def handler(signum: int, frame: object) -> None:
        seen.append("handled")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):  # the handler would run between these bytecodes
                pass
            seen.append("block ended")
        for _ in range(10_000):
            pass
        assert seen == ["block ended", "handled"]
        assert signal.getsignal(signal.SIGINT) is handler
        with interrupts.deferred():
            pass
        assert seen == ["block ended", "handled"] and signal.getsignal(signal.SIGINT) is handler
        with pytest.raises(KeyboardInterrupt), interrupts.remembered(), interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
            seen.append("inner ended")
        assert seen[-1] == "inner ended"
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_second_ctrl_c_in_a_deferred_block_goes_through_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A start that hangs is stopped by pressing again: the second Ctrl-C reaches the previous handler inside the
    block, and the block's end adds none. Where the handler was set from C (``getsignal`` is None), the block
    leaves it alone and a Ctrl-C arrives as it would have."""
    import contextlib
    import os

    from pelab import interrupts

    seen: list[str] = []

    def handler(signum: int, frame: object) -> None:
        seen.append("handled")
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        for nested in (False, True):  # a block inside a block (the backend's around the fork server's): the same
            inner = interrupts.deferred() if nested else contextlib.nullcontext()
            with pytest.raises(KeyboardInterrupt), interrupts.deferred(), inner:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                seen.append("waited")
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                seen.append("not reached")
            assert seen == ["waited", "handled"] and signal.getsignal(signal.SIGINT) is handler
            seen.clear()
        monkeypatch.setattr(interrupts.signal, "getsignal", lambda signum: None)
        with pytest.raises(KeyboardInterrupt), interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            seen.append("not reached")
        assert seen == ["handled"]
    finally:
        monkeypatch.undo()
        signal.signal(signal.SIGINT, previous)
