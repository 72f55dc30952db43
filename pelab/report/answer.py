"""The answer as one picture: concatenating against adding in language models on natural text.

Left, the gap against width: for each width the paired difference concat − add in bits per byte (a per-seed
log-ratio, shown as a percentage), with the interval its verdict read, one line per pairing (``concat_split`` at
the same width; ``concat_wide`` against ``add`` at concat_wide's total width) and position scheme, the ±2% margin
shaded. Right, the same gap along training (tokens seen), from each run's validation loss on the same held-out
windows at every point of its curve (``pelab.train.curve_val_loss``), so a reader sees whether it closes or opens as
the models train. One row of panels per model kind (causal ``charlm``, masked ``mlm``).

Every point on the left is a row C6 decided (``claims.json``); the right is descriptive (a 95% t-interval per point,
no verdict reads it).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from scipy import stats as st

from pelab.report.context import ReportContext
from pelab.report.registry import ClaimResult, Figure
from pelab.report.summary import join_and
from pelab.rules import LM_LEARNED_SHARE, LOG_MARGIN, NOT_SUPPORTED, RELATIVE_MARGIN, SUPPORTED
from pelab.study.sequential import Looks

#: Language-model tasks (``first_screen.LM_TASKS``), and the kind of model each trains.
KINDS = {"charlm": "causal", "mlm": "masked"}
#: C6's families read here (A the concatenating arm, B the adding one), and how the picture names them.
PAIRINGS = {
    "concat_split vs add": "concat_split vs add (same width)",
    "concat_wide vs add at its width": "concat_wide vs add at its width",
}
#: Rows read both ways: the other direction's family, whose verdict says "add better".
BACKWARD = {
    "concat_split vs add": "add vs concat_split",
    "concat_wide vs add at its width": "add at its width vs concat_wide",
}


def percent(x: float) -> float:
    """A log-ratio of bits per byte, log(A / B), as the percentage A differs from B: 100 (e^x − 1)."""
    return 100.0 * math.expm1(x) if math.isfinite(x) else math.nan


@dataclass
class GapPoint:
    """One C6 row of a language model: the gap concat − add at one width, its interval and verdict."""

    kind: str  # causal | masked
    pairing: str  # a key of PAIRINGS
    scheme: str
    d: int  # the concatenating arm's base width
    diff: float  # mean log-ratio of bits per byte, A over B
    lo: float
    hi: float
    verdict: str  # the row's verdict on "concat better"
    add_better: bool  # the other direction's row said add better
    seeds: int
    level: float
    a_runs: list[str] = field(default_factory=list)
    b_runs: list[str] = field(default_factory=list)
    #: the row's protocol reading: "confirmatory" (a confirmatory grid read by the rules it was trained under) or
    #: "exploratory"; "" in a claims.json written before rows carried it
    protocol: str = ""
    #: the row's sequential design (``Looks.record``), None with fixed seeds
    looks: Mapping[str, Any] | None = None

    @property
    def read_level(self) -> float:
        """The level the interval was read at: ``level`` with fixed seeds, or under a sequential design the nominal
        level of its last look (a repeated confidence interval, ``Test.read_level``), which is stricter."""
        return Looks.from_record(self.looks).nominal_level(self.level) if self.looks else self.level

    @property
    def decided(self) -> bool:
        return self.verdict in (SUPPORTED, NOT_SUPPORTED) or self.add_better

    @property
    def reading(self) -> str:
        """What the row establishes, in words: which arm is better beyond the interval, or equal within the margin,
        or undecided."""
        if self.verdict == SUPPORTED:
            return "concat better"
        if self.add_better:
            return "add better"
        if self.verdict == NOT_SUPPORTED:
            return "equal within the margin"
        return "undecided"


def _lm_rows(claims: Sequence[ClaimResult], frame: Any) -> Iterator[tuple[Mapping[str, Any], str, int]]:
    """C6's language-model rows of the pairings the answer reads, each with its model kind and the concatenating
    arm's base width (read from its runs' configs: concat_wide's row names the total width)."""
    c6 = next((c for c in claims if c.id == "C6"), None)
    if c6 is None:
        return
    width = {}
    if "model.d" in getattr(frame, "columns", ()):
        width = dict(zip(frame.run_id, frame["model.d"], strict=True))
    for r in c6.rows:
        where = r.get("where") or {}
        kind = KINDS.get(str(where.get("task.name")))
        if kind is not None and r.get("family") in PAIRINGS:
            first = (r.get("a_runs") or [None])[0]
            yield r, kind, int(width.get(first, where.get("model.d", 0)) or 0)


