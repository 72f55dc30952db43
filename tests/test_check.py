"""``pelab check`` (``pelab.conformance``): pelab's own schemes and combiners pass the very checks a plugin is held
to, and a deliberately broken plugin fails the one check that names its fault, and only that one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pelab.combine import COMBINERS
from pelab.conformance import FAILED, NOT_APPLICABLE, PASSED, SKIPPED, check_combiner, check_scheme, check_task
from pelab.positions import SCHEMES


@pytest.mark.parametrize("name", list(SCHEMES))
def test_every_builtin_scheme_passes(name: str) -> None:
    results = check_scheme(name)
    bad = [(r.check, r.detail) for r in results if r.status not in (PASSED, NOT_APPLICABLE)]
    assert not bad, bad
    assert {r.check for r in results if r.status == PASSED} >= {"shapes and dtypes", "gradients", "stacked seeds"}


@pytest.mark.parametrize("name", list(COMBINERS))
def test_every_builtin_combiner_passes(name: str) -> None:
    bad = [(r.check, r.detail) for r in check_combiner(name) if r.status not in (PASSED, NOT_APPLICABLE)]
    assert not bad, bad


@pytest.mark.parametrize("name", ["reverse", "copy", "cell2d"])
def test_builtin_tasks_pass(name: str) -> None:
    bad = [(r.check, r.detail) for r in check_task(name) if r.status not in (PASSED, NOT_APPLICABLE)]
    assert not bad, bad


BROKEN = {
    # the table of a fixed sinusoid over 0..T-1, whatever positions it is asked for
    "table ignores positions": ("hooks follow positions", '''
        import torch
        from pelab.positions import PositionScheme, register
        from pelab.positions.sinusoidal import sinusoid_table

        @register
        class Ignores(PositionScheme):
            name = "ignores"
            description = "a table of slots, not of positions"
            has_table = True
            hooks = ("input",)

            def __init__(self, ctx):
                super().__init__(ctx)
                self.register_buffer("_dtype", torch.empty(0), persistent=False)  # follows .double()

            def table(self, positions):
                t = sinusoid_table(torch.arange(len(positions)), self.ctx.width)
                return t.to(positions.device, self._dtype.dtype)
    '''),
    # says d_model = d, gives d + d_position
    "combiner of the wrong width": ("shapes and dtypes", '''
        import torch
        from pelab.combine import Combiner, register

        @register
        class TooWide(Combiner):
            name = "toowide"
            description = "[x ; p] while claiming width d"

            def forward(self, x, sides, positions=None):
                return torch.cat([x, *sides.values()], dim=-1)
    '''),
    # a bias that is finite forward but whose gradient is 0 * inf = nan on the diagonal
    "non-finite gradients": ("gradients", '''
        import torch
        from torch import nn
        from pelab.positions import PositionScheme, register
        from pelab.positions.base import relative_offsets

        @register
        class LogDistance(PositionScheme):
            name = "logdistance"
            description = "w * log|i - j|, zero on the diagonal"
            hooks = ("attention: bias",)

            def __init__(self, ctx):
                super().__init__(ctx)
                self.w = nn.Parameter(torch.full((ctx.n_heads, 1, 1), -0.5))

            def bias(self, q, k):
                d = relative_offsets(q, k).abs().to(self.w.dtype)
                logs = self.w * torch.log(d)
                return torch.where(d > 0, logs, torch.zeros_like(logs))
    '''),
    # a learned table that says it extrapolates, and wraps around silently past its rows
    "a false claim to extrapolate": ("longer inputs", '''
        import torch
        from torch import nn
        from pelab.positions import PositionScheme, register

        @register
        class Wraps(PositionScheme):
            name = "wraps"
            description = "a learned table that wraps past max_len"
            has_table = True
            hooks = ("input",)

            def __init__(self, ctx):
                super().__init__(ctx)
                self.weight = nn.Parameter(torch.randn(ctx.max_len, ctx.width))

            def table(self, positions):
                return self.weight[positions % self.ctx.max_len] + 0.0 * positions[:, None]
    '''),
}  # fmt: skip


@pytest.mark.parametrize("fault", list(BROKEN))
def test_a_broken_plugin_fails_the_named_check_and_only_that_one(fault: str, load_plugin) -> None:
    from pelab.conformance import check_classes

    check, text = BROKEN[fault]
    plugin = load_plugin(f"broken_{abs(hash(fault)) % 10**6}", text)
    results = check_classes(list(plugin.provides))
    failed = [r.check for r in results if r.status == FAILED]
    assert failed == [check], [(r.check, r.status, r.detail) for r in results]
    skipped = {r.status for r in results if r.check != check}
    assert skipped <= {PASSED, NOT_APPLICABLE, SKIPPED}


def test_pelab_check_prints_a_table_and_exits_1_on_a_failure(tmp_path: Path) -> None:
    check, text = BROKEN["table ignores positions"]
    path = tmp_path / "ignores.py"
    path.write_text(textwrap.dedent(text))
    r = subprocess.run([sys.executable, "-m", "pelab", "check", str(path)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if "position ignores" in line]
    assert len(lines) == 9 and sum("failed" in line for line in lines) == 1, r.stdout
    assert "hooks follow positions" in next(line for line in lines if "failed" in line)
    assert "8 passed, 1 failed (ignores: hooks follow positions)" in r.stdout
    ok = subprocess.run([sys.executable, "-m", "pelab", "check", "--scheme", "alibi"], capture_output=True, text=True,
                        timeout=300)  # fmt: skip
    assert ok.returncode == 0 and "9 passed, 0 failed" in ok.stdout, ok.stdout + ok.stderr
