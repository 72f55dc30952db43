"""C9: does adding positions to pretrained (frozen) word vectors damage them?

Every arm reads MiniLM's frozen word vectors (``token_table="minilm"``) on the
``wordorder`` task (a real paragraph's opening, forwards or reversed) and differs
only in how positions meet them: ``add`` or ``concat_split`` at the same width d,
``concat_wide`` (width d + d_position) and ``add`` at that same total width, each
with sinusoidal and with learned positions; and a control with no positions at all,
which must sit at chance. Same task, batches, budget and evaluation set; seeds
paired across arms. Runs go to a results store (``OUT/results.sqlite``, the study
format: `pelab results OUT --by model.combine --by model.position.scheme --by model.d`
reads it, and a second call skips what is stored).

Word vectors are 384 wide; an arm whose token embedding is narrower reads their
fixed PCA projection (see ``pelab.pretrained.minilm.word_table``). The default
d = 128 keeps the whole experiment within minutes on two CPU cores.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pelab.config import RunConfig, build
from pelab.report.verdicts import TOO_SMALL, combine_any, directional
from pelab.study.stats import t_interval

#: Below this evaluation accuracy an arm has not learned the task (chance is 0.5).
FLOOR = 0.6
#: Differences inside +-MARGIN count as equal (the study's default equivalence margin).
MARGIN = 0.01


@dataclass(frozen=True)
class Budget:
    """What every arm shares."""

    seeds: int = 3
    steps: int = 300
    batch_size: int = 32
    length: int = 16
    d: int = 128
    d_position: int = 32
    n_layers: int = 1
    n_heads: int = 4
    lr: float = 1e-3
    corpus: str | None = None


@dataclass(frozen=True)
class Arm:
    combine: str
    position: str
    wide: bool = False  # add at concat_wide's total width

    @property
    def label(self) -> str:
        if self.combine == "none":
            return "no positions"
        return f"add@wide+{self.position}" if self.wide else f"{self.combine}+{self.position}"


def arms() -> list[Arm]:
    """The C9 arms, and a control without positions (an encoder without them cannot tell a reversal: 50%)."""
    out = [Arm("none", "none")]
    for position in ("sinusoidal", "learned"):
        out += [Arm("add", position), Arm("concat_split", position), Arm("concat_wide", position)]
        out.append(Arm("add", position, wide=True))
    return out


#: (arm, baseline) pairs whose paired difference decides C9: concat against add at equal width.
COMPARISONS = [
    (f"{concat}+{p}", f"{base}+{p}")
    for p in ("sinusoidal", "learned")
    for concat, base in (("concat_split", "add"), ("concat_wide", "add@wide"))
]


def config(arm: Arm, seed: int, budget: Budget) -> RunConfig:
    """One arm's run; a config the budget cannot make (a bad corpus, say) is a one-line PelabError."""
    d = budget.d + budget.d_position if arm.wide else budget.d
    return build(
        RunConfig,
        task=dict(name="wordorder", length=budget.length, corpus=budget.corpus, eval_multipliers=[1.0]),
        model=dict(
            d=d,
            d_position=budget.d_position,
            n_layers=budget.n_layers,
            n_heads=budget.n_heads,
            combine=arm.combine,
            position=dict(scheme=arm.position),
        ),
        train=dict(steps=budget.steps, batch_size=budget.batch_size, lr=budget.lr),
        seed=seed,
    )


def run_arms(
    budget: Budget,
    out: str,
    threads: int = 1,
    on_run: Callable[[int, int, str], None] | None = None,
) -> list[dict[str, object]]:
    """Train every arm x seed not yet in ``out``'s store; return one record per run.

    One thread by default: the models are small, and on a shared or busy machine a
    second intra-op thread made some runs 30x slower while it waited for a core.
    """
    from pelab.study.store import Store, StudyLock
    from pelab.train import train_run

    plan = [(arm, config(arm, seed, budget)) for arm in arms() for seed in range(budget.seeds)]
    records = []
    with StudyLock(out), Store(out) as store:
        store.set_meta(name="C9: frozen MiniLM word vectors + positions")
        stored = {r["run_id"]: r for r in store.rows() if r["status"] == "done"}
        for i, (arm, cfg) in enumerate(plan):
            if on_run is not None:
                on_run(i, len(plan), arm.label)
            row = stored.get(cfg.run_id)
            if row is None:
                result = train_run(cfg, device="cpu", threads=threads)
                store.write(cfg, result)
                row = {"status": result.status, "reason": result.reason, "metrics": result.metrics,
                       "params": result.params, "flops_per_token": result.flops_per_token}  # fmt: skip
            records.append(
                dict(
                    arm=arm.label,
                    seed=cfg.seed,
                    run_id=cfg.run_id,
                    status=row["status"],
                    reason=row["reason"],
                    acc=(row["metrics"] or {}).get("acc", math.nan),
                    params=row["params"],
                    flops_per_token=row["flops_per_token"],
                    d_model=cfg.model.widths().model,
                    d_token=cfg.model.widths().token,
                )
            )
    return records


def summarize(records: list[dict[str, object]]) -> dict[str, object]:
    """Per arm: mean accuracy and 95% t-interval, size; per comparison: paired difference and verdict.

    Verdicts follow ``pelab.report.verdicts``: "concat beats add" is supported when the
    interval of (concat - add) lies above 0, in at least one comparison whose arms learned.
    """
    by_arm: dict[str, list[dict[str, object]]] = {}
    for r in records:
        by_arm.setdefault(str(r["arm"]), []).append(r)
    table = {}
    for label, rs in by_arm.items():
        done = [r for r in rs if r["status"] == "done"]
        mean, lo, hi = t_interval([float(r["acc"]) for r in done])
        table[label] = dict(
            acc=mean, acc_lo=lo, acc_hi=hi, seeds=len(done), failed=len(rs) - len(done),
            params=int(rs[0]["params"] or 0), flops_per_token=int(rs[0]["flops_per_token"] or 0),
            d_model=rs[0]["d_model"], d_token=rs[0]["d_token"],
        )  # fmt: skip
    comparisons = []
    for arm, base in COMPARISONS:
        if arm not in by_arm or base not in by_arm:
            continue
        a = {r["seed"]: float(r["acc"]) for r in by_arm[arm] if r["status"] == "done"}
        b = {r["seed"]: float(r["acc"]) for r in by_arm[base] if r["status"] == "done"}
        diffs = [a[s] - b[s] for s in sorted(a.keys() & b.keys())]
        mean, lo, hi = t_interval(diffs)
        learned = table[arm]["acc"] >= FLOOR and table[base]["acc"] >= FLOOR
        verdict = directional(lo, hi, MARGIN) if learned else TOO_SMALL
        comparisons.append(dict(arm=arm, baseline=base, diff=mean, lo=lo, hi=hi, seeds=len(diffs), verdict=verdict))
    overall = combine_any([c["verdict"] for c in comparisons])  # add trails concat in some comparison
    return {"arms": table, "comparisons": comparisons, "verdict": overall, "floor": FLOOR, "margin": MARGIN}
