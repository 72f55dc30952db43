"""The four terms of attention (claim C4): how much of layer 1's attention is token-token,
token-position, position-token and position-position.

The split, for a pre-LayerNorm layer 1 whose input is h = X + P:

* X and P are the token and position parts of the layer-1 input, each mapped through the
  combiner alone (add: x and p; scaled_add: sqrt(d) x and p; concat_split: [x; 0] and
  [0; p]; gated: x and g*p; concat_project: W[x; 0] and W[0; p]). Every combiner is linear
  with no bias, so h = X + P exactly (checked). Segment embeddings, where a task has
  them, go with the token part.
* LayerNorm is not linear, but its statistics can be taken from the actual sum:
      LN(h) = g*(h - mean(h))/s + b = g*(X - mean(X))/s + g*(P - mean(P))/s + b,
  with mean(.) per token over channels (linear, so mean(h) = mean(X) + mean(P)) and
  s = sqrt(Var(h) + eps) the scale of the *sum*. So u_X = g*(X - mean(X))/s and
  u_P = g*(P - mean(P))/s are exact parts of the normalised input, but each still
  depends on the other part through the shared s. The LayerNorm bias b is neither token
  nor position: it is kept as a third part u_b = b.
* q = W_q (u_X + u_P + u_b), k likewise (no projection bias in this model), each part
  rotated by the scheme's q/k rotation when it has one (a rotation is linear, so parts
  stay parts). The logit q.k/sqrt(E) then splits into
      tt = q_X.k_X, tp = q_X.k_P, pt = q_P.k_X, pp = q_P.k_P   (query part . key part)
      bias = every product that involves u_b (five of them), all over sqrt(E),
  plus, for a scheme with a logit bias, that bias as a term of its own ("scheme").
  These add up to the logits the model itself computes (max_abs_diff, at float64
  round-off), which ``run`` checks and reports.
* A multiplicative combiner (multiply: x ⊙ (1 + p); matrix: (I + A_pos) x) has no such
  split: its position signal is a product of token and position, so there is no X and
  P to set apart and no four terms; the analysis refuses with that reason (see
  ``pelab.analysis.additive``) rather than return shares of a split that does not exist.

Shares (per head, over held-out sequences, over the (query, key) pairs attention uses:
all of them in an encoder, key <= query in a decoder):
    variance:                Var(term) / sum of Var(terms), over all pairs;
    variance_within_query:   the same after removing each query's mean over its keys,
                             i.e. only what the softmax can see (a per-query constant
                             shifts every logit of the row and changes nothing);
    covariance:              Cov(term, logit) / Var(logit): sums to 1 exactly, and a
                             term that cancels another shows up negative;
    covariance_within_query: the same, within query.

``run`` returns (and writes to attention.json) these stable keys:
    source, scheme, combine, terms [names], max_abs_diff, max_abs_logit, sequences,
    length, shares {variance, variance_within_query, covariance, covariance_within_query}
    (each {term: mean over heads}), per_head [{head, <same four>}], definition,
    summary, files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pelab.analysis import additive
from pelab.analysis.inputs import AnalysisInput, float64_copy, one_blas_thread, write_json
from pelab.embedding import EmbeddingParts
from pelab.errors import PelabError
from pelab.model import Transformer
from pelab.positions import with_tables

SEQUENCES = 64
TERM_LABELS = {
    "tt": "token query . token key",
    "tp": "token query . position key",
    "pt": "position query . token key",
    "pp": "position query . position key",
    "bias": "products with the LN bias",
    "scheme": "the scheme's logit bias",
}
DEFINITION = (
    "Layer-1 input h = X + P, X and P the token and position parts each mapped through the combiner alone "
    "(segments go with X). LayerNorm with the statistics of the actual sum: LN(h) = g*(X - mean X)/s + "
    "g*(P - mean P)/s + b, s = sqrt(Var(h) + eps) the std of the sum, so the split is exact but both parts "
    "share s. The LayerNorm bias b is its own part. q = W_q(.), k = W_k(.) per part (rotated per part if the "
    "scheme rotates), and q.k/sqrt(E) = tt + tp + pt + pp + bias, tp = token query . position key, bias = all "
    "five products involving b (+ the scheme's logit bias as 'scheme' when it has one). max_abs_diff: the sum "
    "of the terms against the model's own layer-1 q.k/sqrt(E), in float64. Shares per head over held-out "
    "sequences and the (query, key) pairs attention uses: variance = Var(term)/sum of Var(terms); "
    "variance_within_query = the same after removing each query's mean over keys (what the softmax sees); "
    "covariance = Cov(term, logit)/Var(logit) (sums to 1; negative when a term cancels another)."
)


def layer_norm_parts(parts: dict[str, Tensor], weight: Tensor, bias: Tensor, eps: float) -> dict[str, Tensor]:
    """Split LN(sum of parts) exactly: each part centred and scaled by the *sum's* std, plus 'bias'.

    parts: name -> (..., C); returns name -> (..., C) for each part, and 'bias' -> b broadcast.
    """
    h = sum(parts.values())
    s = torch.sqrt(h.var(dim=-1, unbiased=False, keepdim=True) + eps)  # (..., 1), the sum's scale
    out = {name: weight * (x - x.mean(dim=-1, keepdim=True)) / s for name, x in parts.items()}
    out["bias"] = bias.expand_as(h)
    return out


def heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, C) -> (B, H, T, E)."""
    B, T, C = x.shape
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)


