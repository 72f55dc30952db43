"""Write docs/results-gpu.md, "what pelab finds on one GPU", from the files one lease of the gpu preset brought back.

bench/gpu_lease.sh leaves in its OUT folder results.sqlite.gz, claims.json, report.md, report.tar.gz, timings.json,
device.txt and lease.log; the device tool copies them here. Nothing on the page is typed by hand: the answer, the
gap-against-width figure and the published-vs-measured table are the report's first screen (report.md), the verdict
table is claims.json, the device, its driver and the software are device.txt, the times of the study and the report
are timings.json, and the rest is computed from the runs themselves (results.sqlite.gz): how far each width's
learning curves were from flat (the last fifth of training's gain in validation loss, against the 2% criterion),
and runs per GPU-minute against how many groups shared the GPU, beside what bench/gpu_cost.py had said. The run ids
go to docs/results-gpu/run_ids.txt, so tests/test_docs_results_gpu.py can check that the code still computes them.

    python docs/make_results_gpu.py LEASE_OUT --commit 1a2b3c4 [--to docs]

No page exists until a lease has run the preset: this script never writes one from anything else.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import re
import sqlite3
import sys
import tarfile
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

DOCS = Path(__file__).parent
ROOT = DOCS.parent
#: The page's figures live here, beside run_ids.txt.
FOLDER = "results-gpu"
#: The report's section the page keeps: its first screen.
FIRST = "## What this run says"
#: The project's criterion for a learning curve that has levelled off.
FLAT = 0.02
#: The language-model tasks, and the kind of model each trains.
KINDS = {"charlm": "causal", "mlm": "masked"}


def _module(name: str, path: Path) -> Any:
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def make_results() -> Any:
    """docs/make_results.py: the verdict table and the key numbers, written once for both pages."""
    return _module("make_results", DOCS / "make_results.py")


def gpu_cost() -> Any:
    return _module("gpu_cost", ROOT / "bench" / "gpu_cost.py")


# --- what the lease brought back ---------------------------------------------------------------------------------
def read_rows(lease: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every stored run (config, metrics and curve parsed) and the study's meta, from results.sqlite.gz."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "results.sqlite"
        db.write_bytes(gzip.decompress((lease / "results.sqlite.gz").read_bytes()))
        conn = sqlite3.connect(db)
        conn.row_factory = sqlite3.Row
        try:
            rows = [dict(r) for r in conn.execute("SELECT * FROM runs")]
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        finally:
            conn.close()
    for r in rows:
        for k in ("config", "metrics", "curve", "versions"):
            if isinstance(r.get(k), str):
                r[k] = json.loads(r[k])
    return rows, meta


def device_facts(lease: Path) -> dict[str, str]:
    """device.txt's lines, by their label (gpu, torch, device 0, cpu, python, pelab, commit)."""
    out = {}
    for line in (lease / "device.txt").read_text().splitlines():
        key, _, value = line.partition(": ")
        out[key.strip()] = value.strip()
    return out


def phase_seconds(timings: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: int(p["seconds"]) for p in timings.get("phases", [])}


def minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


# --- flat curves -------------------------------------------------------------------------------------------------
def last_fifth(curve: list[dict[str, float]]) -> float | None:
    """How much the last fifth of training lowered validation loss, as a share: 1 - loss(end) / loss(at 80%), on
    the same held-out windows at every point (the report's scale sentence reads it the same way)."""
    vals = [p.get("val_loss") for p in curve]
    if len(vals) < 5 or any(v is None for v in vals):
        return None
    at = round(0.8 * (len(vals) - 1))
    return 1 - float(vals[-1]) / float(vals[at])


def flatness(rows: list[dict[str, Any]]) -> list[tuple[str, int, int, int, float, float]]:
    """Per model kind, context and model width (the model's own: concat_wide's is d + d/4), over the done
    language-model runs: (kind, context, width, runs, mean gain of the last fifth, largest gain)."""
    from pelab.config import RunConfig

    gains: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for r in rows:
        if r["status"] != "done" or r["config"]["task"]["name"] not in KINDS:
            continue
        g = last_fifth(r["curve"])
        if g is not None:
            cfg = RunConfig.model_validate(r["config"])
            gains[(KINDS[cfg.task.name], cfg.task.length, cfg.model.widths().model)].append(g)
    return [(k, t, w, len(v), sum(v) / len(v), max(v)) for (k, t, w), v in sorted(gains.items())]


def flatness_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | context | width | runs | last fifth's gain in validation loss: mean | largest | flat (under 2%)? |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, context, width, n, mean, most in flatness(rows):
        flat = "yes" if most < FLAT else ("on average" if mean < FLAT else "no")
        lines.append(f"| {kind} | {context} | {width} | {n} | {100 * mean:.1f}% | {100 * most:.1f}% | {flat} |")
    return "\n".join(lines) + "\n"


