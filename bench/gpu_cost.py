"""A GPU cost model for a study run with ``--device cuda``: seconds per stacked group, and the study's wall time on
one GPU, tier by tier (its grids in file order, the order the driver runs them in on a GPU).

NOT A MEASUREMENT. pelab's own estimate (``pelab.study.estimate``) is fitted to CPUs; this one is written from
FLOPs, bytes moved and one H100 measurement, with every assumption below, so that the first lease that runs the
``gpu`` preset can correct it (``--calibrate``: the constants that reproduce what a lease measured).

A stack of S seeds of one arm takes, per training step, on a GPU that the runs in flight share one after another
(kernels of different processes do not overlap; the GPU is the bottleneck once stacks are whole):

    floor + S x (3 F T_step / R + (kappa x T_step x C x L + pi x P) / BW)

- F: forward FLOPs per token (``pelab.model.body_flops_per_token``: matrix products, attention's T x T products
  and the head); training costs three times that. T_step = batch x sequence tokens per seed-step.
- R: sustained matrix-product rate. fp32 (PyTorch leaves TF32 off): ASSUMED 30 TFLOP/s, under half the H100's
  67 TFLOP/s non-tensor fp32 peak. bf16 autocast: ASSUMED 300 TFLOP/s, 38% of the 798 TFLOP/s an 8192^3 bf16
  product ran at on the lent H100 (KINDS.md): these products are 4k-40k rows by 128-2,560 columns.
- The rest of a step is elementwise (LayerNorm with an unfused affine, GELU, residual adds, autocast's casts,
  layout copies, per-seed selects, AdamW). COUNTED on a CPU (``--count``: every non-view aten op of a stacked
  training step, the bytes of its inputs and outputs, matrix products and attention left out; pelab's step
  dispatches the same ops on CUDA): kappa = 430 bytes per token, per channel of model width C, per layer (bf16
  autocast, 4 layers, stacks of 5; fp32: 450-490), and pi = 56 bytes per parameter (AdamW's state, gradients,
  casts), moved at an ASSUMED BW = 2.5 TB/s (the lent H100 copied 3.0 TB/s device to device). Every byte is
  counted as a trip to memory: at d=128 much of it stays in the H100's 50 MB of L2, so this errs high there.
- floor: a step's fixed GPU time. A stacked step of 4 layers is 449 ops under bf16 autocast and 355 in fp32
  (counted as above, stacks of 5), whatever the width. Fitted to the one H100 measurement of a stacked study
  (README "On GPUs": the paper's language model, d=128, 128 bytes, 4 layers, batch 32, fp32: 20 runs of 300
  steps in 19.9 s as stacks of 5, 4 processes sharing the GPU, ASSUMED 5 s of it starting): 3.2 ms in fp32,
  about 9 us per op (a kernel's launch, its run and the switches between the processes sharing the GPU);
  bf16 at the same 9 us per op: 4.0 ms.
- A group's process starts fresh (a CUDA context, the corpus read): ASSUMED 3 s, on the CPU, overlapping other
  groups' GPU work; the study's own start (the pool, imports, pre-flight): ASSUMED 20 s.
- Evaluation: forward passes (a third of a training token's cost) over the test and validation sets at the
  training length and one validation batch per curve point, each pass paying a third of the floor.

The floor was fitted to the slowest of the three H100 figures pelab has: the same model ran 10 runs in 8.9 s with
2 processes on another H100 (the model says 13.9 s), and the paper preset's first 51 runs, one seed a process and
8 sharing the GPU, took 5.8 min (the model says 7.6 min). So the model's figure is the pessimistic end of what
these three measurements allow, at d=128 in fp32; wider models in bf16 rest on R and BW, assumed, and could
come out either side of it. Plan against the model's figure, and let the time box and the grid order (the
driver runs a GPU study grid by grid) decide what a slower GPU leaves out.

    python bench/gpu_cost.py                       # the gpu preset on one H100, tier by tier
    python bench/gpu_cost.py my.toml --runs-per-gpu 4
    python bench/gpu_cost.py --calibrate           # the model against the measurement it was fitted to
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from pelab.config import RunConfig  # noqa: E402
from pelab.study.grid import Study  # noqa: E402


@dataclass(frozen=True)
class GpuModel:
    """The constants of the model (see the module docstring for where each comes from)."""

    name: str = "one H100 (assumed constants; see bench/gpu_cost.py)"
    #: sustained matrix-product FLOP/s, by precision
    rate: dict[str, float] = field(default_factory=lambda: {"fp32": 30e12, "bf16": 300e12})
    #: a stacked step's fixed GPU seconds, by precision
    floor: dict[str, float] = field(default_factory=lambda: {"fp32": 3.2e-3, "bf16": 4.0e-3})
    #: elementwise bytes per token per channel per layer of a training step, and per parameter
    kappa: float = 430.0
    pi: float = 56.0
    #: device memory bytes per second the elementwise kernels reach
    bandwidth: float = 2.5e12
    #: a group's own process start (CPU side, overlaps other groups' GPU work)
    group_start: float = 3.0
    #: the study's own start
    study_start: float = 20.0
    #: the calibrating measurement's own start (bench/study.py: a pool of 4 processes, then the study)
    bench_start: float = 5.0


H100 = GpuModel()


def _sizes(cfg: RunConfig) -> tuple[int, int, int, int, int]:
    """Forward FLOPs per token, sequence length, model width, layers and parameters of a run."""
    from pelab.model import body_flops_per_token
    from pelab.preflight import model_params
    from pelab.tasks import make_task

    task = make_task(cfg.task)
    seq = task.seq_len(task.n)
    m = cfg.model
    return body_flops_per_token(m, seq), seq, m.widths().model, m.n_layers, model_params(m)


def seed_step_seconds(cfg: RunConfig, model: GpuModel = H100) -> float:
    """GPU seconds one seed adds to a stacked training step: matrix products, then elementwise traffic."""
    flops, seq, width, layers, params = _sizes(cfg)
    tokens = cfg.train.batch_size * seq
    moved = model.kappa * tokens * width * layers + model.pi * params
    return 3 * flops * tokens / model.rate[cfg.train.precision] + moved / model.bandwidth


def group_gpu_seconds(group: Sequence[RunConfig], model: GpuModel = H100) -> float:
    """GPU seconds of one stacked group (one arm's seeds): its training steps, then each seed's evaluation."""
    cfg, S = group[0], len(group)
    t = cfg.train
    floor = model.floor[t.precision]
    flops, seq, width, layers, _ = _sizes(cfg)
    train = t.steps * (floor + S * seed_step_seconds(cfg, model))
    # a forward pass: a third of a training token's products and activation traffic
    per_token = flops / model.rate[t.precision] + model.kappa * width * layers / model.bandwidth / 3
    passes = 2 * t.eval_batches + t.curve_points  # test and validation at the training length, the curve's points
    sequences = (2 * t.eval_batches + t.curve_points) * t.eval_batch_size
    return train + S * (sequences * seq * per_token + passes * floor / 3)


@dataclass(frozen=True)
class Tier:
    """One grid of a study as the driver runs it on a GPU: its groups, their GPU seconds, and when it ends."""

    name: str
    runs: int
    groups: int
    gpu_seconds: float
    ends_at: float  # modelled seconds from the study's start


def _groups(runs: Sequence[RunConfig]) -> list[list[RunConfig]]:
    from pelab.study.groups import MAX_STACK

    arms: dict[str, list[RunConfig]] = {}
    for r in runs:
        arms.setdefault(r.arm_id, []).append(r)
    return [a[i : i + MAX_STACK] for a in arms.values() for i in range(0, len(a), MAX_STACK)]


def study_tiers(study: Study, runs_per_gpu: int = 4, model: GpuModel = H100) -> list[Tier]:
    """Each grid's groups in the order the driver starts them on one GPU (tier by tier: ``grid_tiers``), and when
    each grid's last group ends: the GPU serves the groups in flight one after another (a serial resource), while
    a group's own start overlaps the others' GPU work. Whole stacks (the driver's budget keeps them whole with 4
    processes on an 80 GB GPU)."""
    from pelab.study.groups import grid_tiers

    tiers = grid_tiers(study)
    by_tier: dict[int, list[RunConfig]] = {}
    for r in study.runs:
        by_tier.setdefault(tiers.get(r.run_id, 0), []).append(r)
    names = [g.name for g in study.grids]
    out, clock = [], model.study_start
    for tier in sorted(by_tier):
        groups = _groups(by_tier[tier])
        gpu = sum(group_gpu_seconds(g, model) for g in groups)
        clock += max(gpu, len(groups) * model.group_start / max(1, runs_per_gpu))
        out.append(Tier(names[tier], len(by_tier[tier]), len(groups), gpu, clock))
    return out


def _paper_lm(steps: int, seeds: int, schemes: Sequence[str]) -> list[RunConfig]:
    """The paper preset's language model (charlm d=128, 128 bytes of Python's stdlib, 4 layers, batch 32, fp32)."""
    return [
        RunConfig.model_validate({"task": {"name": "charlm", "length": 128, "corpus": "code"},
                                  "model": {"d": 128, "n_layers": 4, "n_heads": 4, "combine": "none",
                                            "position": {"scheme": scheme}},
                                  "train": {"steps": steps, "batch_size": 32, "eval_batches": 4}, "seed": s})
        for scheme in schemes for s in range(seeds)
    ]  # fmt: skip


def calibration(model: GpuModel = H100) -> list[tuple[str, float, float]]:
    """(what, modelled seconds, measured seconds) for the three H100 figures pelab has (README "On GPUs", and the
    paper preset's first lease). The floor was fitted to the first; the other two are checks."""
    four = _groups(_paper_lm(300, 5, ("rotary", "none", "alibi", "t5")))
    two = four[:2]
    lease = [[c] for c in _paper_lm(2000, 51, ("rotary",))]
    start = model.bench_start + model.group_start
    return [
        ("20 runs x 300 steps, stacks of 5, 4 processes", start + sum(map(group_gpu_seconds, four)), 19.9),
        ("10 runs x 300 steps, stacks of 5, 2 processes (another H100)", start + sum(map(group_gpu_seconds, two)), 8.9),
        ("51 runs x 2000 steps, one seed a process, 8 processes (lease)",
         start + sum(map(group_gpu_seconds, lease)), 5.8 * 60),
    ]  # fmt: skip


def tokens_per_run(study: Study) -> dict[str, tuple[int, int]]:
    """Each grid's training tokens per run (fewest, most)."""
    from pelab.tasks import make_task

    out: dict[str, list[int]] = {}
    for r in study.runs:
        task = make_task(r.task)
        n = r.train.steps * r.train.batch_size * task.seq_len(task.n)
        out.setdefault(study.membership[r.run_id][0], []).append(n)
    return {k: (min(v), max(v)) for k, v in out.items()}


def describe(study: Study, runs_per_gpu: int = 4, model: GpuModel = H100) -> str:
    """The table ``python bench/gpu_cost.py`` prints: each grid in the order it runs, and when it ends."""
    tiers = study_tiers(study, runs_per_gpu, model)
    tokens = tokens_per_run(study)
    lines = [
        f"{study.name}: {len(study.runs)} runs on {model.name}, {runs_per_gpu} processes sharing it; "
        "modelled minutes from the study's start:",
        f"  {'grid (in the order it runs)':58s} {'runs':>5s} {'groups':>6s} {'tokens/run':>10s} {'GPU s':>6s} "
        f"{'ends at':>9s}",
    ]
    for t in tiers:
        lo, hi = tokens.get(t.name, (0, 0))
        tok = f"{lo / 1e6:.1f}M" if lo == hi else f"{lo / 1e6:.1f}-{hi / 1e6:.1f}M"
        lines.append(
            f"  {t.name[:58]:58s} {t.runs:5d} {t.groups:6d} {tok:>10s} {t.gpu_seconds:6.0f} {t.ends_at / 60:5.1f} min"
        )
    if tiers:
        lines.append(f"  the whole study: {tiers[-1].ends_at / 60:.1f} min modelled")
    return "\n".join(lines)


def count_step(d: int, seq: int, batch: int, seeds: int, precision: str) -> tuple[float, float, float]:
    """On this CPU, one stacked training step of a charlm arm (4 layers): (ops, elementwise bytes, parameters).
    Every aten op that is not a view is counted with the bytes of its inputs and outputs, matrix products and
    attention left out; the difference of a 3-step and a 1-step group, halved, so set-up and evaluation cancel."""
    from collections import Counter

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from pelab.preflight import model_params
    from pelab.train import train_group

    products = ("mm", "bmm", "addmm", "baddbmm", "_scaled_dot_product")

    def size(x: object) -> int:
        if isinstance(x, torch.Tensor):
            return x.numel() * x.element_size()
        if isinstance(x, list | tuple):
            return sum(size(y) for y in x)
        return 0

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter[str] = Counter()
            self.bytes: Counter[str] = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            name = func.__name__.split(".")[0]
            if not func.is_view and name not in ("detach", "lift_fresh"):
                self.ops[name] += 1
                if not name.startswith(products):
                    self.bytes[name] += size(list(args)) + size(list((kwargs or {}).values())) + size(out)
            return out

    def group(steps: int) -> tuple[Count, list[RunConfig]]:
        cfgs = [
            RunConfig.model_validate({"task": {"name": "charlm", "length": seq},
                                      "model": {"d": d, "n_layers": 4, "n_heads": 4, "position": {"scheme": "learned"}},
                                      "train": {"steps": steps, "batch_size": batch, "eval_batches": 1,
                                                "eval_batch_size": 1, "curve_points": 1, "precision": precision},
                                      "seed": s})
            for s in range(seeds)
        ]  # fmt: skip
        with Count() as c:
            results = train_group(cfgs, device="cpu", threads=1)
        assert all(r.status == "done" for r in results), results[0].reason
        return c, cfgs

    (one, cfgs), (three, _) = group(1), group(3)
    ops = (sum(three.ops.values()) - sum(one.ops.values())) / 2
    moved = (sum(three.bytes.values()) - sum(one.bytes.values())) / 2
    return ops, moved, float(seeds * model_params(cfgs[0].model))


def load(path: str | Path) -> Study:
    """A study file, as ``pelab study`` reads it. Until the grid parser knows ``confirmatory`` (branch h39), a
    grid's ``confirmatory = true`` is read as a comment here, so the gpu preset can be sized and tested before then;
    once the key is known this is ``load_study`` itself."""
    from pelab.study.grid import GRID_KEYS, load_study, parse_study

    if "confirmatory" in GRID_KEYS:
        return load_study(path)
    text = Path(path).read_text()
    return parse_study(re.sub(r"(?m)^confirmatory = true\n", "", text), str(path))


def main() -> None:
    from pelab.cli.app import preset_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", nargs="?", help="a study file (default: the gpu preset)")
    ap.add_argument("--runs-per-gpu", type=int, default=4)
    ap.add_argument("--calibrate", action="store_true", help="the model against the H100 measurement it was fitted to")
    ap.add_argument("--count", action="store_true", help="count a stacked step's ops and bytes on this CPU")
    a = ap.parse_args()
    if a.calibrate:
        print("the paper preset's language model (charlm d=128, 128 bytes, 4 layers, batch 32, fp32) on an H100:")
        for what, modelled, measured in calibration():
            print(f"  {what:62s} model {modelled:6.1f} s, measured {measured:6.1f} s ({measured / modelled:.2f}x)")
        return
    if a.count:
        for d, batch, precision in ((128, 4, "bf16"), (128, 16, "bf16"), (512, 4, "bf16"), (128, 16, "fp32")):
            ops, moved, params = count_step(d, 256, batch, 5, precision)
            print(f"d={d}, 256 bytes, batch {batch}, 5 seeds, {precision}: {ops:.0f} ops a step, "
                  f"{moved / 1e6:,.0f} MB elementwise ({params / 1e6:.1f}M parameters)")  # fmt: skip
        print("kappa, pi: fit bytes = kappa x tokens x width x 4 layers + pi x parameters to these rows")
        return
    path = a.study or preset_path("gpu")
    print(describe(load(path), a.runs_per_gpu))


if __name__ == "__main__":
    main()
