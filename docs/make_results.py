"""Write docs/results.md, "what pelab finds at the full budget", from a finished study folder.

Nothing on the page is typed by hand: the answer, the figure and the published-vs-measured table are the study's
own report.md (its first screen), the verdict table is its claims.json, and the provenance (command, commit, CPU,
wall time) is what the person who ran it passes here. The run ids of every stored run go to
docs/results/run_ids.txt, so tests/test_docs_results.py can check that the current code still computes them: the
page cannot go stale silently when a change moves the runs it reports.

    python docs/make_results.py pelab-out/full --command "pelab study --preset full" \
        --commit 170220a --cpu "AMD EPYC, 2 cores" --wall "1 h 32 min" [--to docs]

A study too long for one machine's sitting travels as its database (after `pelab report FOLDER --keep-measures`):

    python docs/make_results.py pelab-out/full --carry CARRIED   (docs/study.md)

When the preset moves and the study has not been run again yet, the page is marked out of date instead, with the
counts of runs moved computed here and checked by the test (a page can be stale, never silently):

    python docs/make_results.py --out-of-date "The language-model sweep moved to English prose."
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
from pathlib import Path

#: The figures copied beside the page: the answer (the language models' gap against width and along training), the
#: overview, then the central claims' forest plots.
FIGURES = ("gap-lm", "overview-forest", "forest-c6", "forest-c9", "forest-c7", "forest-c18", "forest-c2")
#: The line that opens an out-of-date page; ``out_of_date`` writes it and tests/test_docs_results.py checks its
#: numbers against the code, so a stale page says so with the right counts or the test fails.
STALE = "> **Out of date: do not cite these verdicts.**"
#: The preset the page reports.
FULL = Path(__file__).parents[1] / "pelab" / "presets" / "full.toml"
#: The report's section the page keeps: its first screen (the answer, the overview figure, published vs measured).
KEEP = ("## What this run says",)


def own_seeds() -> str:
    """ "; grid 'X': its own 30 seeds (200–229), ..." for the preset's grids with their own seeds."""
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


def staleness(to: Path, preset: Path = FULL) -> tuple[int, int, int]:
    """(stale, stored, missing): the page's runs the code no longer computes for the preset (at any seed count
    its rounds allow), the page's runs, and the runs of the preset's first round the page lacks."""
    from pelab.study.grid import parse_study, with_seeds

    stored = set((to / "results" / "run_ids.txt").read_text().split())
    study = parse_study(preset.read_text(), str(preset))
    cap = study.sequential.max_seeds if study.sequential is not None else None
    every = with_seeds(study, {r.arm_id: cap for r in study.runs}) if cap else study
    computed = {r.run_id for r in every.runs}
    first = {r.run_id for r in study.runs}
    return len(stored - computed), len(stored), len(first - stored)


def out_of_date(stale: int, stored: int, missing: int, why: str) -> str:
    """The banner of a page whose runs the preset has moved away from: the counts are the code's (``staleness``),
    ``why`` says in a sentence what changed."""
    return (
        f"{STALE} The full preset has changed since this run: {stale} of this page's {stored} runs are no longer "
        f"in it, and {missing} runs of its first round are not on this page. {why} The page is made again from "
        "`pelab study --preset full` and this script; until then the README's main job (the `quick` preset) gives "
        "the current rules' answer."
    )


def mark_out_of_date(to: Path, why: str) -> Path:
    """Put (or renew) the out-of-date banner under the page's title, leaving the rest of the page as it was made."""
    page = to / "results.md"
    lines = [ln for ln in page.read_text().splitlines() if not ln.startswith(STALE)]
    counts = staleness(to)
    banner = out_of_date(*counts, why) if counts[0] or counts[2] else None
    if banner:
        lines[1:1] = ["", banner]
    text = "\n".join(lines) + "\n"
    page.write_text(text.replace("\n\n\n", "\n\n"))
    return page


def publish_runs(folder: Path, figures: Path, ids: list[str]) -> None:
    """claims.json and the stored rows of the page's runs (gzipped CSV, one row per run with its config, curve
    and final metrics, as results.sqlite holds them), so anyone can recompute the verdicts without training."""
    import csv
    import gzip
    import io

    shutil.copyfile(folder / "claims.json", figures / "claims.json")
    wanted = set(ids)
    with sqlite3.connect(folder / "results.sqlite") as conn:
        cur = conn.execute("SELECT * FROM runs WHERE status = 'done' ORDER BY run_id")
        names = [c[0] for c in cur.description]
        rows = [r for r in cur if r[names.index("run_id")] in wanted]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(names)
    w.writerows(rows)
    with gzip.GzipFile(figures / "runs.csv.gz", "wb", mtime=0) as f:  # mtime 0: the same runs give the same bytes
        f.write(buf.getvalue().encode())
    publish_database(folder, figures)


#: The study folder's files that, with its database, let ``pelab report`` decide every verdict again (its design's
#: rounds and its protocol); the checkpoints are not among them: the measures of their weights are in the database.
BESIDE = ("protocol.json", "sequential.json")


