"""What every conformance check shares: the outcome of a check, the runner that skips what a failed check
broke, the tiny models, and the checks schemes and combiners have in common."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from pelab import checkpoint
from pelab.config import ModelConfig, PositionConfig, RunConfig
from pelab.errors import PelabError
from pelab.model import Transformer

D, HEADS, LAYERS, VOCAB, OUT, T, B = 16, 2, 2, 11, 7, 16, 3
GRID = (4, 4)  # T patches: serves a 2-D scheme, ignored by the rest
PASSED, FAILED, SKIPPED, NOT_APPLICABLE = "passed", "failed", "skipped", "n/a"


@dataclass(frozen=True)
class Check:
    """One check's outcome on one class: one line of ``pelab check``'s table."""

    kind: str  # position | combine | task
    name: str  # the class's registered name
    check: str
    status: str
    detail: str = ""


class Fail(Exception):
    """A check's finding: what is wrong, in one line."""


class NotApplicable(Exception):
    """The check does not apply to this class (a combiner that takes no position, a task with no longer size)."""


def _one_line(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if "/pelab/" not in f.filename.replace("\\", "/")] or frames
    where = f" ({Path(own[-1].filename).name}:{own[-1].lineno})" if own else ""
    text = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}: {text}{where}"


def _run(kind: str, name: str, checks: list[tuple[str, Callable[[], str | None], tuple[str, ...]]]) -> list[Check]:
    """Each (check, function, checks it needs) in order; the function returns a detail or raises Fail."""
    out: list[Check] = []
    status: dict[str, str] = {}
    for check, fn, needs in checks:
        broken = [n for n in needs if status.get(n) in (FAILED, SKIPPED)]
        if broken:
            out.append(Check(kind, name, check, SKIPPED, f"needs {broken[0]}"))
            status[check] = SKIPPED
            continue
        with torch.random.fork_rng():
            try:
                out.append(Check(kind, name, check, PASSED, fn() or ""))
            except Fail as e:
                out.append(Check(kind, name, check, FAILED, str(e)))
            except NotApplicable as e:
                out.append(Check(kind, name, check, NOT_APPLICABLE, str(e)))
            except Exception as e:  # noqa: BLE001 - the class's own error is the finding
                out.append(Check(kind, name, check, FAILED, _one_line(e)))
        status[check] = out[-1].status
    return out


# --- the tiny models every check builds ------------------------------------------------------------------------


def _config(kind: str, scheme: str, combine: str, max_len: int = T) -> ModelConfig:
    return ModelConfig(
        kind=kind, d=D, n_heads=HEADS, n_layers=LAYERS, vocab_size=VOCAB, n_outputs=OUT, max_len=max_len,
        grid=GRID, position=PositionConfig(scheme=scheme), combine=combine,
    )  # fmt: skip


