"""Claims settled by looking inside encodings and trained models: C1, C2, C3, C4, C8, C10, C11, C15.

The analyses themselves live in ``pelab.analysis``; this module picks which stored
checkpoints to analyse (the lowest-seed run of each arm), runs the analyses through
``ReportContext.analyse`` (results cached under the study's ``analyses/`` folder) and
turns their numbers into verdicts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from pelab.report.claims import (
    CHAIN,
    ClaimResult,
    Figure,
    ReportContext,
    Table,
    claim,
    family_table,
    pct,
    row_records,
    runs_of,
    used_metrics,
)
from pelab.report.evidence import compare, config_labels, select, split_configs
from pelab.report.figures import gap_plot
from pelab.report.rules import (
    ACC,
    LOSS_DOUBTS,
    MIN_EQUIVALENCE_SEEDS,
    OVERLAP,
    PROBE,
    SHARE,
    Comparison,
    Evidence,
    Family,
    Side,
    decide,
    decide_some_group,
    enters,
    family,
    from_diffs,
    margin_for,
    metric,
    paired_test,
    swapped,
)
from pelab.report.verdicts import EXACT, INCONCLUSIVE, NO_INFO, NOT_RUN, NOT_SUPPORTED, SUPPORTED, TOO_SMALL
from pelab.study.stats import t_interval

#: C1/C15 look at the encoding at the size of the question's figures.
C1_D, C1_LENGTH = 512, 128
#: C4: the cross terms "carry a real share" of the layer-1 logit variance above this.
CROSS_SHARE = 0.10


def _figures(result: dict[str, Any] | None, titles: dict[str, str]) -> list[Figure]:
    if not result:
        return []
    folder = Path(result["folder"])
    out = []
    for name in result.get("files", []):
        for suffix, title in titles.items():
            if name.endswith(suffix):
                out.append(Figure(title, folder / name))
    return out


@claim(
    "C1",
    "Sinusoidal encoding is 'conceptually a concatenation'",
    "The sinusoid disturbs the first dimensions a lot and the last ones hardly at all, so adding it leaves most "
    "of the token's dimensions alone.",
    "an answer to the question",
    f"the count of dimensions whose range over positions 0..{C1_LENGTH - 1} exceeds 0.1 (d={C1_D}, the question's "
    "figure): supported when it is well below d, which pelab takes as at most half of d; not supported otherwise. "
    "Beside it, the share of the table's variance in the last half of the dimensions; exact computation, no training",
)
def c1(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    s = ctx.analyse("spectrum", scheme="sinusoidal", d=C1_D, length=C1_LENGTH)
    quiet = C1_D - s["varying"]
    r.verdict = rule_c1(s["varying"], C1_D)
    variance = np.asarray(s["variance"], dtype=float)
    late = float(variance[C1_D // 2 :].sum() / variance.sum())
    r.key = (
        f"{s['varying']} of {C1_D} dimensions vary by > 0.1 ({quiet} hardly move); the last half of the dimensions "
        f"carry {100 * late:.1f}% of the variance"
    )
    flips = {t: c for t, c in s["varying_at"].items() if rule_c1(int(c), C1_D) != r.verdict}
    if flips:  # the rule's threshold is a choice: say where another choice would turn the verdict
        r.caveats.append(
            "The verdict rests on the 0.1 threshold: at "
            + ", ".join(f"{t} the count is {c} ({rule_c1(int(c), C1_D)})" for t, c in flips.items())
            + ". The table below gives every threshold measured."
        )
    r.tables.append(
        Table(
            "Dimensions whose range over the positions exceeds a threshold",
            ["threshold", "dimensions varying", "share of d"],
            [[str(t), str(c), pct(c / C1_D)] for t, c in s["varying_at"].items()],
        )
    )
    dims = list(dict.fromkeys(v["dimension"] for v in s["values"]))
    grid: dict[int, dict[int, float]] = {}
    for v in s["values"]:
        grid.setdefault(v["position"], {})[v["dimension"]] = v["value"]
    r.tables.append(
        Table(
            "Values at chosen positions (rows) and dimensions (columns)",
            ["position", *[f"dim {j}" for j in dims]],
            [[str(p), *[f"{row[j]:+.4f}" for j in dims]] for p, row in grid.items()],
        )
    )
    r.figures += _figures(s, {"_range.png": "range of each dimension over the positions"})
    r.setup = f"paper layout, d={C1_D}, positions 0..{C1_LENGTH - 1}; no training involved"
    return r


@claim(
    "C15",
    "What the encoding looks like (the question's figures)",
    "The heatmap of p (positions × dimensions) and curves of selected dimensions.",
    "the question's figures",
    "exact when the images exist and the plotted table matches the closed form to 1e-12",
)
def c15(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    from pelab.config import PositionConfig
    from pelab.tables import scheme_table

    s = ctx.analyse("spectrum", scheme="sinusoidal", d=C1_D, length=C1_LENGTH)
    pos = np.arange(C1_LENGTH)[:, None]
    i = np.arange(C1_D)[None, :]
    closed = np.where(
        i % 2 == 0, np.sin(pos / 10000 ** ((i - i % 2) / C1_D)), np.cos(pos / 10000 ** ((i - i % 2) / C1_D))
    )
    drawn = scheme_table(PositionConfig(scheme="sinusoidal"), C1_D, C1_LENGTH).numpy()
    err = float(np.abs(drawn - closed).max())
    r.figures += _figures(
        s,
        {
            "_heatmap.png": "sinusoidal table, paper layout (d=512, 128 positions)",
            "_curves.png": "chosen dimensions against position",
        },
    )
    t2t = ctx.analyse("spectrum", scheme="sinusoidal", layout="tensor2tensor", d=C1_D, length=C1_LENGTH)
    r.figures += _figures(t2t, {"_heatmap.png": "sinusoidal table, tensor2tensor layout (all sines, then cosines)"})
    r.verdict = EXACT if err < 1e-12 and r.figures else NOT_SUPPORTED
    r.key = f"max |drawn − closed form| = {err:.1e}"
    r.notes.append("PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).")
    return r


# --- the pure rules -----------------------------------------------------------------------
def rule_c1(varying: int, d: int) -> str:
    """C1: the count of dimensions that vary (range > 0.1) is 'well below d': at most half of it."""
    return SUPPORTED if varying <= d / 2 else NOT_SUPPORTED


def rule_c2(geometry: Family, not_worse: Family, concat_wins: Family) -> str:
    """C2: supported when trained subspaces are closer to orthogonal than at init (every learned arm, over
    seeds) and add is not worse than concat_split beyond the margin on every learned comparison; not
    supported when concat_split beats add on some comparison (Holm), or add is worse beyond the margin, or the
    overlap grows."""
    if NOT_SUPPORTED in (geometry.verdict, not_worse.verdict) or concat_wins.verdict == SUPPORTED:
        return NOT_SUPPORTED
    if geometry.verdict == SUPPORTED and not_worse.verdict == SUPPORTED:
        return SUPPORTED
    for v in (TOO_SMALL, NOT_RUN, NO_INFO):
        if v in (geometry.verdict, not_worse.verdict):
            return v
    return INCONCLUSIVE


def rule_c3(series: list[Evidence], margin: float) -> Family:
    """C3: on each width series, the concat_split − add gap (in the direction it has at the narrowest width)
    is smaller at the widest width than at the narrowest, over paired seeds: supported when it shrinks beyond
    the interval on every series; not supported when it grows, or stays within the margin, on some."""
    return decide(series, margin, kind="better", combine="all")


def c2_families(comps: list[Comparison], floor: float, margin: float) -> tuple[Family, Family]:
    """C2's two comparison halves over add (A) against concat_split (B): "add not worse" on every comparison,
    and "concat_split better" on some (Holm). SCIENCE.md says none of them may be dropped: under the one floor
    policy (``FLOOR_POLICY``) a comparison in which only one arm learned stays in both, and the arm that failed
    is the evidence against it."""
    not_worse = family(comps, CHAIN, floor, margin, kind="not_worse", combine="all")
    concat_wins = family(swapped(comps), CHAIN, floor, margin, kind="better", combine="any")
    return not_worse, concat_wins


def c4_families(comps: list[Comparison], floor: float, margin: float) -> tuple[Family, Family]:
    """C4's half 2 both ways over add (A) against untied (B): "removing them costs" (add better) and "removing
    them helps" (untied better), each Holm-corrected. Under the one floor policy (``FLOOR_POLICY``), untied
    failing a task add solves is a cost of removing the cross terms, and the other way round a help."""
    cost = family(comps, CHAIN, floor, margin, kind="better", combine="any")
    helps = family(swapped(comps), CHAIN, floor, margin, kind="better", combine="any")
    return cost, helps


def cost_half(cost: Family, helps: Family) -> str:
    """Half 2 of C4, "removing the cross terms costs": ``cost`` is add against untied, ``helps`` the same
    comparisons the other way round (untied against add), each Holm-corrected across its comparisons.

    The half is a general statement: SCIENCE.md does not say "on some task" here, as it does for C6 and C8. So
    one comparison where removing the cross terms *helps* beyond its Holm interval refutes it, as one
    concat_split win refutes C2's "add is not worse". Read the other way, one cost would outweigh any number
    of comparisons against it (``full`` once showed 1 against 6). Supported when removing them costs somewhere
    and helps nowhere; otherwise the cost family's own verdict (not supported when every comparison lies
    inside the margin on enough seeds)."""
    if helps.verdict == SUPPORTED:
        return NOT_SUPPORTED
    return cost.verdict


def rule_c4(share: str, cost: str) -> str:  # share: the per-arm threshold family's verdict; cost: cost_half's
    """C4 has two halves and names both: the cross terms carry a real share (``share``, a one-sample verdict
    against CROSS_SHARE), and removing them costs (``cost``, from ``cost_half``). Supported when both hold; not
    supported when either fails; otherwise what keeps it open."""
    if NOT_SUPPORTED in (share, cost):
        return NOT_SUPPORTED
    if share == SUPPORTED and cost == SUPPORTED:
        return SUPPORTED
    for v in (TOO_SMALL, NOT_RUN, NO_INFO):
        if v in (share, cost):
            return v
    return INCONCLUSIVE


def rule_c8(equivariant: list[str], probe: Family) -> str:
    """C8: exact equivariance for `none` alone (and no other scheme), and the NoPE decoder's position probe
    beating both controls (layer-1 input, same model at initialisation) beyond the interval over seeds, on some
    task (``rules.decide_some_group``): the claim is that a causal decoder *can* learn position."""
    if equivariant != ["none"] or probe.verdict == NOT_SUPPORTED:
        return NOT_SUPPORTED
    return probe.verdict


def rule_c10(decodability: Family) -> str:
    """C10: supported when token or position decodability from the layer-1 input under add falls below
    concat_split beyond the (Holm-corrected) interval at some width; not supported when every informative
    comparison is within the margin (or add ahead); collisions are reported beside, never the rule."""
    return decodability.verdict


# --- helpers ------------------------------------------------------------------------------
def _token_tasks(ctx: ReportContext) -> list[str]:
    f = ctx.frame
    seg = f["model.n_segments"].fillna(0) if "model.n_segments" in f else pd.Series(0, index=f.index)
    tok = f[(f["model.head"] == "token") & (seg == 0)]
    if "model.token_table" in tok:
        tok = tok[tok["model.token_table"].isna()]
    return list(dict.fromkeys(tok["task.name"]))


def _seed(ctx: ReportContext, run_id: str) -> int:
    return int(ctx.frame.loc[ctx.frame.run_id == run_id, "seed"].iloc[0])


def _accs(ctx: ReportContext, run_ids: list[str]) -> dict[int, float]:
    f = ctx.frame[ctx.frame.run_id.isin(run_ids)]
    return {int(s): float(a) for s, a in zip(f["seed"], f["m.acc"], strict=True)}


def measured_side(ctx: ReportContext, label: str, run_ids: list[str], key: str, values: dict[int, float]) -> Side:
    """A Side of per-seed measurements (not stored metrics), with the runs' accuracy so 'learned' reads it."""
    f = ctx.frame[ctx.frame.run_id.isin(run_ids)]
    return Side(
        label,
        {key: values, "acc": _accs(ctx, run_ids)},
        params=int(f.params.max()) if len(f) else 0,
        flops=int(f.flops_per_token.max()) if len(f) else 0,
        run_ids=tuple(run_ids),
    )


