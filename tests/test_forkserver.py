"""A Ctrl-C that reaches a worker before its own code runs (while it is still unpickling its task) is
ignored, not a KeyboardInterrupt traceback: pelab.forkserver's preload. CI once caught a report worker
printing one there; the window is milliseconds, so this test opens it wide with a module that interrupts
itself while it is being imported in the child."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SLOW = """
import os, signal, time
if os.environ.get("PELAB_TEST_CHILD") == "1":
    os.kill(os.getpid(), signal.SIGINT)  # arrives while the child unpickles its target
    time.sleep(0.2)


def target(path):
    open(path, "w").write("ran")
"""

PARENT = """
import os, sys
sys.path.insert(0, {folder!r})
import slowimport
from pelab import forkserver
os.environ["PELAB_TEST_CHILD"] = "1"
p = forkserver.context().Process(target=slowimport.target, args=({out!r},))
p.start()
p.join(60)
sys.exit(p.exitcode)
"""


def test_a_worker_interrupted_while_it_starts_ignores_it(tmp_path: Path) -> None:
    (tmp_path / "slowimport.py").write_text(SLOW)
    out = tmp_path / "ran.txt"
    parent = textwrap.dedent(PARENT.format(folder=str(tmp_path), out=str(out)))
    r = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert out.read_text() == "ran"


CUT = """
import multiprocessing.forkserver as fs, os, signal, sys, time
sys.path.insert(0, {folder!r})
import slowimport
from pelab import forkserver

connect = fs.connect_to_new_process


def cut_short(fds):
    # Ctrl-C after the server has the child's descriptors and before the task is written: the window where the
    # server (or the child it forked) printed an EOFError traceback once in CI.
    ends = connect(fds)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)
    return ends


fs.connect_to_new_process = cut_short
p = forkserver.context().Process(target=slowimport.target, args=({out!r},))
try:
    p.start()
except KeyboardInterrupt:
    print("interrupted once started:", p.pid is not None)
p.join(60)
sys.exit(p.exitcode)
"""


def test_a_ctrl_c_while_a_worker_starts_waits_until_it_has_started(tmp_path: Path) -> None:
    (tmp_path / "slowimport.py").write_text(SLOW.replace('"1"', '"never"'))
    out = tmp_path / "ran.txt"
    parent = textwrap.dedent(CUT.format(folder=str(tmp_path), out=str(out)))
    r = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=300)
    assert r.stdout.strip() == "interrupted once started: True", (r.stdout, r.stderr[-2000:])
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert out.read_text() == "ran"


def test_the_preload_ignores_sigint_first() -> None:
    """The signal module must be the first thing the server imports: torch takes seconds."""
    from pelab import forkserver

    assert forkserver.PRELOAD[0] == "pelab.forkserver_preload"
