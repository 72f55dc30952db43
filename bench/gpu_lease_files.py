"""What bench/gpu_lease.sh reads and writes besides pelab's own commands: the machine's readout, the stored runs'
counts, the files it brings back and the check of those files against the device's limits.

    python bench/gpu_lease_files.py env FILE               # the device and its software, one line each
    python bench/gpu_lease_files.py stored FOLDER          # stored runs by status, one line
    python bench/gpu_lease_files.py done FOLDER            # how many are done (0 without a database)
    python bench/gpu_lease_files.py pack FOLDER OUT PHASES # OUT/results.sqlite.gz, claims.json, report.md,
                                                           # report.tar.gz, timings.json
    python bench/gpu_lease_files.py check OUT              # exit 1 when OUT breaks a limit, one line either way

The device tool brings back from OUT at most 8 files, 16 MiB each and 64 MiB together, no more than 2 folders
down, every file and folder named in letters, digits, '.', '_' and '-' alone (/work/.library/device/README.md);
``problems`` says which rule a folder breaks. No checkpoint ever goes into OUT.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

#: The device's limits on what comes back from OUT.
MAX_FILES = 8
MAX_FILE_BYTES = 16 * 2**20
MAX_TOTAL_BYTES = 64 * 2**20
MAX_FOLDERS_DOWN = 2
NAME = re.compile(r"[A-Za-z0-9._-]+")
#: What the lease brings back (pack), in OUT's top folder; the script adds lease.log and device.txt.
PACKED = ("results.sqlite.gz", "claims.json", "report.md", "report.tar.gz", "timings.json")
#: Beside the figures (figures/ and analyses/*/) in report.tar.gz: the report's other pages and the study's records.
REPORT_FILES = ("report.html", "claims.md", "sequential.json", "protocol.json")


def problems(out: Path) -> list[str]:
    """Every way OUT breaks the device's limits on what comes back, in words; [] when it keeps them all."""
    found: list[str] = []
    files = []
    for root, dirs, names in os.walk(out):
        rel = Path(root).relative_to(out)
        for name in (*dirs, *names):
            if not NAME.fullmatch(name):
                found.append(f"{(rel / name).as_posix()!r}: a name with characters other than letters, digits, . _ -")
        for name in names:
            path = Path(root) / name
            if path.is_symlink() or not path.is_file():
                found.append(f"{(rel / name).as_posix()}: not a plain file")
                continue
            files.append(path)
            if len(rel.parts) > MAX_FOLDERS_DOWN:
                found.append(f"{(rel / name).as_posix()}: more than {MAX_FOLDERS_DOWN} folders down")
            if path.stat().st_size > MAX_FILE_BYTES:
                found.append(f"{(rel / name).as_posix()}: {path.stat().st_size / 2**20:.1f} MiB, over 16 MiB")
    if len(files) > MAX_FILES:
        found.append(f"{len(files)} files, over {MAX_FILES}")
    total = sum(f.stat().st_size for f in files)
    if total > MAX_TOTAL_BYTES:
        found.append(f"{total / 2**20:.1f} MiB in all, over 64 MiB")
    return found