def run_side(ctx: ReportContext, label: str, run_ids: list[str]) -> Side:
    """A Side of the runs' accuracy alone (an arm below the floor, never measured), with its size: params are
    printed beside every comparison, including the ones the floor removed."""
    return measured_side(ctx, label, run_ids, "acc", _accs(ctx, run_ids))


def _arm(ctx: ReportContext, **filters: Any) -> pd.DataFrame:
    return select(ctx.frame, **filters)


def _configs(arm: pd.DataFrame, shown: list[str]) -> list[tuple[str, dict[str, Any], pd.DataFrame]]:
    """An arm split into its configurations (``split_configs``): (the label extra that tells it apart from a
    configuration with the same ``shown`` values, or "", its config, its rows)."""
    groups = split_configs(arm)
    extra = config_labels([w for w, _ in groups], shown)
    return [(x, w, g) for x, (w, g) in zip(extra, groups, strict=True)]


class TaskPlace(NamedTuple):
    """A task, and what tells its configuration apart from another of the same task ("task.length=12"; "" when
    there is one): a comparison's ``where`` keeps them as two keys, so claims.json's task names stay task names."""

    task: str
    setting: str = ""

    def __str__(self) -> str:
        return f"{self.task} ({self.setting})" if self.setting else self.task

    def where(self, **more: Any) -> dict[str, Any]:
        return {"task.name": self.task, **({"setting": self.setting} if self.setting else {}), **more}


