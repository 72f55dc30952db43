"""C9: does adding positions to pretrained (frozen) word vectors damage them?

Every arm is a causal language model over MiniLM's word pieces of real text (the ``wordlm`` task: prose by
default, the vocabulary cut to the training split's 4095 most frequent pieces and [UNK]) that reads MiniLM's
frozen word vectors of those pieces (the task sets ``token_table="minilm"`` and ``token_rows``), and differs
only in how positions meet them: ``add`` or ``concat_split`` at the same width d, ``concat_wide`` (width
d + d_position) and ``add`` at that same total width, each with sinusoidal and with learned positions; and a
control with no position encoding, which is not at chance (a causal model learns order from its mask: the
pieces it may read). Same task, batches, budget and evaluation windows; seeds paired across arms. The deciding
metric is bits per byte of the held-out text.

The arms are ordinary ``[[grid]]``s of a study, written by ``grids_toml``: the full preset holds its text for
its budget (a test keeps them equal), so `pelab study` trains them with every other run, and `pelab pretrained`
runs the same grids through ``pelab.study.driver.run_study`` into a folder of its own. ``summarize`` reads the
stored runs back with the study's floor and margin.

Word vectors are 384 wide; an arm whose token embedding is narrower reads a fixed PCA projection of the cut
table (see ``pelab.weights.minilm.word_table``). The model size and budget come from a recorded pilot
(bench/pilots/c9-wordlm.toml; its numbers are in the comments of pelab/presets/full.toml).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pelab.config import RunConfig
from pelab.study.stats import t_interval

#: The task every arm trains on.
TASK = "wordlm"
#: What every arm shares (the width d is the add / concat_split width; concat_wide adds D_POSITION), from the
#: pilot (bench/pilots/c9-wordlm.toml).
D, D_POSITION, LENGTH, N_LAYERS, N_HEADS, LR, BATCH_SIZE = 128, 32, 64, 1, 4, 3e-3, 16
#: The full preset's budget (optimiser steps), and `pelab pretrained`'s default.
STEPS = 1500
POSITIONS = ("sinusoidal", "learned")
COMBINES = ("add", "concat_split", "concat_wide")
NAME = "C9: frozen MiniLM word vectors + positions"
CONTROL = "no positions"


@dataclass(frozen=True)
class Budget:
    """What `pelab pretrained` may change; the rest is fixed above."""

    seeds: int = 3
    steps: int = STEPS
    corpus: str | None = None

    def describe(self) -> dict[str, Any]:
        """Every setting the arms share, for the report's setup line."""
        return {**asdict(self), "batch_size": BATCH_SIZE, "length": LENGTH, "d": D, "d_position": D_POSITION,
                "n_layers": N_LAYERS, "n_heads": N_HEADS, "lr": LR}  # fmt: skip


def _inline(values: dict[str, Any]) -> str:
    """A TOML inline table of dotted keys (JSON spells strings, numbers and lists as TOML does)."""
    return "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in values.items()) + " }"


#: The full preset's C9 seeds: its grids train these, fixed and read once, as a confirmatory test (no pilot and no
#: other preset trains them), so C9 never takes seeds in the preset's sequential rounds.
FULL_SEEDS = (600, 601, 602, 603, 604)


def grids_toml(steps: int, corpus: str | None = None, seeds: Sequence[int] = ()) -> str:
    """C9's ``[[grid]]``s, as a study file holds them: the one list of C9's arms. With ``seeds``, every grid trains
    those seeds of its own, as one confirmatory test (the full preset); without, the study's."""
    task: dict[str, Any] = {"task.name": TASK, "task.length": LENGTH}
    if corpus is not None:
        task["task.corpus"] = corpus
    train = {"train.steps": steps, "train.batch_size": BATCH_SIZE, "train.lr": LR}

    def fixed(d: int, **model: str) -> dict[str, Any]:
        shared = {"model.d": d, "model.d_position": D_POSITION, "model.n_layers": N_LAYERS, "model.n_heads": N_HEADS}
        return {**task, **shared, **{f"model.{k}": v for k, v in model.items()}, **train}

    none = {"position.scheme": "none", "combine": "none"}
    grids = [
        ("C9: frozen MiniLM word vectors, positions added or concatenated", fixed(D),
         {"model.position.scheme": list(POSITIONS), "model.combine": list(COMBINES)}),
        ("C9: add at concat_wide's width", fixed(D + D_POSITION, combine="add"),
         {"model.position.scheme": list(POSITIONS)}),
        ("C9: no position encoding (causal: order from the mask alone)", fixed(D, **none), {}),
    ]  # fmt: skip
    out = []
    for name, fixed, axes in grids:
        out += ["[[grid]]", f"name = {json.dumps(name)}"]
        out += ["confirmatory = true", f"seeds = {list(seeds)}"] if seeds else []
        out += [f"set = {_inline(fixed)}"]
        out += [f"axes = {_inline(axes)}"] if axes else []
        out.append("")
    return "\n".join(out)