def gap_points(claims: Sequence[ClaimResult], frame: Any) -> list[GapPoint]:
    """C6's language-model rows that read an interval, as points."""
    c6 = next((c for c in claims if c.id == "C6"), None)
    back: dict[tuple[frozenset[str], frozenset[str]], Mapping[str, Any]] = {}
    for r in c6.rows if c6 is not None else []:
        if r.get("family") in BACKWARD.values():
            back[(frozenset(r.get("b_runs", [])), frozenset(r.get("a_runs", [])))] = r
    out = []
    for r, kind, d in _lm_rows(claims, frame):
        if r.get("diff") is None or not r.get("a_runs"):
            continue
        other = back.get((frozenset(r.get("a_runs", [])), frozenset(r.get("b_runs", []))), {})
        out.append(
            GapPoint(
                kind=kind,
                pairing=str(r["family"]),
                scheme=str(r["where"].get("model.position.scheme", "")),
                d=d,
                diff=float(r["diff"]),
                lo=float(r["lo"]),
                hi=float(r["hi"]),
                verdict=str(r["verdict"]),
                add_better=other.get("verdict") == SUPPORTED,
                seeds=int(r.get("seeds", 0)),
                level=float(r.get("level", 0.95)),
                a_runs=list(r["a_runs"]),
                b_runs=list(r["b_runs"]),
                protocol=str(r.get("reading", "")),
                looks=r.get("looks"),
            )
        )
    return sorted(out, key=lambda p: (list(KINDS.values()).index(p.kind), p.pairing, p.scheme, p.d))


@dataclass(frozen=True)
class Along:
    """The gap along training: tokens seen, and the mean per-seed log-ratio with its 95% t-interval."""

    tokens: tuple[float, ...]
    mean: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    seeds: int


