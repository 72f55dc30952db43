"""Comparisons drawn from stored runs, with nothing but the compared axes allowed to differ.

``compare`` groups runs by every config key except the compared axes and the seed, so
two arms are only ever set against each other when they share task, data, budget,
width and all the rest; within a group, seeds are paired. Every number it returns
comes from stored rows, and the run ids travel with it so the report can cite them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pelab.study.stats import t_interval

CONFIG_PREFIXES = ("task.", "model.", "train.")


def config_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith(CONFIG_PREFIXES)]


@dataclass
class ArmStats:
    label: str
    mean: float
    lo: float
    hi: float
    seeds: int
    params: int
    flops: int
    run_ids: list[str] = field(default_factory=list)

    def learned(self, floor: float) -> bool:
        return self.seeds > 0 and not math.isnan(self.mean) and self.mean >= floor


@dataclass
class Comparison:
    """Arm A against arm B in one group (everything else held equal), paired by seed."""

    group: dict[str, Any]
    a: ArmStats
    b: ArmStats
    diff: float
    lo: float
    hi: float
    pairs: int

    def where(self, keys: list[str]) -> str:
        return ", ".join(f"{k.split('.')[-1]}={self.group[k]}" for k in keys if k in self.group)


def _label(axes: list[str], values: tuple) -> str:
    return " + ".join(str(v) for v in values) if len(axes) > 1 else str(values[0])


def arm_stats(rows: pd.DataFrame, label: str, metric: str) -> ArmStats:
    done = rows[rows.status == "done"]
    col = f"m.{metric}"
    mean, lo, hi = t_interval(done[col].tolist()) if col in done else (math.nan,) * 3
    return ArmStats(
        label=label,
        mean=mean,
        lo=lo,
        hi=hi,
        seeds=int(done[col].notna().sum()) if col in done else 0,
        params=int(rows.params.max()) if len(rows) else 0,
        flops=int(rows.flops_per_token.max()) if len(rows) else 0,
        run_ids=sorted(rows.run_id.tolist()),
    )


def select(frame: pd.DataFrame, **filters: Any) -> pd.DataFrame:
    """Rows whose dotted config keys (``task__name`` spelled with ``__``) equal the given values."""
    out = frame
    for key, value in filters.items():
        col = key.replace("__", ".")
        if col not in out.columns:
            return out.iloc[0:0]
        out = out[out[col] == value]
    return out


def compare(frame: pd.DataFrame, axes: list[str], a: tuple, b: tuple, metric: str = "acc") -> list[Comparison]:
    """Every group in which both arm ``a`` and arm ``b`` (values of ``axes``) were run."""
    if frame.empty or any(ax not in frame.columns for ax in axes):
        return []
    held = [c for c in config_columns(frame) if c not in axes and c != "seed"]
    col = f"m.{metric}"
    out = []
    key_frame = frame[held].astype(str)
    for _, idx in key_frame.groupby(held, sort=False, dropna=False).groups.items():
        group = frame.loc[idx]
        rows_a = group[(group[axes].astype(str) == [str(v) for v in a]).all(axis=1)]
        rows_b = group[(group[axes].astype(str) == [str(v) for v in b]).all(axis=1)]
        if rows_a.empty or rows_b.empty:
            continue
        done_a = rows_a[rows_a.status == "done"].set_index("seed")[col] if col in rows_a else pd.Series(dtype=float)
        done_b = rows_b[rows_b.status == "done"].set_index("seed")[col] if col in rows_b else pd.Series(dtype=float)
        diffs = (done_a - done_b).dropna()
        mean, lo, hi = t_interval(diffs.tolist())
        first = group.iloc[0]
        out.append(
            Comparison(
                group={k: first[k] for k in held},
                a=arm_stats(rows_a, _label(axes, a), metric),
                b=arm_stats(rows_b, _label(axes, b), metric),
                diff=mean,
                lo=lo,
                hi=hi,
                pairs=len(diffs),
            )
        )
    return out


def arms_table(frame: pd.DataFrame, keys: list[str], metric: str) -> list[ArmStats]:
    """One ArmStats per distinct value combination of ``keys`` (seeds pooled)."""
    out = []
    if frame.empty:
        return out
    for values, rows in frame.groupby(keys, sort=False, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        out.append(arm_stats(rows, _label(keys, values), metric))
    return out
