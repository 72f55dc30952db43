"""The pieces the report's first screen is assembled from (``first_screen``: who won, where, by how much), the
claims not run here, the scale a run was measured at, and the claims' documentation.

Nothing here is written by hand per run: the opening of the report is a function of the
claims' verdicts and key figures, and ``docs/claims.md`` is a function of the registry.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pelab.report.catalog import all_claims
from pelab.report.context import ReportContext
from pelab.report.forest import below_floor, scale_of
from pelab.report.registry import DOC, ClaimResult
from pelab.rules import (
    EARLY,
    ERROR,
    EXACT,
    INCONCLUSIVE,
    LOSS_DOUBTS,
    NO_INFO,
    NOT_RUN,
    NOT_SUPPORTED,
    REPORTED,
    SUPPORTED,
    TOO_SMALL,
    UNCONFIRMED,
    metric,
)


def join_and(parts: Sequence[str]) -> str:
    """ "a", "a and b", "a, b and c": a list in a sentence."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" and {parts[-1]}"


#: The command that runs every claim: what a claim (or half of one) this study did not run points to.
FULL_COMMAND = "pelab study --preset full"

PHRASE = {
    EXACT: "exact",
    SUPPORTED: "supported by this run",
    NOT_SUPPORTED: "not supported by this run",
    INCONCLUSIVE: "not settled at this budget",
    UNCONFIRMED: "decided at an early look and not confirmed by the seeds its arms got later",
    NO_INFO: "these tasks cannot tell (every comparison whose arms learned sat at a ceiling on every deciding metric)",
    TOO_SMALL: "no verdict: the arms did not learn at this budget",
    NOT_RUN: f"not run in this study; the full preset runs it (`{FULL_COMMAND}`)",
    REPORTED: "measured; no verdict by design",
    ERROR: "the evidence could not be computed",
}


