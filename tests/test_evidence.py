"""Comparisons drawn from a runs frame: what is held equal, how seeds pair, and concat_wide against add at
its own total width."""

from __future__ import annotations

import pandas as pd

from pelab.report.evidence import compare, compare_wide


def frame(rows: list[dict]) -> pd.DataFrame:
    base = {"status": "done", "params": 100, "flops_per_token": 10, "train.steps": 100}
    return pd.DataFrame([{**base, **r, "run_id": f"r{i}"} for i, r in enumerate(rows)])


def run(task: str, combine: str, d: int, seed: int, acc: float, width: int | None = None) -> dict:
    return {"task.name": task, "model.combine": combine, "model.d": d, "seed": seed, "m.acc": acc,
            "width": width or d}  # fmt: skip


def test_compare_pairs_by_seed_within_groups_only() -> None:
    f = frame(
        [run("reverse", "add", 32, s, 0.8 + 0.01 * s) for s in (0, 1, 2)]
        + [run("reverse", "concat_split", 32, s, 0.9 + 0.01 * s) for s in (2, 1, 0)]  # stored in another order
        + [run("offset", "add", 32, s, 0.5) for s in (0, 1)]  # no concat arm on offset: no comparison
        + [run("reverse", "concat_split", 64, s, 0.99) for s in (0, 1, 2)]  # other width: its own group, no add
    )
    comps = compare(f, ["model.combine"], ("concat_split",), ("add",))
    assert len(comps) == 1
    c = comps[0]
    assert c.where == {"task.name": "reverse", "model.d": 32, "train.steps": 100}
    a, b = c.a.of("acc"), c.b.of("acc")
    assert {s: round(a[s] - b[s], 9) for s in a} == {0: 0.1, 1: 0.1, 2: 0.1}  # paired by seed, not by row order
    assert len(c.a.run_ids) == 3 and set(c.a.run_ids).isdisjoint(c.b.run_ids)


def test_a_failed_run_drops_out_of_its_pair() -> None:
    rows = [run("reverse", "add", 32, s, 0.8) for s in (0, 1, 2)] + [
        run("reverse", "concat_split", 32, s, 0.9) for s in (0, 1, 2)
    ]
    rows[4]["status"] = "failed"
    c = compare(frame(rows), ["model.combine"], ("concat_split",), ("add",))[0]
    assert sorted(c.a.of("acc")) == [0, 2] and sorted(c.b.of("acc")) == [0, 1, 2]


def test_concat_wide_meets_add_at_its_total_width() -> None:
    f = frame(
        [run("reverse", "concat_wide", 32, s, 0.95, width=40) for s in (0, 1, 2)]
        + [run("reverse", "add", 40, s, 0.93) for s in (0, 1, 2)]
        + [run("reverse", "add", 32, s, 0.90) for s in (0, 1, 2)]
    )
    wide = compare_wide(f)
    assert len(wide) == 1
    c = wide[0]
    assert c.a.label == "concat_wide + 32" and c.b.label == "add + 40" and c.where["width"] == 40
    assert c.b.mean("acc") == 0.93  # the add arm at d=40, not the one at d=32
