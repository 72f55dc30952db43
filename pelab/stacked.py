"""Several seeds of one arm as one computation: the Transformer's blocks run on weights stacked along a
leading seed dimension, so S models cost about one model's operator calls.

Legend of dimension letters (as in ``pelab.model``): S seeds, B batch, T sequence, C model width, H heads,
E head width, F feed-forward width, V output classes, N = B·T rows.

Why this shape. At pelab's sizes (d = 16..128) a training step is dominated by the cost of each operator
call, not by arithmetic, so a stack of S seeds trains in little more time than one. The parameters stay
the seeds' own ``Transformer`` modules, one per seed, with their own initialisation from their own seed.
While a stack trains, the weights of the blocks and of the output side (final norm, head) live in one
tensor per weight with a leading seed dimension (``StackedForward.leaves``), and each seed's own parameters
are views of its slice: stacking them anew every step, and sending each gradient back through the stack,
cost a tenth of a small model's step. The optimiser still steps each seed's own parameter objects, with each
leaf's gradient handed to them as slices (``hand_grads``), so its arithmetic runs on the same tensor shapes as
a seed alone (AdamW's vector loops leave a scalar tail that depends on a tensor's length: stepping the stacked
tensor instead moved numbers by an ulp). ``release`` gives each seed its own storage again for evaluation,
analyses and checkpoints.

What makes a seed's numbers independent of its neighbours: every operation here either acts on one seed's
slice alone (``bmm``, whose batch entries are separate matrix products; attention, whose seeds are folded
into the batch) or is elementwise; reductions run over a seed's own rows (``tests/test_stacked.py`` checks
that seed 3 alone, in a stack of 3 and in a stack of 5 gives the same numbers bit for bit). The input side
(token, segment and position vectors, a combiner's own parameters, a scheme's attention bias) differs per
scheme and combiner and costs a handful of calls, so it runs per seed through each model's own modules,
which is what keeps every scheme and combiner stackable without a second implementation of any of them.
A rotation of queries and keys runs inside every layer, so it runs once for the whole stack where every seed's
would be the same one (pelab's: no parameters, the same buffers), and per seed where it is not (a plugin's
learned frequencies: ``rotates_per_seed``), so that no seed trains on another's.

This is the one training computation: a run alone is a stack of one. Evaluation and analyses read the
per-seed ``Transformer`` as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from pelab.config import ModelConfig
from pelab.model import Transformer, attend
from pelab.positions.base import PositionScheme


def _stack(tensors: Sequence[Tensor]) -> Tensor:
    return torch.stack(list(tensors))  # (S, ...)


def _layer_norm(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """x (S, N, C); weight, bias (S, C): each seed's affine after a shared normalisation."""
    return F.layer_norm(x, x.shape[-1:]) * weight[:, None, :] + bias[:, None, :]


def _linear(x: Tensor, weight: Tensor) -> Tensor:
    """x (S, N, in); weight (S, out, in) as nn.Linear stores it -> (S, N, out)."""
    return torch.bmm(x, weight.transpose(1, 2))


def _drop(x: Tensor, p: float) -> Tensor:
    return F.dropout(x, p) if p > 0 else x


#: The parameters a stack holds as one leaf each, by name within a ``Transformer``: every block's and the
#: output side's. The input side (token, segment and position vectors, a combiner's own parameters) stays each
#: seed's own: it differs per scheme and combiner and costs a handful of calls.
STACKED_PREFIXES = ("blocks.", "ln_f.", "head.")


def unstackable(cfg: ModelConfig) -> str | None:
    """Why seeds of this model must train one at a time, or None: where a seed's numbers would depend on its
    neighbours. Dropout draws its masks from the global generator in the order a stack runs; a feed-forward of
    one channel (``d_ff = 1``) has its products summed otherwise in a stack than alone (``pelab check --scheme
    alibi --set model.d_ff=1`` found seed 3 differing in the last bits; ``d_ff = 2`` and up agree)."""
    if cfg.dropout > 0:
        return "dropout > 0"
    if cfg.d_ff == 1:
        return "d_ff = 1"
    return None


def rotates_per_seed(models: Sequence[Transformer]) -> bool:
    """Whether each seed's ``rotate`` must see its own slice of the stack: its scheme has parameters (each seed
    trains its own; one call through the first seed's would train that seed on every seed's gradient and leave
    the others at their start) or buffers that differ between seeds (drawn from each seed's generator). A
    scheme that does not rotate, or whose every seed rotates alike (rotary, xPos), runs one call for all."""
    schemes = [m.scheme for m in models]
    if type(schemes[0]).rotate is PositionScheme.rotate or len(schemes) == 1:
        return False
    if any(True for _ in schemes[0].parameters()):
        return True
    first = dict(schemes[0].named_buffers())
    return any(
        set(first) != set(dict(s.named_buffers())) or any(not torch.equal(first[n], b) for n, b in s.named_buffers())
        for s in schemes[1:]
    )