def paired_runs(point: GapPoint, rows: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Mapping[str, Any]]]:
    """The point's finished stored runs by seed, each seed with both sides ({seed: {"a": run, "b": run}}): what the
    curve along training and the spread over seeds both pair on."""
    by_id = {r["run_id"]: r for r in rows}
    per_seed: dict[int, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for side, ids in (("a", point.a_runs), ("b", point.b_runs)):
        for run_id in ids:
            r = by_id.get(run_id)
            if r is not None and r.get("status") == "done":
                per_seed[int(r["config"]["seed"])][side] = r
    return {seed: pair for seed, pair in sorted(per_seed.items()) if len(pair) == 2}


def along_training(point: GapPoint, rows: Sequence[Mapping[str, Any]]) -> Along | None:
    """Per seed, log(A's validation loss / B's) at each point of the two runs' curves (the same steps, the same
    held-out windows), then the mean over seeds and its 95% t-interval; None where fewer than 2 seeds have curves
    with validation loss (runs trained before curves carried it)."""
    ratios, tokens = [], None
    for pair in paired_runs(point, rows).values():
        a, b = pair["a"]["curve"], pair["b"]["curve"]
        if not a or len(a) != len(b) or not all("val_loss" in p for p in (*a, *b)):
            continue
        ratios.append([math.log(x["val_loss"] / y["val_loss"]) for x, y in zip(a, b, strict=True)])
        cfg = pair["a"]["config"]
        per_step = cfg["train"]["batch_size"] * cfg["task"]["length"]
        tokens = tuple(float(p["step"]) * per_step for p in a)
    if len(ratios) < 2 or tokens is None:
        return None
    v = np.asarray(ratios)
    mean = v.mean(axis=0)
    half = st.t.ppf(0.975, len(v) - 1) * v.std(axis=0, ddof=1) / math.sqrt(len(v))
    return Along(tokens, tuple(mean), tuple(mean - half), tuple(mean + half), len(v))


#: Colour per pairing, line style per scheme: two ways to tell the four lines apart.
PAIR_COLOUR = {"concat_split vs add": "C0", "concat_wide vs add at its width": "C3"}
SCHEME_STYLE = {"learned": "-", "sinusoidal": "--"}


def gap_figure(ctx: ReportContext, claims: Sequence[ClaimResult]) -> Figure | None:
    """The figure (``gap-lm.png``), or None when the study ran no language model with both add and concat."""
    points = gap_points(claims, ctx.frame)
    if not points or not ctx.display:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pelab.plots import save

    kinds = [k for k in KINDS.values() if any(p.kind == k for p in points)]
    fig, axes = plt.subplots(len(kinds), 2, figsize=(11, 3.9 * len(kinds)), dpi=110, squeeze=False)
    band = 100 * RELATIVE_MARGIN
    for row, kind in zip(axes, kinds, strict=True):
        left, right = row
        mine = [p for p in points if p.kind == kind]
        widths = sorted({p.d for p in mine})
        series: dict[tuple[str, str], list[GapPoint]] = defaultdict(list)
        for p in mine:
            series[(p.pairing, p.scheme)].append(p)
        shift = {key: (i - (len(series) - 1) / 2) * 0.035 for i, key in enumerate(sorted(series))}
        for (pairing, scheme), pts in sorted(series.items()):
            colour, style = PAIR_COLOUR.get(pairing, "C7"), SCHEME_STYLE.get(scheme, ":")
            xs = [p.d * 2 ** shift[(pairing, scheme)] for p in pts]
            ys = [percent(p.diff) for p in pts]
            left.plot(xs, ys, style, color=colour, lw=1.3, label=f"{PAIRINGS[pairing]}, {scheme}")
            for x, p in zip(xs, pts, strict=True):
                y, lo, hi = percent(p.diff), percent(p.lo), percent(p.hi)
                face = colour if p.decided else "white"
                left.errorbar([x], [y], yerr=[[y - lo], [hi - y]], fmt="o", color=colour, mfc=face, capsize=3, lw=1)
        left.axhspan(-band, band, color="0.85", zorder=0, label=f"±{band:g}% margin")
        left.axhline(0, color="0.4", lw=0.8)
        left.set_xscale("log", base=2)
        left.set_xticks(widths, [str(w) for w in widths])
        left.minorticks_off()
        left.set(xlabel="model width d (concat_wide: its base width)", ylabel="concat − add, % bits per byte",
                 title=f"{kind} language models: the gap against width")  # fmt: skip
        left.grid(alpha=0.3)
        left.legend(fontsize=7, loc="best")
        _along_panel(right, [p for p in mine if p.pairing == "concat_split vs add"], ctx.rows, band, kind)
    fig.text(0.5, 0.005, "below 0: concatenating did better; filled: the verdict decided the row (a direction, or "
             "equal within the margin); hollow: undecided", ha="center", fontsize=8, color="0.3")  # fmt: skip
    path = save(fig, ctx.figures / "gap-lm.png")
    caption = (
        "Left: concat − add in bits per byte at each width (a paired, per-seed log-ratio shown as a percentage), with "
        "the interval its verdict read (C6), one line per pairing and position scheme; the grey band is the ±2% "
        "margin. Right: concat_split − add along training, on the same held-out windows at every point of each run's "
        "curve (mean over seeds, 95% t-band; descriptive, no verdict reads it)."
    )
    contexts = sorted({int(r["config"]["task"]["length"]) for r in runs_of(points, ctx.rows)})
    if contexts:
        caption += f" Byte-level models with {'/'.join(map(str, contexts))}-byte contexts."
    missing = missing_cells(claims, ctx.frame)
    if missing:
        caption += (f" No point where an arm did not learn (held-out loss above {LM_LEARNED_SHARE:.0%} of the "
                    f"context-free model's): {missing}.")  # fmt: skip
    caption += undecided_sentence(points, ctx.rows)
    return Figure("Concatenating against adding in language models", path, caption)


def seed_spread(point: GapPoint, rows: Sequence[Mapping[str, Any]], metric: str = "bpb") -> float | None:
    """The standard deviation over seeds of the per-seed log-ratio log(A / B) of ``metric``, read from the stored
    runs themselves (not back from the interval); None with fewer than 2 paired seeds."""
    values = [(p["a"].get("metrics") or {}, p["b"].get("metrics") or {}) for p in paired_runs(point, rows).values()]
    logs = [math.log(a[metric] / b[metric]) for a, b in values if (a.get(metric) or 0) > 0 and (b.get(metric) or 0) > 0]
    return float(np.std(logs, ddof=1)) if len(logs) >= 2 else None


#: The most seeds ``seeds_to_fit`` looks for; beyond it the sentence says "more than".
MOST_SEEDS = 1000


def seeds_to_fit(sd: float, level: float, margin: float = LOG_MARGIN) -> int | None:
    """The fewest seeds whose t-interval at ``level`` (the level the row's verdict read) is no wider than
    ±``margin`` on a log-ratio whose per-seed spread is ``sd``: what an interval needs to fit inside the margin
    where the true gap is zero and ``sd`` is the true spread (a rough floor: an estimate from 5 seeds can be off by
    a factor of two either way, and half the intervals of that size would still overhang). Why: an undecided row
    says what buying it would cost. None beyond ``MOST_SEEDS``."""
    for n in range(2, MOST_SEEDS + 1):
        if st.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n) <= margin:
            return n
    return None