def term_name(qpart: str, kpart: str) -> str:
    return "bias" if "bias" in (qpart, kpart) else qpart[0] + kpart[0]


@dataclass
class FourTerms:
    terms: dict[str, Tensor]  # name -> (B, H, T, T): tt, tp, pt, pp, bias[, scheme]
    logits: Tensor  # (B, H, T, T) what the model computes: q.k/sqrt(E) (+ the scheme's bias)
    allowed: Tensor  # (T, T) bool: the (query, key) pairs attention uses
    max_abs_diff: float  # max |sum of terms - logits| over all pairs


def input_parts(model: Transformer, parts: EmbeddingParts) -> dict[str, Tensor]:
    """Token and position parts of the layer-1 input, each through the combiner alone (see the docstring)."""
    emb = model.embed
    why = additive.reason(model, "attention", "split the layer-1 logits into four terms by")
    if why is not None:
        raise PelabError(why)
    if parts.position is None:
        raise PelabError(
            f"attention: position={model.cfg.position.scheme} with combine={model.cfg.combine} puts no position "
            "vector into the layer-1 input, so there are no token-position terms to split; the four-terms "
            f"analysis needs an input table ({with_tables()}) with any combiner but none"
        )
    x = parts.token  # (B, T, d_token)
    p = parts.position.to(x.dtype).expand(x.shape[0], -1, -1)  # (B, T, d_position)
    s = parts.segment
    sides_x = {"position": torch.zeros_like(p)} | ({"segment": s} if s is not None else {})
    sides_p = {"position": p} | ({"segment": torch.zeros_like(s)} if s is not None else {})
    token = emb.combiner(x, sides_x)  # (B, T, C)
    position = emb.combiner(torch.zeros_like(x), sides_p)  # (B, T, C)
    gap = float((token + position - parts.combined).abs().max())
    if gap > 1e-6 * (1.0 + float(parts.combined.abs().max())):
        raise PelabError(
            f"attention: combine={model.cfg.combine} is not additive in its parts (gap {gap:.2e}), "
            "so its input does not split into token and position"
        )
    return {"token": token, "position": position}


@torch.no_grad()
def four_terms(model: Transformer, inputs: Tensor, segments: Tensor | None = None) -> FourTerms:
    """Layer 1's attention logits split into tt, tp, pt, pp, bias (+ scheme), checked against the model's own."""
    out = model(inputs, segments, return_parts=True, return_qk=True)
    assert out.parts is not None and out.q is not None and out.k is not None
    parts = input_parts(model, out.parts)
    T = inputs.shape[1]
    positions = torch.arange(T)
    block = model.blocks[0]
    C, H = model.embed.combiner.widths.model, model.cfg.n_heads
    E = C // H
    u = layer_norm_parts(parts, block.ln1.weight, block.ln1.bias, block.ln1.eps)
    w_q, w_k = block.attn.qkv.weight[:C], block.attn.qkv.weight[C : 2 * C]  # (C, C) each
    qs, ks = {}, {}
    for name, v in u.items():
        q, k = heads(v @ w_q.T, H), heads(v @ w_k.T, H)  # (B, H, T, E)
        qs[name], ks[name] = model.scheme.rotate(q, k, positions)
    terms: dict[str, Tensor] = {}
    for a in u:
        for b in u:
            t = qs[a] @ ks[b].transpose(-1, -2) / math.sqrt(E)  # (B, H, T, T)
            n = term_name(a, b)
            terms[n] = terms[n] + t if n in terms else t
    logits = out.q @ out.k.transpose(-1, -2) / math.sqrt(E)  # (B, H, T, T): the model's own
    allowed = torch.ones(T, T, dtype=torch.bool)
    if model.causal:
        allowed = allowed.tril()
    bias = model.scheme.bias(positions, positions)
    if bias is not None:
        terms["scheme"] = bias.to(logits.dtype).expand_as(logits)
        logits = logits + terms["scheme"]
    order = ["tt", "tp", "pt", "pp", "bias", "scheme"]
    terms = {n: terms[n] for n in order if n in terms}
    diff = float((sum(terms.values()) - logits).abs().max())
    return FourTerms(terms=terms, logits=logits, allowed=allowed, max_abs_diff=diff)