# --- throughput against concurrency ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Group:
    """One stacked group as the store recorded it: its runs' seeds trained together from ``start`` to ``end``."""

    start: float
    end: float
    runs: int
    seed_steps: int


def groups(rows: list[dict[str, Any]]) -> list[Group]:
    """The groups of the done and diverged runs: runs of one arm stored within a second of each other, each run's
    ``seconds`` its share of the group's wall time (``pelab.train.train_group``), so a group ran for seconds x its
    stack from its end (``finished_at``) back."""
    from pelab.config import RunConfig

    by: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["status"] not in ("done", "diverged") or not r.get("finished_at"):
            continue
        end = datetime.fromisoformat(r["finished_at"]).timestamp()
        arm = RunConfig.model_validate(r["config"]).arm_id
        by[(arm, round(end))].append(r | {"_end": end})
    out = []
    for members in by.values():
        stack = max(len(members), int((members[0].get("versions") or {}).get("stack", len(members))))
        end = max(m["_end"] for m in members)
        wall = max(float(m["seconds"] or 0.0) for m in members) * stack
        steps = sum(int(m["config"]["train"]["steps"]) for m in members)
        out.append(Group(end - wall, end, len(members), steps))
    return sorted(out, key=lambda g: g.start)


def by_concurrency(gs: list[Group]) -> list[tuple[int, float, float, float]]:
    """(groups in flight, seconds at that many, runs per minute, seed-steps per second): each group's runs and
    seed-steps spread evenly over its lifetime, summed over the stretches when k groups shared the GPU."""
    edges = sorted({t for g in gs for t in (g.start, g.end)})
    spent: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for a, b in zip(edges, edges[1:], strict=False):
        live = [g for g in gs if g.start < b and g.end > a]
        if not live:
            continue
        cell = spent[len(live)]
        cell[0] += b - a
        for g in live:
            share = (b - a) / max(g.end - g.start, 1e-9)
            cell[1] += g.runs * share
            cell[2] += g.seed_steps * share
    return [(k, s, 60 * runs / s, steps / s) for k, (s, runs, steps) in sorted(spent.items()) if s > 0]


def throughput_table(rows: list[dict[str, Any]], study_seconds: float | None) -> str:
    gs = groups(rows)
    done = sum(r["status"] == "done" for r in rows)
    lines = []
    if study_seconds:
        lines.append(f"{done} runs done in {minutes(study_seconds)} of study: {60 * done / study_seconds:.1f} runs "
                     "per GPU-minute over the whole study (its start and its tail included).\n")  # fmt: skip
    lines += [
        "| groups sharing the GPU | minutes | runs per GPU-minute | seed-steps per second |",
        "|---|---|---|---|",
    ]
    for k, s, rpm, sps in by_concurrency(gs):
        lines.append(f"| {k} | {s / 60:.1f} | {rpm:.1f} | {sps:.0f} |")
    return "\n".join(lines) + "\n"


def modelled_seconds(meta: dict[str, str], runs_per_gpu: int) -> float | None:
    """What bench/gpu_cost.py says the stored study takes, for the page to set beside the measured time."""
    text = meta.get("study")
    if not text:
        return None
    gc = gpu_cost()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "study.toml"
        path.write_text(text)
        tiers = gc.study_tiers(gc.load(path), runs_per_gpu)
    return tiers[-1].ends_at if tiers else None


# --- the page ----------------------------------------------------------------------------------------------------
def first_screen_raw(report_md: str) -> str:
    """The report's first screen as it wrote it: its answer, figures and published vs measured; where the report
    has no such heading, everything between its title and its list of claims."""
    parts = re.split(r"(?m)^(?=## )", report_md)
    kept = "".join(p for p in parts if p.startswith(FIRST))
    return kept or report_md.split("## Every claim")[0].split("\n", 1)[-1]


def first_screen(report_md: str) -> str:
    """The first screen with its links made to work from docs/ (figures beside the page, claims in claims.md)."""
    text = first_screen_raw(report_md).replace(FIRST, "## The answer on one GPU", 1)
    text = re.sub(r"\]\((?:figures|analyses/[\w.-]+)/([\w.-]+\.png)\)", rf"]({FOLDER}/\1)", text)
    return re.sub(r"\]\(#(c\d+)\)", r"](claims.md#\1)", text).rstrip() + "\n"


def copy_figures(lease: Path, to: Path, report_md: str) -> list[str]:
    """The figures the first screen links, and gap-lm.png, from report.tar.gz into docs/results-gpu/."""
    wanted = set(re.findall(r"\]\((?:figures|analyses/[\w.-]+)/([\w.-]+\.png)\)", first_screen_raw(report_md)))
    wanted.add("gap-lm.png")
    copied = []
    with tarfile.open(lease / "report.tar.gz") as tar:
        for m in tar.getmembers():
            name = Path(m.name).name
            if m.isfile() and name in wanted and name not in copied:
                data = tar.extractfile(m)
                assert data is not None
                (to / name).write_bytes(data.read())
                copied.append(name)
    return copied