def publish_database(folder: Path, to: Path) -> None:
    """The study's database, gzipped (a consistent copy, taken with SQLite's backup, so a study writing meanwhile
    cannot tear it), with its protocol and design: unpacked into a folder, ``pelab report`` there recomputes every
    verdict, those that measure trained models (C2, C4, C8, C10) included, from the measures the study's report kept,
    without its ~1 GB of checkpoints (docs/study.md)."""
    import gzip
    import tempfile
    from contextlib import closing

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "results.sqlite"
        source = f"{(folder / 'results.sqlite').resolve().as_uri()}?mode=ro"
        with closing(sqlite3.connect(source, uri=True)) as src, closing(sqlite3.connect(copy)) as dst:
            src.backup(dst)
        with closing(sqlite3.connect(copy, isolation_level=None)) as dst:  # one file: no -wal left behind it
            dst.execute("PRAGMA journal_mode=DELETE")
            dst.execute("VACUUM")
        assert not Path(f"{copy}-wal").exists(), "the published copy would be missing what its -wal held"
        with gzip.GzipFile(to / "results.sqlite.gz", "wb", mtime=0) as f:
            f.write(copy.read_bytes())
    for name in BESIDE:
        if (folder / name).is_file():
            shutil.copyfile(folder / name, to / name)


def carry(folder: Path, to: Path) -> None:
    """A study still running, copied to go on on another machine without its weights (``publish_database``): not
    while a study writes it (its lock), and only when every finished run's measures were kept since its last run
    finished (``pelab report FOLDER --keep-measures``), else a run would travel with neither weights nor measures."""
    from pelab.errors import PelabError
    from pelab.study.store import Store, StudyLock

    if not (folder / "results.sqlite").is_file():
        raise SystemExit(f"carry: {folder} holds no pelab study (no results.sqlite)")
    try:
        with StudyLock(folder):
            with Store(folder, create=False) as store:
                kept = store.meta("measures_kept")
                now = store.finished_stamp()
            if kept != now:
                why = "runs changed since its measures were kept" if kept else "measures were never kept"
                raise SystemExit(f"carry: {folder}'s {why}; run `pelab report {folder} --keep-measures` first")
            to.mkdir(parents=True, exist_ok=True)
            publish_database(folder, to)
    except PelabError as e:
        raise SystemExit(f"carry: {e}") from None


#: How the study was run, where nothing else is said: the README's install on a fresh clone, in one go.
FRESH = "from a fresh clone, the README's install"


def write_page(folder: Path, to: Path, command: str, commit: str, cpu: str, wall: str, setup: str = FRESH) -> Path:
    """The page, from a finished study folder. ``setup`` says how the runs came about where it was not the
    README's install on a fresh clone (a study resumed over sittings from a carried database), so the command row
    does not claim a fresh clone it never had."""
    from pelab.study.folder import StudyFolder

    StudyFolder(folder).check()  # a received folder: a link or FIFO where pelab keeps a file is refused, not read
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
    publish_runs(folder, figures, ids)
    provenance = [
        "| | |",
        "|---|---|",
        f"| command | `{command}` ({setup}) |",
        f"| commit | `{commit}` |",
        f"| CPU | {cpu} |",
        f"| wall time | {wall} |",
        f"| runs | {len(ids)} finished; run ids in [results/run_ids.txt](results/run_ids.txt); their stored rows in "
        "[results/runs.csv.gz](results/runs.csv.gz) and the verdicts in [results/claims.json](results/claims.json); "
        "the whole database, measures of the trained models included, in [results/results.sqlite.gz]"
        "(results/results.sqlite.gz) (unpack it with protocol.json and sequential.json into a folder and run `pelab "
        "report` there: every verdict again, no checkpoint needed) |",
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
        "The full preset's study (`pelab/presets/full.toml`)"
        + (", from a fresh clone," if setup == FRESH else "")
        + " and its report's first "
        "screen and verdicts, unedited. Verdicts hold at this scale only (small models, short training, 2 CPU "
        "cores); rerun it to check them, or change the preset to ask your own question. "
        "tests/test_docs_results.py fails when the code no longer computes these runs' ids and the page does not "
        "open by saying so (then rerun the command and this script).",
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
    for name in FIGURES[2:]:
        if (figures / f"{name}.png").exists():
            page.append(f"![{name}](results/{name}.png)\n")
    out = to / "results.md"
    out.write_text("\n".join(page))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path, nargs="?", help="a finished study folder (pelab study --preset full)")
    p.add_argument("--to", type=Path, default=Path(__file__).parent, help="the docs folder")
    p.add_argument("--command")
    p.add_argument("--commit")
    p.add_argument("--cpu")
    p.add_argument("--wall")
    p.add_argument("--setup", default=FRESH, help=f"how the runs came about (default: {FRESH})")
    p.add_argument("--out-of-date", metavar="WHY", help="only mark the page out of date (what changed, a sentence)")
    p.add_argument(
        "--carry",
        type=Path,
        metavar="DIR",
        help="only copy a study that is still running into DIR (its database, protocol and design), to go on on "
        "another machine; run `pelab report FOLDER --keep-measures` first (docs/study.md)",
    )
    a = p.parse_args()
    if a.out_of_date:
        print(mark_out_of_date(a.to, a.out_of_date))
        return
    if a.carry:
        if a.folder is None:
            p.error("--carry needs the study folder")
        carry(a.folder, a.carry)
        print(a.carry / "results.sqlite.gz")
        return
    if a.folder is None or None in (a.command, a.commit, a.cpu, a.wall):
        p.error("a study folder and --command, --commit, --cpu and --wall are needed to write the page")
    print(write_page(a.folder, a.to, a.command, a.commit, a.cpu, a.wall, a.setup))


if __name__ == "__main__":
    main()