def undecided_sentence(points: Sequence[GapPoint], rows: Sequence[Mapping[str, Any]]) -> str:
    """Why the hollow points are hollow, per model kind: how far their seeds disagree (the per-seed gap's standard
    deviation, as 100 x the log-ratio's, beside the decided points' of the same kind) and the fewest seeds that
    would fit an interval inside the margin at that spread. "" where every point was decided or no run carries the
    metric."""
    out = []
    for kind in KINDS.values():
        mine = [p for p in points if p.kind == kind]
        open_ = [(p, seed_spread(p, rows)) for p in mine if not p.decided]
        open_ = [(p, sd) for p, sd in open_ if sd is not None]
        if not open_:
            continue
        sds = [100 * sd for _, sd in open_]
        need = [seeds_to_fit(sd, p.read_level) for p, sd in open_]
        closed = [sd for sd in (seed_spread(p, rows) for p in mine if p.decided) if sd is not None]
        beside = f"; the decided ones' {_span([100 * sd for sd in closed])}" if closed else ""
        known = [n for n in need if n is not None]
        fewest = (f"{min(known)}" if min(known) == max(known) else f"{min(known)} to {max(known)}") if known \
            else f"more than {MOST_SEEDS}"  # fmt: skip
        if known and len(known) < len(need):
            fewest += f" (more than {MOST_SEEDS} for {len(need) - len(known)})"
        out.append(f"{kind}, {len(open_)}: their seeds disagree (the per-seed gap's standard deviation is "
                   f"{_span(sds)}{beside}), so an interval at the level each was read at would fit inside "
                   f"±{100 * RELATIVE_MARGIN:g}% only from about {fewest} seeds (a rough floor: it takes this "
                   f"spread as the true one and the true gap as zero)")  # fmt: skip
    return (" Undecided (hollow) points: " + "; ".join(out) + ".") if out else ""