class StackedForward:
    """The forward pass of S ``Transformer``s that share a config (they differ only in seed).

    Holds the stacked leaves of the models' block and output weights (``leaves``, one (S, ...) tensor per name),
    built from the models' current values, and makes those parameters of each model views of its slice; the
    input side reads each model's own parameters. An optimiser steps the models' parameters as ever, after
    ``hand_grads``; ``release`` ends the sharing.
    """

    def __init__(self, models: Sequence[Transformer]) -> None:
        if not models:
            raise ValueError("a stack needs at least one model")
        cfg = models[0].cfg
        if any(m.cfg != cfg for m in models):
            raise ValueError("a stack holds models of one config")
        if len(models) > 1 and (why := unstackable(cfg)) is not None:
            raise ValueError(f"{why}: its seeds train one at a time (unstackable)")
        self.models = list(models)
        self.cfg = cfg
        self.rotate_each = rotates_per_seed(self.models)
        self._params = [dict(m.named_parameters()) for m in self.models]
        stacked = [n for n in self._params[0] if n.startswith(STACKED_PREFIXES)]
        self.leaves: dict[str, Tensor] = {}
        with torch.no_grad():
            for n in stacked:
                leaf = _stack([p[n] for p in self._params]).requires_grad_(self._params[0][n].requires_grad)
                for s, p in enumerate(self._params):
                    p[n].data = leaf.data[s]  # the seed's own parameter object, now a view of its slice
                self.leaves[n] = leaf

    def hand_grads(self) -> None:
        """After ``backward``: each seed's stacked parameters get their slice of the leaf's gradient (a view), where
        an optimiser and gradient clipping read them as a seed alone would have them. The leaf lets go of it, so the
        next backward starts a fresh gradient, as ``zero_grad(set_to_none=True)`` gives the seeds' own."""
        for n, leaf in self.leaves.items():
            for s, p in enumerate(self._params):
                p[n].grad = None if leaf.grad is None else leaf.grad[s]
            leaf.grad = None

    def release(self) -> None:
        """Each seed's stacked parameters back in storage of their own (the values they trained to)."""
        with torch.no_grad():
            for n in self.leaves:
                for p in self._params:
                    p[n].data = p[n].data.clone()

    def _rotate(self, q: Tensor, k: Tensor, positions: Tensor, S: int) -> tuple[Tensor, Tensor]:
        """q, k (S·B, H, T, E), seed-major: rotated by the first seed's scheme for all, or by each seed's own."""
        if not self.rotate_each:
            return self.models[0].scheme.rotate(q, k, positions)
        qs, ks = q.unflatten(0, (S, -1)), k.unflatten(0, (S, -1))
        turned = [m.scheme.rotate(qs[s], ks[s], positions) for s, m in enumerate(self.models)]
        return torch.cat([t[0] for t in turned]), torch.cat([t[1] for t in turned])

    def __call__(self, inputs: Tensor, segments: Tensor | None = None) -> Tensor:
        """inputs (S, B, T) ids or (S, B, T, P) vectors; segments (S, B, T) or None -> logits (S, B, T, V)
        for a token head, (S, B, V) for a pooled one."""
        S, B, T = inputs.shape[:3]
        assert S == len(self.models), "one input batch per model"
        first = self.models[0]
        w = self.leaves
        positions = torch.arange(T, device=inputs.device)
        xs, biases = [], []
        for s, m in enumerate(self.models):  # the input side, per seed: each scheme and combiner as it is
            m.scheme.check_length(T)
            m.embed.combiner.check_length(T)
            table = m.scheme.table(positions) if "position" in m.embed.combiner.widths.sides else None
            xs.append(m.embed(inputs[s], table, None if segments is None else segments[s], positions).combined)
            biases.append(m.attention_bias(positions))
        x = _stack(xs)  # (S, B, T, C)
        C = x.shape[-1]
        H = self.cfg.n_heads
        E = C // H
        bias = None
        if biases[0] is not None:  # (S, H, T, T) -> one per folded batch row: (S·B, H, T, T)
            bias = _stack(biases)[:, None].expand(S, B, H, T, T).reshape(S * B, H, T, T)
        causal = first.causal and bias is None
        p = self.cfg.dropout if first.training else 0.0  # only a stack of one has any (see __init__)
        x = x.reshape(S, B * T, C)  # (S, N, C)
        for i in range(len(first.blocks)):
            b = f"blocks.{i}."
            h = _layer_norm(x, w[b + "ln1.weight"], w[b + "ln1.bias"])
            qkv = _linear(h, w[b + "attn.qkv.weight"])  # (S, N, 3C)
            qkv = qkv.view(S * B, T, 3, H, E).permute(2, 0, 3, 1, 4)  # (3, S·B, H, T, E)
            q, k = self._rotate(qkv[0], qkv[1], positions, S)
            y = attend(q, k, qkv[2], bias, causal, p)  # (S·B, H, T, E)
            y = y.transpose(1, 2).reshape(S, B * T, C)
            x = x + _drop(_linear(y, w[b + "attn.out.weight"]), p)
            h = _layer_norm(x, w[b + "ln2.weight"], w[b + "ln2.bias"])
            h = F.gelu(_linear(h, w[b + "mlp.0.weight"]))  # (S, N, F)
            x = x + _drop(_linear(h, w[b + "mlp.2.weight"]), p)
        x = _layer_norm(x, w["ln_f.weight"], w["ln_f.bias"])
        if self.cfg.head == "pool":
            x = x.view(S, B, T, C).mean(dim=2)  # (S, B, C)
            return _linear(x, w["head.weight"])  # (S, B, V)
        return _linear(x, w["head.weight"]).view(S, B, T, -1)  # (S, B, T, V)
