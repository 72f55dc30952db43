"""Shared test settings.

The models under test are tiny, so intra-op threading only adds overhead (on a
2-core machine it made a forward pass ~100x slower); one thread keeps the whole
suite fast without changing any result.

The suite runs on pytest-xdist's workers (pyproject: ``-n auto --dist loadgroup``): many tests spend part
of their time starting processes and waiting on them, which a second test fills (on 2 cores, 16 min against
20 serially). A test file stays on one worker, so a module's fixture is built once; every test that starts
Ray is in one group, ``ray``, so no two Ray instances start at once; the slowest groups start first.
"""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

torch.set_num_threads(1)

# A suite started in the background of a non-interactive shell (`cmd &`) inherits SIGINT ignored, and an ignored
# signal stays ignored in every process it starts: the Ctrl-C tests' studies would never see their SIGINT and run
# to the end. A handler (unlike SIG_IGN) is reset to the default on exec, so the studies get Ctrl-C as a user's.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def load_plugin(tmp_path: Path) -> Iterator[Callable[[str, str], Any]]:
    """Load a plugin written as text (``load(name, text)``), as ``--plugin FILE`` would; unloaded afterwards, so no
    other test sees its classes."""
    from pelab import plugins

    loaded: list[str] = []

    def load(name: str, text: str) -> Any:
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(text))
        plugin = plugins.load(str(path))
        loaded.append(plugin.name)
        return plugin

    yield load
    for name in loaded:
        plugins.unload(name)


#: xdist workers when ``-n auto``: one per core, at most this many (each test may start a study with 2 workers).
MAX_XDIST_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return max(1, min(os.cpu_count() or 1, MAX_XDIST_WORKERS))


#: The groups that take longest (CI's --durations), handed out first (``--no-loadscope-reorder`` keeps this
#: order), so that no long group starts last while the other worker sits idle. A stale list costs minutes, not
#: correctness.
SLOW_FIRST = ("ray", "test_killwrite", "test_report", "test_study", "test_rounds", "test_pretrained", "test_layers",
              "test_plugins", "test_planted", "test_gpu_session", "test_rates")  # fmt: skip


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test without a group joins its file's group: ``--dist loadgroup`` then sends a file whole to one
    worker (its module fixtures built once), while the tests marked ``xdist_group("ray")`` run one at a time."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    items.sort(key=_rank)  # stable: a file's tests keep their order


def _rank(item: pytest.Item) -> int:
    marker = item.get_closest_marker("xdist_group")
    name = str(marker.args[0] if marker and marker.args else "")
    return SLOW_FIRST.index(name) if name in SLOW_FIRST else len(SLOW_FIRST)