def _along_panel(
    ax: Any, points: Sequence[GapPoint], rows: Sequence[Mapping[str, Any]], band: float, kind: str
) -> None:
    widths = sorted({p.d for p in points})
    colours = {d: f"C{i}" for i, d in enumerate(widths)}
    drawn = 0
    for p in points:
        along = along_training(p, rows)
        if along is None:
            continue
        x = np.asarray(along.tokens) / 1e6
        style = SCHEME_STYLE.get(p.scheme, ":")
        ax.plot(x, [percent(v) for v in along.mean], style, color=colours[p.d], lw=1.3, label=f"d={p.d}, {p.scheme}")
        ax.fill_between(x, [percent(v) for v in along.lo], [percent(v) for v in along.hi], color=colours[p.d],
                        alpha=0.12, lw=0)  # fmt: skip
        drawn += 1
    ax.axhspan(-band, band, color="0.85", zorder=0)
    ax.axhline(0, color="0.4", lw=0.8)
    ax.set(xlabel="tokens seen (millions)", ylabel="concat_split − add, % validation loss",
           title=f"{kind}: the same-width gap along training")  # fmt: skip
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "no curves with validation loss\n(runs trained before curves carried it)",
                ha="center", va="center", transform=ax.transAxes, fontsize=8, color="0.4")  # fmt: skip


__all__ = ["Along", "GapPoint", "along_training", "gap_figure", "gap_points", "percent", "unread_cells"]


# --- the answer in words -----------------------------------------------------------------------------------------
#: How each pairing is named at the head of its sentence.
LEADS = {
    "concat_split vs add": "Same width (concat_split against add)",
    "concat_wide vs add at its width": "Wider (concat_wide against add at its width)",
}


def _span(values: Sequence[float]) -> str:
    """ "2.1%" or "1.2–4.0%": magnitudes of percentages."""
    lo, hi = min(values), max(values)
    return f"{lo:.1f}%" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}–{hi:.1f}%"


def _widths(points: Sequence[GapPoint], more: Sequence[int] = ()) -> str:
    ds = sorted({p.d for p in points} | set(more))
    return "d=" + join_and([str(d) for d in ds])


def unread_cells(claims: Sequence[ClaimResult], pairing: str, frame: Any = None) -> list[tuple[str, int, str]]:
    """C6's language-model rows of ``pairing`` that read nothing (an arm below the floor, no interval), each as
    (model kind, base width as ``gap_points`` reads it, scheme): the answer counts them, so a cell that did not learn
    is never out of the count."""
    return [
        (kind, d, str(r["where"].get("model.position.scheme", "")))
        for r, kind, d in _lm_rows(claims, frame)
        if r.get("family") == pairing and r.get("diff") is None
    ]


def missing_cells(claims: Sequence[ClaimResult], frame: Any = None) -> str:
    """The cells with no verdict (``unread_cells``) by pairing, in words for the figure's caption, where the first
    screen's sentences only count them: "same width: masked d=128 sinusoidal; wider: masked d=128 learned and
    sinusoidal"; "" where every cell read."""
    out = []
    for pairing, name in PAIRINGS.items():
        by_cell: dict[tuple[str, int], list[str]] = defaultdict(list)
        for kind, d, scheme in sorted(unread_cells(claims, pairing, frame)):
            by_cell[(kind, d)].append(scheme)
        if by_cell:
            cells = ", ".join(f"{kind} d={d} {join_and(schemes)}" for (kind, d), schemes in by_cell.items())
            out.append(f"{name}: {cells}")
    return "; ".join(out)


def cells_where(points: Sequence[GapPoint], unread: Sequence[tuple[str, int, str]] = ()) -> str:
    """The cells a pairing read, in words: "causal and masked, d=32, 64 and 128, learned and sinusoidal positions"."""
    kinds = sorted({p.kind for p in points} | {u[0] for u in unread}, key=list(KINDS.values()).index)
    schemes = sorted({p.scheme for p in points} | {u[2] for u in unread})
    return f"{' and '.join(kinds)}, {_widths(points, [u[1] for u in unread])}, {' and '.join(schemes)} positions"