def _build(cfg: ModelConfig, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(cfg)


def _tokens(length: int = T, seed: int = 0) -> Tensor:
    return torch.randint(0, VOCAB, (B, length), generator=torch.Generator().manual_seed(seed))


def _perm(length: int = T) -> Tensor:
    return torch.randperm(length, generator=torch.Generator().manual_seed(7))


def _fresh(model: Any) -> Any:
    """Eval mode, which also resets a stochastic scheme's draws: the next call sees what any first call sees."""
    return model.eval()


def _close(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-6)


def _train_cfg(seed: int, task: dict[str, Any], model: dict[str, Any]) -> RunConfig:
    return RunConfig.model_validate(
        {"task": task, "model": {"d": D, "n_layers": LAYERS, "n_heads": HEADS, **model},
         "train": {"steps": 8, "batch_size": 8, "lr": 3e-3, "eval_batches": 1, "eval_batch_size": 16,
                   "curve_points": 4}, "seed": seed}
    )  # fmt: skip


def stacked_identity(make: Callable[[int], RunConfig]) -> str:
    """Seed 3 alone and in a stack of 3 (seeds 1, 3, 2): the same status, metrics, curve and evaluations, bit for
    bit. Both may diverge (alike); a failed run is a finding."""
    from pelab.train import train_group

    # on a CPU, where the identity is bit for bit (a GPU's batched kernels may sum in another order: README)
    alone = train_group([make(3)], device="cpu")[0]
    stacked = train_group([make(s) for s in (1, 3, 2)], device="cpu")[1]
    for r in (alone, stacked):
        if r.status == "failed":
            raise Fail(f"the run failed: {r.reason}")
    for what in ("status", "reason", "metrics", "curve", "evals"):
        if getattr(alone, what) != getattr(stacked, what):
            raise Fail(f"seed 3 in a stack of 3 differs from seed 3 alone in its {what}")
    return "seed 3: alone = in a stack of 3" + ("" if alone.status == "done" else f" (both {alone.status})")


def _first_valid(makers: list[Callable[[int], RunConfig]]) -> Callable[[int], RunConfig]:
    """The first task setting a class can serve (a 2-D scheme needs an image task)."""
    errors = []
    for make in makers:
        try:
            make(0)
            return make
        except (ValueError, PelabError) as e:
            errors.append(" ".join(str(e).split())[:160])
    raise Fail(f"no tiny task it can serve: {errors[0]}")


# --- checks shared by schemes and combiners -----------------------------------------------------------------------


def _shapes(scheme: str, combine: str) -> str:
    for kind in ("encoder", "decoder"):
        model = _fresh(_build(_config(kind, scheme, combine)))
        w = model.embed.combiner.widths
        x = torch.randn(B, T, w.token)
        sides = {k: torch.randn(B, T, v) for k, v in w.sides.items()}
        h = model.embed.combiner(x, sides, torch.arange(T))
        if h.shape != (B, T, w.model):
            raise Fail(f"the combiner gives {tuple(h.shape)}, but its widths say (B, T, d_model) = {(B, T, w.model)}")
        for dtype in (torch.float32, torch.float64):
            model = _fresh(model.to(dtype))
            out = model(_tokens(), return_parts=True, return_qk=True)
            if out.logits.shape != (B, T, OUT) or out.logits.dtype != dtype:
                raise Fail(f"logits {tuple(out.logits.shape)} {out.logits.dtype}, expected {(B, T, OUT)} {dtype}")
            if not torch.isfinite(out.logits).all():
                raise Fail(f"non-finite outputs ({kind}, {dtype})")
            _scheme_shapes(model, dtype)
    return f"encoder and decoder, float32 and float64, T={T}"


def _scheme_shapes(model: Transformer, dtype: torch.dtype) -> None:
    s, p, ctx = _fresh(model).scheme, torch.arange(T), model.scheme.ctx
    table = s.table(p)
    if type(s).has_table != (table is not None):
        raise Fail(f"has_table is {type(s).has_table}, but table() returns {'None' if table is None else 'vectors'}")
    if table is not None and (table.shape != (T, ctx.width) or table.dtype != dtype):
        raise Fail(f"table is {tuple(table.shape)} {table.dtype}, expected (T, width) = {(T, ctx.width)} {dtype}")
    _fresh(model)
    bias = s.bias(p, p)
    if bias is not None and (bias.shape != (ctx.n_heads, T, T) or bias.dtype != dtype):
        raise Fail(f"bias is {tuple(bias.shape)} {bias.dtype}, expected (H, T, T) = {(ctx.n_heads, T, T)} {dtype}")
    q = torch.randn(B, ctx.n_heads, T, ctx.head_dim, dtype=dtype)
    rq, rk = s.rotate(q, q.clone(), p)
    if rq.shape != q.shape or rk.shape != q.shape or rq.dtype != dtype:
        raise Fail(f"rotate gives {tuple(rq.shape)} {rq.dtype} for q of {tuple(q.shape)} {dtype}")


def _gradients(scheme: str, combine: str) -> str:
    count = 0
    for kind in ("encoder", "decoder"):
        model = _build(_config(kind, scheme, combine)).train()
        targets = torch.randint(0, OUT, (B * T,), generator=torch.Generator().manual_seed(1))
        F.cross_entropy(model(_tokens()).logits.reshape(-1, OUT), targets).backward()
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if p.grad is None or not p.grad.abs().sum() > 0:
                raise Fail(f"{name} gets no gradient ({kind}): the loss does not reach it")
            if not torch.isfinite(p.grad).all():
                raise Fail(f"{name} gets a non-finite gradient ({kind})")
            count += 1
    return f"{count} parameter tensors, all finite and reached"


def _save_and_load(scheme: str, combine: str) -> str:
    import tempfile

    model = _fresh(_build(_config("encoder", scheme, combine), seed=1))
    with tempfile.TemporaryDirectory(prefix="pelab-check-") as tmp:
        path = Path(tmp) / "model.safetensors"
        checkpoint.save(model, path)
        torch.manual_seed(99)  # another RNG state must not matter once the weights are loaded
        loaded = checkpoint.load(path)
    with torch.no_grad():
        a, b = _fresh(model)(_tokens()).logits, _fresh(loaded)(_tokens()).logits
    if not torch.equal(a, b):
        raise Fail(f"outputs after a safetensors round trip differ by {(a - b).abs().max().item():.3g}")
    return "same outputs, bit for bit"


def _longer(scheme: str, combine: str, says: bool, who: str) -> str:
    model = _fresh(_build(_config("encoder", scheme, combine, max_len=T)))
    try:
        with torch.no_grad():
            y = model(_tokens(2 * T)).logits
    except PelabError as e:
        if says:
            raise Fail(f"extrapolates is True, but at 2x the length it was sized for: {e}") from None
        return f"refuses 2x length cleanly ({' '.join(str(e).split(';')[0].split())[:90]})"
    except Exception as e:
        if says:
            raise
        raise Fail(f"extrapolates is False, but 2x length is not a clean PelabError: {_one_line(e)}") from None
    if not says:
        raise Fail(f"extrapolates is False, but 2x length gave outputs: raise a PelabError from {who}.check_length")
    if not torch.isfinite(y).all():
        raise Fail("non-finite outputs at 2x the length the model was sized for")
    table = _fresh(model).scheme.table(torch.arange(2 * T)) if "position" in model.embed.combiner.widths.sides else None
    if table is not None:
        seen, new = table[:T].double(), table[T:].double()
        copies = (new[:, None, :] - seen[None, :, :]).abs().amax(-1).amin(-1) < 1e-9  # (T,) a row equal to a seen one
        if bool(copies.all()):
            raise Fail("every position past the length it was sized for repeats a code seen before (it wraps around)")
    return "finite at 2x the length the model was sized for" + (", new codes there" if table is not None else "")


def _causality(scheme: str, combine: str) -> str:
    model = _fresh(_build(_config("decoder", scheme, combine)))
    x, j = _tokens(), 9
    x2 = x.clone()
    x2[:, j] = (x2[:, j] + 1) % VOCAB
    with torch.no_grad():
        y, y2 = _fresh(model)(x).logits, _fresh(model)(x2).logits
    if not torch.equal(y[:, :j], y2[:, :j]):
        raise Fail(f"a decoder's outputs before position {j} change when token {j} does")
    return "earlier outputs bit-identical when a later token changes"


def _equivariance_gap(scheme: str, combine: str) -> tuple[float, float]:
    model = _build(_config("encoder", scheme, combine)).double()
    x, perm = _tokens(), _perm()
    with torch.no_grad():
        y = _fresh(model)(x).logits
        yp = _fresh(model)(x[:, perm]).logits
    return float((yp - y[:, perm]).abs().max()), float(y.abs().max())


def _declaration(cls: type, base_attrs: dict[str, type]) -> str:
    for attr, typ in base_attrs.items():
        if not isinstance(getattr(cls, attr, None), typ):
            raise Fail(f"{attr} must be a {typ.__name__} (got {getattr(cls, attr, None)!r:.60})")
    if not str(cls.description).strip():
        raise Fail("description is empty: `pelab list` shows it")
    return f"{cls.__module__}.{cls.__qualname__}"