def study_text(budget: Budget) -> str:
    """A study of C9's grids alone, with the study's default floor and margin (what `pelab pretrained` runs)."""
    from pelab.study.grid import REPORT_KEYS

    head = [f"name = {json.dumps(NAME)}", f"seeds = {list(range(budget.seeds))}", "", "[report]"]
    head += [f"{k} = {v}" for k, v in REPORT_KEYS.items()]
    return "\n".join(head) + "\n\n" + grids_toml(budget.steps, budget.corpus)


def label(cfg: RunConfig) -> str | None:
    """A C9 run's arm, as the tables name it; None for a run of another task."""
    if cfg.task.name != TASK or cfg.model.token_table != "minilm":
        return None
    m = cfg.model
    if m.combine == "none":
        return CONTROL
    wide = m.combine == "add" and m.d == D + D_POSITION
    return f"add@wide+{m.position.scheme}" if wide else f"{m.combine}+{m.position.scheme}"


def arm_order() -> list[str]:
    """The arms' labels in the order the tables list them."""
    out = [CONTROL]
    for p in POSITIONS:
        out += [f"{c}+{p}" for c in COMBINES] + [f"add@wide+{p}"]
    return out


#: (arm, baseline) pairs whose paired difference decides C9: concat against add at equal width.
COMPARISONS = [
    (f"{concat}+{p}", f"{base}+{p}")
    for p in POSITIONS
    for concat, base in (("concat_split", "add"), ("concat_wide", "add@wide"))
]
#: The per-seed metrics a record carries (bits per byte decides; the loss and its context-free baseline say
#: whether an arm learned).
METRICS = ("bpb", "loss", "baseline_loss", "acc")


def records(rows: list[dict[str, Any]], run_ids: set[str] | None = None) -> list[dict[str, object]]:
    """One record per stored C9 run (a study store's ``rows()``), restricted to ``run_ids`` when given."""
    out = []
    for row in rows:
        if run_ids is not None and row["run_id"] not in run_ids:
            continue
        cfg = RunConfig.model_validate(row["config"])
        arm = label(cfg)
        if arm is None:
            continue
        metrics = row["metrics"] or {}
        out.append(
            dict(
                arm=arm,
                seed=cfg.seed,
                run_id=row["run_id"],
                status=row["status"],
                reason=row["reason"],
                **{k: metrics.get(k, math.nan) for k in METRICS},
                params=row["params"],
                flops_per_token=row["flops_per_token"],
                d_model=cfg.model.widths().model,
                d_token=cfg.model.widths().token,
            )
        )
    order = {a: i for i, a in enumerate(arm_order())}
    return sorted(out, key=lambda r: (order.get(str(r["arm"]), len(order)), r["seed"]))


def summarize(records: list[dict[str, object]], floor: float, margin: float) -> dict[str, object]:
    """Per arm: mean bits per byte and its 95% t-interval, loss as a share of the context-free baseline's, size;
    per comparison: the paired relative difference of bits per byte and its verdict.

    ``floor`` and ``margin`` are the study's (``[report]``), and the verdicts are the study report's own rule
    for C9 (``pelab.rules.family``: concat beats add on some comparison, Holm across them; language models are
    decided on bits per byte, and learned when their loss is at most 80% of the context-free baseline's), so
    `pelab pretrained` and `pelab study` cannot disagree.
    """
    from pelab.rules import Comparison, Side, family

    by_arm: dict[str, list[dict[str, object]]] = {}
    for r in records:
        by_arm.setdefault(str(r["arm"]), []).append(r)
    table = {}
    for arm, rs in by_arm.items():
        done = [r for r in rs if r["status"] == "done"]
        mean, lo, hi = t_interval([float(r["bpb"]) for r in done])
        shares = [float(r["loss"]) / float(r["baseline_loss"]) for r in done]
        table[arm] = dict(
            bpb=mean, bpb_lo=lo, bpb_hi=hi, share=sum(shares) / len(shares) if shares else math.nan,
            seeds=len(done), failed=len(rs) - len(done),
            params=int(rs[0]["params"] or 0), flops_per_token=int(rs[0]["flops_per_token"] or 0),
            d_model=rs[0]["d_model"], d_token=rs[0]["d_token"],
        )  # fmt: skip

    def side(arm: str) -> Side:
        done = [r for r in by_arm[arm] if r["status"] == "done"]
        values = {k: {int(r["seed"]): float(r[k]) for r in done if k in r} for k in METRICS}
        return Side(arm, values, params=table[arm]["params"], flops=table[arm]["flops_per_token"])

    pairs = [(arm, base) for arm, base in COMPARISONS if arm in by_arm and base in by_arm]
    fam = family([Comparison({}, side(a), side(b)) for a, b in pairs], ("bpb",), floor, margin)
    comparisons = []
    for (arm, base), row in zip(pairs, fam.rows, strict=True):
        t = row.test
        comparisons.append(dict(
            arm=arm, baseline=base, metric=t.metric.key if t else None, diff=t.mean if t else math.nan,
            lo=row.interval[0] if t else math.nan, hi=row.interval[1] if t else math.nan,
            seeds=t.n if t else 0, verdict=row.verdict,
        ))  # fmt: skip
    return {"arms": table, "comparisons": comparisons, "verdict": fam.verdict, "floor": floor, "margin": margin,
            "correction": fam.correction}  # fmt: skip
