"""How a study's runs are grouped into stacks: one arm's seeds together, capped, split to feed every worker."""

from __future__ import annotations

import pytest

from pelab.config import RunConfig
from pelab.study.groups import MAX_STACK, stack_groups, unstacked_arms


def _cfg(seed: int, scheme: str = "learned", dropout: float = 0.0, steps: int = 50) -> RunConfig:
    return RunConfig.model_validate(
        {"task": {"name": "reverse", "length": 6}, "model": {"d": 16, "n_heads": 2, "position": {"scheme": scheme},
         "dropout": dropout}, "train": {"steps": steps}, "seed": seed}
    )  # fmt: skip


def test_one_arms_seeds_share_a_group_and_arms_do_not() -> None:
    runs = [_cfg(s, scheme) for scheme in ("learned", "sinusoidal") for s in range(3)]
    groups = stack_groups(runs, workers=1)
    assert sorted(len(g) for g in groups) == [3, 3]
    for g in groups:
        assert len({r.arm_id for r in g}) == 1
    assert sorted(r.run_id for g in groups for r in g) == sorted(r.run_id for r in runs)


def test_groups_are_capped_and_split_so_every_worker_has_one() -> None:
    runs = [_cfg(s) for s in range(MAX_STACK + 3)]
    assert sorted(len(g) for g in stack_groups(runs, workers=1)) == [3, MAX_STACK]
    assert sorted(len(g) for g in stack_groups(runs[:5], workers=2)) == [2, 3]
    assert len(stack_groups(runs[:1], workers=4)) == 1  # one run cannot be split


def test_costliest_group_first() -> None:
    runs = [_cfg(s, steps=20) for s in range(2)] + [_cfg(s, "sinusoidal", steps=400) for s in range(2)]
    groups = stack_groups(runs, workers=1)
    assert groups[0][0].train.steps == 400


def test_dropout_trains_one_seed_at_a_time_and_says_so() -> None:
    runs = [_cfg(s, dropout=0.1) for s in range(3)]
    assert [len(g) for g in stack_groups(runs, workers=1)] == [1, 1, 1]
    assert list(unstacked_arms(runs).values()) == ["dropout > 0"]
    assert unstacked_arms([_cfg(0)]) == {}


def test_a_feed_forward_of_one_channel_trains_one_seed_at_a_time() -> None:
    """At d_ff = 1 seed 3 in a stack of 3 differed from seed 3 alone in its last bits (pelab check --set
    model.d_ff=1): its seeds train alone, and a stack of them is refused."""
    from pelab.train import check_group

    runs = [_cfg(s, steps=4).model_copy(update={"model": _cfg(s).model.model_copy(update={"d_ff": 1})})
            for s in range(3)]  # fmt: skip
    assert [len(g) for g in stack_groups(runs, workers=1)] == [1, 1, 1]
    assert list(unstacked_arms(runs).values()) == ["d_ff = 1"]
    with pytest.raises(ValueError, match="d_ff = 1"):
        check_group(runs)


def test_a_stack_holds_no_more_seeds_than_fit_its_memory() -> None:
    from pelab.preflight import estimate

    runs = [_cfg(s) for s in range(6)]
    need = estimate(runs[0]).bytes
    assert sorted(len(g) for g in stack_groups(runs, budget=2 * need + 1)) == [2, 2, 2]
    assert sorted(len(g) for g in stack_groups(runs, budget=need // 2)) == [1] * 6  # one seed always trains


def test_large_activations_train_one_seed_at_a_time_small_ones_stack() -> None:
    from pelab.study.groups import STACK_VALUES, values_per_seed

    big = [RunConfig.model_validate({"task": {"name": "charlm", "length": 64}, "model": {"d": 64}, "seed": s})
           for s in range(4)]  # fmt: skip
    assert values_per_seed(big[0]) == 32 * 64 * 64 > STACK_VALUES // 2
    assert [len(g) for g in stack_groups(big, workers=1)] == [1, 1, 1, 1]
    small = [_cfg(s) for s in range(4)]  # 32 x 6 x 16 values a seed
    assert [len(g) for g in stack_groups(small, workers=1)] == [4]


def test_on_a_gpu_large_activations_stack_too_within_memory() -> None:
    """The cache bound is a CPU's: on a GPU the paper's language model (524k activation values a seed) trains its
    seeds as one stack, and only memory (``budget``) splits it."""
    from pelab.preflight import estimate

    big = [RunConfig.model_validate({"task": {"name": "charlm", "length": 128}, "model": {"d": 128}, "seed": s})
           for s in range(5)]  # fmt: skip
    assert [len(g) for g in stack_groups(big, workers=1, gpu=True)] == [5]
    assert [len(g) for g in stack_groups(big, workers=1)] == [1] * 5
    need = estimate(big[0]).bytes
    assert sorted(len(g) for g in stack_groups(big, workers=1, budget=2 * need + 1, gpu=True)) == [1, 2, 2]


def test_on_a_gpu_a_stack_is_not_split_to_feed_more_processes() -> None:
    runs = [_cfg(s) for s in range(5)]
    assert sorted(len(g) for g in stack_groups(runs, workers=4)) == [1, 1, 1, 2]
    assert [len(g) for g in stack_groups(runs, workers=4, gpu=True)] == [5]
