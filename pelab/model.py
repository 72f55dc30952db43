"""A small pre-LayerNorm Transformer, encoder or causal decoder, built around a
position scheme and a combiner that are passed in, not hard-wired.

Legend of dimension letters:
    B batch, T sequence length, C model width (d_model), H heads, E head width (C / H),
    F feed-forward width, V output classes.

Position can enter at three places, all delegated to the scheme's hooks: an input
table (combined with the tokens by the combiner), a rotation of q/k, and a bias on
the attention logits. The model itself never asks which scheme it has. A combiner
may carry position itself (``matrix``: a learned map per position), so it is given
the positions and checks the length too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pelab.combine import combiner_class
from pelab.config import ModelConfig
from pelab.embedding import EmbeddingParts, InputEmbedding
from pelab.positions import PositionScheme, scheme_class


@dataclass
class ModelOutput:
    logits: Tensor  # (B, T, V) for head=token, (B, V) for head=pool
    parts: EmbeddingParts | None = None  # layer-1 input, part by part
    hidden: list[Tensor] = field(default_factory=list)  # [input, after block 1, ...], each (B, T, C)
    q: Tensor | None = None  # layer-1 queries after the scheme's rotation, (B, H, T, E)
    k: Tensor | None = None  # layer-1 keys, (B, H, T, E)
    attn_bias: Tensor | None = None  # (H, T, T) logit bias incl. causal mask, or None


class Attention(nn.Module):
    def __init__(self, width: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.out = nn.Linear(width, width, bias=False)

    def forward(
        self, x: Tensor, scheme: PositionScheme, positions: Tensor, bias: Tensor | None, causal: bool
    ) -> tuple[Tensor, Tensor, Tensor]:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)  # 3 x (B, T, C)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, T, E)
        q, k = scheme.rotate(q, k, positions)
        y = attend(q, k, v, bias, causal and bias is None, self.dropout if self.training else 0.0)  # (B, H, T, E)
        return self.out(y.transpose(1, 2).reshape(B, T, C)), q, k


def attend(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, causal: bool, dropout: float) -> Tensor:
    """Scaled dot-product attention. Under bf16 autocast on a CPU it runs in fp32: PyTorch's CPU flash
    attention is about 3x slower backward in bf16 than in fp32 (measured with torch 2.13 on AVX512-BF16), so
    there the bf16 matmuls around it gain and attention itself would lose (bench/step.py: with this, bf16 is
    about 2x fp32 at d = 128 rather than 1.4x). Without autocast, and on CUDA, attention runs as it is given."""
    if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        with torch.autocast("cpu", enabled=False):
            q, k, v = q.float(), k.float(), v.float()
            bias = bias.float() if bias is not None and bias.is_floating_point() else bias
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=causal, dropout_p=dropout)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=causal, dropout_p=dropout)


class Block(nn.Module):
    def __init__(self, width: int, n_heads: int, ff: int, dropout: float) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, n_heads, dropout)
        self.mlp = nn.Sequential(nn.Linear(width, ff, bias=False), nn.GELU(), nn.Linear(ff, width, bias=False))
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, scheme: PositionScheme, positions: Tensor, bias: Tensor | None, causal: bool
    ) -> tuple[Tensor, Tensor, Tensor]:
        a, q, k = self.attn(self.ln1(x), scheme, positions, bias, causal)
        x = x + self.drop(a)
        x = x + self.drop(self.mlp(self.ln2(x)))
        return x, q, k


def body_flops_per_token(cfg: ModelConfig, seq_len: int) -> int:
    """Forward FLOPs per token of the blocks and the head, from the config alone (no model is built): the bulk
    of ``Transformer.flops_per_token``, and what a study's time estimate needs for every run."""
    C, Fw, T = cfg.widths().model, cfg.ff_width, seq_len
    per_layer = 2 * C * 3 * C + 2 * C * C + 2 * 2 * C * Fw + 2 * 2 * T * C
    head = 2 * C * cfg.n_outputs
    if cfg.head == "pool":
        head = head // T
    return cfg.n_layers * per_layer + head


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        widths = cfg.widths()
        C = widths.model
        self.scheme = scheme_class(cfg.position.scheme)(cfg.scheme_context(), **cfg.position.options())
        combiner = combiner_class(cfg.combine)(widths, max_len=cfg.max_len, rank=cfg.matrix_rank)
        self.embed = InputEmbedding(cfg, combiner)
        self.blocks = nn.ModuleList(Block(C, cfg.n_heads, cfg.ff_width, cfg.dropout) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(C)
        self.head = nn.Linear(C, cfg.n_outputs, bias=False)

    @property
    def causal(self) -> bool:
        return self.cfg.kind == "decoder"

    def attention_bias(self, positions: Tensor) -> Tensor | None:
        """The scheme's (H, T, T) bias with the causal mask folded in, or None for plain SDPA."""
        bias = self.scheme.bias(positions, positions)
        if bias is None:
            return None
        if self.causal:
            T = positions.shape[0]
            future = torch.ones(T, T, dtype=torch.bool, device=bias.device).triu(1)
            bias = bias.masked_fill(future, float("-inf"))
        return bias

    def forward(
        self,
        inputs: Tensor,
        segments: Tensor | None = None,
        positions: Tensor | None = None,
        *,
        return_parts: bool = False,
        return_hidden: bool = False,
        return_qk: bool = False,
    ) -> ModelOutput:
        """inputs: (B, T) token ids or (B, T, patch_dim) vectors; positions default to 0..T-1."""
        T = inputs.shape[1]
        if positions is None:
            positions = torch.arange(T, device=inputs.device)
            longest = T  # known without asking the device (no CUDA sync)
        else:
            longest = int(positions.max()) + 1
        self.scheme.check_length(longest)
        self.embed.combiner.check_length(longest)
        table = self.scheme.table(positions) if "position" in self.embed.combiner.widths.sides else None
        parts = self.embed(inputs, table, segments, positions)
        bias = self.attention_bias(positions)
        x = parts.combined  # (B, T, C)
        out = ModelOutput(logits=x, parts=parts if return_parts else None, attn_bias=bias if return_qk else None)
        if return_hidden:
            out.hidden.append(x)
        for i, block in enumerate(self.blocks):
            x, q, k = block(x, self.scheme, positions, bias, self.causal)
            if return_hidden:
                out.hidden.append(x)
            if return_qk and i == 0:
                out.q, out.k = q, k
        x = self.ln_f(x)
        if self.cfg.head == "pool":
            x = x.mean(dim=1)  # (B, C)
        out.logits = self.head(x)
        return out

    # --- size, counted by the model itself -------------------------------------------
    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def flops_per_token(self, seq_len: int) -> int:
        """Forward FLOPs per token (2 per multiply-accumulate of every matrix product).

        Counted from the modules, including the full T x T attention products that SDPA
        computes; elementwise work (norms, activations, rotations) is left out, as in
        Kaplan et al. (2020). A training step costs about three times this.
        """
        return (
            self.embed.flops_per_token()
            + self.scheme.flops_per_token(seq_len)
            + body_flops_per_token(self.cfg, seq_len)
        )
