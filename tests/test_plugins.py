"""Plugins (``pelab.plugins``): a scheme written outside the repository, in a temporary folder, is used by name as
pelab's own (its options validated, its arms trained as stacks on the local backend and on Ray, bit for bit the
same), identified by the hash of its code (a changed plugin makes new runs; pelab's own runs keep their ids), and
never run unasked (a planted plugin that writes a marker file leaves none until the command line confirms it)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pelab import plugins
from pelab.config import RunConfig, build
from pelab.errors import PelabError

PLUGIN = '''
"""A test plugin: a per-head learned linear distance penalty, and a combiner that adds at half strength."""
import torch
from pydantic import Field
from torch import nn

from pelab.combine import Combiner, register as register_combiner
from pelab.frozen import Frozen
from pelab.positions import PositionScheme, register, relative_offsets

__version__ = "{version}"
{marker}

@register
class Decay(PositionScheme):
    name = "decay"
    description = "-slope_h |i - j|, slopes learned from decay_slope"
    hooks = ("attention: bias",)

    class Options(Frozen):
        decay_slope: float = Field({slope}, gt=0, le=10, description="decay: the slopes' starting value")

    def __init__(self, ctx, **options):
        super().__init__(ctx, **options)
        self.slope = nn.Parameter(torch.full((ctx.n_heads,), self.opts.decay_slope))

    def bias(self, q, k):
        d = relative_offsets(q, k).abs().to(self.slope.dtype)
        return -self.slope[:, None, None] * d[None]


@register_combiner
class HalfAdd(Combiner):
    name = "half_add"
    description = "x + p / 2"

    def forward(self, x, sides, positions=None):
        return x + 0.5 * sum(sides.values())
'''

STUDY = """
name = "plugin study"
seeds = [0, 1]
plugins = ["{plugin}"]
[task]
name = "reverse"
length = 5
vocab = 8
[model]
d = 16
n_heads = 2
[train]
steps = 10
eval_batches = 1
[[grid]]
name = "the plugin's scheme, at two slopes"
set = {{ "model.position.scheme" = "decay", "model.combine" = "none" }}
axes = {{ "model.position.decay_slope" = [0.25, 1.0] }}
[[grid]]
name = "the plugin's combiner beside add"
set = {{ "model.position.scheme" = "sinusoidal" }}
axes = {{ "model.combine" = ["half_add", "add"] }}
"""


def write_plugin(folder: Path, name: str = "my_pe", slope: float = 0.5, version: str = "0.1", marker: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    code = f"from pathlib import Path\nPath({marker!r}).write_text('ran')" if marker else ""
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(PLUGIN.format(version=version, slope=slope, marker=code)))
    return path


def write_study(folder: Path, plugin: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    path.write_text(STUDY.format(plugin=plugin))
    return path


def pelab(*args: str, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pelab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)  # fmt: skip


def rows(out: Path, what: str = "run_id, config, status, metrics, evals, curve, versions") -> list[tuple]:
    with sqlite3.connect(out / "results.sqlite") as conn:
        return conn.execute(f"SELECT {what} FROM runs ORDER BY run_id").fetchall()


@pytest.fixture
def loaded() -> Iterator[list[str]]:
    """Plugins loaded in this test process, unloaded after (the registries are process-wide)."""
    names: list[str] = []
    yield names
    for n in names:
        plugins.unload(n)


def load(path: Path, names: list[str]) -> plugins.Plugin:
    p = plugins.load(str(path))
    names.append(p.name)
    return p


# --- configs: by name, options validated, ids -------------------------------------------------------------------


def test_a_plugins_classes_and_options_are_used_by_name(tmp_path: Path, loaded: list[str]) -> None:
    from pelab.study.grid import settable_keys

    builtin = RunConfig().run_id
    p = load(write_plugin(tmp_path / "elsewhere"), loaded)
    assert p.version == "0.1" and p.provides == (("combine", "half_add"), ("position", "decay"))
    cfg = RunConfig(model={"position": {"scheme": "decay", "decay_slope": 0.25}, "combine": "none"})
    assert cfg.plugins == {"my_pe": p.sha256} and cfg.model.position.options() == {"decay_slope": 0.25}
    assert RunConfig(model={"position": {"scheme": "decay"}, "combine": "none"}).model.position.decay_slope == 0.5
    assert RunConfig().run_id == builtin and RunConfig().plugins is None  # pelab's own runs keep their ids
    assert json.loads(RunConfig().canonical_json()).keys() == {"task", "model", "train", "seed"}
    with pytest.raises(PelabError, match=r"^position\.decay_slope: Input should be greater than 0"):
        build(RunConfig, model={"position": {"scheme": "decay", "decay_slope": -1}, "combine": "none"})
    with pytest.raises(PelabError, match=r"^position\.decay_slope: not an option of scheme=rotary; allowed: "):
        build(RunConfig, model={"position": {"scheme": "rotary", "decay_slope": 1.0}, "combine": "none"})
    assert "model.position.decay_slope" in settable_keys()
    again = RunConfig.model_validate_json(cfg.model_dump_json())
    assert again == cfg and again.run_id == cfg.run_id


def test_changed_plugin_code_makes_another_run_id(tmp_path: Path, loaded: list[str]) -> None:
    path = write_plugin(tmp_path)
    load(path, loaded)
    spec = {"model": {"position": {"scheme": "decay"}, "combine": "none"}}
    before = RunConfig(**spec)
    plugins.unload(loaded.pop())
    path.write_text(path.read_text().replace("-slope_h", "- slope_h"))  # a comment's worth of change
    load(path, loaded)
    after = RunConfig(**spec)
    assert after.model == before.model and after.run_id != before.run_id
    with pytest.raises(PelabError, match=r"^plugins: this run was made by plugin my_pe at sha256 "):
        build(RunConfig, **json.loads(before.canonical_json()))  # a stored run of the old code is another run


def test_a_plugin_that_fails_is_one_line_naming_it_and_leaves_nothing_registered(tmp_path: Path) -> None:
    from pelab.positions import SCHEMES

    names = set(SCHEMES)
    cases = {
        "broken": ("import torch\nx = 1 / 0\n", r"^plugins: .*broken\.py: ZeroDivisionError: division by zero \(line"),
        "taken": ("from pelab.positions import PositionScheme, register\n@register\nclass R(PositionScheme):\n"
                  "    name = 'rotary'\n    description = 'mine'\n",
                  r"^plugins: .*taken\.py: RuntimeError: position name 'rotary' is taken \(by pelab\.positions"),
        "empty": ("x = 1\n", r"^plugins: .*empty\.py: registers no position scheme, combiner or task"),
        "clash": ("from pydantic import Field\nfrom pelab.frozen import Frozen\n"
                  "from pelab.positions import PositionScheme, register\n@register\nclass C(PositionScheme):\n"
                  "    name = 'clash'\n    description = 'mine'\n    class Options(Frozen):\n"
                  "        base: float = Field(3.0, gt=1, description='another base')\n",
                  r"^plugins: .*clash\.py: scheme 'clash': position option 'base' is declared differently by "),
        **{f"named{i}": ("from pelab.positions import PositionScheme, register\n@register\nclass N(PositionScheme):\n"
                         f"    name = {bad!r}\n    description = 'mine'\n",
                         r"^plugins: .*named\d\.py: position .*: a name is letters, digits and _ \. \+ -")
           for i, bad in enumerate([" ", "../../escaped", "x[/bold]", "my|pe", "a\x1b[31m"])},
    }  # fmt: skip
    for name, (code, message) in cases.items():
        (tmp_path / f"{name}.py").write_text(code)
        with pytest.raises(PelabError, match=message):
            plugins.load(str(tmp_path / f"{name}.py"))
        assert set(SCHEMES) == names and name not in sys.modules and name not in plugins.loaded()
    with pytest.raises(PelabError, match=r"^plugins: nothere\.py: no such file"):
        plugins.load("nothere.py", tmp_path)
    r = pelab("list", "--plugin", str(tmp_path / "taken.py"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"pelab: error: plugins: {tmp_path / 'taken.py'}: RuntimeError: position name 'rotary'")


def test_pelab_list_and_run_take_a_plugin(tmp_path: Path) -> None:
    path = write_plugin(tmp_path / "elsewhere")
    r = pelab("list", "--plugin", str(path))
    assert r.returncode == 0, r.stderr
    assert "decay (my_pe)" in r.stdout and "half_add (my_pe)" in r.stdout and "sha256" in r.stdout
    r = pelab("run", "--plugin", str(path), "--position", "decay", "--combine", "none", "--d", "16", "--heads", "2",
              "--steps", "5", "--length", "4", "--vocab", "6", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "done"


# --- a study: stacked seeds on the local backend, the record, the report ---------------------------------------------


def test_a_plugin_from_another_folder_trains_in_a_study_and_shows_in_the_report(
    tmp_path: Path, loaded: list[str]
) -> None:
    from pelab.train import train_group

    plugin = write_plugin(tmp_path / "theirs")
    study = write_study(tmp_path / "study", str(plugin))
    out = tmp_path / "out"
    r = pelab("study", str(study), "--out", str(out), "--plugin", str(plugin), "--workers", "2", "--threads", "1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    stored = rows(out)
    assert len(stored) == 8 and {s[2] for s in stored} == {"done"}
    sha = plugins.resolve(str(plugin)).sha256
    mine = [s for s in stored if json.loads(s[1])["model"]["combine"] != "add"]  # the plugin's scheme or combiner
    assert len(mine) == 6 and all(json.loads(s[1])["plugins"] == {"my_pe": sha} for s in mine)
    assert all("plugins" not in json.loads(s[1]) for s in stored if s not in mine)  # add + sinusoidal: pelab's own
    versions = [json.loads(s[6]) for s in mine]
    assert all(v["stack"] == "2" for v in versions)  # the two seeds trained as one stack, in a worker process
    record = json.loads(versions[0]["plugins"])[0]
    assert record == {"name": "my_pe", "file": str(plugin.resolve()), "sha256": sha, "version": "0.1",
                      "provides": ["combine:half_add", "position:decay"]}  # fmt: skip
    # bit for bit what this process trains with the same code: the worker ran exactly the plugin's bytes
    load(plugin, loaded)
    cfg = RunConfig.model_validate_json(mine[0][1])
    alone = train_group([cfg.model_copy(update={"seed": s}) for s in (0, 1)])[cfg.seed]
    assert alone.run_id == mine[0][0] and alone.metrics == json.loads(mine[0][3])
    assert alone.curve == json.loads(mine[0][5])
    # the report, the terminal's table and claims.json name the plugin and its hash
    md = (out / "report.md").read_text()
    assert f"| my_pe | {plugin.resolve()} | {sha[:12]} | 0.1 | combine half_add, position decay |" in md
    assert sha[:12] in (out / "report.html").read_text()
    assert "decay + none + decay_slope=0.25" in md and "decay + none + decay_slope=1" in md  # C17: two arms, not one
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())}
    assert claims["C17"]["plugins"][0]["sha256"] == sha
    assert "plugins" not in claims["C1"]  # a claim read off pelab's own sinusoid names no plugin
    r = pelab("results", str(out), "--plugin", str(plugin))
    assert r.returncode == 0 and f"plugin my_pe: {plugin.resolve()}, sha256 {sha[:12]}, version 0.1" in r.stdout


# --- nothing runs unasked ---------------------------------------------------------------------------------------------


def test_a_planted_plugin_runs_only_when_confirmed(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    plugin = write_plugin(tmp_path / "received", name="planted", marker=str(marker))
    study = write_study(tmp_path / "received", "planted.py")  # relative: from the study file's folder
    out = tmp_path / "out"
    r = pelab("study", str(study), "--out", str(out), "--no-report", cwd=tmp_path)
    assert r.returncode == 2 and not marker.exists() and not out.exists()
    sha = plugins.resolve(str(plugin)).sha256
    assert r.stderr == (
        f"pelab: error: plugins: study.toml runs code from planted.py (sha256 {sha[:12]}), and pelab runs a plugin "
        "only when you say so: add --plugin received/planted.py (or --trust-plugins)\n"
    )
    r = pelab("study", str(study), "--out", str(out), "--no-report", "--workers", "2", "--trust-plugins", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"pelab: plugins: running {plugin.resolve()} (sha256 {sha[:12]})" in r.stderr and marker.exists()
    marker.unlink()
    # the folder, received by someone else: report, results and study run none of it unconfirmed
    for args in (["report", str(out)], ["results", str(out)], ["study", str(study), "--out", str(out)]):
        r = pelab(*args, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--trust-plugins" in r.stderr, (args, r.stderr)
        assert not marker.exists(), args
    # another file of the same name: refused by its hash before any of it runs
    other = write_plugin(tmp_path / "other", name="planted", slope=0.75, marker=str(marker))
    r = pelab("results", str(out), "--plugin", str(other))
    assert (
        r.returncode == 2 and f"its sha256 {plugins.resolve(str(other)).sha256[:12]} is not the {sha[:12]}" in r.stderr
    )
    assert not marker.exists()
    r = pelab("results", str(out), "--plugin", str(plugin))
    assert r.returncode == 0 and marker.exists(), r.stderr
    marker.unlink()
    # the plugin's file gone: --trust-plugins runs the copy the folder kept, hash checked
    moved = tmp_path / "copy"
    shutil.copytree(out, moved)
    plugin.unlink()
    r = pelab("results", str(moved))
    assert r.returncode == 2 and "--plugin YOUR_COPY for planted" in r.stderr and "no longer there" in r.stderr
    r = pelab("results", str(moved), "--trust-plugins")
    assert r.returncode == 0 and marker.exists() and "planted" in r.stdout, r.stderr
    said = " ".join(r.stderr.split())
    assert f"running the folder's kept copy of {plugin.resolve()} (that file is gone" in said, r.stderr


def test_every_plugin_waiting_for_a_yes_is_named_in_one_line(tmp_path: Path) -> None:
    """A study of several plugins is confirmed in one try: the refusal names every file, before any code runs."""
    marker = tmp_path / "marker"
    a = plugins.resolve(str(write_plugin(tmp_path / "a", name="first_pe", marker=str(marker))))
    b = plugins.resolve(str(write_plugin(tmp_path / "b", name="second_pe", marker=str(marker))))
    with pytest.raises(PelabError) as e:
        plugins.gate([a, b], trust=False, what="study.toml")
    line = str(e.value)
    assert "\n" not in line and "first_pe.py" in line and "second_pe.py" in line, line
    assert line.count("--plugin ") == 2 and not marker.exists()


def test_a_changed_plugin_never_mixes_with_the_old_codes_runs(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path / "p")
    study = write_study(tmp_path / "p", "my_pe.py")
    out = tmp_path / "out"
    assert pelab("study", str(study), "--out", str(out), "--plugin", str(plugin), "--no-report").returncode == 0
    first = {s[0] for s in rows(out)}
    plugin.write_text(plugin.read_text().replace('"0.1"', '"0.2"'))
    r = pelab("study", str(study), "--out", str(out), "--plugin", str(plugin), "--no-report")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2 already stored, 6 to run" in r.stdout  # pelab's own arm stays; the plugin's arms are new runs
    assert "6 stored run(s) left out, made by plugin code that is not loaded now" in r.stderr
    assert len({s[0] for s in rows(out)} - first) == 6
    from pelab.study.store import Store

    with Store(out, create=False) as store:  # the old code stays beside its runs, source and all
        (now,), (before,) = store.plugin_records(), store.earlier_plugin_records()
    assert now["version"] == "0.2" and before["version"] == "0.1" and '"0.1"' in before["source"]
    made_by = {json.loads(json.loads(v)["plugins"])[0]["sha256"] for r, v in rows(out, "run_id, versions")
               if r in first and "plugins" in json.loads(v)}  # fmt: skip
    assert made_by == {before["sha256"]} and now["sha256"] != before["sha256"]


# --- Ray --------------------------------------------------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed: pip install 'pelab[ray]'")
@pytest.mark.xdist_group("ray")
def test_a_plugin_trains_on_ray_as_on_the_local_backend(tmp_path: Path) -> None:
    """In a network namespace (tests/netns.py, as tests/test_ray.py): the same study on a local Ray instance
    stores the same rows as the local backend, bit for bit; the workers got the plugin's code from the driver."""
    from netns import Netns, ray_env, unavailable

    why = unavailable()
    if why is not None:
        pytest.skip(why)

    plugin = write_plugin(tmp_path / "p")
    study = write_study(tmp_path / "p", "my_pe.py")
    local, ray_out = tmp_path / "local", tmp_path / "ray"
    args = ["--plugin", str(plugin), "--no-report", "--threads", "1"]
    r = pelab("study", str(study), "--out", str(local), "--workers", "2", *args)
    assert r.returncode == 0, r.stderr[-2000:]
    with ray_env() as env, Netns("plugin") as ns:
        argv = [sys.executable, "-m", "pelab", "study", str(study), "--out", str(ray_out), "--backend", "ray", *args]
        r = subprocess.run(ns.command(*argv), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    compared = "run_id, config, status, metrics, evals, curve"
    assert rows(ray_out, compared) == rows(local, compared) and len(rows(local)) == 8
    hosts = {h for (h,) in rows(ray_out, "host")}
    assert all(h.endswith("(127.0.0.1)") for h in hosts), hosts