def pairing_sentence(
    points: Sequence[GapPoint], pairing: str, unread: Sequence[tuple[str, int, str]] = (), where: bool = True
) -> str | None:
    """One sentence per pairing, counting what its cells decided ("12 cells: concatenating better in 2 (by at least
    2.4–4.8%); equal within ±2% in 3"), over every model kind, width and scheme it read, and the cells with no
    verdict (``unread_cells``, named under the figure); the cells and their count in words unless ``where`` is False
    (``lm_sentences`` says them once where both pairings read the same); None where the study has no such row."""
    mine = [p for p in points if p.pairing == pairing]
    if not mine and not unread:
        return None
    n = len(mine) + len(unread)
    parts = []
    add = [p for p in mine if p.reading == "add better"]
    cat = [p for p in mine if p.reading == "concat better"]
    equal = [p for p in mine if p.reading == "equal within the margin"]
    open_ = [p for p in mine if p.reading == "undecided"]
    # by how much: the bound nearer 0 of each decided row's interval, the least the interval establishes
    if add:
        parts.append(f"adding better in {len(add)} (by at least {_span([percent(p.lo) for p in add])})")
    if cat:
        parts.append(f"concatenating better in {len(cat)} (by at least {_span([-percent(p.hi) for p in cat])})")
    if equal:
        parts.append(f"equal within ±{100 * RELATIVE_MARGIN:g}% in {len(equal)}")
    if open_:  # how wide their intervals are, the figure beneath shows
        parts.append(f"undecided in {len(open_)}")
    if unread:
        parts.append(f"no verdict in {len(unread)} (did not learn)")
    said = f" ({cells_where(mine, unread)}; bits per byte)" if where else ""
    tag = ""
    loose = [p for p in mine if p.protocol == "exploratory"]
    if loose:  # a confirmatory grid read by rules changed since its runs, or a grid never marked confirmatory
        tag = " Exploratory" + ("" if len(loose) == n else f" in {len(loose)} of {n}") + ": see the protocol line."
    count = f", {n} cell{'s' if n != 1 else ''}" if where else ""
    return f"{LEADS[pairing]}{count}: " + "; ".join(parts) + f"{said}." + tag


@dataclass(frozen=True)
class Facts:
    """The scale and the cost the first screen states beside the answer, from the language models' own runs."""

    params: tuple[int, int]
    tokens: tuple[int, int]
    seeds: tuple[int, int]
    layers: tuple[int, ...]
    #: concat_wide's parameters and FLOPs per token over add's at the same base width, per (task, width, scheme):
    #: a learned table and a fixed one cost differently, so keying by width alone kept one scheme's ratio
    wide_cost: dict[tuple[str, int, str], tuple[float, float]]
    #: concat_split's parameters over add's at the same width (< 1: the narrower token table), keyed as above
    split_params: dict[tuple[str, int, str], float]
    #: mean improvement of validation loss over the last fifth of training, per model kind (None: no curves)
    last_fifth: dict[str, float]
    #: the rates each base width's runs trained at (concat_wide's add at d + d/4 under d)
    width_rates: dict[int, tuple[float, ...]] = field(default_factory=dict)
    #: whether every arm chose its rate on validation (a study's ``train.lr`` list) rather than train at one
    tuned: bool = False

    @property
    def rates(self) -> tuple[float, ...]:
        """Every rate the points' runs trained at (one for every arm, or those the arms kept), ascending."""
        return tuple(sorted({x for v in self.width_rates.values() for x in v}))


def last_fifth(val_losses: Sequence[float]) -> float:
    """What the last fifth of training still gained: 1 − the last validation loss over the one at 80% of the curve's
    points (issue 38's bar for a model near levelling off: under 2%)."""
    at = round(0.8 * (len(val_losses) - 1))
    return 1 - val_losses[-1] / val_losses[at]


