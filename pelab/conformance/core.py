"""What every conformance check shares: the outcome of a check, the runner that skips what a failed check
broke, the tiny models, and the checks schemes and combiners have in common."""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from pelab import checkpoint
from pelab.config import ModelConfig, RunConfig
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


#: pelab's own package: a traceback's frames outside it are the class's (a user's folder may be named pelab too).
PACKAGE = Path(__file__).resolve().parents[1]


def _one_line(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if not Path(f.filename).resolve().is_relative_to(PACKAGE)] or frames
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


#: Model settings the checks build with besides their own (``pelab check --set model.position.NAME=VALUE``): a
#: class's options other than its defaults, nested as a study file's ``model`` table. A scheme's options apply where
#: that scheme is built; the widths, layers and budgets stay the checks' own.
SETTINGS: ContextVar[dict[str, Any] | None] = ContextVar("pelab_check_settings", default=None)


@contextmanager
def building_with(settings: dict[str, Any], field: str, name: str) -> Iterator[bool]:
    """``SETTINGS`` while one class is checked: the model-wide settings, and the scheme options (``settings
    ["position"]``) this class declares if it is a scheme. Yields whether any of ``settings`` reaches it."""
    from pelab.positions import SCHEMES

    declared = SCHEMES[name].Options.model_fields if field == "position" else {}
    mine = {k: v for k, v in settings.get("position", {}).items() if k in declared}
    wide = {k: v for k, v in settings.items() if k != "position"}
    token = SETTINGS.set({**wide, "position": mine, "for": name if mine else None})
    try:
        yield bool(mine or wide)
    finally:
        SETTINGS.reset(token)


def _with_settings(model: dict[str, Any]) -> dict[str, Any]:
    """A tiny model's settings with ``SETTINGS`` laid over: model-wide ones always, a scheme's options where the
    model is built with that scheme (``for``)."""
    settings = SETTINGS.get() or {}
    out = {**model, **{k: v for k, v in settings.items() if k not in ("position", "for")}}
    position = dict(model.get("position") or {})
    if position.get("scheme") == settings.get("for"):
        out["position"] = {**position, **settings.get("position", {})}
    return out


def _config(kind: str, scheme: str, combine: str, max_len: int = T) -> ModelConfig:
    return ModelConfig.model_validate(_with_settings({
        "kind": kind, "d": D, "n_heads": HEADS, "n_layers": LAYERS, "vocab_size": VOCAB, "n_outputs": OUT,
        "max_len": max_len, "grid": GRID, "position": {"scheme": scheme}, "combine": combine,
    }))  # fmt: skip


