"""C18: a causal language model learns position without an encoding; a masked one cannot.

C18 reads byte-level language models on real text (``charlm`` causal, ``mlm`` masked): NoPE against the best scheme
with positions, chosen on the validation split so the test comparison is not the one it was picked on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from pelab.report.arms import ARM, _finish, budget_text, key_of, position_frame
from pelab.report.context import ReportContext
from pelab.report.evidence import compare, side
from pelab.report.registry import ClaimResult, Table, claim
from pelab.report.tables import family_table
from pelab.rules import (
    INCONCLUSIVE,
    LM_LEARNED_SHARE,
    MIN_EQUIVALENCE_SEEDS,
    NOT_RUN,
    NOT_SUPPORTED,
    PARTLY_RUN,
    SUPPORTED,
    TOO_SMALL,
    Comparison,
    Family,
    family,
)
from pelab.study.stats import t_interval

NOPE = ("none", "none")


#: The schemes with positions C18 compares NoPE against (Haviv et al. 2022 used learned; the others are the
#: common alternatives), each with the combiner it is used with.
TEXT_ARMS = (("learned", "add"), ("sinusoidal", "add"), ("rotary", "none"))


WHERE_TEXT = ["task.name", "model.d", "task.length"]


def best_against_nope(frame: pd.DataFrame, reverse: bool = False) -> list[Comparison]:
    """Per group of held-equal settings, NoPE (A) against the scheme with positions that learned and has the
    lowest mean *validation* loss (B); with ``reverse``, that scheme (A) against NoPE (B). Choosing on
    validation keeps the test comparison from being the one the best arm was picked on."""
    groups: dict[str, list[Comparison]] = {}
    for arm in TEXT_ARMS:
        for c in compare(frame, ARM, NOPE, arm):
            groups.setdefault(repr(sorted(c.where.items())), []).append(c)
    out = []
    for cands in groups.values():
        learned = [c for c in cands if c.b.is_language_model and c.b.learned(0.0)] or cands

        def val(c: Comparison) -> float:
            v = c.b.mean("val_loss")
            return v if not math.isnan(v) else c.b.mean("loss")

        best = min(learned, key=val)
        out.append(Comparison(best.where, best.b, best.a) if reverse else best)
    return out


def rule_c18(causal: Sequence[Comparison], masked: Sequence[Comparison], floor: float, margin: float
             ) -> tuple[str, Family, Family]:  # fmt: skip
    """C18, both halves on bits per byte.

    * causal (NoPE = A, best with positions = B): NoPE "gets close": not worse than the best beyond the ±2%
      relative margin, on every comparison. SCIENCE.md's "or trailing it by a stated amount with interval" is
      what the report states beside the verdict (the gap, with its interval), not a way for the half to hold:
      read as holding, it would pass any causal model that uses its context at all, and "close" would never be
      tested. A NoPE model that did not learn where the best did fails the half: the claim is about whether NoPE
      learns, so its failure is evidence (``FLOOR_POLICY``'s exception);
    * masked (best with positions = A, NoPE = B): NoPE is *far* worse: the best beats it by more than the ±2%
      margin, beyond the interval, on every comparison.

    Returns the verdict (``combine_halves``), the causal family (each row's gap in words as its last note,
    ``GAP_WORDS``) and the masked family."""
    causal_fam = family(causal, ("bpb",), floor, margin, kind="not_worse", combine="all", failure_is_evidence=True)
    for row in causal_fam.rows:
        if row.verdict != TOO_SMALL:
            learned = row.comparison.a.learned(floor)
            words = GAP_WORDS.get(row.verdict, row.verdict)
            capped = [n for n in row.notes if "equivalence needs" in n]
            if row.verdict == INCONCLUSIVE and capped and row.test is not None:
                # the generic "outside/inside the margin, but ..." note, said in C18's words in its place
                row.notes.remove(capped[0])
                side = "trails the best beyond the margin" if capped[0].startswith("outside") else "within the margin"
                words = f"NoPE {side} on {row.test.n} seeds; the rule needs ≥ {MIN_EQUIVALENCE_SEEDS} to decide"
            row.notes.append(words if learned else "NoPE did not learn where the best did")
    masked_fam = family(masked, ("bpb",), floor, margin, kind="beyond_margin", combine="all", failure_is_evidence=True)
    return combine_halves(causal_fam.verdict, masked_fam.verdict), causal_fam, masked_fam


#: How the causal gap reads, by the not-worse test of NoPE against the best (the row's last note).
GAP_WORDS = {
    SUPPORTED: "NoPE within the margin of the best",
    NOT_SUPPORTED: "NoPE trails the best beyond the margin",
    INCONCLUSIVE: "gap to the best not settled at this budget",
}


def combine_halves(causal: str, masked: str) -> str:
    """Both halves must hold. A half that fails refutes the claim; a half not run (no rows) or too small
    leaves it inconclusive (a half not run: partly run), never refuted; too small / not run when neither half could be
    tested."""
    if NOT_SUPPORTED in (causal, masked):
        return NOT_SUPPORTED
    if causal in (TOO_SMALL, NOT_RUN) and masked in (TOO_SMALL, NOT_RUN):
        return TOO_SMALL if TOO_SMALL in (causal, masked) else NOT_RUN
    if causal == SUPPORTED and masked == SUPPORTED:
        return SUPPORTED
    if NOT_RUN in (causal, masked):
        return PARTLY_RUN  # one half ran and refutes nothing; the other is not in this study: both are named
    return INCONCLUSIVE


def _text_frame(ctx: ReportContext, task: str) -> pd.DataFrame:
    f = position_frame(ctx)
    return f[f["task.name"] == task] if "task.name" in f else f.iloc[0:0]


def gap_text(fam: Family, nope_is_a: bool, floor: float | None = None) -> str:
    """How far NoPE trails (or leads) the best scheme, in bits per byte, with the interval that decided. Given
    the ``floor``, a NoPE model that did not learn is named as such, its numbers not quoted (SCIENCE.md: key
    figures never quote an arm below the floor)."""
    parts = []
    for row in fam.rows:
        if row.test is None:
            continue
        c = row.comparison
        nope, best = (c.a, c.b) if nope_is_a else (c.b, c.a)
        if floor is not None and not nope.learned(floor):
            parts.append(
                f"NoPE did not learn (held-out loss above {LM_LEARNED_SHARE:.0%} of the context-free baseline's), "
                f"{best.label} {best.mean('bpb'):.3f} bits/byte"
            )
            continue
        lo, hi = row.interval
        mean = row.test.mean
        if not nope_is_a:  # express as NoPE relative to the best either way (a log-ratio turns round exactly)
            mean, lo, hi = -mean, -hi, -lo
        fmt = row.test.metric.fmt_diff
        parts.append(
            f"NoPE {nope.mean('bpb'):.3f} vs {best.label} {best.mean('bpb'):.3f} bits/byte "
            f"({fmt(mean)} [{fmt(lo)}, {fmt(hi)}])"
        )
    return "; ".join(parts)


@claim(
    "C18",
    "A causal language model learns position without an encoding; a masked one cannot",
    "A multi-layer causal LM without any position encoding gets close to one with it, but a bidirectional (masked) "
    "model cannot: 'LLMs can learn position without PE ... but it is better to provide it'.",
    "Haviv et al. 2022, 'Transformer language models without positional encodings still learn positional "
    "information'; an answer to the question",
    "byte-level language models on real text, bits per byte on the test split; causal: NoPE 'gets close', not "
    "worse than the best scheme with positions (chosen on validation) beyond ±2% relative, on every comparison, "
    "on at least 5 seeds either way, as every test against a margin (a NoPE model better beyond the interval "
    "needs no margin, and no fifth seed); "
    "where it trails beyond that, the half fails and the gap is stated with its interval (SCIENCE.md's 'trailing "
    "it by a stated amount'); a NoPE model that did not learn where the best did fails it too; masked: NoPE far "
    "worse, the best scheme beating it by more than ±2% beyond the "
    "interval, on every comparison. Supported when both halves hold, not supported when either fails, partly "
    "run when a half was not run, inconclusive when one is not settled; an arm learned when its loss is at most "
    "80% of the context-free (unigram) baseline's",
    metrics=("bpb",),
)
def c18(ctx: ReportContext, r: ClaimResult) -> ClaimResult:
    causal = best_against_nope(_text_frame(ctx, "charlm"))
    masked = best_against_nope(_text_frame(ctx, "mlm"), reverse=True)
    if not causal and not masked:
        r.verdict = NOT_RUN
        r.key = "not run: the study has no charlm or mlm runs with NoPE and a scheme with positions"
        return r
    verdict, causal_fam, masked_fam = rule_c18(causal, masked, ctx.floor, ctx.margin)
    ctx.analyses["c18"] = {"causal": causal_fam, "masked": masked_fam}
    r.verdict = verdict
    r.halves = {"causal NoPE gets close to the best": causal_fam.verdict if causal else NOT_RUN,
                "masked NoPE far worse": masked_fam.verdict if masked else NOT_RUN}  # fmt: skip
    if causal:
        r.tables.append(family_table("Causal (charlm): NoPE (A) against the best scheme with positions (B); verdict: "
                                     "A not worse (within the margin)", causal_fam, WHERE_TEXT))  # fmt: skip
    if masked:
        r.tables.append(family_table("Masked (mlm): the best scheme with positions (A) against NoPE (B); verdict: A "
                                     "far better (beyond the margin)", masked_fam, WHERE_TEXT))  # fmt: skip
    r.tables.append(text_arms_table(ctx))
    halves = []
    if causal:
        how = "; ".join(dict.fromkeys(r.notes[-1] for r in causal_fam.rows if r.verdict != TOO_SMALL))
        gap = gap_text(causal_fam, True, ctx.floor) or key_of(causal_fam, WHERE_TEXT, ctx.floor)
        halves.append(f"causal {causal_fam.verdict}{f' ({how})' if how else ''}: {gap}")
    else:
        halves.append("causal not run")
    if masked:
        gap = gap_text(masked_fam, False, ctx.floor) or key_of(masked_fam, WHERE_TEXT, ctx.floor)
        halves.append(f"masked {masked_fam.verdict}: {gap}")
    else:
        halves.append("masked not run")
    r.key = "; ".join(halves)
    text = pd.concat([_text_frame(ctx, "charlm"), _text_frame(ctx, "mlm")])
    r.setup = f"byte-level language models on real text, NoPE against each scheme with positions; {budget_text(text)}"
    r.caveats.append(
        "The best scheme is chosen per comparison on validation bits per byte among the arms that learned; NoPE is "
        "compared with that one arm, so the causal half is a test against the strongest alternative run here."
    )
    with_positions = [c.b for arm in TEXT_ARMS for c in compare(_text_frame(ctx, "mlm"), ARM, NOPE, arm)]
    unlearned = sorted({side.label for side in with_positions if not side.learned(ctx.floor)})
    if unlearned:
        r.caveats.append(
            f"Masked arms with positions that did not learn at this budget either: {', '.join(unlearned)}. The masked "
            "half compares NoPE with the best arm that did; against these, both failed."
        )
    _finish(r, ctx, {"causal": causal_fam, "masked": masked_fam})
    return r


def text_arms_table(ctx: ReportContext) -> Table:
    """Every language-model arm: bits per byte on test with its interval, the baseline, params."""
    rows = []
    for task in ("charlm", "mlm"):
        sub = _text_frame(ctx, task)
        if sub.empty:
            continue
        for values, g in sub.groupby(ARM + ["model.d"], sort=False):
            done = g[g.status == "done"]
            if done.empty or "m.bpb" not in done:
                continue
            mean, lo, hi = t_interval(done["m.bpb"].dropna().tolist())
            base = float(done["m.baseline_loss"].mean()) / math.log(2) if "m.baseline_loss" in done else math.nan
            learned = side(done, "arm").learned(ctx.floor)  # the rules' own test, not a copy of its threshold
            cell = f"{mean:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if not math.isnan(lo) else "")
            rows.append([task, f"{values[0]} + {values[1]}", str(values[2]), cell, f"{base:.3f}",
                         "yes" if learned else "no", str(len(done)), f"{int(g.params.max()):,}"])  # fmt: skip
    return Table(
        "Language-model arms: test bits per byte (mean [95% CI] over seeds)",
        ["task", "arm", "d", "bits/byte", "context-free baseline", "learned", "seeds", "params"],
        rows,
    )