def runs_of(points: Sequence[GapPoint], rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The finished stored runs of the points' arms, both sides: what the caption and the scale and cost sentences
    read."""
    ids = {r for p in points for r in (*p.a_runs, *p.b_runs)}
    return [r for r in rows if r["run_id"] in ids and r.get("status") == "done"]


def answer_facts(ctx: ReportContext, points: Sequence[GapPoint]) -> Facts | None:
    """What the scale and cost sentences read: the runs of the points' arms (parameters, FLOPs per token, tokens
    seen, seeds) and their curves (how much the last fifth of training still gained)."""
    rows = runs_of(points, ctx.rows)
    if not rows:
        return None
    tokens = [r["config"]["train"]["steps"] * r["config"]["train"]["batch_size"] * r["config"]["task"]["length"]
              for r in rows]  # fmt: skip
    arms: dict[str, list[dict[str, Any]]] = defaultdict(list)  # an arm: its config but the seed
    for r in rows:
        arms[json.dumps({k: v for k, v in r["config"].items() if k != "seed"}, sort_keys=True)].append(r)
    seeds = [len(v) for v in arms.values()]
    kinds: dict[tuple[str, int, str, str], dict[str, Any]] = {}  # the first arm of each (task, d, combine, scheme)
    for runs in arms.values():
        m = runs[0]["config"]["model"]
        kinds.setdefault((runs[0]["config"]["task"]["name"], int(m["d"]), m["combine"], m["position"]["scheme"]),
                         runs[0])  # fmt: skip
    wide_cost, split_params = {}, {}
    for (task, d, combine, scheme), run in kinds.items():
        base = kinds.get((task, d, "add", scheme))
        if base is None or combine == "add":
            continue
        ratio_p = run["params"] / base["params"]
        ratio_f = run["flops_per_token"] / base["flops_per_token"]
        if combine == "concat_wide":
            wide_cost[task, d, scheme] = (ratio_p, ratio_f)
        elif combine == "concat_split":
            split_params[task, d, scheme] = ratio_p
    last: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        vals = [p.get("val_loss") for p in r["curve"]]
        if len(vals) >= 5 and all(v is not None for v in vals):
            last[KINDS.get(r["config"]["task"]["name"], "?")].append(last_fifth(vals))
    return Facts(
        params=(min(r["params"] for r in rows), max(r["params"] for r in rows)),
        tokens=(min(tokens), max(tokens)),
        seeds=(min(seeds), max(seeds)),
        layers=tuple(sorted({int(r["config"]["model"]["n_layers"]) for r in rows})),
        wide_cost=dict(sorted(wide_cost.items())),
        split_params=dict(sorted(split_params.items())),
        last_fifth={k: float(np.mean(v)) for k, v in last.items()},
        width_rates=_width_rates(points, rows),
        tuned={r["run_id"] for r in rows} <= ctx.study.tuned,
    )


def _width_rates(points: Sequence[GapPoint], rows: Sequence[Mapping[str, Any]]) -> dict[int, tuple[float, ...]]:
    """Each base width's learning rates, over the runs of its points."""
    width = {r: p.d for p in points for r in (*p.a_runs, *p.b_runs)}
    out: dict[int, set[float]] = defaultdict(set)
    for r in rows:
        if "lr" in r["config"]["train"]:
            out[width[r["run_id"]]].add(float(r["config"]["train"]["lr"]))
    return {d: tuple(sorted(v)) for d, v in sorted(out.items())}


def _range(lo: float, hi: float, fmt: str = "{:,}") -> str:
    """ "990–1,300", or one number where both ends read alike."""
    a, b = fmt.format(lo), fmt.format(hi)
    return a if a == b else f"{a}–{b}"


