"""C5: concatenation costs more parameters and computation, counted by the model itself."""

from __future__ import annotations

from pelab.report.context import ReportContext
from pelab.report.registry import ClaimResult, Table, claim
from pelab.rules import EXACT


@claim(
    "C5",
    "Concatenation costs more parameters and computation",
    "Concatenating a position vector widens the input, so it costs parameters and FLOPs; adding is free.",
    "a common answer to the question",
    "exact counts from the model itself, for every combiner at the same d and for add at concat_wide's total "
    "width; no verdict needed beyond the table",
)
def c5(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    from pelab.config import ModelConfig, build
    from pelab.model import Transformer
    from pelab.sizes import CombinerSize, combiner_sizes
    from pelab.tasks import make_task

    r.verdict = EXACT
    template = next(
        (run for run in ctx.study.runs if run.model.vocab_size and run.model.token_table is None), ctx.study.runs[0]
    )
    task = make_task(template.task)
    T = task.seq_len(task.n)
    sizes = combiner_sizes(template.model, T)
    wide = next(x for x in sizes if x.combine == "concat_wide")
    base = sizes[0]
    # add at that width with the scheme concat_wide's row used (the study's first scheme may act inside attention)
    position = template.model.position.with_scheme(wide.position).model_dump()
    wide_cfg = build(
        ModelConfig, **{**template.model.model_dump(), "d": wide.d_model, "combine": "add", "position": position}
    )
    wide_model = Transformer(wide_cfg)
    at_width = CombinerSize("add", wide_cfg.position.scheme, wide.d_model, 0, wide.d_model,
                            wide_model.num_parameters(), wide_model.flops_per_token(T), 0.0, 0.0)  # fmt: skip
    rows = [
        [
            x.combine,
            x.position,
            str(x.d_token),
            str(x.d_position),
            str(x.d_model),
            f"{x.params:,}",
            f"{x.params_vs_add:.3f}",
            f"{x.flops_per_token:,}",
            f"{x.flops_vs_add:.3f}",
        ]
        for x in sizes
    ]
    rows.append(
        [
            f"add at concat_wide's width (d={wide.d_model})",
            at_width.position,
            str(at_width.d_token),
            str(at_width.d_position),
            str(at_width.d_model),
            f"{at_width.params:,}",
            f"{at_width.params / base.params:.3f}",
            f"{at_width.flops_per_token:,}",
            f"{at_width.flops_per_token / base.flops_per_token:.3f}",
        ]
    )
    m = template.model
    r.setup = (
        f"task {template.task.name} (sequence length {T}), d={m.d}, {m.n_layers} layers, {m.n_heads} heads, "
        f"d_position={m.d_position_requested} for concat combiners; counted by Transformer.num_parameters and "
        "Transformer.flops_per_token (2 FLOPs per multiply-accumulate, attention included)."
    )
    r.tables.append(
        Table(
            "Parameters and forward FLOPs per token",
            ["combine", "position", "d_token", "d_position", "d_model", "parameters", "× add", "FLOPs/token", "× add"],
            rows,
        )
    )
    split = next(x for x in sizes if x.combine == "concat_split")
    r.key = (
        f"concat_wide ×{wide.params_vs_add:.3f} params, ×{wide.flops_vs_add:.3f} FLOPs; concat_split "
        f"×{split.params_vs_add:.3f} / ×{split.flops_vs_add:.3f}; add at concat_wide's width "
        f"×{at_width.params / base.params:.3f} / ×{at_width.flops_per_token / base.flops_per_token:.3f}"
    )
    r.notes.append(
        "Only concat_wide (and, slightly, concat_project) costs more: concat_split keeps the width, so its "
        "layers cost the same and its embeddings are a little smaller. C6 sets concat_wide against add at the "
        "same total width, so a gain can be told apart from the size."
    )
    return r