def variance_shares(terms: dict[str, Tensor], allowed: Tensor) -> list[dict[str, dict[str, float]]]:
    """Per head: {variance, variance_within_query, covariance, covariance_within_query} -> {term: share}.

    terms: name -> (B, H, T, T); allowed: (T, T). Statistics pool sequences and allowed pairs.
    """
    names = list(terms)
    stack = torch.stack([terms[n] for n in names]).double()  # (K, B, H, T, T)
    m = allowed.to(stack.dtype)  # (T, T)
    per_row = m.sum(-1).clamp(min=1)  # (T,)
    row_mean = (stack * m).sum(-1, keepdim=True) / per_row[:, None]  # (K, B, H, T, 1)
    out = []
    for h in range(stack.shape[2]):
        shares: dict[str, dict[str, float]] = {}
        for kind, x in (("", stack[:, :, h]), ("_within_query", (stack - row_mean)[:, :, h])):
            vals = x[:, :, m.bool()]  # (K, B, pairs)
            vals = vals.reshape(len(names), -1)
            centred = vals - vals.mean(dim=1, keepdim=True)
            var = (centred**2).mean(dim=1)  # (K,)
            total = centred.sum(0)  # the logit, centred
            cov = (centred * total).mean(dim=1)
            var_logit = float((total**2).mean())
            shares[f"variance{kind}"] = {n: _ratio(float(var[i]), float(var.sum())) for i, n in enumerate(names)}
            shares[f"covariance{kind}"] = {n: _ratio(float(cov[i]), var_logit) for i, n in enumerate(names)}
        out.append(shares)
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def mean_shares(per_head: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    kinds = per_head[0].keys()
    return {kind: {t: float(np.mean([h[kind][t] for h in per_head])) for t in per_head[0][kind]} for kind in kinds}


@one_blas_thread
def run(inputs: AnalysisInput, out: Path) -> dict[str, Any]:
    from pelab import plots

    model, _ = inputs.require_model("attention")
    model64 = float64_copy(model)
    batch = inputs.held_out(SEQUENCES)
    x = batch.inputs.double() if batch.inputs.is_floating_point() else batch.inputs
    split = four_terms(model64, x, batch.segments)
    per_head = variance_shares(split.terms, split.allowed)
    shares = mean_shares(per_head)
    names = list(split.terms)
    result: dict[str, Any] = {
        "analysis": "attention",
        "source": inputs.label,
        "scheme": model.cfg.position.scheme,
        "combine": model.cfg.combine,
        "terms": names,
        "max_abs_diff": split.max_abs_diff,
        "max_abs_logit": float(split.logits[:, :, split.allowed].abs().max()),
        "sequences": int(x.shape[0]),
        "length": int(x.shape[1]),
        "shares": shares,
        "per_head": [{"head": h, **s} for h, s in enumerate(per_head)],
        "definition": DEFINITION,
    }
    stem = out / "attention"
    heads_labels = [f"head {h}" for h in range(len(per_head))] + ["mean"]
    files = [
        plots.bars(
            f"{stem}_shares.png",
            heads_labels,
            {t: [s["variance"][t] for s in per_head] + [shares["variance"][t]] for t in names},
            f"layer-1 logit variance by term ({model.cfg.position.scheme} + {model.cfg.combine})",
            "share of the sum of term variances",
            stacked=True,
        ),
        plots.heatmaps(
            f"{stem}_terms.png",
            {f"{t}: {TERM_LABELS[t]}": split.terms[t][0, 0].numpy() for t in names}
            | {"logits (the model's own)": split.logits[0, 0].numpy()},
            f"head 0, first held-out sequence; terms sum to the model's logits within {split.max_abs_diff:.1e}",
            "key",
            "query",
        ),
    ]
    v = shares["variance"]
    result["summary"] = (
        "variance shares "
        + ", ".join(f"{t} {v[t]:.2f}" for t in names)
        + f" (sum matches logits to {split.max_abs_diff:.1e})"
    )
    result["files"] = [p.name for p in [*files, out / "attention.json"]]
    write_json(out, "attention", result)
    return result
