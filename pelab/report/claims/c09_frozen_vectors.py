"""C9: adding a position encoding to pretrained (frozen) word vectors damages them.

C9's frozen-word-vector arms are ordinary ``[[grid]]``s of the study (see ``pelab.pretrained.frozen.grids_toml``),
trained by `pelab study` with every other run: causal language models over MiniLM's word pieces of real text
(the ``wordlm`` task) that read MiniLM's frozen word vectors, decided on bits per byte.
"""

from __future__ import annotations

import math

import pandas as pd

from pelab.report.arms import key_of
from pelab.report.context import ReportContext
from pelab.report.evidence import compare, compare_wide, side
from pelab.report.registry import CHAIN, ClaimResult, Table, claim
from pelab.report.tables import family_table, row_records, runs_of, used_metrics
from pelab.rules import NOT_RUN, Comparison, Family, family
from pelab.study.stats import t_interval

#: The task C9's arms train on (``pelab.pretrained.frozen.TASK``, named here so the claim reads no experiment).
TASK = "wordlm"
WHAT = "bits per byte of a word-piece language model with frozen MiniLM vectors"


def rule_c9(comps: list[Comparison], floor: float, margin: float) -> Family:
    """C9: concatenation beats addition at equal width (concat_split against add at d, concat_wide against add at
    d + d_position) on some comparison, beyond the Holm-corrected interval, among comparisons whose arms both
    learned (``FLOOR_POLICY``). The arms are language models: decided on bits per byte (``rules.chain_for``), and
    learned when their held-out loss is at most 80% of the context-free baseline's."""
    return family(comps, CHAIN, floor, margin, kind="better", combine="any")


def c9_frame(ctx: ReportContext) -> pd.DataFrame:
    f = ctx.frame
    if "model.token_table" not in f:
        return f.iloc[0:0]
    return f[(f["task.name"] == TASK) & (f["model.token_table"] == "minilm")]


def arms_table(frame: pd.DataFrame, floor: float) -> Table:
    """Every C9 arm: test bits per byte with its interval, loss as a share of the context-free baseline's."""
    rows = []
    keys = ["model.combine", "model.position.scheme", "model.d", "width"]
    order = {c: i for i, c in enumerate(("none", "add", "concat_split", "concat_wide"))}
    schemes = {s: i for i, s in enumerate(("none", "sinusoidal", "learned"))}
    groups = sorted(frame.groupby(keys, sort=False), key=lambda kv: (schemes.get(kv[0][1], 9), kv[0][3],
                                                                    order.get(kv[0][0], 9)))  # fmt: skip
    for values, g in groups:
        done = g[g.status == "done"]
        if done.empty or "m.bpb" not in done:
            continue
        mean, lo, hi = t_interval(done["m.bpb"].dropna().tolist())
        share = float((done["m.loss"] / done["m.baseline_loss"]).mean())
        # the baseline in bits per byte: bpb / loss is the same constant (1 / (ln 2 x bytes per piece)) in every run
        base = float((done["m.baseline_loss"] * done["m.bpb"] / done["m.loss"]).mean())
        learned = side(done, "arm").learned(floor)  # the rules' own test, not a copy of its threshold
        cell = f"{mean:.4f}" + (f" [{lo:.4f}, {hi:.4f}]" if not math.isnan(lo) else "")
        scheme = "no position encoding" if values[0] == "none" else f"{values[0]} + {values[1]}"
        rows.append([scheme, str(values[2]), str(values[3]), cell, f"{base:.3f}", f"{share:.1%}",
                     "yes" if learned else "no", str(len(done)), f"{int(g.params.max()):,}"])  # fmt: skip
    return Table(
        "C9 arms: test bits per byte (mean [95% CI] over seeds)",
        ["arm", "d", "model width", "bits/byte", "context-free baseline", "loss / baseline", "learned", "seeds",
         "trainable params"],
        rows,
    )  # fmt: skip


@claim(
    "C9",
    "Adding a position encoding to pretrained (frozen) word vectors damages them",
    "Frozen pretrained word vectors carry meaning in all their dimensions; adding positions on top corrupts it, "
    "while concatenating leaves it intact.",
    "an answer to the question",
    "supported when add trails a concat arm at equal width (concat_split against add at d; concat_wide against add "
    "at its total width d + d_position) beyond the Holm-corrected interval on some comparison whose arms both "
    "learned; not supported when every informative comparison is within the margin (±2% of bits per byte) or "
    f"favours add; deciding metric: {WHAT}; an arm learned when its held-out loss is at most 80% of the "
    "context-free (unigram) baseline's",
    metrics=("bpb",),
)
def c9(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    wo = c9_frame(ctx)
    if wo.empty:
        r.verdict = NOT_RUN
        r.key = (f"not run: this study has no {TASK} runs on MiniLM's frozen word vectors (the full preset has "
                 "them)")  # fmt: skip
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
        f"{WHAT}: task {TASK} (predict the next of {t.length} MiniLM word pieces of the {t.corpus} corpus; the "
        f"vocabulary cut to the training split's {m.vocab_size - 1} most frequent pieces and [UNK]); "
        f"seeds {', '.join(map(str, sorted({int(x) for x in wo.seed})))}; {first.train.steps} steps of "
        f"{first.train.batch_size} windows, {m.n_layers} layer(s). Word vectors narrower than 384 are a fixed PCA "
        "of the cut table; all are scaled to the token embedding's init RMS. Parameters are trainable ones."
    )
    r.tables.append(family_table("concat arm (A) against add at the same width (B)", fam,
                                 ["model.position.scheme", "model.d", "width"]))  # fmt: skip
    r.tables.append(arms_table(wo, ctx.floor))
    control = wo[(wo["model.combine"] == "none") & (wo.status == "done")]
    if not control.empty and "m.bpb" in control:
        r.notes.append(
            f"Control without a position encoding (a causal model still learns order from its mask): "
            f"{control['m.bpb'].mean():.4f} bits per byte over {len(control)} seeds."
        )
    r.caveats.append(
        "Bits per byte of a word-piece model: loss per piece over ln 2 and the test text's bytes per piece. WordPiece "
        "drops case and spacing and [UNK] stands for any rare piece, so it charges less than a byte-level model "
        "pays; compare these arms with one another, not with charlm's."
    )
    r.key = key_of(fam, ["model.position.scheme", "model.d", "width"], ctx.floor)
    r.metric = used_metrics(fam)
    r.run_ids = runs_of(fam)
    r.rows = row_records(fam, "concat beats add")
    return r
