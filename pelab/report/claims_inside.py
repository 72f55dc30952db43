"""Claims settled by looking inside encodings and trained models: C1, C2, C3, C4, C8, C10, C11, C15.

The analyses themselves live in ``pelab.analysis``; this module picks which stored
checkpoints to analyse (the lowest-seed run of each arm), runs the analyses through
``ReportContext.analyse`` (results cached under the study's ``analyses/`` folder) and
turns their numbers into verdicts.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pelab.report.claims import (
    ClaimResult,
    Figure,
    ReportContext,
    Table,
    comparison_table,
    directional_verdict,
    pct,
    pp,
)
from pelab.report.evidence import compare, select
from pelab.report.figures import gap_plot
from pelab.report.verdicts import EXACT, INCONCLUSIVE, NOT_SUPPORTED, REPORTED, SUPPORTED, TOO_SMALL, directional

#: C1/C15 look at the encoding at the size of the question's figures.
C1_D, C1_LENGTH = 512, 128
CROSS_SHARE = 0.10
ADD_WORDS = {SUPPORTED: "add worse", NOT_SUPPORTED: "add not worse"}


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


def _learned_run(ctx: ReportContext, arm: pd.DataFrame) -> str | None:
    """The arm's analysed run, only if the arm learned its task (mean accuracy above the floor)."""
    done = arm[arm.status == "done"]
    if done.empty or "m.acc" not in done or float(done["m.acc"].mean()) < ctx.floor:
        return None
    return ctx.pick_run(arm)


def _token_tasks(ctx: ReportContext) -> list[str]:
    f = ctx.frame
    seg = f["model.n_segments"].fillna(0) if "model.n_segments" in f else pd.Series(0, index=f.index)
    tok = f[(f["model.head"] == "token") & (seg == 0)]
    return list(dict.fromkeys(tok["task.name"]))


def c1(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C1",
        title="Sinusoidal encoding is 'conceptually a concatenation'",
        claim="The sinusoid disturbs the first dimensions a lot and the last ones hardly at all, so adding it "
        "leaves most of the token's dimensions alone.",
        source="an answer to the question",
        rule=f"supported when at least a quarter of the d={C1_D} dimensions vary by less than 0.1 over "
        f"positions 0..{C1_LENGTH - 1}, and the table of values shows it",
    )
    s = ctx.analyse("spectrum", scheme="sinusoidal", d=C1_D, length=C1_LENGTH)
    quiet = C1_D - s["varying"]
    r.verdict = SUPPORTED if quiet >= C1_D / 4 else NOT_SUPPORTED
    r.key = f"{s['varying']} of {C1_D} dimensions vary by > 0.1; {quiet} hardly move"
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


def c15(ctx: ReportContext) -> ClaimResult:
    from pelab.config import PositionConfig
    from pelab.tables import scheme_table

    r = ClaimResult(
        id="C15",
        title="What the encoding looks like (the question's figures)",
        claim="The heatmap of p (positions × dimensions) and curves of selected dimensions.",
        source="the question's figures",
        rule="the images exist and the plotted table matches the closed form",
    )
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


