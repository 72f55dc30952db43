"""C11: PE(pos+k) is a linear function of PE(pos) for sinusoidal encoding."""

from __future__ import annotations

from pelab.report.context import ReportContext
from pelab.report.evidence import select
from pelab.report.measured import _token_tasks
from pelab.report.registry import ClaimResult, Table, claim
from pelab.rules import EXACT, NOT_SUPPORTED


@claim(
    "C11",
    "PE(pos+k) is a linear function of PE(pos) for sinusoidal encoding",
    "A fixed linear map (a rotation) takes each position's encoding to the one k steps on, which lets attention "
    "use relative position.",
    "Vaswani et al. 2017, §3.5",
    "exact when the held-out residual of the best linear map (fit on some positions, scored on the others, so a "
    "table with more dimensions than positions cannot pass by fitting anything) is below 1e-9 for sinusoidal; "
    "residuals reported for learned tables (trained) and MiniLM's pretrained table",
)
def c11(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    lin = ctx.analyse("linearity", scheme="sinusoidal", d=64, length=64)
    rows = []
    for name, res in lin["tables"].items():
        for x in res:
            rows.append(
                [
                    f"sinusoidal ({name})",
                    str(x["k"]),
                    f"{x['residual']:.1e}",
                    f"{x['heldout_residual']:.1e}",
                    "yes" if x["determined"] else "no (any table fits)",
                ]
            )
    # Held-out, not in-sample: with d ≥ the number of positions any table, random ones included, fits in-sample
    sin_max = max(x["heldout_residual"] for x in lin["tables"][lin["subject"]])
    ids = []
    for task in _token_tasks(ctx)[:2]:
        run_id = ctx.pick_run(
            select(ctx.frame, task__name=task, model__position__scheme="learned", model__combine="add")
        )
        if run_id is None:
            continue
        ids.append(run_id)
        trained = ctx.analyse("linearity", run_id=run_id)
        for name, res in trained["tables"].items():
            for x in res:
                rows.append(
                    [
                        f"learned, trained on {task} ({name})",
                        str(x["k"]),
                        f"{x['residual']:.1e}",
                        f"{x['heldout_residual']:.1e}",
                        "yes" if x["determined"] else "no (any table fits)",
                    ]
                )
    pre = ctx.prefetched("pretrained")
    if pre and "linearity" in pre:
        for x in pre["linearity"].get("minilm", []):
            rows.append(
                [
                    f"MiniLM pretrained positions (shuffled rows: {x['shuffled_residual']:.2f})",
                    str(x["k"]),
                    f"{x['residual']:.1e}",
                    "–",
                    "yes",
                ]
            )
    r.tables.append(
        Table(
            "Relative residual of the best linear map PE(pos) → PE(pos+k)",
            ["table", "k", "residual", "held-out residual", "over-determined"],
            rows,
        )
    )
    r.verdict = EXACT if sin_max < 1e-9 else NOT_SUPPORTED
    r.key = f"sinusoidal held-out residual ≤ {sin_max:.1e}"
    r.run_ids = ids
    return r