def _c2_arms(ctx: ReportContext) -> Iterator[tuple[TaskPlace, Any, pd.DataFrame, list[str]]]:
    """C2's add + learned arms, one per configuration of each token task: (task, with what tells two
    configurations apart; d; its runs; the runs it probes)."""
    for task in _token_tasks(ctx):
        arm = _arm(ctx, task__name=task, model__position__scheme="learned", model__combine="add")
        for extra, w, sub in sorted(_configs(arm, ["model.d"]), key=lambda t: t[1]["model.d"]):
            yield TaskPlace(task, extra), w["model.d"], sub, ctx.learned_runs(sub)


def _c4_arms(ctx: ReportContext) -> Iterator[tuple[TaskPlace, str, Any, list[str]]]:
    """C4's add arms that learned, one per configuration: (task and what tells configurations apart, scheme,
    d, runs), whose cross-term shares it measures."""
    for task in _token_tasks(ctx):
        for scheme in ("learned", "sinusoidal"):
            arm = _arm(ctx, task__name=task, model__position__scheme=scheme, model__combine="add")
            for extra, w, sub in sorted(_configs(arm, ["model.d"]), key=lambda t: t[1]["model.d"]):
                runs = ctx.learned_runs(sub)
                if runs:
                    yield TaskPlace(task, extra), scheme, w["model.d"], runs


def _c8_arms(ctx: ReportContext) -> Iterator[tuple[TaskPlace, str, str, pd.DataFrame, list[str]]]:
    """C8's causal decoders, NoPE and learned, per configuration of each task: (task and what tells two
    configurations apart, scheme, combine, arm, the runs it probes)."""
    dec = ctx.frame[ctx.frame["model.kind"] == "decoder"] if "model.kind" in ctx.frame else ctx.frame.iloc[0:0]
    for task in dict.fromkeys(dec["task.name"]):
        for scheme, comb in (("none", "none"), ("learned", "add")):
            arm = select(dec, task__name=task, model__position__scheme=scheme, model__combine=comb)
            for extra, _, sub in _configs(arm, []):
                yield TaskPlace(task, extra), scheme, comb, sub, ctx.learned_runs(sub)


#: C10's arms at each place, both with learned positions: concatenated (lossless by construction) and added.
C10_ARMS = ("concat_split", "add")


def _c10_pairs(ctx: ReportContext) -> list[tuple[TaskPlace, Any, dict[str, pd.DataFrame]]]:
    """Where C10 probes the layer-1 input: concat_split and add with learned positions in one configuration
    (everything else held equal, seeds paired), at every width of the width series, or, with none, of every
    token task: (task and what tells two configurations apart, d, each arm's rows)."""
    series = width_series(ctx)
    places = {(c.where["task.name"], c.where["model.d"]) for cs in series.values() for c in cs}
    f = ctx.frame
    if "model.position.scheme" not in f or "task.name" not in f:
        return []
    learned = f[(f["model.position.scheme"] == "learned") & f["task.name"].isin(_token_tasks(ctx))]
    comps = [
        c
        for c in compare(learned, ["model.combine"], C10_ARMS[:1], C10_ARMS[1:])
        if not places or (c.where["task.name"], c.where["model.d"]) in places
    ]
    extra = config_labels([c.where for c in comps], ["task.name", "model.d"])
    out = []
    for c, x in zip(comps, extra, strict=True):
        rows = {comb: f[f.run_id.isin(s.run_ids)] for comb, s in zip(C10_ARMS, (c.a, c.b), strict=True)}
        out.append((TaskPlace(c.where["task.name"], x), c.where["model.d"], rows))
    return sorted(out, key=lambda t: (t[0], t[1]))


def _plan_c10(ctx: ReportContext) -> None:
    for _, _, arms in _c10_pairs(ctx):
        for arm in arms.values():
            ctx.submit("input_probes", ctx.learned_runs(arm))


def _plan_c2(ctx: ReportContext) -> None:
    for *_, runs in _c2_arms(ctx):
        ctx.submit("overlap", runs)


def _plan_c4(ctx: ReportContext) -> None:
    for *_, runs in _c4_arms(ctx):
        ctx.submit("cross_share", runs)


def _plan_c8(ctx: ReportContext) -> None:
    for _, scheme, _, _, runs in _c8_arms(ctx):
        ctx.submit("layer_probes", runs)
        if scheme == "none":  # its control: the same models at initialisation
            ctx.submit("layer_probes", runs, at_init=True)