def cost_sentence(facts: Facts) -> str:
    """C5 beside the answer: what concatenating costs at these widths, counted by the models themselves."""
    parts = []
    if facts.split_params:
        r = [100 * (v - 1) for v in facts.split_params.values()]
        fewer = all(x < 0 for x in r)
        size = _range(min(abs(x) for x in r), max(abs(x) for x in r), "{:.1f}")
        parts.append(f"concat_split {size}% {'fewer' if fewer else 'more'} parameters"
                     if fewer or all(x > 0 for x in r)
                     else f"concat_split as many parameters (within {size}%)")  # fmt: skip
    if facts.wide_cost:
        p = [100 * (v[0] - 1) for v in facts.wide_cost.values()]
        f = [100 * (v[1] - 1) for v in facts.wide_cost.values()]
        parts.append(f"concat_wide {_range(min(p), max(p), '{:.0f}')}% more parameters, "
                     f"{_range(min(f), max(f), '{:.0f}')}% more FLOPs per token")  # fmt: skip
    return ("Cost (C5): " + "; ".join(parts) + ".") if parts else ""


def scale_sentence(facts: Facts) -> str:
    """The scale the answer holds at, and how far training was from levelling off."""
    layers = "/".join(map(str, facts.layers))
    text = (
        f"Scale: {layers} layers, {_range(*facts.params)} parameters, "
        f"{_range(facts.tokens[0] / 1e6, facts.tokens[1] / 1e6, '{:.2g}')}M bytes each, {_range(*facts.seeds)} "
        "paired seeds"
    )
    if facts.last_fifth:
        many = len(facts.last_fifth) > 1
        each = [f"{100 * v:.1f}%" + (f" ({k})" if many else "") for k, v in facts.last_fifth.items()]
        text += f"; the last fifth of training still cut validation loss by {' and '.join(each)}"
    if facts.tuned:  # the rates each arm kept are in the report's 'Learning rates', not on the first screen
        text += "; each arm's learning rate chosen on validation"
    elif len(facts.rates) == 1:  # a gap at one rate may be one of learning speed: the reader is told it was one rate
        text += f"; one learning rate ({facts.rates[0]:g}) for every arm"
    elif facts.width_rates and all(len(v) == 1 for v in facts.width_rates.values()):  # full: one rate per width
        by_rate: dict[float, list[int]] = defaultdict(list)
        for d, (rate,) in facts.width_rates.items():
            by_rate[rate].append(d)
        each = [f"{rate:g} at d={join_and([str(d) for d in ds])}" for rate, ds in by_rate.items()]
        text += f"; one rate per width for every arm ({', '.join(each)})"
    elif facts.rates:
        text += f"; learning rates {', '.join(f'{x:g}' for x in facts.rates)}"
    return text + "."


class LMAnswer(NamedTuple):
    """The answer where it lives, before its picture: the cells both pairings read, counted and in words ("12 cells
    each: causal and masked, …"; "" where they differ, and each sentence says its own), and one sentence per pairing,
    then the cost and the scale."""

    where: str
    sentences: list[str]


def lm_sentences(ctx: ReportContext, claims: Sequence[ClaimResult]) -> LMAnswer:
    """The first screen's answer (``LMAnswer``): the cells said once where both pairings read the same ones, which
    keeps full's 24 cells in words a reader takes in (issue 38: at most 150 words up to the figure)."""
    points = gap_points(claims, ctx.frame)
    unread = {pairing: unread_cells(claims, pairing, ctx.frame) for pairing in PAIRINGS}
    present = [pg for pg in PAIRINGS if any(p.pairing == pg for p in points) or unread[pg]]
    mine = {pg: [p for p in points if p.pairing == pg] for pg in present}
    said = {(cells_where(mine[pg], unread[pg]), len(mine[pg]) + len(unread[pg])) for pg in present}
    where, n = next(iter(said)) if len(said) == 1 else ("", 0)
    made = [pairing_sentence(points, pg, unread[pg], where=not where) for pg in present]
    out = [s for s in made if s]
    facts = answer_facts(ctx, points) if out else None
    if facts is not None:
        out += [s for s in (cost_sentence(facts), scale_sentence(facts)) if s]
    each = " each" if len(present) > 1 else ""
    lead = f"{n} cell{'s' if n != 1 else ''}{each}: {where}; bits per byte" if where else ""
    return LMAnswer(lead, out)
