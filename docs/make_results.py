"""Write docs/results.md, "what pelab finds at the full budget", from a finished study folder.

Nothing on the page is typed by hand: the answer, the figure and the published-vs-measured table are the study's
own report.md (its first screen), the verdict table is its claims.json, and the provenance (command, commit, CPU,
wall time) is what the person who ran it passes here. The run ids of every stored run go to
docs/results/run_ids.txt, so tests/test_docs_results.py can check that the current code still computes them: the
page cannot go stale silently when a change moves the runs it reports.

    python docs/make_results.py pelab-out/full --command "pelab study --preset full" \
        --commit 170220a --cpu "AMD EPYC, 2 cores" --wall "1 h 32 min" [--to docs]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
from pathlib import Path

#: The figures copied beside the page: the answer's overview, then the central claims' forest plots.
FIGURES = ("overview-forest", "forest-c6", "forest-c9", "forest-c7", "forest-c18", "forest-c2")
#: The preset the page reports.
FULL = Path(__file__).parents[1] / "pelab" / "presets" / "full.toml"
#: The report's section the page keeps: its first screen (the answer, the overview figure, published vs measured).
KEEP = ("## What this run says",)


def own_seeds() -> str:
    """"; grid 'X': its own 30 seeds (200–229), ..." for the preset's grids with their own seeds."""
    from pelab.study.design import seed_span
    from pelab.study.grid import load_study

    grids = [g for g in load_study(FULL).grids if g.seeds]
    return "".join(
        f"; grid '{g.name}': its own {len(g.seeds)} seeds ({seed_span(g.seeds)}), read once without interim looks"
        for g in grids
    )


def key_number(key: str, limit: int = 140) -> str:
    """A claim's key figure down to its number: up to the end of its interval and unit ("concat_split vs add
    (task=reverse, …): A − B +62.0 pp [+35.5 pp, +88.5 pp] accuracy"), without the level and rule prose the
    report gives in full; else its first clause."""
    text = " ".join(key.split())
    m = re.match(r"^(.*?\[[^\]]*\][^(;]*)", text)
    short = (m.group(1) if m else text.split(";")[0]).strip().rstrip(",")
    return short if len(short) <= limit else short[: limit - 1] + "…"


def sections(report_md: str) -> str:
    """The report's first screen and verdict list, with links made to work from docs/."""
    parts = re.split(r"(?m)^(?=## )", report_md)
    kept = [p for p in parts if p.startswith(KEEP)]
    text = "\n".join(p.rstrip() + "\n" for p in kept)
    text = text.replace("## What this run says", "## The answer at the full budget", 1)
    text = re.sub(r"\]\(figures/([\w.-]+\.png)\)", r"](results/\1)", text)
    text = re.sub(r"\]\(#(c\d+)\)", r"](claims.md#\1)", text)  # a claim's rule, in docs/claims.md
    return text


def verdict_table(claims: list[dict]) -> str:
    from pelab.report.catalog import all_claims

    titles = {c.id: c.title for c in all_claims()}
    lines = ["| claim | verdict | key number (95% interval) |", "|---|---|---|"]
    for c in claims:
        figure = key_number(str(c.get("key", "")))
        res = c.get("resolution")
        if isinstance(res, dict) and c["verdict"] in ("inconclusive at this budget", "no information"):
            figure = f"{figure}; {res['text']}" if figure else res["text"]
        cell = figure.replace("|", "\\|")
        link = f"[{c['id']}](claims.md#{c['id'].lower()}) {titles.get(c['id'], '')}"
        lines.append(f"| {link} | {c['verdict']} | {cell} |")
    return "\n".join(lines) + "\n"


def run_ids(folder: Path, preset: Path = FULL) -> list[str]:
    """The finished runs the report read: those of the preset's design as the folder's rounds set it
    (``sequential.json``). A store may hold more (a round begun under other decisions, then interrupted); they
    are no part of this study, so the page neither counts nor lists them."""
    from pelab.study.design import load_design
    from pelab.study.grid import load_study

    study, _ = load_design(folder, load_study(preset))
    planned = {r.run_id for r in study.runs}
    with sqlite3.connect(folder / "results.sqlite") as conn:
        done = {r[0] for r in conn.execute("SELECT run_id FROM runs WHERE status = 'done'")}
    return sorted(done & planned)


def write_page(folder: Path, to: Path, command: str, commit: str, cpu: str, wall: str) -> Path:
    report_md = (folder / "report.md").read_text()
    claims = json.loads((folder / "claims.json").read_text())
    ids = run_ids(folder)
    seq = json.loads((folder / "sequential.json").read_text()) if (folder / "sequential.json").exists() else {}
    design = seq.get("design", {})
    figures = to / "results"
    figures.mkdir(parents=True, exist_ok=True)
    for name in FIGURES:
        src = folder / "figures" / f"{name}.png"
        if src.exists():
            shutil.copyfile(src, figures / src.name)
    (figures / "run_ids.txt").write_text("\n".join(ids) + "\n")
    provenance = [
        "| | |",
        "|---|---|",
        f"| command | `{command}` (from a fresh clone, the README's install) |",
        f"| commit | `{commit}` |",
        f"| CPU | {cpu} |",
        f"| wall time | {wall} |",
        f"| runs | {len(ids)} finished; run ids in [results/run_ids.txt](results/run_ids.txt) |",
    ]
    if design:
        provenance.append(
            f"| seeds | {len(design['seeds'])} per arm to start, {design['step']} more at a time to arms whose "
            f"comparisons of {', '.join(design['claims'])} were still open, at most {design['max_seeds']} "
            f"({design['spending']} alpha spending; rounds: {len(seq.get('rounds', []))}){own_seeds()} |"
        )
    page = [
        "# What pelab finds at the full budget",
        "",
        "The full preset's study (`pelab/presets/full.toml`), from a fresh clone, and its report's first "
        "screen and verdicts, unedited. Verdicts hold at this scale only (small models, short training, 2 CPU "
        "cores); rerun it to check them, or change the preset to ask your own question. "
        "tests/test_docs_results.py fails when the code no longer computes these runs' ids (the page is then "
        "stale: rerun the command and this script).",
        "",
        *provenance,
        "",
        sections(report_md),
        "## The verdicts",
        "",
        verdict_table(claims),
        "*key number: the comparison that decided the claim (A − B, paired over seeds, at the level the claim's "
        "rule read), else the claim's measurement; an open claim adds its resolution, what its intervals do "
        "establish. Every rule: [claims.md](claims.md).*",
        "",
        "## The central claims' comparisons",
        "",
    ]
    for name in FIGURES[1:]:
        if (figures / f"{name}.png").exists():
            page.append(f"![{name}](results/{name}.png)\n")
    out = to / "results.md"
    out.write_text("\n".join(page))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path, help="a finished study folder (pelab study --preset full)")
    p.add_argument("--to", type=Path, default=Path(__file__).parent, help="the docs folder")
    p.add_argument("--command", required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--cpu", required=True)
    p.add_argument("--wall", required=True)
    a = p.parse_args()
    print(write_page(a.folder, a.to, a.command, a.commit, a.cpu, a.wall))


if __name__ == "__main__":
    main()
