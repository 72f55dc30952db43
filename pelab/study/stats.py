"""From stored runs to arms: mean and 95% t-interval over seeds, paired differences.

Pure functions over a pandas frame with one row per run (see ``runs_frame``), so
the same numbers feed `pelab results`, CSV export and the report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as st


def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of the Student-t interval; low = high = nan with fewer than two values."""
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if len(x) == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if len(x) < 2:
        return (mean, math.nan, math.nan)
    half = float(st.t.ppf(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return (mean, mean - half, mean + half)


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as dotted keys (``{"model": {"d": 32}}`` -> ``{"model.d": 32}``), for study files and stored
    configs alike. An empty table at a setting (``d = {}``) stays a value, so validation rejects it by name."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def steps_to_reach(curve: Sequence[dict[str, float]], level: float) -> float:
    """The first logged step whose training accuracy reached ``level``; nan when it never did.

    The curve logs the mean over the steps since the last point, so this is when the model's
    accuracy on fresh training batches (new draws for the synthetic tasks) first averaged ``level``.
    """
    for point in curve:
        if point.get("acc", math.nan) >= level:
            return float(point["step"])
    return math.nan


def curve_auc(curve: Sequence[dict[str, float]]) -> float:
    """Area under the training-accuracy curve over the run's steps, as a share of the best possible (0..1):
    it rewards learning early as well as learning well, and it does not saturate when the end does."""
    if not curve:
        return math.nan
    steps = np.array([0.0] + [p["step"] for p in curve])
    acc = np.array([curve[0].get("acc", math.nan)] + [p.get("acc", math.nan) for p in curve])
    area = float(np.sum((acc[1:] + acc[:-1]) / 2 * np.diff(steps)))  # trapezoids, by hand: numpy 1.x and 2.x
    return area / steps[-1] if steps[-1] > 0 else math.nan


def runs_frame(rows: list[dict[str, Any]], floor: float | None = None) -> pd.DataFrame:
    """One row per run: flattened config (dotted keys), metrics (``m.*``), size and status.

    With ``floor``, two metrics are derived from each stored learning curve: ``m.steps_to_floor``
    (``steps_to_reach``) and ``m.auc`` (``curve_auc``).
    """
    records = []
    for r in rows:
        rec = {"run_id": r["run_id"], "status": r["status"], "reason": r["reason"]}
        rec.update({k: (str(v) if isinstance(v, list | tuple) else v) for k, v in flatten(r["config"]).items()})
        rec.update({f"m.{k}": v for k, v in (r["metrics"] or {}).items()})
        if floor is not None and r.get("curve"):
            rec["m.steps_to_floor"] = steps_to_reach(r["curve"], floor)
            rec["m.auc"] = curve_auc(r["curve"])
        rec.update(
            params=r["params"],
            flops_per_token=r["flops_per_token"],
            tokens_per_s=r["tokens_per_s"],
            seconds=r["seconds"],
        )
        records.append(rec)
    return pd.DataFrame.from_records(records)


def telling_keys(frame: pd.DataFrame, keys: list[str]) -> list[str]:
    """The run settings (``task.*``, ``model.*``, ``train.*`` columns, seed aside) that differ among runs which
    ``keys`` alone would pool: grouping by ``keys`` plus these gives one group per arm, so no table row or figure
    bar averages two arms' seeds (the full preset's lookup at vocab 16 for 600 steps and at vocab 32 for 800 both
    read "learned + add + 16"). Model settings a task decides follow from the task's and are left out."""
    from pelab.config import TASK_DECIDES

    if frame.empty or not keys:
        return []
    settings = [
        c for c in frame.columns
        if c.split(".")[0] in ("task", "model", "train") and c not in keys
        and not (c.startswith("model.") and c.removeprefix("model.") in TASK_DECIDES)
    ]  # fmt: skip
    groups = frame.groupby(keys, sort=False, dropna=False)
    return [c for c in settings if (groups[c].nunique(dropna=False) > 1).any()]


def setting_labels(frame: pd.DataFrame, settings: list[str]) -> pd.Series:
    """Each run's values of ``settings`` where they differ from the most common ("length=12, steps=600"), "" where
    none does: a label that names only what sets an arm apart."""
    common = {c: frame[c].mode(dropna=False).iloc[0] for c in settings}

    def label(row: pd.Series) -> str:
        differ = [c for c in settings if not _same(row[c], common[c])]
        return ", ".join(f"{c.rsplit('.', 1)[-1]}={_plain(row[c])}" for c in differ)

    return frame.apply(label, axis=1) if len(frame) else pd.Series([], dtype=str)


def _same(a: Any, b: Any) -> bool:
    return bool(a == b or (pd.isna(a) and pd.isna(b)))


def _plain(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def summarize(frame: pd.DataFrame, by: list[str], metrics: list[str]) -> pd.DataFrame:
    """Per arm: seeds done, and for each metric the mean and its 95% interval; size beside it."""
    out = []
    for key, group in frame.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        done = group[group.status == "done"]
        rec: dict[str, Any] = dict(zip(by, key, strict=True))
        rec["seeds"] = len(done)
        rec["failed"] = int((group.status != "done").sum())
        for m in metrics:
            col = f"m.{m}"
            mean, lo, hi = t_interval(done[col].tolist()) if col in done else (math.nan,) * 3
            rec[m], rec[f"{m}_lo"], rec[f"{m}_hi"] = mean, lo, hi
        rec["params"] = int(group.params.max()) if len(group) else 0
        rec["flops_per_token"] = int(group.flops_per_token.max()) if len(group) else 0
        out.append(rec)
    return pd.DataFrame.from_records(out)