def check(out: Path) -> int:
    files = [p for p in out.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    found = problems(out)
    if found:
        print(f"out: OVER THE DEVICE'S LIMITS ({len(files)} files, {total / 2**20:.2f} MiB): " + "; ".join(found))
        return 1
    names = ", ".join(sorted(p.relative_to(out).as_posix() for p in files))
    print(f"out: {len(files)} files, {total / 2**20:.2f} MiB in all, within the device's limits "
          f"(at most {MAX_FILES} files, 16 MiB each, 64 MiB in all): {names}")  # fmt: skip
    return 0


def _run(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable ({type(e).__name__})"
    return (done.stdout.strip() or done.stderr.strip() or f"exit {done.returncode}").replace("\n", " | ")


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def env_lines() -> list[str]:
    """The device and its software: what docs/results-gpu.md states beside the numbers."""
    lines = [f"gpu: {_run(['nvidia-smi', '--query-gpu=name,memory.total,driver_version', '--format=csv,noheader'])}"]
    try:
        import torch

        cuda = torch.cuda.is_available()
        lines.append(f"torch: {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
                     f"CUDA available: {cuda}")  # fmt: skip
        if cuda:
            p = torch.cuda.get_device_properties(0)
            lines.append(f"device 0: {p.name}, {p.total_memory / 2**30:.1f} GiB, {p.multi_processor_count} SMs, "
                         f"capability {p.major}.{p.minor}, bf16: {torch.cuda.is_bf16_supported()}")  # fmt: skip
    except Exception as e:  # noqa: BLE001 - a readout says what it could not read
        lines.append(f"torch: not importable ({type(e).__name__}: {e})")
    lines.append(f"cpu: {cpu_model()}, {os.cpu_count()} cores")
    lines.append(f"python: {platform.python_version()} ({sys.executable})")
    try:
        import pelab
        from pelab.train import source_digest

        lines.append(f"pelab: {pelab.__version__}, source {source_digest()} (from {Path(pelab.__file__).parent})")
    except Exception as e:  # noqa: BLE001
        lines.append(f"pelab: not importable ({type(e).__name__}: {e})")
    commit = os.environ.get("LEASE_COMMIT") or _run(["git", "rev-parse", "--short", "HEAD"])
    lines.append(f"commit: {commit}")
    return lines


def stored(folder: Path) -> Counter[str]:
    """Stored runs by status ({} when there is no database yet)."""
    db = folder / "results.sqlite"
    if not db.is_file():
        return Counter()
    with sqlite3.connect(db) as conn:
        return Counter(dict(conn.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()))


def _copy_db(folder: Path, to: Path) -> None:
    """results.sqlite as one gzipped file, read through SQLite (the store is in WAL mode: a plain copy could miss
    the runs still in its log)."""
    with tempfile.TemporaryDirectory() as tmp:
        flat = Path(tmp) / "results.sqlite"
        src, dst = sqlite3.connect(folder / "results.sqlite"), sqlite3.connect(flat)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        with open(flat, "rb") as f, gzip.open(to, "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)


def read_phases(path: Path) -> list[dict[str, object]]:
    """The script's phases: name, seconds and exit status, one tab-separated line each."""
    out = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        name, seconds, rc = (line.split("\t") + ["", ""])[:3]
        out.append({"name": name, "seconds": int(seconds or 0), "rc": int(rc) if rc.lstrip("-").isdigit() else None})
    return out


def pack(folder: Path, out: Path, phases: Path) -> list[str]:
    """Write what the lease brings back into OUT (never a checkpoint): the database, the verdicts, the report's
    Markdown, its figures and other pages as one archive, and the phases' times. Returns the names written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if (folder / "results.sqlite").is_file():
        _copy_db(folder, out / "results.sqlite.gz")
        written.append("results.sqlite.gz")
    for name in ("claims.json", "report.md"):
        if (folder / name).is_file():
            shutil.copyfile(folder / name, out / name)
            written.append(name)
    # every figure the report links: its own (figures/) and the analyses' (analyses/NAME/*.png)
    members = sorted((folder / "figures").glob("*.png")) + sorted((folder / "analyses").glob("**/*.png"))
    members += [folder / n for n in REPORT_FILES if (folder / n).is_file()]
    if members:
        with tarfile.open(out / "report.tar.gz", "w:gz") as tar:
            for p in members:
                tar.add(p, arcname=p.relative_to(folder).as_posix())
        written.append("report.tar.gz")
    counts = stored(folder)
    timing = {
        "phases": read_phases(phases),
        "stored": dict(counts),
        "study_seconds": _meta(folder, "study_seconds"),
        "study": os.environ.get("LEASE_STUDY") or "--preset gpu",
        "device": os.environ.get("LEASE_DEVICE", "cuda"),
        "runs_per_gpu": os.environ.get("LEASE_RUNS_PER_GPU"),
        "budget_seconds": os.environ.get("LEASE_BUDGET"),
    }
    (out / "timings.json").write_text(json.dumps(timing, indent=1) + "\n")
    written.append("timings.json")
    return written


def _meta(folder: Path, key: str) -> str | None:
    db = folder / "results.sqlite"
    if not db.is_file():
        return None
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def main(argv: list[str]) -> int:
    what, *args = argv or ["?"]
    if what == "env" and len(args) == 1:
        text = "\n".join(env_lines()) + "\n"
        Path(args[0]).write_text(text)
        print(text, end="")
        return 0
    if what == "stored" and len(args) == 1:
        counts = stored(Path(args[0]))
        print("stored runs: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"))
        return 0
    if what == "done" and len(args) == 1:
        print(stored(Path(args[0])).get("done", 0))
        return 0
    if what == "pack" and len(args) == 3:
        print("packed: " + ", ".join(pack(Path(args[0]), Path(args[1]), Path(args[2]))))
        return 0
    if what == "check" and len(args) == 1:
        return check(Path(args[0]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
