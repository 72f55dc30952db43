"""Network namespaces for anything that starts Ray, so that Ray binds and connects only inside them.

Ray opens sockets on the machine's own network address even when told to use
127.0.0.1; inside a namespace with nothing but loopback it has no other address
to use. A "host" here is a namespace; two hosts are joined by a veth pair with
addresses of our choosing. Everything a namespace ran is killed when it is
removed. Root only (``ip netns add`` needs CAP_SYS_ADMIN); ``unavailable()``
says why not, for a skip message. Used by tests/test_ray.py and bench/ray.py.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root to create network namespaces (ip netns add), as in CI"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip` to create network namespaces"
    try:
        with Netns("probe"):
            pass
    except (subprocess.CalledProcessError, OSError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        return f"cannot create a network namespace here: {detail.strip()}"
    return None


class Netns:
    """A network namespace with loopback up; a context manager that leaves nothing behind."""

    def __init__(self, label: str) -> None:
        self.name = f"pelab-{label}-{uuid.uuid4().hex[:6]}"
        _ip("netns", "add", self.name)
        try:
            self.run("ip", "link", "set", "lo", "up")
        except BaseException:
            _ip("netns", "del", self.name)
            raise

    def command(self, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, *argv: str, **kw: Any) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*argv), check=True, capture_output=True, text=True, **kw)

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen:
        return subprocess.Popen(self.command(*argv), **kw)

    def pids(self) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def kill_all(self) -> None:
        """SIGKILL every process in the namespace: the host "loses power"."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)

    def close(self) -> None:
        self.kill_all()
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def __enter__(self) -> Netns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def link(a: Netns, b: Netns, addr_a: str, addr_b: str, prefix: int = 24) -> None:
    """A cable between two hosts: a veth pair, one end in each namespace."""
    end_a, end_b = f"pv{uuid.uuid4().hex[:6]}a", f"pv{uuid.uuid4().hex[:6]}b"
    _ip("link", "add", end_a, "type", "veth", "peer", "name", end_b)
    for ns, end, addr in ((a, end_a, addr_a), (b, end_b, addr_b)):
        _ip("link", "set", end, "netns", ns.name)
        ns.run("ip", "addr", "add", f"{addr}/{prefix}", "dev", end)
        ns.run("ip", "link", "set", end, "up")


@contextlib.contextmanager
def ray_env() -> Iterator[dict[str, str]]:
    """Environment for every Ray process of one test: its own short temp dir (Ray's socket paths must be short),
    removed after; a fresh auth token; no usage reporting; nothing written to the home folder."""
    tmp = tempfile.mkdtemp(prefix="plr")
    try:
        yield dict(os.environ, RAY_TMPDIR=tmp, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token",
                   RAY_AUTH_TOKEN=secrets.token_hex(16))  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
