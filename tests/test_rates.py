"""Learning rate as a nuisance parameter: expansion of a rate list, choice on validation, the fixed-rate view."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pelab.errors import PelabError
from pelab.report import rates
from pelab.report.evidence import compare
from pelab.study.grid import parse_study

STUDY = """
seeds = [0, 1]
[task]
name = "reverse"
length = 4
[model]
d = 16
[train]
steps = 2
lr = [1e-3, 3e-3, 1e-2]
[[grid]]
name = "combiners"
axes = {{ "model.combine" = ["add", "concat_split"] }}
[[grid]]
name = "fixed"
set = {{ "model.combine" = "add", "train.lr" = {fixed} }}
"""


def test_a_rate_list_expands_every_arm_and_marks_it_tuned():
    study = parse_study(STUDY.format(fixed=0.02))
    # 2 combiners x 2 seeds x 3 rates tuned, plus the fixed-rate grid's 2 seeds
    assert len(study.runs) == 14
    assert len(study.tuned) == 12
    assert study.learning_rates == [1e-3, 3e-3, 1e-2]
    fixed = [r for r in study.runs if r.run_id not in study.tuned]
    assert {r.train.lr for r in fixed} == {0.02}


def test_a_grid_that_sets_a_rate_list_tunes_only_its_own_arms():
    text = STUDY.replace("lr = [1e-3, 3e-3, 1e-2]", "lr = 0.003").format(fixed="[0.001, 0.01]")
    study = parse_study(text)
    tuned = [r for r in study.runs if r.run_id in study.tuned]
    assert {r.train.lr for r in tuned} == {0.001, 0.01}
    assert {r.model.combine for r in tuned} == {"add"}


@pytest.mark.parametrize("bad", ["[]", "[0.001, 0.001]", "[0.001, -1]", '["fast"]', "[true]"])
def test_bad_rate_lists_are_one_line_errors(bad):
    with pytest.raises(PelabError, match="train.lr"):
        parse_study(STUDY.replace("lr = [1e-3, 3e-3, 1e-2]", f"lr = {bad}").format(fixed=0.02))


def _frame(val: dict[tuple[str, float], list[float]], test_offset: float = 0.0) -> pd.DataFrame:
    rows = []
    for (combine, lr), losses in val.items():
        for seed, v in enumerate(losses):
            rows.append(
                {
                    "run_id": f"{combine}-{lr}-{seed}",
                    "status": "done",
                    "seed": seed,
                    "model.combine": combine,
                    "task.name": "reverse",
                    "train.lr": lr,
                    "m.val_loss": v,
                    # the test loss ranks the rates the other way round: a choice made on it would differ
                    "m.loss": 10 - v + test_offset,
                    "m.acc": 0.9,
                    "params": 1,
                    "flops_per_token": 1,
                }
            )
    return pd.DataFrame(rows)


def test_each_arm_keeps_its_best_validation_rate_never_the_test_one():
    frame = _frame(
        {
            ("add", 0.001): [1.0, 1.2],
            ("add", 0.01): [0.5, 0.7],  # add: best at 0.01
            ("concat_split", 0.001): [0.4, 0.4],  # concat_split: best at 0.001
            ("concat_split", 0.01): [0.9, 0.8],
        }
    )
    kept, choices = rates.choose(frame, set(frame.run_id))
    chosen = {c.arm["model.combine"]: c.chosen for c in choices}
    assert chosen == {"add": 0.01, "concat_split": 0.001}
    assert len(kept) == 4
    by_arm = kept.groupby("model.combine")["lr_chosen"].unique()
    assert list(by_arm["add"]) == [0.01] and list(by_arm["concat_split"]) == [0.001]
    add = next(c for c in choices if c.arm["model.combine"] == "add")
    assert math.isclose(add.val_loss[0.001], 1.1) and math.isclose(add.val_loss[0.01], 0.6)
    # arms that kept different rates still pair up, seed by seed: the rate is not an axis
    (comparison,) = compare(kept, ["model.combine"], ("concat_split",), ("add",))
    assert sorted(comparison.a.values["loss"]) == [0, 1]


def test_at_a_fixed_rate_every_tuned_arm_is_read_at_that_rate_and_untuned_runs_stay():
    frame = _frame({("add", 0.001): [1.0, 1.0], ("add", 0.01): [0.5, 0.5], ("gated", 0.02): [0.3, 0.3]})
    tuned = {r for r in frame.run_id if not r.startswith("gated")}
    fixed = rates.at_rate(frame, tuned, 0.001)
    assert set(fixed["train.lr"]) == {0.001, 0.02}
    assert len(fixed) == 4


def test_without_a_validation_loss_the_arm_keeps_the_fixed_rate():
    frame = _frame({("add", 0.001): [1.0], ("add", 0.003): [1.0], ("add", 0.01): [1.0]}).drop(columns="m.val_loss")
    _, (choice,) = rates.choose(frame, set(frame.run_id))
    assert choice.chosen == 0.003 and choice.val_loss == {}


def test_fixed_rate_is_the_middle_of_the_list():
    assert rates.fixed_rate([0.01, 0.001, 0.003]) == 0.003
    assert rates.fixed_rate([0.01, 0.001]) == 0.001
    assert rates.fixed_rate([0.5]) == 0.5


def test_the_report_says_how_the_rate_was_set() -> None:
    """Where every reader looks ("How the comparisons were made"): a grid and its choice on validation, or
    one fixed rate that is not tuned per arm, with its values."""
    from pelab.report.build import rate_note

    tuned = rate_note(parse_study(STUDY.format(fixed=0.02)))
    assert tuned.startswith("each arm kept its best of 0.001, 0.003, 0.01 on validation")
    fixed = rate_note(parse_study(STUDY.replace("lr = [1e-3, 3e-3, 1e-2]", "lr = 3e-3").format(fixed=0.02)))
    assert fixed.startswith("one fixed rate per task (0.003, 0.02)") and "not tuned per arm" in fixed


def test_a_study_with_a_rate_grid_writes_its_report_with_the_fixed_rate_verdicts(tmp_path) -> None:
    """The paper preset's path end to end, at a toy size: every arm trained at every rate, the report decides every
    claim on the kept rates and again at the middle rate alone (a regression: that second pass once raised)."""
    from pelab.report.build import build_report
    from pelab.study.driver import run_study

    study = parse_study(STUDY.format(fixed=0.02))
    outcome = run_study(study, tmp_path, workers=1, quiet=True)
    assert outcome.ran == 14 and outcome.failed == 0
    _, md, claims = build_report(tmp_path)
    text = md.read_text()
    assert "Learning rates" in text and "Each arm's rate" in text
    assert not [c.id for c in claims if c.verdict == "error"], [(c.id, c.key) for c in claims if c.verdict == "error"]


#: full's shape: each grid (width) its own two rates, drawn from one union
PER_WIDTH = (
    STUDY.split("[[grid]]")[0].replace("lr = [1e-3, 3e-3, 1e-2]", "lr = 3e-3")
    + """[[grid]]