def c2(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C2",
        title="With learned embeddings, addition is a super-case of concatenation",
        claim="Training can split the dimensions itself: token and position vectors move into separate "
        "subspaces, so adding loses nothing against concatenating.",
        source="an answer to the question",
        rule="supported when the trained token/position subspaces overlap less than at initialisation and "
        "add + learned is not worse than the best concat_split beyond the interval",
    )
    rows, shrunk, ids, drops = [], [], [], []
    for task in _token_tasks(ctx):
        arm = select(ctx.frame, task__name=task, model__position__scheme="learned", model__combine="add")
        for d in sorted(arm["model.d"].unique()) if not arm.empty else []:
            run_id = _learned_run(ctx, arm[arm["model.d"] == d])
            if run_id is None:
                continue
            g = ctx.analyse("geometry", run_id=run_id)
            init, trained = g["overlap"]["init"], g["overlap"]["trained"]
            shrunk.append(trained["overlap"] < init["overlap"])
            drops.append(init["overlap"] - trained["overlap"])
            ids.append(run_id)
            rows.append(
                [
                    task,
                    str(d),
                    f"{init['overlap']:.3f}",
                    f"{trained['overlap']:.3f}",
                    f"{trained['random_baseline']:.3f}",
                    run_id,
                ]
            )
    r.tables.append(
        Table(
            "Overlap of token and position subspaces (mean cos² of principal angles)",
            ["task", "d", "at init", "trained", "random subspaces", "run"],
            rows,
        )
    )
    comps, verdicts = [], []
    for task in _token_tasks(ctx):
        sub = ctx.frame[ctx.frame["task.name"] == task]
        cands = []
        for scheme in ("learned", "sinusoidal"):
            cands += compare(
                sub, ["model.position.scheme", "model.combine"], ("learned", "add"), (scheme, "concat_split")
            )
        if cands:
            worst = min(cands, key=lambda c: c.diff if c.diff == c.diff else math.inf)  # the best concat arm
            comps.append(worst)
            verdicts.append(directional_verdict(worst, ctx, direction=-1))
    r.tables.append(
        comparison_table(
            "add + learned (A) against the best concat_split (B)",
            comps,
            ["task.name", "model.d"],
            [ADD_WORDS.get(v, v) for v in verdicts],
        )
    )
    add_ok = [v in (NOT_SUPPORTED, INCONCLUSIVE) for v in verdicts if v != TOO_SMALL]
    if not rows or not add_ok:
        r.verdict = TOO_SMALL if not rows or all(v == TOO_SMALL for v in verdicts) else INCONCLUSIVE
    elif all(shrunk) and all(v == NOT_SUPPORTED for v in verdicts if v != TOO_SMALL):
        r.verdict = SUPPORTED
    elif not any(shrunk) or any(v == SUPPORTED for v in verdicts):
        r.verdict = NOT_SUPPORTED
    else:
        r.verdict = INCONCLUSIVE
    r.key = f"overlap fell in {sum(shrunk)} of {len(shrunk)} trained models"
    if drops:
        r.key += f" (by {np.mean(drops):.3f} on average)"
        r.caveats.append(
            "Compare the size of the fall with the overlap expected of random subspaces of the same "
            "dimensions (the 'random subspaces' column): a fall that stays near that baseline is a small effect."
        )
    if ids:
        g = ctx.analyse("geometry", run_id=ids[0])
        r.figures += _figures(g, {"_subspaces.png": f"subspaces, run {ids[0]}"})
    r.run_ids = ids + sorted({x for c in comps for x in c.a.run_ids + c.b.run_ids})
    r.caveats.append("'Best concat_split' is chosen after seeing the results, which favours concatenation.")
    return r


def c3(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C3",
        title="In high dimensions random vectors are nearly orthogonal",
        claim="So token and position information barely interfere when added, and less so as d grows.",
        source="an answer to the question",
        rule="supported when the concat_split − add gap at the smallest d is above its value at the largest d "
        "beyond both intervals (the gap shrinks as d grows); the widest pair must have learned its task",
    )
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
    comps = [c for c in compare(ctx.frame, ["model.combine"], ("concat_split",), ("add",))]
    by_series: dict[str, list] = {}
    for c in comps:
        key = f"{c.group['task.name']}, {c.group['model.position.scheme']}"
        by_series.setdefault(key, []).append(c)
    series = {k: v for k, v in by_series.items() if len({c.group["model.d"] for c in v}) >= 3}
    verdicts = []
    for name, cs in series.items():
        cs = sorted(cs, key=lambda c: c.group["model.d"])
        small, large = cs[0], cs[-1]
        # The widest pair must have learned (else there is no baseline to shrink to); the narrowest
        # is measured as it is, since straining small widths is the point.
        if not (small.a.seeds and small.b.seeds and large.a.learned(ctx.floor) and large.b.learned(ctx.floor)):
            verdicts.append(TOO_SMALL)
        elif small.lo > large.hi:
            verdicts.append(SUPPORTED)
        elif large.lo > small.hi:
            verdicts.append(NOT_SUPPORTED)
        else:
            verdicts.append(INCONCLUSIVE)
        r.tables.append(comparison_table(f"Gap by width: {name}", cs, ["model.d"]))
    if series:
        path = gap_plot(
            ctx.figures / "c3-gap-by-d.png",
            {k: [(c.group["model.d"], c.diff, c.lo, c.hi) for c in v] for k, v in series.items()},
            "concat_split − add accuracy against width",
            "accuracy difference",
        )
        r.figures.append(Figure("concat_split − add against d", path))
    from pelab.report.verdicts import combine_any

    r.verdict = combine_any(verdicts) if verdicts else INCONCLUSIVE
    law_ok = all(abs(c["mean_abs_cos"] - c["exact"]) < 4 * c["stderr"] + 1e-9 for c in g["random_cosines"])
    gaps = []
    for cs in series.values():
        cs = sorted(cs, key=lambda c: c.group["model.d"])
        gaps.append(
            f"concat_split − add {pp(cs[0].diff, cs[0].lo, cs[0].hi)} at d={cs[0].group['model.d']}, "
            f"{pp(cs[-1].diff, cs[-1].lo, cs[-1].hi)} at d={cs[-1].group['model.d']}"
        )
    r.key = f"random cosines follow the law: {'yes' if law_ok else 'no'}; " + ("; ".join(gaps) or "no width series")
    r.run_ids = sorted({x for cs in series.values() for c in cs for x in c.a.run_ids + c.b.run_ids})
    return r


