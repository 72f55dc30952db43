"""Subnormal floats and an encoder's speed on the CPU: the same masked language model trained with and without
flush-to-zero, side by side in one process.

Why: a run trains with subnormal floats flushed to zero (``pelab.train.flushed_subnormals``, engine
"stacked-2"). An encoder's attention has no causal mask, so as it sharpens some attention probabilities and
their gradients fall below 1.2e-38, and an x86 CPU handles those in microcode. This prints, per stretch of
training steps, the seconds with the mode off and on, their ratio, and both runs' final loss (the two
computations agree except where a subnormal arose).

The model is the full preset's masked byte model at d=128 (2 layers, 32 bytes, batch 32, rate 1e-2,
concat_wide, learned positions) on the prose corpus (pelab[text]), one thread. The slowdown grows as attention
sharpens, so it needs a few hundred steps to show. Usage: ``python bench/denormal.py [--steps 400]``.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch

import pelab.train as train
from pelab.config import RunConfig

CONFIG = {
    "seed": 400,
    "task": {"name": "mlm", "length": 32, "corpus": "prose"},
    "model": {"kind": "encoder", "d": 128, "n_layers": 2, "n_heads": 4, "max_len": 32, "vocab_size": 257,
              "n_outputs": 256, "head": "token", "combine": "concat_wide", "position": {"scheme": "learned"}},
    "train": {"batch_size": 32, "lr": 1e-2},
}  # fmt: skip


def timed(flush: bool, steps: int, stretch: int) -> tuple[list[float], float]:
    """Seconds of each ``stretch`` steps, and the final test loss, with subnormals flushed or not."""
    cfg = RunConfig.model_validate({**CONFIG, "train": {**CONFIG["train"], "steps": steps}})
    marks: list[float] = []

    def on_step(i: int, n: int) -> None:
        if i % stretch == 0:
            marks.append(time.perf_counter())

    engine = train.flushed_subnormals  # what a run trains under (stacked-2); the reference arm goes without it
    if not flush:
        train.flushed_subnormals = lambda: contextlib.nullcontext(False)  # type: ignore[assignment]
    try:
        result = train.train_run(cfg, device="cpu", threads=1, on_step=on_step)
    finally:
        train.flushed_subnormals = engine
    loss = float(result.metrics.get("loss", float("nan"))) if result.metrics else float("nan")
    return [b - a for a, b in zip(marks, marks[1:], strict=False)], loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--stretch", type=int, default=100, help="steps per timed stretch")
    args = p.parse_args()
    torch.set_num_threads(1)
    plain, plain_loss = timed(False, args.steps, args.stretch)
    flushed, flushed_loss = timed(True, args.steps, args.stretch)
    print(f"masked byte LM, d=128, 1 thread; seconds per {args.stretch} steps")
    print("steps        | subnormals kept | flushed to zero | ratio")
    for i, (a, b) in enumerate(zip(plain, flushed, strict=False)):
        print(f"{i * args.stretch:>4}-{(i + 1) * args.stretch:<7} | {a:15.1f} | {b:15.1f} | {a / b:5.2f}x")
    print(f"in all       | {sum(plain):15.1f} | {sum(flushed):15.1f} | {sum(plain) / sum(flushed):5.2f}x")
    print(f"final test loss (nats): kept {plain_loss:.6f}, flushed {flushed_loss:.6f}")


if __name__ == "__main__":
    main()
