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


def test_an_arm_of_two_grids_splits_into_its_configurations_and_each_label_says_what_differs() -> None:
    """add at d=32 on sort, from a grid at length 10 and another at length 12: seeds 0-2 of each. Pooled, the
    seed-keyed values of one would overwrite the other's; split, each keeps its own three seeds."""
    from pelab.report.evidence import config_labels, split_configs

    rows = [run("sort", "add", 32, s, 0.5 + 0.01 * s) | {"task.length": 10, "model.max_len": 20} for s in (0, 1, 2)]
    rows += [run("sort", "add", 32, s, 0.9 + 0.01 * s) | {"task.length": 12, "model.max_len": 24} for s in (0, 1, 2)]
    rows += [run("sort", "add", 64, s, 0.95) | {"task.length": 12, "model.max_len": 24} for s in (0, 1, 2)]
    groups = split_configs(frame(rows))
    assert [(w["task.length"], w["model.d"], sorted(g.seed)) for w, g in groups] == [
        (10, 32, [0, 1, 2]), (12, 32, [0, 1, 2]), (12, 64, [0, 1, 2])
    ]  # fmt: skip
    assert [round(float(g["m.acc"].mean()), 2) for _, g in groups] == [0.51, 0.91, 0.95]
    # two share d=32: named by the task setting that differs (not the model key that follows from it); d=64 needs
    # nothing beyond its width
    assert config_labels([w for w, _ in groups], ["model.d"]) == ["task.length=10", "task.length=12", ""]
    # with nothing shown, each is told from the other two: by the task length where that suffices, else by every
    # key that differs from some twin
    assert config_labels([w for w, _ in groups], []) == [
        "task.length=10", "model.d=32, model.max_len=24, task.length=12", "model.d=64, model.max_len=24, task.length=12"
    ]  # fmt: skip


def test_c17_never_ranks_arms_trained_at_two_lengths_together() -> None:
    from pelab.report.claims.c17_extrapolation import task_settings

    rows = [run("sort", c, 32, s, 0.9) | {"task.length": n} for n in (10, 12) for c in ("add", "none") for s in (0, 1)]
    rows += [run("copy", "add", 32, s, 0.9) | {"task.length": 8} for s in (0, 1)]
    got = [(name, sorted(set(g["task.length"])), len(g)) for name, g in task_settings(frame(rows))]
    assert got == [("sort (task.length=10)", [10], 4), ("sort (task.length=12)", [12], 4), ("copy", [8], 2)]


def test_a_configuration_setting_is_its_own_key_and_reads_plainly() -> None:
    """C2, C4, C8 and C10 name a task's configuration ("task.length=12") beside the task, not inside its name:
    claims.json's task.name stays a task name, and tables read "sort (task.length=12)" as before."""
    from pelab.report.evidence import config_labels
    from pelab.report.measured import TaskPlace
    from pelab.rules import Comparison, Side

    place = TaskPlace("sort", "task.length=12")
    assert str(place) == "sort (task.length=12)" and str(TaskPlace("sort")) == "sort"
    assert place.where(**{"model.d": 32}) == {"task.name": "sort", "setting": "task.length=12", "model.d": 32}
    assert TaskPlace("sort").where() == {"task.name": "sort"}
    wheres = [place.where(), TaskPlace("sort", "task.length=10").where()]
    assert config_labels(wheres, ["task.name"]) == ["task.length=12", "task.length=10"]
    empty = Side("x", {})
    assert Comparison(place.where(**{"model.d": 32}), empty, empty).place() == "task=sort, task.length=12, d=32"