def c4(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C4",
        title="Adding makes attention do four jobs at once",
        claim="With x + p, every layer-1 logit mixes token–token, token–position, position–token and "
        "position–position terms.",
        source="an answer to the question; Ke et al. 2021 (TUPE)",
        rule=f"supported when the cross terms (token–position + position–token) carry at least "
        f"{CROSS_SHARE:.0%} of the within-query logit variance; the untied comparison says whether removing "
        "them costs accuracy",
    )
    rows, cross, ids = [], [], []
    for task in _token_tasks(ctx):
        for scheme in ("learned", "sinusoidal"):
            arm = select(ctx.frame, task__name=task, model__position__scheme=scheme, model__combine="add")
            arm = arm[arm["model.d"] == arm["model.d"].min()] if not arm.empty else arm
            run_id = _learned_run(ctx, arm) if not arm.empty else None
            if run_id is None:
                continue
            a = ctx.analyse("attention", run_id=run_id)
            sh = a["shares"]["variance_within_query"]
            cross.append(sh.get("tp", 0) + sh.get("pt", 0))
            ids.append(run_id)
            rows.append(
                [task, scheme]
                + [pct(sh.get(t, math.nan)) for t in ("tt", "tp", "pt", "pp")]
                + [pct(cross[-1]), f"{a['max_abs_diff']:.1e}", run_id]
            )
    r.tables.append(
        Table(
            "Share of layer-1 logit variance within each query (mean over heads)",
            ["task", "scheme", "tt", "tp", "pt", "pp", "cross", "sum check", "run"],
            rows,
        )
    )
    comps = []
    for base in (("learned", "add"), ("sinusoidal", "add")):
        comps += compare(ctx.frame, ["model.position.scheme", "model.combine"], ("untied", "none"), base)
    verdicts = [directional_verdict(c, ctx, direction=-1) for c in comps]
    r.tables.append(
        comparison_table(
            "untied (cross terms removed, A) against add (B); verdict: 'removing them costs'",
            comps,
            ["task.name", "model.d"],
            verdicts,
        )
    )
    if cross:
        r.verdict = SUPPORTED if float(np.mean(cross)) >= CROSS_SHARE else NOT_SUPPORTED
        r.key = f"cross terms: {pct(float(np.mean(cross)))} of within-query variance (mean of {len(cross)} models)"
        a = ctx.analyse("attention", run_id=ids[0])
        r.figures += _figures(a, {".png": f"four terms, run {ids[0]}"})
    else:
        r.verdict, r.key = TOO_SMALL, "no add arm learned its task above the floor"
    r.notes.append(
        "Split used: LN(x+p) = g(x−mean x)/s + g(p−mean p)/s + b with s the scale of the sum, so the parts add "
        "up exactly; the LayerNorm bias is a part of its own. 'sum check' is max |Σ terms − model logits|."
    )
    r.run_ids = ids + sorted({x for c in comps for x in c.a.run_ids + c.b.run_ids})
    return r


def c8(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C8",
        title="Without position an encoder is permutation-equivariant, but a causal decoder still learns position",
        claim="NoPE encoders cannot tell order; causal decoders recover absolute position from the mask.",
        source="Haviv et al. 2022; Kazemnejad et al. 2023",
        rule="equivariance: difference at float round-off for `none` only; probe: the NoPE decoder's position "
        "probe well above chance (at least twice chance) in its best layer",
    )
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
    equi_ok = s["equivariant_schemes"] == ["none"]
    probe_rows, probe_ok, ids = [], [], []
    dec = ctx.frame[ctx.frame["model.kind"] == "decoder"]
    for task in dict.fromkeys(dec["task.name"]):
        for scheme, comb in (("none", "none"), ("learned", "add")):
            arm = select(dec, task__name=task, model__position__scheme=scheme, model__combine=comb)
            run_id = ctx.pick_run(arm)
            if run_id is None:
                continue
            task_acc = pct(float(arm[arm.status == "done"]["m.acc"].mean()))
            p = ctx.analyse("probes", run_id=run_id)
            best = max(p["position"], key=lambda x: x["accuracy"])
            if scheme == "none":
                probe_ok.append(best["accuracy"] >= 2 * best["chance"])
            ids.append(run_id)
            for layer in p["position"]:
                probe_rows.append(
                    [
                        task,
                        f"{scheme} + {comb}",
                        task_acc,
                        str(layer["layer"]),
                        pct(layer["accuracy"]),
                        pct(layer["chance"]),
                        run_id,
                    ]
                )
    r.tables.append(
        Table(
            "Linear probe of absolute position from each layer of causal decoders (held-out sequences)",
            ["task", "arm", "task accuracy", "layer", "probe accuracy", "chance", "run"],
            probe_rows,
        )
    )
    if ids:
        p = ctx.analyse("probes", run_id=ids[0])
        r.figures += _figures(p, {".png": f"probes, run {ids[0]}"})
    if not probe_ok:
        r.verdict = SUPPORTED if equi_ok else NOT_SUPPORTED
        r.caveats.append("No NoPE decoder checkpoint in this study: only the equivariance half was measured.")
    else:
        r.verdict = SUPPORTED if equi_ok and all(probe_ok) else NOT_SUPPORTED
    probe = str(all(probe_ok)) if probe_ok else "n/a"
    r.key = f"equivariant: {', '.join(s['equivariant_schemes']) or 'none'}; NoPE decoder probe above chance: {probe}"
    r.notes.append(
        "The probe asks whether position is linearly readable from a causal model trained without any "
        "position signal; the arm's own task accuracy is shown beside it."
    )
    r.run_ids = ids
    return r