# --- claims -------------------------------------------------------------------------------
@claim(
    "C2",
    "With learned embeddings, addition is a super-case of concatenation",
    "Training can split the dimensions itself: token and position vectors move into separate subspaces, so "
    "adding loses nothing against concatenating.",
    "an answer to the question",
    "supported when, over seeds, the trained token/position subspaces overlap less than at initialisation beyond "
    "the interval (every add + learned arm that learned) and add is not worse than concat_split (both learned "
    "positions) beyond the margin ({margin} accuracy, ±2% loss) on every comparison with an arm above the floor "
    "({floor}; none may be dropped, so an arm failing where the other learned counts against it); "
    "not supported when concat_split beats add beyond the Holm-corrected interval on some comparison, "
    "or add is worse beyond the margin, or the overlap grows",
    metrics=CHAIN,
    plan=_plan_c2,
)
def c2(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    geo_rows, table = [], []
    for task, d, sub, runs in _c2_arms(ctx):
        done = sub[sub.status == "done"]
        if not runs:
            side = run_side(ctx, "trained", list(done.run_id))
            geo_rows.append(Evidence(Comparison(task.where(**{"model.d": d}), side, side), False, ()))
            continue
        got = ctx.measure_many("overlap", runs)
        got = {run: g for run, g in got.items() if g}
        trained = {_seed(ctx, run): g["trained"] for run, g in got.items()}
        init = {_seed(ctx, run): g["init"] for run, g in got.items()}
        c = Comparison(
            task.where(**{"model.d": d}),
            measured_side(ctx, "trained", list(got), "overlap", trained),
            measured_side(ctx, "at init", list(got), "overlap", init),
        )
        geo_rows.append(Evidence(c, True, (paired_test(c, OVERLAP),)))
        rand = float(np.mean([g["random"] for g in got.values()]))
        table.append(
            [
                str(task),
                str(d),
                f"{np.mean(list(init.values())):.3f}",
                f"{np.mean(list(trained.values())):.3f}",
                f"{rand:.3f}",
                str(len(got)),
            ]
        )
    geometry = decide(geo_rows, ctx.margin, kind="better", combine="all")
    learned_pos = ctx.frame[ctx.frame["model.position.scheme"] == "learned"]
    learned_pos = learned_pos[learned_pos["task.name"].isin(_token_tasks(ctx))]
    comps = compare(learned_pos, ["model.combine"], ("add",), ("concat_split",))
    not_worse, concat_wins = c2_families(comps, ctx.floor, ctx.margin)
    r.verdict = rule_c2(geometry, not_worse, concat_wins)
    r.tables.append(
        Table(
            "Overlap of token and position subspaces (mean cos² of principal angles), mean over the seeds "
            "of add + learned arms that learned",
            ["task", "d", "at init", "trained", "random subspaces", "seeds"],
            table,
        )
    )
    r.tables.append(
        family_table(
            "Trained (A) against initial (B) overlap, paired by seed; verdict: A lower",
            geometry,
            ["task.name", "model.d"],
        )
    )
    r.tables.append(
        family_table(
            "add (A) against concat_split (B), learned positions, every comparison; verdict: add not worse",
            not_worse,
            ["task.name", "model.d"],
        )
    )
    r.tables.append(
        family_table(
            "concat_split (A) against add (B); verdict: concat_split better", concat_wins, ["task.name", "model.d"]
        )
    )
    halves = {
        "overlap falls": geometry.verdict,
        "add not worse": not_worse.verdict,
        "concat_split better somewhere": concat_wins.verdict,
    }
    r.halves = halves
    r.key = "; ".join(f"{k}: {v}" for k, v in halves.items())
    learned_geo = [row for row in geometry.rows if row.test is not None]
    if learned_geo:
        drop = -float(np.mean([row.test.mean for row in learned_geo]))
        r.key += f" (overlap fell by {drop:.3f} on average over {len(learned_geo)} arm(s))"
        first = learned_geo[0].comparison.a.run_ids[0]
        g = ctx.analyse("geometry", run_id=first)
        r.figures += _figures(g, {"_subspaces.png": f"subspaces, run {first}"})
    r.caveats.append(
        "Compare the fall with the overlap expected of random subspaces of the same dimensions (the 'random "
        "subspaces' column): a fall that stays near that baseline is a small effect."
    )
    r.metric = used_metrics(not_worse, concat_wins)
    r.run_ids = runs_of(geometry, not_worse)
    r.rows = (
        row_records(geometry, "overlap")
        + row_records(not_worse, "add not worse")
        + row_records(concat_wins, "concat_split better")
    )
    return r


def width_series(ctx: ReportContext) -> dict[str, list[Comparison]]:
    """concat_split against add at three or more widths of one configuration (everything but the width held
    equal): the series C3 reads, named by task and scheme, and by whatever else tells two series apart."""
    comps = compare(ctx.frame, ["model.combine"], ("concat_split",), ("add",))
    by: dict[str, list[Comparison]] = {}
    for c in comps:
        by.setdefault(repr(sorted((k, str(v)) for k, v in c.where.items() if k != "model.d")), []).append(c)
    series = [v for v in by.values() if len({c.where["model.d"] for c in v}) >= 3]
    rest = [{k: v for k, v in cs[0].where.items() if k != "model.d"} for cs in series]
    extra = config_labels(rest, ["task.name", "model.position.scheme"])
    return {
        f"{w['task.name']}, {w['model.position.scheme']}" + (f" ({x})" if x else ""): sorted(
            cs, key=lambda c: c.where["model.d"]
        )
        for w, x, cs in zip(rest, extra, series, strict=True)
    }


def shrink_evidence(name: str, cs: list[Comparison], floor: float, margin: float) -> Evidence:
    """C3's evidence on one width series (concat_split against add, narrowest width first).

    Only widths at which an arm learned enter (``FLOOR_POLICY``: add failing where concat_split learned is the
    largest penalty there is); the narrowest and the widest of them are compared.
    Per seed and on each metric of CHAIN, the *add penalty* (concat_split better than add, so positive =
    adding hurts) at the narrowest width minus the penalty at the widest: positive = the penalty shrank as d
    grew. The direction is fixed before looking at the data, by the claim itself (adding interferes, less so in
    high dimensions), not by the sign the narrowest gap happens to have.

    A metric carries no information on the series (the chain falls back to the next one) when either end has
    both its arms at a bound of it (a ceiling or floor says nothing of a penalty), or when the narrowest width
    shows no penalty (its 95% interval inside the margin, on at least MIN_EQUIVALENCE_SEEDS seeds): there is no
    gap to shrink, and "nothing to nothing" would read as "not supported".
    """
    learned = [c for c in cs if enters(c, floor)]
    widths = [c.where["model.d"] for c in learned]
    where = {"series": name, "widths learned": ", ".join(map(str, widths)) or "none"}
    if len(learned) < 2:
        empty = Side("add penalty", {})
        return Evidence(Comparison(where, empty, empty), False, ())
    small, large = learned[0], learned[-1]
    tests = []
    for key in CHAIN:
        m = metric(key)
        sign = 1.0 if m.higher_is_better else -1.0
        arms = [small.a.of(key), small.b.of(key), large.a.of(key), large.b.of(key)]
        seeds = sorted(set.intersection(*(set(a) for a in arms)))

        def penalty(a: dict[int, float], b: dict[int, float], s: int, m: Any = m, sign: float = sign) -> float:
            return sign * ((a[s] - b[s]) / b[s] if m.relative else a[s] - b[s])

        diffs = [penalty(arms[0], arms[1], s) - penalty(arms[2], arms[3], s) for s in seeds]
        # Either end with both its arms at a bound carries no penalty on this metric (SCIENCE.md: a comparison at
        # a ceiling or floor carries no information), so neither does the change between the ends
        ends = [(small, arms[0], arms[1]), (large, arms[2], arms[3])]
        at = [(c, m.arms_at_bound([a[s] for s in seeds], [b[s] for s in seeds])) for c, a, b in ends]
        bound = next(((c, x) for c, x in at if x), None)
        info = f"both arms at the {bound[1]} of {m.label} at d={bound[0].where['model.d']}" if bound else None
        narrow = [penalty(arms[0], arms[1], s) for s in seeds]
        m_narrow = margin_for(m, margin, float(np.mean([arms[1][s] for s in seeds])) if seeds else math.nan)
        if info is None and len(narrow) >= MIN_EQUIVALENCE_SEEDS:
            _, lo, hi = t_interval(narrow)
            if -m_narrow <= lo and hi <= m_narrow:
                info = f"no add penalty on {m.label} at d={small.where['model.d']} to shrink (inside the margin)"
        tests.append(from_diffs(_flip(m), diffs, info))
    a = Side(
        f"add penalty at d={small.where['model.d']}",
        {},
        small.a.params,
        small.a.flops,
        small.a.run_ids + small.b.run_ids,
    )
    b = Side(
        f"add penalty at d={large.where['model.d']}",
        {},
        large.a.params,
        large.a.flops,
        large.a.run_ids + large.b.run_ids,
    )
    return Evidence(Comparison(where, a, b), True, tuple(tests))


def c3_table(fam: Family, series: dict[str, list[Comparison]], floor: float) -> Table:
    """One row per width series: the widths that learned, the add penalty at both ends, the shrink, verdict."""
    rows = []
    for row in fam.rows:
        name = row.comparison.where["series"]
        learned = [c for c in series[name] if enters(c, floor)]
        ends = []
        for c in (learned[0], learned[-1]) if len(learned) >= 2 else ():
            t = paired_test(c, row.test.metric if row.test is not None else ACC)
            lo, hi = t.oriented()
            fmt = t.metric.fmt_diff
            ends.append(f"d={c.where['model.d']}: {fmt(t.sign * t.mean)} [{fmt(lo)}, {fmt(hi)}]")
        rows.append(
            [
                name,
                row.comparison.where["widths learned"],
                *(ends or ["–", "–"]),
                row.describe() if row.test is not None else "; ".join(row.skipped),
                "95%" if abs(row.level - 0.95) < 1e-9 else f"{100 * row.level:.2f}% (Holm)",
                row.verdict,
            ]
        )
    return Table(
        f"Does the add penalty shrink as d grows? — {fam.explain()}",
        [
            "series",
            "widths where an arm learned",
            "add penalty, narrowest",
            "add penalty, widest",
            "narrowest − widest (positive: shrank)",
            "interval level",
            "verdict",
        ],
        rows,
    )


def _flip(m: Any) -> Any:
    from dataclasses import replace

    return replace(m, higher_is_better=True)


@claim(
    "C3",
    "In high dimensions random vectors are nearly orthogonal",
    "So token and position information barely interfere when added, and less so as d grows.",
    "an answer to the question",
    "on every width series (concat_split against add at three or more widths), take the narrowest and the widest "
    "width at which an arm learned (floor {floor}; fewer than two such widths: budget too small); supported when "
    "the add penalty (concat_split better than add) at the narrowest minus the penalty at the widest is above 0 "
    "beyond the interval over paired seeds (the penalty shrinks as d grows); not supported when it grows, or changes "
    "by less than the margin, on some series (Holm); deciding metric: accuracy, then held-out loss",
    metrics=CHAIN,
)
def c3(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    g = ctx.analyse("geometry", scheme="sinusoidal", d=64, length=64)
    r.tables.append(
        Table(
            "Mean |cos| of random vector pairs against the law sqrt(2/(πd))",
            ["d", "measured", "sqrt(2/(πd))", "exact"],
            [
                [str(c["d"]), f"{c['mean_abs_cos']:.4f} ± {c['stderr']:.4f}", f"{c['law']:.4f}", f"{c['exact']:.4f}"]
                for c in g["random_cosines"]
            ],
        )
    )
    r.figures += _figures(g, {"_cosines.png": "random cosines against d"})
    series = width_series(ctx)
    fam = rule_c3([shrink_evidence(name, cs, ctx.floor, ctx.margin) for name, cs in series.items()], ctx.margin)
    r.verdict = fam.verdict
    for name, cs in series.items():
        r.tables.append(
            family_table(
                f"Gap by width: {name}; concat_split (A) against add (B)",
                family(cs, CHAIN, ctx.floor, ctx.margin),
                ["model.d"],
            )
        )
    r.tables.append(c3_table(fam, series, ctx.floor))

    if series:
        pts = {}
        for name, cs in series.items():
            tests = [(c.where["model.d"], paired_test(c, ACC), enters(c, ctx.floor)) for c in cs]
            pts[name] = [(d, t.mean, *t.interval(), learned) for d, t, learned in tests]
        path = gap_plot(
            ctx.figures / "c3-gap-by-d.png", pts, "concat_split − add accuracy against width", "accuracy difference"
        )
        r.figures.append(Figure("concat_split − add against d", path))
    law_ok = all(abs(c["mean_abs_cos"] - c["exact"]) < 4 * c["stderr"] + 1e-9 for c in g["random_cosines"])
    shrink = []
    for row in fam.rows:
        where = row.comparison.where
        if row.test is None:
            shrink.append(f"{where['series']}: {row.verdict} (widths where an arm learned: {where['widths learned']})")
            continue
        lo, hi = row.interval
        fmt = row.test.metric.fmt_diff
        shrink.append(
            f"{where['series']}: add penalty shrank by {fmt(row.test.mean)} [{fmt(lo)}, {fmt(hi)}] "
            f"{row.test.metric.label} between d={where['widths learned']} ({row.verdict})"
            + "".join(f"; {n}" for n in row.notes if n.startswith(LOSS_DOUBTS))
        )
    r.key = f"random cosines follow the law: {'yes' if law_ok else 'no'}; " + ("; ".join(shrink) or "no width series")
    r.metric = used_metrics(fam)
    # every run of every width series, learned or not (the series rows themselves are built from differences)
    r.run_ids = sorted(set(runs_of(fam)) | {run for cs in series.values() for c in cs for run in c.run_ids()})
    r.rows = row_records(fam, "gap shrinks")
    return r


@claim(
    "C4",
    "Adding makes attention do four jobs at once",
    "With x + p, every layer-1 logit mixes token–token, token–position, position–token and position–position "
    "terms, and the cross terms cost something.",
    "an answer to the question; Ke et al. 2021 (TUPE)",
    f"two halves, both named: (1) the cross terms (token–position + position–token) carry at least "
    f"{CROSS_SHARE:.0%} of the within-query logit variance, beyond the 95% interval over seeds, in every add arm "
    "(every task, scheme and width) that learned (floor {floor}); (2) removing them costs: add beats untied "
    "attention (cross terms dropped) beyond the Holm-corrected interval on some comparison, and untied beats add "
    "on none (a general statement: one comparison where removing them helps refutes it); an arm that did not learn "
    "where the other did counts against it (the one floor policy); supported when both halves hold, not "
    "supported when either fails",
    metrics=CHAIN,
    plan=_plan_c4,
)
def c4(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    rows, items, ids = [], [], []
    for task, scheme, d, runs in _c4_arms(ctx):
        got = ctx.measure_many("cross_share", runs)
        shares = {_seed(ctx, run): x["cross"] for run, x in got.items()}
        ids += runs
        c = Comparison(
            task.where(**{"model.position.scheme": scheme, "model.d": d}),
            measured_side(ctx, "cross terms", runs, "share", shares),
            measured_side(ctx, f"threshold {CROSS_SHARE:.0%}", runs, "share", {s: CROSS_SHARE for s in shares}),
        )
        items.append(Evidence(c, True, (paired_test(c, SHARE),)))
        rows.append(
            [
                str(task),
                scheme,
                str(d),
                *[
                    pct(float(np.mean([x.get(t, np.nan) for x in got.values()])))
                    for t in ("tt", "tp", "pt", "pp", "cross")
                ],
                str(len(got)),
            ]
        )
    share = decide(items, ctx.margin, kind="better", combine="all")
    r.tables.append(
        Table(
            "Share of layer-1 logit variance within each query (mean over heads and over the seeds that learned)",
            ["task", "scheme", "d", "tt", "tp", "pt", "pp", "cross", "seeds"],
            rows,
        )
    )
    r.tables.append(
        family_table(
            f"Half 1: cross-term share (A) against {CROSS_SHARE:.0%} (B), every add arm that learned, per seed",
            share,
            ["task.name", "model.position.scheme", "model.d"],
        )
    )
    comps = []
    for base in (("learned", "add"), ("sinusoidal", "add")):
        comps += compare(ctx.frame, ["model.position.scheme", "model.combine"], base, ("untied", "none"))
    cost, helps = c4_families(comps, ctx.floor, ctx.margin)
    costs = cost_half(cost, helps)
    r.tables.append(
        family_table(
            "Half 2: add (A) against untied (cross terms removed, B); verdict: removing them costs",
            cost,
            ["task.name", "model.d"],
        )
    )
    r.tables.append(
        family_table(
            "Half 2, the other way: untied (A) against add (B); verdict: removing them helps (each row at its own "
            "Holm level; one that holds refutes a general cost)",
            helps,
            ["task.name", "model.d"],
        )
    )
    r.verdict = rule_c4(share.verdict, costs)

    def count(fam: Family) -> int:
        return sum(row.verdict == SUPPORTED for row in fam.rows)

    direction = ""
    if cost.tested:
        direction = (
            f" (removing them cost on {count(cost)} and helped on {count(helps)} of {len(cost.tested)} informative "
            "comparisons, each beyond its Holm-corrected interval"
            + ("; one that helps refutes a general cost)" if count(helps) else ")")
        )
        speed = [row for row in cost.tested if row.test.metric.key == "auc"]
        failed = [row for row in cost.tested if not row.comparison.learned(ctx.floor)]
        if speed:
            direction += (
                f"; {len(speed)} of the {len(cost.tested)} decided on learning speed alone (both arms at the accuracy "
                "ceiling and below the loss floor: how fast, not how well)"
            )
        if failed:
            direction += f"; on {len(failed)} one arm did not learn where the other did (counted: see the rule)"
    r.halves = {f"cross terms carry ≥ {CROSS_SHARE:.0%}": share.verdict, "removing them costs": costs}
    # untied's extra projections: a size difference said beside any verdict on it
    ratios = [row.comparison.b.params / row.comparison.a.params for row in cost.tested if row.comparison.a.params]
    if ratios:
        lo, hi = min(ratios), max(ratios)
        direction += f"; untied has ×{lo:.2f}{f'–{hi:.2f}' if hi - lo > 0.005 else ''} add's parameters"
    r.key = f"cross terms carry ≥ {CROSS_SHARE:.0%}: {share.verdict}; removing them costs: {costs}{direction}"
    if ids:
        a = ctx.analyse("attention", run_id=ids[0])
        r.figures += _figures(a, {".png": f"four terms, run {ids[0]}"})
    r.notes.append(
        "Split used: LN(x+p) = g(x−mean x)/s + g(p−mean p)/s + b with s the scale of the sum, so the parts add "
        "up exactly; the LayerNorm bias is a part of its own."
    )
    r.caveats.append(
        "Untied attention is not a clean removal of the cross terms: it carries position only inside attention "
        "(no input table), with its own parameters (see the params column), so half 2 compares two designs."
    )
    r.metric = used_metrics(cost)
    r.run_ids = sorted(set(ids) | set(runs_of(cost)))
    r.rows = (
        row_records(share, "cross-term share")
        + row_records(cost, "removing the cross terms costs")
        + row_records(helps, "removing the cross terms helps")
    )
    return r


@claim(
    "C8",
    "Without position an encoder is permutation-equivariant, but a causal decoder still learns position",
    "NoPE encoders cannot tell order; causal decoders recover absolute position from the mask.",
    "Haviv et al. 2022; Kazemnejad et al. 2023",
    "equivariance: max |f(x[π]) − f(x)[π]| at float round-off for `none` and for no other scheme; probe: in a "
    "causal NoPE decoder that learned its task (floor {floor}), a linear probe of absolute position from its best "
    "layer beats both controls, the layer-1 input (no position, only token–position correlation) and the best "
    "layer of the same model at initialisation, beyond the interval over seeds, on some task: both controls must "
    "fall on that task, and Holm–Bonferroni runs across the tasks. A task whose solution needs no absolute "
    "position (sorting) may show none without refuting that a decoder can learn it; the key gives each task's "
    "verdict",
    metrics=("probe",),
    plan=_plan_c8,
)
def c8(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    s = ctx.analyse("symmetry", scheme="none", d=32, length=12)
    r.tables.append(
        Table(
            "Permutation test on fresh encoders (float64): max |f(x[π]) − f(x)[π]|",
            ["scheme", "combine", "max abs diff", "equivariant"],
            [
                [k, v["combine"], f"{v['max_abs_diff']:.1e}", "yes" if v["equivariant"] else "no"]
                for k, v in s["schemes"].items()
            ],
        )
    )
    items, table, shown = [], [], []
    for task, scheme, comb, arm, runs in _c8_arms(ctx):
        acc = float(arm[arm.status == "done"]["m.acc"].mean())
        if not runs:
            table.append([str(task), f"{scheme} + {comb}", pct(acc), "below the floor: not probed", "", "", ""])
            if scheme == "none":
                side = run_side(ctx, "NoPE decoder", list(arm.run_id))
                items.append(Evidence(Comparison(task.where(), side, side), False, ()))
            continue
        trained = ctx.measure_many("layer_probes", runs)
        best = {_seed(ctx, run): max(p["accuracy"][1:]) for run, p in trained.items()}
        first = {_seed(ctx, run): p["accuracy"][0] for run, p in trained.items()}
        chance = float(np.mean([p["chance"] for p in trained.values()]))
        shown.append(runs[0])
        row = [
            str(task),
            f"{scheme} + {comb}",
            pct(acc),
            pct(float(np.mean(list(best.values())))),
            pct(float(np.mean(list(first.values())))),
        ]
        if scheme == "none":
            at_init = ctx.measure_many("layer_probes", runs, at_init=True)
            init = {_seed(ctx, run): max(p["accuracy"][1:]) for run, p in at_init.items()}
            row.append(pct(float(np.mean(list(init.values())))))
            a = measured_side(ctx, "trained NoPE, best layer", runs, "probe", best)
            for label, control in (("layer-1 input", first), ("at initialisation, best layer", init)):
                c = Comparison(task.where(control=label), a, measured_side(ctx, label, runs, "probe", control))
                items.append(Evidence(c, True, (paired_test(c, PROBE),)))
        else:
            row.append("–")
        row.append(pct(chance))
        table.append(row)
    by_task: dict[str, list[Evidence]] = {}
    for item in items:
        w = item.comparison.where
        by_task.setdefault(str(TaskPlace(w["task.name"], w.get("setting", ""))), []).append(item)
    probe, task_verdicts = decide_some_group(list(by_task.values()), ctx.margin)
    r.verdict = rule_c8(s["equivariant_schemes"], probe)
    r.halves = {"equivariant without positions": EXACT if s["equivariant_schemes"] == ["none"] else NOT_SUPPORTED,
                "a NoPE decoder learns position": probe.verdict}  # fmt: skip
    r.tables.append(
        Table(
            "Linear probe of absolute position from causal decoders (held-out sequences), mean over the seeds that "
            "learned",
            [
                "task",
                "arm",
                "task accuracy",
                "probe, best layer",
                "probe, layer-1 input",
                "probe at init, best layer",
                "chance",
            ],
            table,
        )
    )
    r.tables.append(
        family_table("Trained NoPE probe (A) against each control (B), paired by seed", probe, ["task.name", "control"])
    )
    if shown:
        p = ctx.analyse("probes", run_id=shown[0])
        r.figures += _figures(p, {"_layers.png": f"probes by layer, run {shown[0]}"})
    equi = ", ".join(s["equivariant_schemes"]) or "none"
    per_task = ", ".join(f"{t}: {v}" for t, v in zip(by_task, task_verdicts, strict=True))
    r.key = f"equivariant: {equi} (exact); NoPE decoder learns position: {probe.verdict} ({per_task or 'no decoder'})"
    if probe.verdict == TOO_SMALL:
        r.caveats.append("No NoPE decoder reached the floor at this budget, so the probe half could not be drawn.")
    r.metric = used_metrics(probe)
    r.run_ids = sorted(set(runs_of(probe)) | set(shown))
    r.rows = row_records(probe, "NoPE probe beats control")
    return r


@claim(
    "C10",
    "After adding, token and position can collide",
    "embed(a) + p1 ≈ embed(b) + p2: addition can make different (token, position) pairs look alike.",
    "an answer to the question",
    "supported when linear decodability of token id or of position from the layer-1 input under add falls below "
    "concat_split (lossless by construction) beyond the Holm-corrected interval over seeds at some width (arms that "
    "learned, floor {floor}); not supported when every informative comparison is within the margin ({margin}) or "
    "favours add; nearest-neighbour collisions are reported beside, not as the rule",
    metrics=("probe",),
    plan=_plan_c10,
)
def c10(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    items, table, shown = [], [], []
    for task, d, arms in _c10_pairs(ctx):
        sides, learned = {}, True
        for comb in C10_ARMS:
            arm = arms[comb]
            runs = ctx.learned_runs(arm)
            if not runs:
                learned = False
                sides[comb] = run_side(ctx, comb, list(arm.run_id))
                continue
            got = ctx.measure_many("input_probes", runs)
            sides[comb] = {
                what: measured_side(ctx, comb, runs, "probe", {_seed(ctx, run): g[what] for run, g in got.items()})
                for what in ("token", "position")
            }
            shown.append(runs[0])
            table.append(
                [
                    str(task),
                    str(d),
                    comb,
                    pct(float(np.mean([g.get("token", np.nan) for g in got.values()]))),
                    pct(float(np.mean([g["position"] for g in got.values()]))),
                    str(len(got)),
                ]
            )
        if len(sides) < 2:
            continue
        for what in ("token", "position"):
            if not learned:
                a = sides["concat_split"] if isinstance(sides["concat_split"], Side) else sides["concat_split"][what]
                b = sides["add"] if isinstance(sides["add"], Side) else sides["add"][what]
                items.append(Evidence(Comparison(task.where(**{"model.d": d}, decoded=what), a, b), False, ()))
                continue
            c = Comparison(task.where(**{"model.d": d}, decoded=what), sides["concat_split"][what], sides["add"][what])
            items.append(Evidence(c, True, (paired_test(c, PROBE),)))
    fam = decide(items, ctx.margin, kind="better", combine="any")
    r.verdict = rule_c10(fam)
    r.tables.append(
        Table(
            "Decodability from the layer-1 input (learned positions), mean over the seeds that learned",
            ["task", "d", "combine", "token probe", "position probe", "seeds"],
            table,
        )
    )
    r.tables.append(
        family_table(
            "concat_split (A) against add (B): decodability; verdict: add loses information",
            fam,
            ["task.name", "model.d", "decoded"],
        )
    )
    coll = []
    for run in shown:
        col = (ctx.analyse("probes", run_id=run) or {}).get("collisions") or {}
        if col:
            row = ctx.frame[ctx.frame.run_id == run].iloc[0]
            coll.append(
                [
                    row["task.name"],
                    str(row["model.d"]),
                    row["model.combine"],
                    pct(col["token_fraction"]),
                    pct(col["position_fraction"]),
                    run,
                ]
            )
    if coll:
        r.tables.append(
            Table(
                "Nearest-neighbour collisions in the layer-1 input (reported beside, not the rule)",
                ["task", "d", "combine", "token collisions", "position collisions", "run"],
                coll,
            )
        )
    tested = [row for row in fam.rows if row.test is not None]
    if tested:
        best = max(tested, key=lambda row: row.test.mean)
        where = best.comparison.place(["task.name", "model.d", "decoded"])
        r.key = (
            f"largest concat_split − add decodability gap: {where}: {best.describe()}; {len(tested)} of "
            f"{len(fam.rows)} comparisons informative"
        )
    else:
        # Say how many comparisons each reason removed: "every probe at its ceiling" must not stand for rows that
        # the task floor removed before any probe was read.
        reasons = Counter(row.skipped[0] if row.skipped else row.verdict for row in fam.rows)
        r.key = (
            f"no informative comparison among {len(fam.rows)}: "
            + "; ".join(f"{n} with {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
            if reasons
            else "not run: this study has no add and concat_split arms of a token task at one width"
        )
    r.notes.append("Concatenation is lossless by construction: ||[x_a − x_b; p_i − p_j]|| ≥ ||p_i − p_j||.")
    r.metric = used_metrics(fam)
    r.run_ids = runs_of(fam)
    r.rows = row_records(fam, "add loses decodability")
    return r


@claim(
    "C11",
    "PE(pos+k) is a linear function of PE(pos) for sinusoidal encoding",
    "A fixed linear map (a rotation) takes each position's encoding to the one k steps on, which lets attention "
    "use relative position.",
    "Vaswani et al. 2017, §3.5",
    "exact when the held-out residual of the best linear map (fit on some positions, scored on the others, so a "
    "table with more dimensions than positions cannot pass by fitting anything) is below 1e-9 for sinusoidal; "
    "residuals reported for learned tables (trained) and MiniLM's pretrained table",
)
def c11(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    lin = ctx.analyse("linearity", scheme="sinusoidal", d=64, length=64)
    rows = []
    for name, res in lin["tables"].items():
        for x in res:
            rows.append(
                [
                    f"sinusoidal ({name})",
                    str(x["k"]),
                    f"{x['residual']:.1e}",
                    f"{x['heldout_residual']:.1e}",
                    "yes" if x["determined"] else "no (any table fits)",
                ]
            )
    # Held-out, not in-sample: with d ≥ the number of positions any table, random ones included, fits in-sample
    sin_max = max(x["heldout_residual"] for x in lin["tables"][lin["subject"]])
    ids = []
    for task in _token_tasks(ctx)[:2]:
        run_id = ctx.pick_run(
            select(ctx.frame, task__name=task, model__position__scheme="learned", model__combine="add")
        )
        if run_id is None:
            continue
        ids.append(run_id)
        trained = ctx.analyse("linearity", run_id=run_id)
        for name, res in trained["tables"].items():
            for x in res:
                rows.append(
                    [
                        f"learned, trained on {task} ({name})",
                        str(x["k"]),
                        f"{x['residual']:.1e}",
                        f"{x['heldout_residual']:.1e}",
                        "yes" if x["determined"] else "no (any table fits)",
                    ]
                )
    pre = ctx.prefetched("pretrained")
    if pre and "linearity" in pre:
        for x in pre["linearity"].get("minilm", []):
            rows.append(
                [
                    f"MiniLM pretrained positions (shuffled rows: {x['shuffled_residual']:.2f})",
                    str(x["k"]),
                    f"{x['residual']:.1e}",
                    "–",
                    "yes",
                ]
            )
    r.tables.append(
        Table(
            "Relative residual of the best linear map PE(pos) → PE(pos+k)",
            ["table", "k", "residual", "held-out residual", "over-determined"],
            rows,
        )
    )
    r.verdict = EXACT if sin_max < 1e-9 else NOT_SUPPORTED
    r.key = f"sinusoidal held-out residual ≤ {sin_max:.1e}"
    r.run_ids = ids
    return r