def _build(cfg: ModelConfig, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(cfg)


def _tokens(length: int = T, seed: int = 0) -> Tensor:
    return torch.randint(0, VOCAB, (B, length), generator=torch.Generator().manual_seed(seed))


def _perm(length: int = T) -> Tensor:
    return torch.randperm(length, generator=torch.Generator().manual_seed(7))


#: The row a "rows alone" check redraws: what a row-wise hook gives every other row must not change.
ROW = 5


def _row_redrawn(*xs: Tensor, dim: int = 1) -> tuple[Tensor, ...]:
    """Copies of ``xs`` with row ``ROW`` along ``dim`` drawn afresh. A permutation test cannot see a hook that
    mixes rows by a symmetric reduction (a mean over the sequence); changing one row shows it."""
    g = torch.Generator().manual_seed(11)
    out = []
    for x in xs:
        y = x.clone()
        y.select(dim, ROW).copy_(torch.randn(y.select(dim, ROW).shape, generator=g, dtype=x.dtype))
        out.append(y)
    return tuple(out)


def _without_row(x: Tensor, dim: int = 1) -> Tensor:
    keep = torch.tensor([i for i in range(x.shape[dim]) if i != ROW])
    return x.index_select(dim, keep)


def _fresh(model: Any) -> Any:
    """Eval mode, which also resets a stochastic scheme's draws: the next call sees what any first call sees."""
    return model.eval()


def _close(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-6)


def _train_cfg(seed: int, task: dict[str, Any], model: dict[str, Any]) -> RunConfig:
    return RunConfig.model_validate(
        {"task": task, "model": _with_settings({"d": D, "n_layers": LAYERS, "n_heads": HEADS, **model}),
         "train": {"steps": 8, "batch_size": 8, "lr": 3e-3, "eval_batches": 1, "eval_batch_size": 16,
                   "curve_points": 4}, "seed": seed}
    )  # fmt: skip


def _same_numbers(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN: two runs that diverged alike hold NaN in the same places."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_numbers(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_numbers(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def stacked_identity(make: Callable[[int], RunConfig]) -> str:
    """Seed 3 alone and in a stack of 3 (seeds 1, 3, 2): the same status, metrics, curve and evaluations, bit for
    bit. Then seed 3 must have trained: a tiny model that diverges in its first steps at a modest rate is a scheme
    (or combiner) whose outputs or gradients blow up, which no study could read."""
    from pelab.stacked import unstackable
    from pelab.train import train_group

    # on a CPU, where the identity is bit for bit (a GPU's batched kernels may sum in another order: README)
    alone = train_group([make(3)], device="cpu")[0]
    again = train_group([make(3)], device="cpu")[0]
    why = unstackable(make(3).model)
    if why is not None:  # its seeds train one at a time (dropout's masks come from the global generator)
        stacked = alone
    else:
        stacked = train_group([make(s) for s in (1, 3, 2)], device="cpu")[1]
    for r in (alone, stacked):
        if r.status == "failed":
            raise Fail(f"the run failed: {r.reason}")
    for what in ("status", "reason", "metrics", "curve", "evals"):
        if not _same_numbers(getattr(alone, what), getattr(again, what)):
            raise Fail(
                f"seed 3 trained twice alone differs in its {what}: it draws from something no seed fixes "
                "(Python's random, NumPy, the clock); draw from torch's generator, which each run seeds"
            )
        if not _same_numbers(getattr(alone, what), getattr(stacked, what)):
            raise Fail(
                f"seed 3 in a stack of 3 differs from seed 3 alone in its {what}: something the stack shares "
                "(one scheme's or combiner's call for every seed, a global generator) reaches it"
            )
    if alone.status != "done":
        cfg = make(3)
        raise Fail(
            f"seed 3 {alone.status} in {cfg.train.steps} steps of a d={cfg.model.d} model at lr {cfg.train.lr:g} "
            f"(alone and in a stack alike): {alone.reason}"
        )
    if why is not None:
        return f"seed 3: alone = again ({why}: its seeds train one at a time, never stacked)"
    return "seed 3: alone = again = in a stack of 3"


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
    """Every parameter gets a finite gradient that is not all zero: at the start, or, for one that starts
    unreached (behind a zero-initialised gate, as ReZero or LoRA start), after a few steps of training."""
    count, later = 0, []
    for kind in ("encoder", "decoder"):
        model = _build(_config(kind, scheme, combine)).train()
        unreached = _backward(model)
        if unreached:
            opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
            for _ in range(3):
                opt.step()
                opt.zero_grad(set_to_none=True)
                still = _backward(model)
            if still:
                raise Fail(f"{still[0]} gets no gradient ({kind}), at the start or after 3 steps: the loss does not "
                           "reach it")  # fmt: skip
            later += [n for n in unreached if n not in later]
        count += sum(p.requires_grad for p in model.parameters())
    return f"{count} parameter tensors, all finite and reached" + (
        f" ({', '.join(later)} after a step: it starts behind a zero)" if later else ""
    )


def _backward(model: Transformer) -> list[str]:
    """One backward pass of a cross-entropy loss; the parameters it leaves without a gradient (all zero), or a
    Fail for a non-finite one."""
    targets = torch.randint(0, OUT, (B * T,), generator=torch.Generator().manual_seed(1))
    F.cross_entropy(model(_tokens()).logits.reshape(-1, OUT), targets).backward()
    unreached = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.grad is not None and not torch.isfinite(p.grad).all():
            raise Fail(f"{name} gets a non-finite gradient ({'decoder' if model.causal else 'encoder'})")
        if p.grad is None or not p.grad.abs().sum() > 0:
            unreached.append(name)
    return unreached


def _save_and_load(scheme: str, combine: str) -> str:
    import tempfile

    model = _fresh(_build(_config("encoder", scheme, combine), seed=1))
    twin = _fresh(_build(_config("encoder", scheme, combine), seed=1))
    with torch.no_grad():
        torch.manual_seed(5)
        first = _fresh(model)(_tokens()).logits
        torch.manual_seed(6)  # another global generator state: an evaluation must not read it
        if not torch.equal(first, _fresh(model)(_tokens()).logits):
            raise Fail("two evaluations of one model differ: its forward pass draws from the global generator or "
                       "the clock (an evaluation must be a function of weights and input)")  # fmt: skip
        if not torch.equal(first, _fresh(twin)(_tokens()).logits):
            raise Fail("two models built from one seed differ: it draws its start outside torch's generator, which "
                       "each run seeds (Python's random, NumPy, the clock)")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pelab-check-") as tmp:
        path = Path(tmp) / "model.safetensors"
        checkpoint.save(model, path)
        torch.manual_seed(99)  # another RNG state must not matter once the weights are loaded
        loaded = checkpoint.load(path)
    with torch.no_grad():
        a, b = _fresh(model)(_tokens()).logits, _fresh(loaded)(_tokens()).logits
    if not torch.equal(a, b):
        raise Fail(f"outputs after a safetensors round trip differ by {(a - b).abs().max().item():.3g}")
    return "one seed builds one model; same outputs again and after a round trip, bit for bit"


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
        raise Fail(f"extrapolates is False, but 2x length gave outputs: raise a PelabError from {who} check_length")
    if not torch.isfinite(y).all():
        raise Fail("non-finite outputs at 2x the length the model was sized for")
    table = _fresh(model).scheme.table(torch.arange(2 * T)) if "position" in model.embed.combiner.widths.sides else None
    if table is not None:
        seen, new = table[:T].double(), table[T:].double()
        copies = (new[:, None, :] - seen[None, :, :]).abs().amax(-1).amin(-1) < 1e-9  # (T,) a row equal to a seen one
        if bool(copies.all()):
            raise Fail("every position past the length it was sized for repeats a code seen before (it wraps around)")
    return "finite at 2x the length the model was sized for" + (", new codes there" if table is not None else "")


def _twice_in_training(build: Callable[[], Any], call: Callable[[Any, int], Tensor]) -> tuple[Tensor, Tensor] | None:
    """``call(module, 0)`` and ``call(module, 1)`` (the second with the changed input), each on a module built
    afresh and put in training mode with the global generator at one state, so a module's own draws (randomized
    positions, dropout) are the same in both and only the input differs. None when two builds given the same input
    differ (a start drawn outside torch's generator, which save and load names): then no comparison can be read."""
    outs = []
    with torch.no_grad():
        for i in (0, 0, 1):
            module = build().train()
            torch.manual_seed(5)
            outs.append(call(module, i))
    return None if not torch.equal(outs[0], outs[1]) else (outs[0], outs[2])


#: What a check says where training mode could not be compared (``_twice_in_training`` gave None).
UNSEEDED = "; training mode not compared: two builds from one seed differ (save and load)"


def _causality(scheme: str, combine: str) -> str:
    """A decoder's outputs before position j do not change when token j does, in evaluation and in training
    (a leak only in training mode would train every decoder on the answer, and pass an eval-mode check)."""
    x, j = _tokens(), 9
    x2 = x.clone()
    x2[:, j] = (x2[:, j] + 1) % VOCAB
    cfg = _config("decoder", scheme, combine)
    with torch.no_grad():
        model = _fresh(_build(cfg))
        y, y2 = _fresh(model)(x).logits, _fresh(model)(x2).logits
    if not torch.equal(y[:, :j], y2[:, :j]):
        raise Fail(f"a decoder's outputs before position {j} change when token {j} does")
    trained = _twice_in_training(lambda: _build(cfg), lambda m, i: m(x2 if i else x).logits)
    if trained is None:
        return f"earlier outputs bit-identical when a later token changes{UNSEEDED}"
    if not torch.equal(trained[0][:, :j], trained[1][:, :j]):
        raise Fail(f"in training mode, a decoder's outputs before position {j} change when token {j} does")
    return "earlier outputs bit-identical when a later token changes, in evaluation and in training"


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