def tested(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The informative rows of a family (claims.json records: ``row_records``)."""
    return [r for r in records if r["verdict"] not in (TOO_SMALL, NO_INFO) and r["metric"]]


def who_won(won: list[dict[str, Any]]) -> str:
    """With which position schemes the wins won ("all with sinusoidal positions", "3 with learned, 2 with sinusoidal
    positions"), or "": C6's sign follows the scheme in full, concatenation ahead with sinusoidal tables and adding
    with learned ones."""
    schemes = Counter(str(r["where"].get("model.position.scheme")) for r in won
                      if r.get("where", {}).get("model.position.scheme") is not None)  # fmt: skip
    if not schemes:
        return ""
    if len(schemes) == 1:  # one win is "with learned positions", not "all with"
        return f"{'all ' if sum(schemes.values()) > 1 else ''}with {next(iter(schemes))} positions"
    return ", ".join(f"{n} with {s}" for s, n in schemes.most_common()) + " positions"


def early(won: list[dict[str, Any]]) -> str:
    """ "1 of them decided at an early look and confirmed on all its arms' seeds", or "": a win the sequential design
    stopped at (``rules.EARLY``) whose arms got more seeds later, for other comparisons, that bear it out
    (``rules.decide``); one they do not bear out is no win ("decided early, not confirmed"), counted apart."""
    n = sum(any(str(x).startswith(EARLY) for x in r.get("notes", [])) for r in won)
    if not n:
        return ""
    if len(won) == 1:
        return "decided at an early look and confirmed on all the seeds its arms got later"
    return f"{n} of them decided at an early look and confirmed on all the seeds their arms got later"


def where_won(won: list[dict[str, Any]]) -> str:
    """ "all on sort", "3 on sort", or "": where several wins share one task, so four wins are not read as four
    tasks."""
    tasks = Counter(str(r.get("where", {}).get("task.name")) for r in won if r.get("where", {}).get("task.name"))
    if len(won) < 2 or not tasks:
        return ""
    task, n = tasks.most_common(1)[0]
    if n == len(won):
        return f"all on {task}"
    return f"{n} on {task}" if n > 1 else ""


def size_text(row: Mapping[str, Any], x: float) -> str:
    """An unsigned effect in the row's deciding metric: "3.1 pp accuracy", "12.0% in held-out loss" (a relative
    metric's log-ratio x as 100·(exp(x) − 1)%: the worse arm's value that much above the better's)."""
    key = row["metric"]
    m = metric(key)
    if m.relative:
        return f"{100 * math.expm1(x):.1f}% in {m.label}"
    factor, unit = scale_of(key)
    if unit.startswith("pp"):
        return f"{factor * x:.1f} {unit}"
    return f"{x:.3g} {unit}"


def span_text(row: Mapping[str, Any], lo: float, hi: float) -> str:
    """ "1.9% to 84.4% in held-out loss", "2.0 to 10.0 pp accuracy": an effect between two positive ends in the row's
    metric; "up to 3.6 pp accuracy" where the low end prints as 0 (it is above 0: a reader must not read "by 0")."""
    low = size_text(row, lo)
    if _prints_zero(low):
        return f"up to {size_text(row, hi)}"
    return f"{low.split(' ', 1)[0]} to {size_text(row, hi)}"


def _prints_zero(size: str) -> bool:
    """Whether ``size_text``'s number reads 0 ("0.0 pp accuracy", "0.0% in held-out loss")."""
    return float(size.split(" ", 1)[0].rstrip("%")) == 0


def by_how_much(won: list[dict[str, Any]]) -> str:
    """ "by 1.9% to 84.4% in held-out loss" (one win), "each by at least 0.5 pp accuracy (up to 3.1 pp)" (several:
    the smallest low end and the largest high end of their intervals, per metric), or "": what the winning
    intervals establish, so a count of wins is never the whole answer."""
    spans: dict[str, tuple[float, float, dict[str, Any]]] = {}
    for r in won:
        res, key = r.get("resolution"), r.get("metric")
        if not res or not key or res["lo"] <= 0:  # oriented: positive is A ahead; a win's interval clears 0
            continue
        lo, hi, _ = spans.get(key, (res["lo"], res["hi"], r))
        spans[key] = (min(lo, res["lo"]), max(hi, res["hi"]), r)
    if not spans:
        return ""
    if len(won) == 1:
        return "by " + " or ".join(span_text(r, lo, hi) for lo, hi, r in spans.values())
    # several wins: each interval's low end is at least the smallest, and none reaches past the largest high end
    # ("each by 29.5% to 98.8%" read as every win's own interval, which one of them was not)
    return "each by " + " or ".join(_at_least(r, lo, hi) for lo, hi, r in spans.values())


def _at_least(row: Mapping[str, Any], lo: float, hi: float) -> str:
    """ "at least 29.5% in held-out loss (up to 98.8%)", "at least 1.2 pp accuracy (up to 9.1 pp)"; "up to 3.6 pp
    accuracy" where the low end prints as 0 (it is above 0)."""
    low, high = size_text(row, lo), size_text(row, hi)
    if _prints_zero(low):
        return f"up to {high}"
    short = high.split(" ")[0] if high.split(" ")[0].endswith("%") else " ".join(high.split(" ")[:2])
    return f"at least {low} (up to {short})"


def win_facts(records: list[dict[str, Any]], floor: float | None = None) -> list[str]:
    """What a family's wins were, one fact each, for the first screen to list under the sentence that counts them:
    where ("3 on sort"), on learning speed, with which schemes, by how much, decided early; then the doubts a reader
    must discount them by: held-out loss not backing an accuracy win (``rules.second_opinion``), and, with the
    study's ``floor``, a win over an arm that had not learned its task at this budget (the floor policy counts it,
    but it says how fast each arm learns, not how well). [] when none won."""
    won = [r for r in tested(records) if r["verdict"] == SUPPORTED]
    if not won:
        return []
    speed = sum(r["metric"] == "auc" for r in won)
    facts = [where_won(won), "all on learning speed alone" if speed == len(won) else f"{speed} on learning speed"
             * bool(speed), who_won(won), by_how_much(won), early(won)]  # fmt: skip
    doubted = sum(any(str(n).startswith(LOSS_DOUBTS) for n in r.get("notes", [])) for r in won)
    if doubted:
        facts.append("on accuracy; held-out loss does not confirm it" if doubted == len(won)
                     else f"{doubted} of them on accuracy where held-out loss does not confirm it")  # fmt: skip
    unlearned = sum(below_floor(r, floor, "b") for r in won) if floor is not None else 0  # B: the losing arm
    if unlearned:
        which = "each" if unlearned == len(won) else f"{unlearned} of them"
        facts.append(f"{which} over an arm that had not learned at this budget: below the {floor:.0%} floor")
    return [f for f in facts if f]


def not_measured(ctx: ReportContext) -> list[str]:
    """What SCIENCE.md asks for that this run did not measure, so a reader does not mistake silence for a result
    (every claim C1–C19 is declared; these are parts of claims a study can leave out)."""
    out: list[str] = []
    f = ctx.frame
    if "task.name" in f and not f["task.name"].isin(["charlm"]).any():
        out.append("C7 on real text (language-model perplexity): no charlm runs in this study")
    combines = set(f.get("model.combine", pd.Series(dtype=str)))
    if not {"multiply", "matrix"} & combines:
        out.append("C12's multiply and matrix combiners: not run in this study")
    decoders = f[f["model.kind"] == "decoder"] if "model.kind" in f else f.iloc[0:0]
    schemes = set(decoders.get("model.position.scheme", pd.Series(dtype=str)))
    lacking = [x for x in ("t5", "alibi", "rotary") if x not in schemes]
    if lacking:
        out.append(f"C17 for causal decoders with {', '.join(lacking)}: not run in this study")
    return [f"{what}; `{FULL_COMMAND}` runs it" for what in out]


def run_elsewhere(claims: list[ClaimResult]) -> list[str]:
    """Each claim, or half of one, that this study did not run, with the command that runs it: every claim stays
    present in the report, and one that has no evidence here says where its evidence is."""
    whole, parts = [], []
    for c in claims:
        halves = c.halves or {}
        if c.verdict == NOT_RUN and all(v == NOT_RUN for v in halves.values()):
            whole.append(c.id)
        else:  # a claim undecided because one half was not run names that half, not the claim: the other half ran
            parts += [f"{c.id} ({half})" for half, v in halves.items() if v == NOT_RUN]
    if not whole and not parts:
        return []
    # one line: the claims by id (each has its section, which says the same), then the halves
    return [f"{', '.join(whole + parts)}: not run in this study; `{FULL_COMMAND}` runs them"]


def scale(ctx: ReportContext) -> str:
    """Parameters, tokens seen per run and seeds: the size at which this run's verdicts hold."""
    from pelab.tasks import make_task

    done = ctx.frame[ctx.frame.status == "done"]
    if done.empty:
        return ""
    tokens: dict[Any, int] = {}
    for run in ctx.study.runs:
        key = (run.task.model_dump_json(), run.train.steps, run.train.batch_size)
        if key not in tokens:
            task = make_task(run.task)
            tokens[key] = run.train.steps * run.train.batch_size * task.seq_len(task.n)
    lo_p, hi_p = int(done.params.min()), int(done.params.max())
    lo_t, hi_t = min(tokens.values()), max(tokens.values())
    _, per_arm, how = seeds_used(ctx)
    span = lambda lo, hi: f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"  # noqa: E731
    return (
        f"Scale: models of {span(lo_p, hi_p)} parameters, {span(lo_t, hi_t)} tokens seen per run, "
        f"{per_arm} per arm{f' ({how})' if how else ''}, {len(done)} finished runs. Verdicts hold at this scale only."
    )


def seeds_line(ctx: ReportContext) -> str:
    """ "seeds 0–7 (5 to 8 paired seeds per arm, sequential)": the report's subtitle and method line."""
    from pelab.study.design import seed_span

    seeds, per_arm, how = seeds_used(ctx)
    return f"seeds {seed_span(seeds)} ({per_arm} per arm{f', {how}' if how else ''})"


def seeds_used(ctx: ReportContext) -> tuple[list[int], str, str]:
    """The seeds the finished runs used, how many each arm got in words ("5 paired seeds", "5 to 8 paired seeds"),
    and "sequential" where a sequential study gave arms different counts: its listed seeds are where it starts.
    Arms of a grid with its own seeds (``Study.fixed``) are counted apart ("30 on a grid's own seeds"): their count
    is no round's doing, and they pair with no other grid's arms."""
    done = set(ctx.frame[ctx.frame.status == "done"].run_id)
    by_arm: dict[str, set[int]] = {}
    for run in ctx.study.runs:
        if run.run_id in done:
            by_arm.setdefault(run.arm_id, set()).add(run.seed)
    seeds = sorted(set().union(*by_arm.values())) if by_arm else list(ctx.study.seeds)
    own = sorted({len(s) for a, s in by_arm.items() if a in ctx.study.fixed})
    counts = sorted({len(s) for a, s in by_arm.items() if a not in ctx.study.fixed}) or own or [len(ctx.study.seeds)]
    mixed = own and any(a not in ctx.study.fixed for a in by_arm)
    apart = [f"{' or '.join(map(str, own))} on a grid's own seeds"] if mixed else []
    if counts[0] == counts[-1]:
        return seeds, f"{counts[0]} paired seeds", "; ".join(apart)
    return (
        seeds,
        f"{counts[0]} to {counts[-1]} paired seeds",
        "; ".join((["sequential"] if ctx.study.sequential else []) + apart),
    )


def claims_markdown() -> str:
    """docs/claims.md: every claim, who made it, its deciding metrics and its rule, from the registry."""
    from pelab.rules import FLOOR_POLICY, LOSS_FLOOR, RELATIVE_MARGIN
    from pelab.rules.metrics import LOSS_MARGIN_TEXT, SOLVED_TEXT

    lines = [
        "# The claims and their rules",
        "",
        "Written from pelab's claims registry (`pelab claims --markdown`); the report links each claim here.",
        "Every rule is code (`pelab/rules/` and the `rule_cN` functions beside each claim) with unit",
        "tests on hand-made comparisons whose verdict is known (`tests/test_rules.py`, `tests/test_claim_rules.py`).",
        "",
        "## How every training verdict is drawn",
        "",
        "- **Learned.** An arm learned its task when its mean accuracy at the training size reaches the study's",
        "  floor (`[report] floor`, default 80%); a language model when its loss is at most 80% of the",
        "  context-free baseline's. One policy for every claim: " + FLOOR_POLICY + ". Key figures quote",
        "  a comparison whose arms both learned wherever there is one, and never an arm's numbers below the floor.",
        "- **Paired.** Arms share task data, seeds, steps, optimiser and evaluation sets; the difference A − B is",
        "  taken per seed, and its 95% Student-t interval decides.",
        "- **Deciding metric.** Each claim names an ordered list of metrics (below). A comparison whose arms all",
        "  sit at the ceiling or floor of a metric, or whose paired differences have zero spread, carries *no",
        "  information* on it and falls back to the next metric (accuracy → held-out loss → area under the",
        "  learning curve). Where no metric informs, the comparison is *no information*, never evidence for or",
        "  against.",
        f"- **Solved is not informative.** {SOLVED_TEXT[0].upper()}{SOLVED_TEXT[1:]}: two arms that give the same",
        "  answers differ only in how sharp those answers are and how fast they got there, which the budget and the",
        f"  learning rate decide more than the encoding. Held-out loss under {LOSS_FLOOR} nats means the right answer",
        "  already gets p > 0.99. The row is shown as no information, with both arms' accuracy, like a ceiling.",
        "- **Margins.** Equivalence and 'no effect' use ±`[report] margin` (default 1 percentage point) on",
        f"  accuracy and {LOSS_MARGIN_TEXT} (A's value within a factor {1 + RELATIVE_MARGIN:g} of B's either",
        "  way), the same whatever B's value: no margin is widened near a floor. A relative difference is the",
        "  t-interval of the per-seed log-ratios log(A / B), shown as 100·(exp(x) − 1)%, so no interval can cross",
        "  −100% and A against B is the mirror image of B against A.",
        "- **Directions and margins.** 'A beats B' is supported when the interval excludes 0 the claimed way and",
        "  does not lie wholly inside the margin (a sure but negligible gap is no win); not supported when it",
        "  excludes 0 the other way, or lies inside the margin with at least 5 seeds. An equivalence is decided",
        "  either way only with at least 5 seeds; 'A not worse' holds on fewer when A is better beyond the interval.",
        "- **Several comparisons.** A claim that holds 'on some comparison' is decided with Holm–Bonferroni",
        "  across its informative comparisons (each row read on its interval at its Holm level); a claim that",
        "  must hold 'on every comparison' needs every row at 95% (an intersection–union test) and is refuted",
        "  by one row at its Holm level. The report states how many comparisons there were.",
        "- **Resolution.** Beside every verdict, what its interval does establish (the interval the verdict read, at",
        "  its level): for an equivalence the smallest margin that would decide it ('within ±2.3 pp at 95%'), for a",
        "  'not worse' how far A may still trail B, for a direction the largest effect the interval still allows",
        "  either way. An inconclusive claim states the widest over its undecided comparisons. It never changes a",
        "  verdict (`pelab/rules/resolution.py`).",
        "- **Sequential seeds.** Where a study adds seeds to undecided comparisons in rounds up to a cap, each",
        "  comparison is read at its last look's nominal level (Lan–DeMets alpha spending by the spending function the",
        "  study names in `[sequential] spending`, O'Brien–Fleming-type or Pocock-type, over the looks taken;",
        "  boundaries on the paired t-statistics), so the interim looks keep every verdict's error rate at its",
        "  nominal level; the row says so with its looks and the report's method line names the function",
        "  (`pelab/study/sequential.py`).",
        "- **Every seed counts.** A comparison decided at an interim look whose arms later got more seeds (bought by",
        "  another open comparison) is read on all of them at the nominal level of the look it stopped at; the",
        "  decision stands only where that reading decides it the same way, and is otherwise *decided early, not",
        "  confirmed*: never a win, counted apart, combined like an inconclusive row (a conservative variant of the",
        "  deletion method for overrunning data, Whitehead 1992; `pelab/rules/families.py`, simulated in",
        "  `tests/test_sequential.py`).",
        "- **Confirmatory and exploratory.** A `[[grid]]` with `confirmatory = true` lists its own seeds, none of",
        "  which any other grid or the study's own seeds and rounds use (nor, checked by the tests, a recorded pilot",
        "  in `bench/pilots/`); its comparisons are read once at 95%. When a study folder's runs are first trained,",
        "  pelab writes `protocol.json` there: the sha256",
        "  of the rules' source, the git commit, pelab's version and the study file's sha256. A comparison is",
        "  *confirmatory* when every run of both arms comes from a confirmatory grid declared in that protocol and",
        "  was trained after it was fixed; every other is *exploratory*, and says so. The report prints the protocol",
        "  and says when the rules or the study file changed since (`pelab/study/protocol.py`).",
        "- **Published results** were measured in other settings (another task, model kind or scale): this run is",
        "  *consistent at this budget* with one, or *differs at this budget (not comparable)*, never 'agrees' or",
        "  'disagrees'; *inconclusive* with its resolution where an interval does not decide; *not run* where nothing",
        "  ran.",
        "- **Verdicts.** *supported*, *not supported*, *inconclusive at this budget*, *decided early, not",
        "  confirmed* (a comparison's row only), *no information*, *budget too small*; *not run in this study* where",
        "  the study has none of the runs a claim compares (a study without its task or arms: no budget was",
        "  tried); *exact* for closed-form checks; *reported* where",
        "  SCIENCE.md asks for numbers only.",
        "",
    ]
    for c in all_claims():
        lines += [
            f'<a id="{c.id.lower()}"></a>',
            f"## {c.id} · {c.title}",
            "",
            f"- **Claim.** {c.claim} *({c.source})*",
            f"- **Deciding metric.** {', then '.join(metric(k).label for k in c.metrics) or 'none: exact or reported'}",
            f"- **Rule.** {c.rule_for(0.8, 0.01)}",
            "",
        ]
    return "\n".join(lines)


__all__ = ["DOC", "claims_markdown", "not_measured", "run_elsewhere", "scale", "win_facts"]
