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

from pelab.rules import Comparison, Side, setting_text
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
    #: mean accuracy at the training size, whatever metric ``mean`` is: "learned" always reads accuracy
    acc: float = math.nan

    def learned(self, floor: float) -> bool:
        level = self.mean if math.isnan(self.acc) else self.acc
        return self.seeds > 0 and not math.isnan(level) and level >= floor


def _label(axes: list[str], values: tuple) -> str:
    """ "learned + add + 16", or "learned + add + 16 + vocab=32, steps=800" where a setting sets the arm apart (an
    empty setting, the most common one, is left out)."""
    return " + ".join(str(v) for v in values if str(v) != "") if len(axes) > 1 else str(values[0])


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
        acc=float(done["m.acc"].mean()) if "m.acc" in done and done["m.acc"].notna().any() else math.nan,
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


def side(rows: pd.DataFrame, label: str) -> Side:
    """An arm's finished runs as a typed Side: every stored metric by seed, size, run ids."""
    done = rows[rows.status == "done"]
    values = {
        col[2:]: {int(s): float(v) for s, v in zip(done["seed"], done[col], strict=True) if pd.notna(v)}
        for col in rows.columns
        if col.startswith("m.")
    }
    return Side(
        label=label,
        values=values,
        params=int(rows.params.max()) if len(rows) else 0,
        flops=int(rows.flops_per_token.max()) if len(rows) else 0,
        run_ids=tuple(sorted(rows.run_id.tolist())),
    )


def split_configs(frame: pd.DataFrame) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """An arm's rows split into its configurations (every config key but the seed), in first-seen order: a
    filter on a few keys (task, scheme, combiner, width) may still hold runs of two grids that differ
    elsewhere (length, vocabulary, layout), and seeds are only paired within one configuration."""
    if frame.empty:
        return []
    held = [c for c in config_columns(frame) if c != "seed"]
    out = []
    for pos in frame[held].astype(str).groupby(held, sort=False, dropna=False).indices.values():
        group = frame.iloc[pos]
        first = group.iloc[0]
        out.append(({k: first[k] for k in held if not (isinstance(first[k], float) and math.isnan(first[k]))}, group))
    return out


def config_labels(wheres: list[dict[str, Any]], shown: list[str]) -> list[str]:
    """For each configuration, the settings beyond ``shown`` that tell it apart from another with the same
    ``shown`` values ("task.length=12, task.vocab=32"), or "" where ``shown`` already does: table rows and
    series names stay short, and two configurations never share a label."""
    out = []
    for w in wheres:
        twins = [o for o in wheres if o is not w and all(str(o.get(k)) == str(w.get(k)) for k in shown)]
        differ = [_differ(w, o, shown) for o in twins]
        keys = sorted(set().union(*differ)) if twins else []
        # a task setting (length, vocabulary) also sets the model keys that follow from it (max_len, outputs):
        # name the task's alone, wherever they tell this configuration from every twin
        task_keys = [k for k in keys if k.startswith("task.")]
        if task_keys and all(d & set(task_keys) for d in differ):
            keys = task_keys
        out.append(", ".join(setting_text(k, w.get(k)) for k in keys))
    return out


def _differ(w: dict[str, Any], o: dict[str, Any], shown: list[str]) -> set[str]:
    return {k for k in set(o) | set(w) if k not in shown and str(o.get(k)) != str(w.get(k))}


def compare(frame: pd.DataFrame, axes: list[str], a: tuple, b: tuple) -> list[Comparison]:
    """Every group in which both arm ``a`` and arm ``b`` (values of ``axes``) were run; seeds paired."""
    if frame.empty or any(ax not in frame.columns for ax in axes):
        return []
    held = [c for c in config_columns(frame) if c not in axes and c != "seed"]
    out = []
    key_frame = frame[held].astype(str)
    for pos in key_frame.groupby(held, sort=False, dropna=False).indices.values():
        group = frame.iloc[pos]
        rows_a = group[(group[axes].astype(str) == [str(v) for v in a]).all(axis=1)]
        rows_b = group[(group[axes].astype(str) == [str(v) for v in b]).all(axis=1)]
        if rows_a.empty or rows_b.empty:
            continue
        first = group.iloc[0]
        where = {k: first[k] for k in held if not (isinstance(first[k], float) and math.isnan(first[k]))}
        out.append(Comparison(where, side(rows_a, _label(axes, a)), side(rows_b, _label(axes, b))))
    return out


def compare_wide(frame: pd.DataFrame, arm: str = "concat_wide", baseline: str = "add") -> list[Comparison]:
    """``arm`` at base width d against ``baseline`` at the same *total* width (d + d_position): a win of a
    wider model told apart from its size. Needs the frame's ``width`` column (the model's actual width)."""
    if frame.empty or "width" not in frame or "model.combine" not in frame:
        return []
    wide = frame[frame["model.combine"] == arm]
    out = []
    for (d, width), _ in wide.groupby(["model.d", "width"], sort=True):
        pool = frame[
            ((frame["model.combine"] == arm) & (frame["model.d"] == d))
            | ((frame["model.combine"] == baseline) & (frame["model.d"] == width))
        ]
        for c in compare(pool.drop(columns=["model.d_position"], errors="ignore"), ["model.combine", "model.d"],
                         (arm, d), (baseline, width)):  # fmt: skip
            out.append(Comparison({**c.where, "width": int(width)}, c.a, c.b))
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
