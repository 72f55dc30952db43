"""C9: does adding positions to pretrained (frozen) word vectors damage them?

Every arm reads MiniLM's frozen word vectors (the ``wordorder`` task sets
``token_table="minilm"``) on the ``wordorder`` task (a real paragraph's opening,
forwards or reversed) and differs only in how positions meet them: ``add`` or
``concat_split`` at the same width d, ``concat_wide`` (width d + d_position) and ``add``
at that same total width, each with sinusoidal and with learned positions; and a
control with no positions at all, which must sit at chance. Same task, batches, budget
and evaluation set; seeds paired across arms.

The arms are ordinary ``[[grid]]``s of a study, written by ``grids_toml``: the presets
hold its text for their budget (a test keeps them equal), so `pelab study` trains them
with every other run, and `pelab pretrained` runs the same grids through
``pelab.study.driver.run_study`` into a folder of its own. ``summarize`` reads the
stored runs back with the study's floor and margin.

Word vectors are 384 wide; an arm whose token embedding is narrower reads their
fixed PCA projection (see ``pelab.weights.minilm.word_table``). d = 128 keeps the
whole experiment within a minute or two on two CPU cores.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from pelab.config import RunConfig
from pelab.study.stats import t_interval

#: What every arm shares (the width d is the add / concat_split width; concat_wide adds D_POSITION).
D, D_POSITION, LENGTH, N_LAYERS, N_HEADS, LR, BATCH_SIZE = 128, 32, 16, 1, 4, 1e-3, 32
POSITIONS = ("sinusoidal", "learned")
COMBINES = ("add", "concat_split", "concat_wide")
NAME = "C9: frozen MiniLM word vectors + positions"


@dataclass(frozen=True)
class Budget:
    """What `pelab pretrained` may change; the rest is fixed above."""

    seeds: int = 3
    steps: int = 300
    corpus: str | None = None

    def describe(self) -> dict[str, Any]:
        """Every setting the arms share, for the report's setup line."""
        return {**asdict(self), "batch_size": BATCH_SIZE, "length": LENGTH, "d": D, "d_position": D_POSITION,
                "n_layers": N_LAYERS, "n_heads": N_HEADS, "lr": LR}  # fmt: skip


def _inline(values: dict[str, Any]) -> str:
    """A TOML inline table of dotted keys (JSON spells strings, numbers and lists as TOML does)."""
    return "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in values.items()) + " }"


def grids_toml(steps: int, corpus: str | None = None) -> str:
    """C9's ``[[grid]]``s, as a study file holds them: the one list of C9's arms."""
    task: dict[str, Any] = {"task.name": "wordorder", "task.length": LENGTH, "task.eval_multipliers": [1.0]}
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
        ("C9: no positions (chance: 50%)", fixed(D, **none), {}),
    ]  # fmt: skip
    out = []
    for name, fixed, axes in grids:
        out += ["[[grid]]", f"name = {json.dumps(name)}", f"set = {_inline(fixed)}"]
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
    if cfg.task.name != "wordorder":
        return None
    m = cfg.model
    if m.combine == "none":
        return "no positions"
    wide = m.combine == "add" and m.d == D + D_POSITION
    return f"add@wide+{m.position.scheme}" if wide else f"{m.combine}+{m.position.scheme}"


def arm_order() -> list[str]:
    """The arms' labels in the order the tables list them."""
    out = ["no positions"]
    for p in POSITIONS:
        out += [f"{c}+{p}" for c in COMBINES] + [f"add@wide+{p}"]
    return out


#: (arm, baseline) pairs whose paired difference decides C9: concat against add at equal width.
COMPARISONS = [
    (f"{concat}+{p}", f"{base}+{p}")
    for p in POSITIONS
    for concat, base in (("concat_split", "add"), ("concat_wide", "add@wide"))
]


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
        out.append(
            dict(
                arm=arm,
                seed=cfg.seed,
                run_id=row["run_id"],
                status=row["status"],
                reason=row["reason"],
                acc=(row["metrics"] or {}).get("acc", math.nan),
                loss=(row["metrics"] or {}).get("loss", math.nan),
                params=row["params"],
                flops_per_token=row["flops_per_token"],
                d_model=cfg.model.widths().model,
                d_token=cfg.model.widths().token,
            )
        )
    order = {a: i for i, a in enumerate(arm_order())}
    return sorted(out, key=lambda r: (order.get(str(r["arm"]), len(order)), r["seed"]))


def summarize(records: list[dict[str, object]], floor: float, margin: float) -> dict[str, object]:
    """Per arm: mean accuracy and 95% t-interval, size; per comparison: paired difference and verdict.

    ``floor`` and ``margin`` are the study's (``[report]``), and the verdicts are the study report's own rule
    for C9 (``pelab.rules.family``: concat beats add on some comparison, Holm across them, held-out loss
    where accuracy sits at its ceiling), so `pelab pretrained` and `pelab study` cannot disagree.
    """
    from pelab.rules import Comparison, Side, family

    by_arm: dict[str, list[dict[str, object]]] = {}
    for r in records:
        by_arm.setdefault(str(r["arm"]), []).append(r)
    table = {}
    for arm, rs in by_arm.items():
        done = [r for r in rs if r["status"] == "done"]
        mean, lo, hi = t_interval([float(r["acc"]) for r in done])
        table[arm] = dict(
            acc=mean, acc_lo=lo, acc_hi=hi, seeds=len(done), failed=len(rs) - len(done),
            params=int(rs[0]["params"] or 0), flops_per_token=int(rs[0]["flops_per_token"] or 0),
            d_model=rs[0]["d_model"], d_token=rs[0]["d_token"],
        )  # fmt: skip

    def side(arm: str) -> Side:
        done = [r for r in by_arm[arm] if r["status"] == "done"]
        values = {k: {int(r["seed"]): float(r[k]) for r in done if k in r} for k in ("acc", "loss")}
        return Side(arm, values, params=table[arm]["params"], flops=table[arm]["flops_per_token"])

    pairs = [(arm, base) for arm, base in COMPARISONS if arm in by_arm and base in by_arm]
    fam = family([Comparison({}, side(a), side(b)) for a, b in pairs], ("acc", "loss"), floor, margin)
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
