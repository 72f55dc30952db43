"""Terminal output of runs and studies (Rich tables)."""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pelab.config import RunConfig
from pelab.errors import PelabError
from pelab.files import make_dirs, write_atomic
from pelab.records import RunResult, sizes_in
from pelab.report.looks import VERDICT_GLYPH, VERDICT_STYLE


def fmt(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def print_result(console: Console, cfg: RunConfig, r: RunResult) -> None:
    m = cfg.model
    title = (
        f"run {r.run_id}: task={cfg.task.name} position={m.position.scheme} combine={m.combine} d={m.d} seed={cfg.seed}"
    )
    t = Table(title=escape(title), title_justify="left")
    t.add_column("size n")
    for col in ("loss", "acc", "exact", "ppl"):
        t.add_column(col, justify="right")
    for n, ev in r.evals.items():
        t.add_row(n, fmt(ev["loss"]), fmt(ev["acc"]), fmt(ev["exact"]), fmt(ev.get("ppl", math.nan), 2))
    console.print(t)
    console.print(
        f"status {r.status}{': ' + escape(r.reason) if r.reason else ''} | params {r.params:,} | "
        f"FLOPs/token {r.flops_per_token:,} | {r.tokens_per_s:,.0f} tokens/s | {r.seconds:.1f}s on {r.device} "
        f"x {r.threads} thread(s)"
    )
    if r.curve:
        pts = r.curve[:: max(1, len(r.curve) // 8)] + ([r.curve[-1]] if len(r.curve) > 1 else [])
        console.print(
            "learning curve (step: train loss): " + ", ".join(f"{int(c['step'])}: {c['loss']:.3f}" for c in pts)
        )


def results_table(
    console: Console, out: Path, by: list[str] | None = None, csv: Path | None = None, metric: str | None = None
) -> None:
    from pelab.study.stats import runs_frame, summarize, telling_keys
    from pelab.study.store import Store

    with Store(out, create=False) as store:
        study = store.study()  # damaged stored text: one line naming results.sqlite
        rows = store.rows()
    if not rows:
        raise PelabError(f"out: {out} has no stored runs yet")
    frame = runs_frame(rows)
    if study is not None:
        from pelab.study.folder import StudyFolder

        study = StudyFolder(out).load_design(study)[0]  # a sequential study: with the seeds its rounds added
        frame = frame[frame.run_id.isin({r.run_id for r in study.runs})]
    keys = by or (study.axes if study is not None else []) or ["task.name"]
    if not by:  # the study's axes, and any setting that tells apart arms they would pool
        keys = [*keys, *telling_keys(frame, keys)]
    for k in keys:
        if k not in frame.columns:
            allowed = sorted(c for c in frame.columns if "." in c and not c.startswith("m."))
            raise PelabError(f"by: unknown key {k!r}; allowed: {', '.join(allowed)}")
    ppl = "m.ppl" in frame.columns and frame["m.ppl"].notna().any()
    main = metric or ("ppl" if ppl else "acc")
    if f"m.{main}" not in frame.columns:
        allowed = sorted(c[2:] for c in frame.columns if c.startswith("m."))
        raise PelabError(f"metric: unknown value {main!r}; allowed: {', '.join(allowed)}")
    # Accuracy at each evaluated size, smallest first, leaving out the one that repeats `acc`.
    extra = [c[2:] for _, c in sizes_in(frame.columns)]
    extra = [e for e in extra if not (main == "acc" and frame[f"m.{e}"].equals(frame["m.acc"]))]
    metrics = [main, *extra]
    table = summarize(frame, keys, metrics)
    if csv is not None:
        make_dirs(csv.parent)
        write_atomic(csv, table.to_csv(index=False))
    name = escape(study.name if study else str(out))
    t = Table(title=f"{name}: mean [95% interval] over seeds", title_justify="left")
    for k in keys:
        t.add_column(k.split(".")[-1] if k.count(".") else k)
    t.add_column("seeds", justify="right")
    for m in metrics:
        t.add_column(m, justify="right")
    t.add_column("params", justify="right")
    t.add_column("FLOPs/token", justify="right")
    for _, row in table.iterrows():
        cells = [escape(str(row[k])) for k in keys]
        seeds = f"{row['seeds']}" + (f" ({row['failed']} failed)" if row["failed"] else "")
        vals = [f"{fmt(row[m])} [{fmt(row[m + '_lo'])}, {fmt(row[m + '_hi'])}]" for m in metrics]
        t.add_row(*cells, seeds, *vals, f"{row['params']:,}", f"{row['flops_per_token']:,}")
    console.print(t)
    for p in study.plugins if study is not None else []:  # whose code the plugins' arms ran
        console.print(
            f"plugin {escape(str(p['name']))}: {escape(str(p['file']))}, sha256 {str(p['sha256'])[:12]}, version "
            f"{escape(str(p.get('version') or 'none'))} ({escape(', '.join(map(str, p.get('provides', []))))})",
            highlight=False,
        )
    if csv is not None:
        console.print(f"wrote {escape(str(csv))}")


#: The widest line ``summary_lines`` prints: a terminal's 100 columns, whatever the key figure's length.
LINE = 100


def summary_lines(claims: list) -> list[str]:
    """One plain line a claim, at most ``LINE`` characters: its id, verdict and the number behind it (a decided
    claim's deciding interval, ``claim_lines.key_interval``, then how many comparisons bear it out; an open
    claim's resolution: ``claim_lines.short_figure``), else its key figure; cut with '…' (the report has it
    whole)."""
    from pelab.report.claim_lines import key_interval, short_figure

    out = []
    width = max((len(c.verdict) for c in claims), default=0)
    for c in claims:
        glyph = VERDICT_GLYPH.get(c.verdict, "·")
        count = short_figure(c) if hasattr(c, "rows") else ""
        figure = count or str(c.key)
        number, where = key_interval(c.key) if c.verdict in ("supported", "not supported") else ("", "")
        if number:  # the number behind the verdict, how many comparisons agree, then where it was measured
            figure = "; ".join(x for x in (number, count, where) if x)
        line = f"{c.id:<4}{glyph} {c.verdict:<{width}} {' '.join(figure.split())}".rstrip()
        out.append(line if len(line) <= LINE else line[: LINE - 1] + "…")
    return out


def summary_table(console: Console, claims: list) -> None:
    """The report's summary in the terminal: one line a claim (``summary_lines``), coloured by verdict."""
    console.print("claims (verdict, key figure; the report has each in full):", markup=False, highlight=False)
    for c, line in zip(claims, summary_lines(claims), strict=True):
        console.print(line, style=VERDICT_STYLE.get(c.verdict, "default"), markup=False, highlight=False)
