"""Helpers of the claims settled by looking inside encodings and trained models (C1, C2, C3, C4, C8, C10, C11, C15).

The analyses themselves live in ``pelab.analysis``; these claims pick which stored checkpoints to analyse (the
lowest-seed run of each arm, or every learned seed), run the analyses through ``ReportContext.analyse`` or
``ReportContext.measure_many`` (results cached under the study's ``analyses/`` folder) and turn their numbers into
verdicts. Here: the arms they read, the sides built from measures, and the width series C3 and C10 share.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from pelab.report.context import ReportContext
from pelab.report.evidence import compare, config_labels, select, split_configs
from pelab.report.registry import Figure
from pelab.rules import Comparison, Side

#: C1/C15 look at the encoding at the size of the question's figures.
C1_D, C1_LENGTH = 512, 128


def _figures(result: dict[str, Any] | None, titles: dict[str, str]) -> list[Figure]:
    if not result:
        return []
    folder = Path(result["folder"])
    out = []
    for name in result.get("files", []):
        for suffix, title in titles.items():
            if name.endswith(suffix):
                out.append(Figure(title, folder / name))
    return out


def _token_tasks(ctx: ReportContext) -> list[str]:
    f = ctx.frame
    seg = f["model.n_segments"].fillna(0) if "model.n_segments" in f else pd.Series(0, index=f.index)
    tok = f[(f["model.head"] == "token") & (seg == 0)]
    if "model.token_table" in tok:
        tok = tok[tok["model.token_table"].isna()]
    return list(dict.fromkeys(tok["task.name"]))


def _seed(ctx: ReportContext, run_id: str) -> int:
    return int(ctx.frame.loc[ctx.frame.run_id == run_id, "seed"].iloc[0])


def _accs(ctx: ReportContext, run_ids: list[str]) -> dict[int, float]:
    f = ctx.frame[ctx.frame.run_id.isin(run_ids)]
    return {int(s): float(a) for s, a in zip(f["seed"], f["m.acc"], strict=True)}


def measured_side(ctx: ReportContext, label: str, run_ids: list[str], key: str, values: dict[int, float]) -> Side:
    """A Side of per-seed measurements (not stored metrics), with the runs' accuracy so 'learned' reads it."""
    f = ctx.frame[ctx.frame.run_id.isin(run_ids)]
    return Side(
        label,
        {key: values, "acc": _accs(ctx, run_ids)},
        params=int(f.params.max()) if len(f) else 0,
        flops=int(f.flops_per_token.max()) if len(f) else 0,
        run_ids=tuple(run_ids),
    )


def run_side(ctx: ReportContext, label: str, run_ids: list[str]) -> Side:
    """A Side of the runs' accuracy alone (an arm below the floor, never measured), with its size: params are
    printed beside every comparison, including the ones the floor removed."""
    return measured_side(ctx, label, run_ids, "acc", _accs(ctx, run_ids))


def _arm(ctx: ReportContext, **filters: Any) -> pd.DataFrame:
    return select(ctx.frame, **filters)


def _configs(arm: pd.DataFrame, shown: list[str]) -> list[tuple[str, dict[str, Any], pd.DataFrame]]:
    """An arm split into its configurations (``split_configs``): (the label extra that tells it apart from a
    configuration with the same ``shown`` values, or "", its config, its rows)."""
    groups = split_configs(arm)
    extra = config_labels([w for w, _ in groups], shown)
    return [(x, w, g) for x, (w, g) in zip(extra, groups, strict=True)]


class TaskPlace(NamedTuple):
    """A task, and what tells its configuration apart from another of the same task ("task.length=12"; "" when
    there is one): a comparison's ``where`` keeps them as two keys, so claims.json's task names stay task names."""

    task: str
    setting: str = ""

    def __str__(self) -> str:
        return f"{self.task} ({self.setting})" if self.setting else self.task

    def where(self, **more: Any) -> dict[str, Any]:
        return {"task.name": self.task, **({"setting": self.setting} if self.setting else {}), **more}


def width_series(ctx: ReportContext) -> dict[str, list[Comparison]]:
    """concat_split against add at three or more widths of one configuration (everything but the width held
    equal): the series C3 reads, named by task and scheme, and by whatever else tells two series apart."""
    comps = compare(ctx.frame, ["model.combine"], ("concat_split",), ("add",))
    by: dict[str, list[Comparison]] = {}
    for c in comps:
        by.setdefault(repr(sorted((k, str(v)) for k, v in c.where.items() if k != "model.d")), []).append(c)
    series = [v for v in by.values() if len({c.where["model.d"] for c in v}) >= 3]
    rest = [{k: v for k, v in cs[0].where.items() if k != "model.d"} for cs in series]
    extra = config_labels(rest, ["task.name", "model.position.scheme"])
    return {
        f"{w['task.name']}, {w['model.position.scheme']}" + (f" ({x})" if x else ""): sorted(
            cs, key=lambda c: c.where["model.d"]
        )
        for w, x, cs in zip(rest, extra, series, strict=True)
    }