def write_page(lease: Path, to: Path, commit: str) -> Path:
    from pelab.study.grid import parse_study

    rows, meta = read_rows(lease)
    timings = json.loads((lease / "timings.json").read_text())
    device = device_facts(lease)
    phases = phase_seconds(timings)
    report_md = (lease / "report.md").read_text()
    claims = json.loads((lease / "claims.json").read_text())
    figures = to / FOLDER
    figures.mkdir(parents=True, exist_ok=True)
    copied = copy_figures(lease, figures, report_md)
    done = sorted(r["run_id"] for r in rows if r["status"] == "done")
    (figures / "run_ids.txt").write_text("\n".join(done) + "\n")
    study = parse_study(meta["study"]) if meta.get("study") else None
    planned = len(study.runs) if study else None
    study_seconds = float(meta["study_seconds"]) if meta.get("study_seconds") else phases.get("study")
    runs_per_gpu = int(timings.get("runs_per_gpu") or 4)
    modelled = modelled_seconds(meta, runs_per_gpu)
    versions = next((r["versions"] for r in rows if r.get("versions")), {})
    complete = planned is not None and len(done) >= planned
    tests = next((line for line in (lease / "lease.log").read_text().splitlines() if line.startswith("tests: ")), "")
    provenance = [
        "| | |",
        "|---|---|",
        f"| command | `bash bench/gpu_lease.sh OUT` (`{meta.get('command', 'pelab study --preset gpu')}`), "
        "then `pelab report` |",
        f"| commit | `{commit}` (pelab source {versions.get('pelab_source', '?')}) |",
        f"| GPU | {device.get('gpu', '?')} (name, memory, driver); {device.get('device 0', '')} |",
        f"| software | torch {device.get('torch', '?')}; Python {versions.get('python', '?')} |",
        f"| CPU | {device.get('cpu', '?')} |",
        f"| CUDA tests | {tests.removeprefix('tests: ') or 'not run'} |",
        f"| study | {minutes(study_seconds or 0)}"
        + (f" (bench/gpu_cost.py had said {minutes(modelled)})" if modelled else "")
        + f"; {runs_per_gpu} processes sharing the GPU |",
        f"| report | {minutes(phases.get('report', 0))} |",
        f"| runs | {len(done)} done" + (f" of {planned}" if planned else "")
        + ("" if complete else " (the study's time box stopped it; the report reads the runs it has)")
        + f"; run ids in [{FOLDER}/run_ids.txt]({FOLDER}/run_ids.txt) |",
    ]  # fmt: skip
    page = [
        "# What pelab finds on one GPU",
        "",
        "The gpu preset's study (`pelab/presets/gpu.toml`: causal and masked byte-level language models on English "
        "prose, d=128 to 512, add against concatenate on 5 confirmatory seeds; C7 and C18 at their best rate), run "
        "in one lease of one GPU by `bench/gpu_lease.sh` (docs/gpu.md), and its report's first screen and verdicts, "
        "unedited. tests/test_docs_results_gpu.py fails when the code no longer computes these runs' ids (the page "
        "is then stale: run a lease again and this script).",
        "",
        *provenance,
        "",
        first_screen(report_md),
    ]
    if "gap-lm.png" in copied and f"]({FOLDER}/gap-lm.png)" not in page[-1]:
        page += ["![Concatenating against adding in language models](results-gpu/gap-lm.png)", ""]
    page += [
        "## How far from flat",
        "",
        "The project's criterion for a curve that has levelled off: the last fifth of training lowers validation "
        "loss (the same held-out windows at every point) by under 2%. Per model kind, context (bytes) and model "
        "width:",
        "",
        flatness_table(rows),
        "## The verdicts",
        "",
        make_results().verdict_table(claims),
        "## Runs per GPU-minute",
        "",
        throughput_table(rows, study_seconds),
        "*From the stored runs: each group (one arm's seeds, one stack) ran for its runs' seconds times its stack "
        "before it was stored; its runs and seed-steps are spread evenly over that time. bench/gpu_cost.py's "
        "constants are what this table corrects.*",
        "",
    ]
    out = to / "results-gpu.md"
    out.write_text("\n".join(page))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("lease", type=Path, help="the files bench/gpu_lease.sh left in OUT, as the device returned them")
    p.add_argument("--to", type=Path, default=DOCS, help="the docs folder")
    p.add_argument("--commit", required=True, help="the commit the lease ran (the device machine has no .git)")
    a = p.parse_args()
    print(write_page(a.lease, a.to, a.commit))


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    main()
