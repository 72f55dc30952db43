"""Several runs per GPU (issue 13): which device each local worker gets, how many runs share a GPU by default, and
the share Ray reserves. The placement logic is tested here on any machine; tests/test_cuda.py runs a study with
several runs per GPU where one is present."""

from __future__ import annotations

import pytest

from pelab.config import RunConfig
from pelab.errors import PelabError
from pelab.preflight import CUDA_CONTEXT_BYTES, MAX_RUNS_PER_GPU, estimate, runs_per_gpu
from pelab.study import driver
from pelab.study.backends import device_slots, run_local
from pelab.study.grid import parse_study
from pelab.study.ray_backend import gpu_share

GiB = 2**30
SMALL = RunConfig(task={"name": "reverse", "length": 8}, model={"d": 32}, train={"steps": 5})


def test_slots_spread_the_first_runs_over_every_gpu() -> None:
    assert device_slots("cuda", 2, 3) == ["cuda:0", "cuda:1"] * 3
    assert device_slots("cuda", 1, 4) == ["cuda:0"] * 4
    assert device_slots("cuda:1", 4, 2) == ["cuda:1", "cuda:1"]  # the GPU the user named, only


def test_default_runs_per_gpu_is_what_fits_capped_by_cores_and_eight() -> None:
    need = estimate(SMALL).bytes + CUDA_CONTEXT_BYTES
    assert runs_per_gpu([SMALL], int(3.5 * need / 0.8), cpus_per_gpu=16) == 3  # memory decides
    assert runs_per_gpu([SMALL], 80 * GiB, cpus_per_gpu=5) == 5  # cores decide
    assert runs_per_gpu([SMALL], 80 * GiB, cpus_per_gpu=64) == MAX_RUNS_PER_GPU
    assert runs_per_gpu([SMALL], need // 2, cpus_per_gpu=16) == 1  # never fewer than one (preflight refuses)
    big = RunConfig(task={"name": "reverse", "length": 64}, model={"d": 1024, "n_layers": 8}, train={"batch_size": 256})
    assert runs_per_gpu([SMALL, big], 80 * GiB, 16) < runs_per_gpu([SMALL], 80 * GiB, 16)  # the largest decides


def test_local_backend_on_gpus_gets_one_slot_per_run_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(driver, "machine_bytes", lambda device: 80 * GiB)
    monkeypatch.setattr(driver.os, "cpu_count", lambda: 16)
    assert driver._gpu_slots("auto", [SMALL], None, None) == ["cuda:0", "cuda:1"] * 8
    assert driver._gpu_slots("cuda", [SMALL], 3, None) == ["cuda:0", "cuda:1"] * 3
    assert driver._gpu_slots("cuda", [SMALL], 3, 4) == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]  # --workers caps
    assert driver._gpu_slots("cuda:1", [SMALL], 2, None) == ["cuda:1", "cuda:1"]
    assert driver._gpu_slots("cpu", [SMALL], None, None) is None


def test_no_gpu_means_no_slots() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert driver._gpu_slots("auto", [SMALL], None, None) is None


def test_ray_reserves_a_share_of_a_gpu() -> None:
    assert gpu_share(True, 4) == 0.25 and gpu_share(True, 1) == 1.0 and gpu_share(False, 4) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(runs_per_gpu=0), "runs_per_gpu: must be in 1..64 (got 0)"),
        (dict(runs_per_gpu=2, device="cpu"), "runs_per_gpu: only used with a GPU (device=cpu)"),
    ],
)
def test_bad_runs_per_gpu_is_refused_in_one_line(kwargs: dict, message: str) -> None:
    study = parse_study('[task]\nname = "reverse"\nlength = 8\n')
    with pytest.raises(PelabError, match=message.replace("(", r"\(").replace(")", r"\)")):
        driver.check_study(study, **kwargs)