name = "narrow"
axes = { "model.combine" = ["add", "concat_split"] }
set = { "model.d" = 16, "train.lr" = [3e-3, 1e-2] }
[[grid]]
name = "wide"
axes = { "model.combine" = ["add", "concat_split"] }
set = { "model.d" = 32, "train.lr" = [1e-3, 3e-3] }
"""
)


def test_rate_lists_per_grid_are_named_as_each_arm_tried_them_not_as_their_union() -> None:
    """full gives each width its own two rates: "each arm kept its best of 0.001, 0.003, 0.01" would claim a
    three-rate search no arm had. The note names the lists; the union only as where they are drawn from."""
    from pelab.report.build import rate_note

    study = parse_study(PER_WIDTH)
    assert sorted(set(rates.rates_per_arm(study))) == [(1e-3, 3e-3), (3e-3, 1e-2)]
    assert len(rates.rates_per_arm(study)) == 4  # 2 combiners x 2 widths, seeds folded into their arm
    note = rate_note(study)
    assert note.startswith(
        "each arm kept its best of the 2 rates of its own list (2 lists, drawn from 0.001, 0.003, 0.01)"
    )
    shared = parse_study(STUDY.format(fixed=0.02))
    assert rates.rate_lists(shared, "every rate in ") == "every rate in 0.001, 0.003, 0.01"


def test_the_rates_section_counts_an_edge_of_the_rates_each_arm_tried(tmp_path) -> None:
    """An arm that tried 1e-3 and 3e-3 and kept 3e-3 kept its largest rate, though 3e-3 is the middle of the study's
    union: the edge count reads each arm's own list (with two rates per arm, every arm is at an edge)."""
    from pelab.report.build import build_report
    from pelab.study.driver import run_study

    study = parse_study(PER_WIDTH)
    outcome = run_study(study, tmp_path, workers=1, quiet=True)
    assert outcome.ran == 16 and outcome.failed == 0
    _, md, _ = build_report(tmp_path)
    text = md.read_text()
    assert "4 arms each trained at the 2 rates of its own list" in text
    assert "4 of 4 arms kept the smallest or largest rate they tried (each tried two" in text
    assert "left out of that check" not in text  # every arm tried 3e-3, the fixed check's rate
    # lists without a shared rate: the check's rate (the union's lower middle, 3e-3) is not one the narrow arms tried
    apart = parse_study(PER_WIDTH.replace("[3e-3, 1e-2]", "[1e-2, 3e-2]"))
    assert run_study(apart, tmp_path / "apart", workers=1, quiet=True).failed == 0
    _, md, _ = build_report(tmp_path / "apart")
    assert "At the single fixed rate 0.003 (the middle one tried) (2 arms did not train at 0.003 and are left out of " \
           "that check)" in md.read_text()  # fmt: skip