def c10(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C10",
        title="After adding, token and position can collide",
        claim="embed(a) + p1 ≈ embed(b) + p2: addition can make different (token, position) pairs look alike.",
        source="an answer to the question",
        rule="supported when token or position decodability from the layer-1 input falls measurably "
        "(≥ 5 points) below concat_split at the smallest d, or add shows collisions where concat has none",
    )
    rows, ids, gaps = [], [], []
    for task in _token_tasks(ctx):
        for d in sorted(select(ctx.frame, task__name=task)["model.d"].unique()):
            got = {}
            for comb in ("add", "concat_split"):
                run_id = _learned_run(
                    ctx,
                    select(
                        ctx.frame, task__name=task, model__position__scheme="learned", model__combine=comb, model__d=d
                    ),
                )
                if run_id is None:
                    continue
                p = ctx.analyse("probes", run_id=run_id)
                got[comb] = p
                ids.append(run_id)
                tok, col = p.get("token") or {}, p.get("collisions") or {}
                rows.append(
                    [
                        task,
                        str(d),
                        comb,
                        pct(tok.get("accuracy", math.nan)),
                        pct(tok.get("chance", math.nan)),
                        pct(p["position"][0]["accuracy"]),
                        pct(p["position"][0]["chance"]),
                        pct(col.get("token_fraction", math.nan)),
                        pct(col.get("position_fraction", math.nan)),
                        run_id,
                    ]
                )
            if len(got) == 2:
                a, c = got["add"], got["concat_split"]
                tok_gap = (c.get("token") or {}).get("accuracy", 0) - (a.get("token") or {}).get("accuracy", 0)
                pos_gap = c["position"][0]["accuracy"] - a["position"][0]["accuracy"]
                coll = (a.get("collisions") or {}).get("token_fraction", 0) + (a.get("collisions") or {}).get(
                    "position_fraction", 0
                )
                gaps.append((d, max(tok_gap, pos_gap), coll))
    r.tables.append(
        Table(
            "Decodability from the layer-1 input (learned positions) and nearest-neighbour collisions",
            [
                "task",
                "d",
                "combine",
                "token probe",
                "chance",
                "position probe",
                "chance",
                "token collisions",
                "position collisions",
                "run",
            ],
            rows,
        )
    )
    if gaps:
        d_min = min(g[0] for g in gaps)
        at_min = [g for g in gaps if g[0] == d_min]
        r.verdict = SUPPORTED if any(g[1] >= 0.05 or g[2] > 0 for g in at_min) else NOT_SUPPORTED
        gap, coll = max(g[1] for g in at_min), max(g[2] for g in at_min)
        r.key = f"at d={d_min}: largest decodability gap {100 * gap:.1f} points, add collisions {pct(coll)}"
    else:
        r.verdict, r.key = TOO_SMALL, "no pair of add and concat_split arms that both learned their task"
    r.notes.append("Concatenation is lossless by construction: ||[x_a − x_b; p_i − p_j]|| ≥ ||p_i − p_j||.")
    r.run_ids = ids
    return r


def c11(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C11",
        title="PE(pos+k) is a linear function of PE(pos) for sinusoidal encoding",
        claim="A fixed linear map (a rotation) takes each position's encoding to the one k steps on, which lets "
        "attention use relative position.",
        source="Vaswani et al. 2017, §3.5",
        rule="exact for sinusoidal up to float error; residuals reported for learned tables (trained) and "
        "MiniLM's pretrained table",
    )
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
    sin_max = max(x["residual"] for x in lin["tables"][lin["subject"]])
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
    pre = ctx.analyses.get("pretrained")
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
    r.key = f"sinusoidal residual ≤ {sin_max:.0e}"
    r.run_ids = ids
    return r


CLAIMS = [c1, c2, c3, c4, c8, c10, c11, c15]
__all__ = ["CLAIMS", "directional", "REPORTED", "pp"]