def test_runs_take_and_give_back_slots(tmp_path) -> None:
    """Five runs through two slots: each run takes a free slot's device and returns it when it ends."""
    runs = [SMALL.model_copy(update={"seed": s}) for s in range(5)]
    results = {}
    # device="cuda" does not exist here: a run that took it instead of its slot's device would fail
    run_local(
        [[r] for r in runs], lambda cfg, r: results.setdefault(cfg.seed, r), device="cuda", devices=["cpu", "cpu"]
    )
    assert sorted(results) == list(range(5))
    assert all(r.status == "done" and r.device == "cpu" for r in results.values())


def test_an_explicit_runs_per_gpu_that_cannot_fit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    need = estimate(SMALL).bytes + CUDA_CONTEXT_BYTES
    monkeypatch.setattr(driver, "machine_bytes", lambda device: 3 * need)
    assert driver._gpu_slots("cuda", [SMALL], 3, None) == ["cuda:0"] * 3
    with pytest.raises(PelabError, match=r"^runs_per_gpu: 4 runs of about .* lower runs_per_gpu"):
        driver._gpu_slots("cuda", [SMALL], 4, None)


# --- a time-boxed GPU lease (issue 42): grid by grid, whole stacks -------------------------------------------------
TIERED = """
seeds = [0, 1, 2]
[task]
name = "reverse"
length = 8
[model]
d = 16
[train]
steps = 5
[[grid]]
name = "first: cheap"
axes = { "model.combine" = ["add", "concat_split"] }
[[grid]]
name = "second: costly"
set = { "model.d" = 128, "train.steps" = 500 }
axes = { "model.combine" = ["add", "concat_split"] }
[[grid]]
name = "third: the first grid's arms again, and one more"
axes = { "model.combine" = ["add", "gated"] }
"""


def test_on_a_gpu_groups_go_grid_by_grid_in_the_files_order() -> None:
    """The driver starts a GPU study's groups tier by tier (a grid's costliest first), so a lease's time box ends it
    with its first grids done; on a CPU the costliest go first whatever their grid (the best use of the cores)."""
    from pelab.study.groups import grid_tiers, stack_groups

    study = parse_study(TIERED)
    tiers = grid_tiers(study)
    assert sorted(set(tiers.values())) == [0, 1, 2]
    add = next(r for r in study.runs if r.model.d == 16 and r.model.combine == "add")
    assert tiers[add.run_id] == 0  # an arm in two grids runs with the first
    gpu = stack_groups(study.runs, 2, gpu=True, tiers=tiers)
    assert [g[0].model.d for g in gpu] == [16, 16, 128, 128, 16]
    assert [tiers[g[0].run_id] for g in gpu] == [0, 0, 1, 1, 2] and all(len(g) == 3 for g in gpu)
    cpu = stack_groups(study.runs, 2)
    assert cpu[0][0].model.d == 128  # costliest first


def test_a_gpu_keeps_stacks_of_five_whole_with_four_runs_sharing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU holds nothing but the runs: a group may use the 80% that runs_per_gpu shares out, less its CUDA
    context (not half of it, as on a CPU, where the report and the driver need room). With 4 processes on an 80 GB
    GPU, the gpu preset's largest arm (d=640, 256 bytes, batch 32) trains its 5 seeds as one stack; 8 would split it."""
    from pelab.study.groups import stack_groups

    monkeypatch.setattr(driver, "machine_bytes", lambda device: 80 * GiB)
    big = RunConfig(task={"name": "charlm", "length": 256}, model={"d": 640, "n_layers": 4, "n_heads": 4},
                    train={"batch_size": 32, "precision": "bf16"})  # fmt: skip
    seeds = [big.model_copy(update={"seed": s}) for s in range(500, 505)]
    whole = stack_groups(seeds, 4, budget=driver._stack_budget("local", "cuda", 4, gpu=True), gpu=True)
    assert [len(g) for g in whole] == [5]
    split = stack_groups(seeds, 8, budget=driver._stack_budget("local", "cuda", 8, gpu=True), gpu=True)
    assert len(split) > 1
