"""pelab's layers (pyproject.toml, ``[tool.importlinter]``): imports run downward only, checked by import-linter.

The second test plants an upward import in a copy of the package, so the contract is shown to fail when it
should and not merely to pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"]


def lint(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([*LINT, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_imports_run_downward_only() -> None:
    r = lint(ROOT, ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "4 kept, 0 broken" in r.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "pelab", tmp_path / "pelab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "pelab" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _late() -> None:\n    import pelab.report.build  # noqa: F401\n")
    r = lint(tmp_path, tmp_path)
    assert r.returncode != 0 and "BROKEN" in r.stdout, r.stdout[-3000:]
    assert "pelab.errors -> pelab.report.build" in r.stdout


def test_a_circle_breaks_the_contract(tmp_path: Path) -> None:
    """Two siblings that import each other (study/estimate.py and study/groups.py once did, both lazily) break the
    acyclic contract, however deep inside a function the import hides."""
    shutil.copytree(ROOT / "pelab", tmp_path / "pelab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    estimate = tmp_path / "pelab" / "study" / "estimate.py"
    late = "\n\ndef _late() -> None:\n    import pelab.study.groups  # noqa: F401\n"
    estimate.write_text(estimate.read_text() + late)
    r = lint(tmp_path, tmp_path)
    assert r.returncode != 0 and "No cycles are allowed in pelab.study." in r.stdout, r.stdout[-3000:]


def test_the_command_line_is_small_modules() -> None:
    """One module per command (or a few small ones together), none past 400 lines: the CLI does not grow back
    into one file."""
    for module in (ROOT / "pelab" / "cli").glob("*.py"):
        assert len(module.read_text().splitlines()) <= 400, module.name


BEFORE = ROOT / "tests" / "data" / "before_layers"  # stored by pelab at 6273ba7, before the modules moved


def test_a_folder_stored_before_the_layers_moved_keeps_its_run_ids(tmp_path: Path) -> None:
    """Moving TaskConfig, the registries and the loaders changed no config's canonical JSON, so no run id: a
    study folder written before still names its runs. Its runs were trained one at a time, before stacked
    training, so resuming trains them again with the current computation rather than mix the two."""
    import json
    import sqlite3

    from pelab.study.grid import parse_study
    from pelab.study.store import DB_NAME

    with sqlite3.connect(BEFORE / DB_NAME) as conn:
        done = conn.execute("SELECT run_id, config FROM runs WHERE status = 'done'")
        configs = {r[0]: json.loads(r[1]) for r in done}
    stored = set(configs)
    study = BEFORE / "study.toml"
    runs = parse_study(study.read_text()).runs
    # every id is kept but the language models': since their default corpus became English prose (issue 38) their
    # configs name it, where these stored ones leave the corpus unset (Python's stdlib, which an unset corpus still
    # reads), so they are other runs, by design
    text = {r for r, c in configs.items() if c["task"]["name"] in ("charlm", "mlm")}
    assert text and all(configs[r]["task"].get("corpus") is None for r in text)
    assert {cfg.run_id for cfg in runs if cfg.task.name not in ("charlm", "mlm")} == stored - text
    assert {cfg.task.corpus for cfg in runs if cfg.task.name in ("charlm", "mlm")} == {"prose"}
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(BEFORE / DB_NAME, out / DB_NAME)
    cmd = [sys.executable, "-m", "pelab", "study", str(study), "--out", str(out), "--no-report", "--workers", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{len(stored - text)} stored run(s) were trained by an older computation" in r.stdout
    assert f"{len(stored)} runs, 0 already stored, {len(stored)} to run" in r.stdout
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert f"{len(stored)} runs, {len(stored)} already stored, 0 to run" in r.stdout, r.stdout


def test_run_records_import_no_torch() -> None:
    code = "import sys, pelab.records; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
