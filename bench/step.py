"""Training-step throughput of pelab's causal decoder, next to x-transformers.

What is measured: one full training step, i.e. forward pass, next-token
cross-entropy loss, backward pass and an AdamW update, on random token ids.
The figure is tokens per second: batch x sequence length x steps, divided by
the wall time of those steps (on CUDA the clock waits for the GPU to finish).

How: every model first runs ``--warmup`` untimed steps; then ``--repeats``
rounds follow, and in each round every model runs ``--steps`` timed steps in
turn (interleaved, so drift in machine speed hits all models alike). The
reported figure is the median over rounds; ``spread`` is (max - min) / median
of the per-round figures, a rough noise gauge. The torch thread count is set
explicitly and printed.

The models are matched as closely as the two libraries allow: same width,
depth, heads and head width, feed-forward 4 x width with GELU and no biases,
bias-free q/k/v/out projections, learned absolute positions added to the
tokens, pre-LayerNorm with a final norm, an untied output head, no dropout.
The one structural difference left: x-transformers' LayerNorms have a gain but
no bias, so pelab has (2 x layers + 1) x width more parameters; both counts
are printed. (Initialisation differs, which does not matter for speed, and
x-transformers scales its position table by 1/sqrt(d), one small (T, d)
multiply.) x-transformers runs twice: with its own softmax attention
(``xt``) and with ``attn_flash=True`` (``xt-flash``), which calls PyTorch's
scaled_dot_product_attention, as pelab always does.

Reading the table: ``pelab/xt`` is pelab's tokens/s over that x-transformers
variant's, taken within each round (the two ran back to back) and then the
median over rounds, so it resists load from other processes better than the
absolute figures do; above 1.00 means pelab trains faster. A ratio within a few
percent of 1.00, or absolute figures differing by less than the spread, is noise.

MFU (model FLOPs utilisation): the step's useful FLOP/s over the machine's matmul peak. Useful
FLOPs per token are 3 x the forward FLOPs pelab's model counts (``Transformer.flops_per_token``:
2 per multiply-accumulate of every matrix product, the full T x T attention products included;
backward costs about twice the forward), used for the x-transformers models too, as they are
matched. The peak is measured in the same run, with the same threads: a square matmul
(``--peak-n``, default 1024 on CPU, 8192 on CUDA) timed in fp32 and in bf16, side by side in
alternating rounds, before the sizes and again after them; the median over all rounds is the
peak. An fp32 step is set against the fp32 peak, a bf16 step against the bf16 peak.

bf16: pelab also runs with its forward pass under bf16 autocast (``pelab-bf16``, as
``train.precision = "bf16"`` does: weights, gradients, AdamW state and the loss stay fp32), from
the same initial weights, interleaved with the others; ``bf16/fp32`` is its tokens/s over pelab
fp32's, per round, then the median. On a CPU without native bf16 (AVX512-BF16 or AMX) oneDNN
emulates bf16 and it is slower than fp32; the header says which instructions this CPU has.

Run: ``python bench/step.py`` (defaults: both sizes, CPU or CUDA as present; ``--no-bf16`` to skip).
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pelab.config import ModelConfig, PositionConfig
from pelab.model import Transformer
from pelab.train import autocast, bf16_supported


@dataclass(frozen=True)
class Size:
    """One benchmark size: width, depth, heads, sequence length, batch."""

    name: str
    d: int
    n_layers: int
    n_heads: int
    seq: int
    batch: int

    def describe(self) -> str:
        return (
            f"d={self.d} layers={self.n_layers} heads={self.n_heads} (head width {self.d // self.n_heads}) "
            f"seq={self.seq} batch={self.batch}"
        )


SIZES: dict[str, Size] = {
    "a": Size("a", d=128, n_layers=2, n_heads=4, seq=64, batch=32),
    "b": Size("b", d=256, n_layers=4, n_heads=8, seq=128, batch=32),
}


@dataclass
class Contender:
    """A model under test and how to get (B, T, V) logits out of it."""

    name: str
    model: nn.Module
    logits: Callable[[nn.Module, Tensor], Tensor]
    precision: str = "fp32"
    optimizer: torch.optim.Optimizer | None = None
    rates: list[float] = field(default_factory=list)  # tokens/s, one per timed round

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def build_pelab(size: Size, vocab: int) -> nn.Module:
    cfg = ModelConfig(
        kind="decoder",
        vocab_size=vocab,
        n_outputs=vocab,
        d=size.d,
        n_layers=size.n_layers,
        n_heads=size.n_heads,
        d_ff=4 * size.d,
        max_len=size.seq,
        dropout=0.0,
        position=PositionConfig(scheme="learned"),
        combine="add",
    )
    return Transformer(cfg)


def build_xt(size: Size, vocab: int, flash: bool) -> nn.Module:
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(
        num_tokens=vocab,
        max_seq_len=size.seq,
        use_abs_pos_emb=True,  # learned absolute positions
        emb_dropout=0.0,
        attn_layers=Decoder(
            dim=size.d,
            depth=size.n_layers,
            heads=size.n_heads,
            attn_dim_head=size.d // size.n_heads,  # default is 64 regardless of width
            attn_dropout=0.0,
            attn_flash=flash,
            ff_mult=4,
            ff_no_bias=True,
            ff_dropout=0.0,
            pre_norm=True,
        ),
    )


def pelab_logits(model: nn.Module, x: Tensor) -> Tensor:
    return model(x).logits


def xt_logits(model: nn.Module, x: Tensor) -> Tensor:
    return model(x)


def train_step(c: Contender, inputs: Tensor, targets: Tensor) -> None:
    assert c.optimizer is not None
    c.optimizer.zero_grad(set_to_none=True)
    with autocast(c.precision, inputs.device):
        logits = c.logits(c.model, inputs)  # (B, T, V)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))  # fp32 loss
    loss.backward()
    c.optimizer.step()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_steps(c: Contender, batches: list[tuple[Tensor, Tensor]], device: torch.device) -> float:
    """Run one step per batch; return the elapsed seconds."""
    sync(device)
    t0 = time.perf_counter()
    for inputs, targets in batches:
        train_step(c, inputs, targets)
    sync(device)
    return time.perf_counter() - t0


def bench_size(size: Size, args: argparse.Namespace, device: torch.device, have_xt: bool) -> list[Contender]:
    vocab = args.vocab
    torch.manual_seed(0)
    contenders = [Contender("pelab", build_pelab(size, vocab), pelab_logits)]
    if args.bf16:  # same initial weights as pelab fp32
        contenders.append(Contender("pelab-bf16", copy.deepcopy(contenders[0].model), pelab_logits, "bf16"))
    if have_xt:
        contenders.append(Contender("xt", build_xt(size, vocab, flash=False), xt_logits))
        contenders.append(Contender("xt-flash", build_xt(size, vocab, flash=True), xt_logits))
    for c in contenders:
        c.model.to(device).train()
        c.optimizer = torch.optim.AdamW(c.model.parameters(), lr=1e-3, weight_decay=0.01)

    # Fixed random data, shared by all models: (B, T + 1) ids -> inputs and shifted targets.
    gen = torch.Generator().manual_seed(1)
    n_batches = max(args.steps, args.warmup, 1)
    batches = []
    for _ in range(n_batches):
        ids = torch.randint(0, vocab, (size.batch, size.seq + 1), generator=gen).to(device)
        batches.append((ids[:, :-1].contiguous(), ids[:, 1:].contiguous()))

    for c in contenders:
        run_steps(c, batches[: args.warmup], device)

    tokens = size.batch * size.seq * args.steps
    for _ in range(args.repeats):
        for c in contenders:
            c.rates.append(tokens / run_steps(c, batches[: args.steps], device))

    return contenders


def matmul_rates(
    n: int, rounds: int, device: torch.device, dtypes: list[torch.dtype]
) -> dict[torch.dtype, list[float]]:
    """FLOP/s of an (n x n) @ (n x n) product per dtype, one figure per round, dtypes alternating."""
    gen = torch.Generator().manual_seed(2)
    a, b = (torch.randn(n, n, generator=gen).to(device) for _ in range(2))
    pairs = {dt: (a.to(dt), b.to(dt)) for dt in dtypes}
    rates: dict[torch.dtype, list[float]] = {dt: [] for dt in dtypes}
    for x, y in pairs.values():  # warm-up
        x @ y
    for _ in range(rounds):
        for dt, (x, y) in pairs.items():
            count, t0 = 0, time.perf_counter()
            sync(device)
            while time.perf_counter() - t0 < 0.25:  # at least a quarter second per figure
                x @ y
                count += 1
                if device.type == "cuda" and count % 10 == 0:
                    sync(device)
            sync(device)
            rates[dt].append(2 * n**3 * count / (time.perf_counter() - t0))
    return rates


def native_bf16_cpu() -> str:
    """Which native bf16 instructions this CPU has, as torch sees them ('none': oneDNN emulates bf16)."""
    found = []
    for name, probe in (("AVX512-BF16", "_is_avx512_bf16_supported"), ("AMX", "_is_amx_tile_supported")):
        fn = getattr(torch.cpu, probe, None)
        if fn is not None and fn():
            found.append(name)
    return ", ".join(found) or "none"


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def installed_xt_version() -> str | None:
    """x-transformers' version, or None when it cannot be imported."""
    try:
        import x_transformers  # noqa: F401
    except ImportError:
        return None
    return importlib.metadata.version("x-transformers")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--steps", type=int, default=8, help="timed training steps per repeat (default 8)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats; the median is reported (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model first (default 2)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="default: cuda if present")
    p.add_argument(
        "--sizes",
        default="a,b",
        help="comma-separated sizes from: " + ", ".join(f"{k} ({v.describe()})" for k, v in SIZES.items()),
    )
    p.add_argument("--vocab", type=int, default=256, help="vocabulary = output classes (default 256)")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (default: all usable cores)")
    p.add_argument("--no-bf16", dest="bf16", action="store_false", help="skip pelab under bf16 autocast")
    p.add_argument("--peak-n", type=int, default=0, help="matmul side for the peak (default 1024 CPU, 8192 CUDA)")
    p.add_argument("--peak-rounds", type=int, default=3, help="alternating peak rounds, before and after (default 3)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        p.error("--steps and --repeats must be >= 1, --warmup >= 0")
    unknown_sizes = [s for s in args.sizes.split(",") if s not in SIZES]
    if unknown_sizes:
        p.error(f"--sizes: unknown {unknown_sizes}; choose from {sorted(SIZES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda asked for but CUDA is not available", file=sys.stderr)
        return 2
    auto = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(auto if args.device == "auto" else args.device)
    torch.set_num_threads(args.threads or usable_cores())

    xt_version = installed_xt_version()
    if args.bf16 and not bf16_supported(device):
        print(f"bf16 is not supported on {device} here: fp32 only")
        args.bf16 = False
    dtypes = [torch.float32] + ([torch.bfloat16] if args.bf16 else [])
    peak_n = args.peak_n or (8192 if device.type == "cuda" else 1024)
    peaks = matmul_rates(peak_n, args.peak_rounds, device, dtypes)

    print(f"torch {torch.__version__}, python {platform.python_version()}, device {device}", end="")
    if device.type == "cuda":
        print(f" ({torch.cuda.get_device_name(device)})", end="")
    print(
        f", torch threads {torch.get_num_threads()} (interop {torch.get_num_interop_threads()}), cores {usable_cores()}"
    )
    if device.type == "cpu":
        print(f"native bf16 instructions: {native_bf16_cpu()}")
    print(f"x-transformers {xt_version}" if xt_version else "x-transformers not installed")
    if hasattr(os, "getloadavg"):  # other busy processes make every figure slower and noisier
        print("load average before the run: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(
        f"training step = forward + cross-entropy + backward + AdamW; {args.warmup} warmup, "
        f"{args.repeats} repeats x {args.steps} steps, median tokens/s; vocab {args.vocab}"
    )

    results = []
    for key in args.sizes.split(","):
        size = SIZES[key]
        results.append((key, size, bench_size(size, args, device, have_xt=xt_version is not None)))
    after = matmul_rates(peak_n, args.peak_rounds, device, dtypes)  # the machine's load may have moved
    peak = {dt: statistics.median(peaks[dt] + after[dt]) for dt in dtypes}
    print(f"\nmatmul peak ({peak_n} x {peak_n}, {2 * args.peak_rounds} alternating rounds, median):")
    for dt, name in zip(dtypes, ("fp32", "bf16"), strict=False):
        before_s, after_s = statistics.median(peaks[dt]) / 1e9, statistics.median(after[dt]) / 1e9
        print(f"  {name}: {peak[dt] / 1e9:,.1f} GFLOP/s (before the sizes {before_s:,.1f}, after {after_s:,.1f})")
    if args.bf16:
        print(f"  bf16/fp32 peak: {peak[torch.bfloat16] / peak[torch.float32]:.2f}")

    for key, size, (pelab, *others) in results:
        print(f"\nsize {key}: {size.describe()}")
        step_flops = 3 * pelab.model.flops_per_token(size.seq)  # per token: forward + backward
        print(f"  {'model':<11}{'params':>12}{'tokens/s':>12}{'spread':>9}{'MFU':>8}{'pelab/xt':>10}")
        for c in (pelab, *others):
            med = statistics.median(c.rates)
            spread = (max(c.rates) - min(c.rates)) / med
            mfu = med * step_flops / peak[torch.bfloat16 if c.precision == "bf16" else torch.float32]
            # Ratio per round (the models ran back to back), then the median over rounds.
            ratio = statistics.median(p / x for p, x in zip(pelab.rates, c.rates, strict=True))
            shown = f"{ratio:10.2f}" if c.name.startswith("xt") else f"{'':>10}"
            print(f"  {c.name:<11}{c.n_params:>12,}{med:>12,.0f}{spread:>8.0%}{mfu:>8.1%} {shown}")
        for c in others:
            if c.precision == "bf16":
                ratio = statistics.median(b / f for b, f in zip(c.rates, pelab.rates, strict=True))
                print(f"  bf16/fp32 (pelab, tokens/s): {ratio:.2f}")
        print(f"  training FLOPs/token (3 x forward): {step_flops:,}")

    if xt_version is None:
        print('\nhint: pip install -c constraints.txt ".[bench]"  # adds x-transformers for the comparison')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
