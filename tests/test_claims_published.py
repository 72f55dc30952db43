"""C18, C19 and the published-vs-measured outcomes on hand-made evidence whose verdict is known: each branch."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pelab.report.claims.c18_causal_nope import GAP_WORDS, best_against_nope, combine_halves, rule_c18
from pelab.report.claims.c19_grid_concat import rule_c19
from pelab.report.published import (
    CONSISTENT,
    DIFFERS,
    UNDECIDED,
    UNTESTED,
    kazemnejad_outcome,
    per_seed_tau,
)
from pelab.report.tables import row_records
from pelab.rules import (
    INCONCLUSIVE,
    LM_LEARNED_SHARE,
    NOT_RUN,
    NOT_SUPPORTED,
    PARTLY_RUN,
    SUPPORTED,
    TOO_SMALL,
    Comparison,
    Side,
)

FLOOR, MARGIN = 0.8, 0.01
LN2 = math.log(2)
BASELINE = 3.2  # nats per byte, about the stdlib's unigram loss


def lm(label: str, bpb: list[float], baseline: float = BASELINE) -> Side:
    """A language-model arm: loss in nats from bits per byte, with the context-free baseline beside it."""
    seeds = range(len(bpb))
    return Side(
        label,
        {
            "bpb": dict(zip(seeds, bpb, strict=True)),
            "loss": {s: b * LN2 for s, b in zip(seeds, bpb, strict=True)},
            "val_loss": {s: b * LN2 for s, b in zip(seeds, bpb, strict=True)},
            "baseline_loss": {s: baseline for s in seeds},
            "acc": {s: 0.5 for s in seeds},  # next-byte accuracy: far below the floor, and it must not matter
        },
        params=1000,
        flops=2000,
        run_ids=(label,),
    )


def comp(a: Side, b: Side) -> Comparison:
    return Comparison({"task.name": "charlm"}, a, b)


GOOD = [2.50, 2.52, 2.49, 2.51, 2.50]  # learned: 2.5 bits = 1.73 nats, well below 0.8 x 3.2
CLOSE = [2.51, 2.53, 2.50, 2.52, 2.51]  # +0.4%: inside ±2%
FAR = [2.90, 2.95, 2.92, 2.91, 2.93]  # +16%
NOISY = [2.40, 2.70, 2.45, 2.75, 2.50]
SLIGHT = [1.010, 1.012, 1.009, 1.011, 1.010]  # 1% worse, a little noise
UNLEARNED = [4.40, 4.45, 4.42, 4.41, 4.43]  # 3.06 nats: above 0.8 x 3.2 = 2.56


def test_language_models_learn_against_their_context_free_baseline_not_accuracy() -> None:
    assert lm("x", GOOD).learned(FLOOR)
    assert not lm("x", UNLEARNED).learned(FLOOR)
    edge = BASELINE * LM_LEARNED_SHARE / LN2
    assert lm("x", [edge - 1e-6] * 3).learned(FLOOR) and not lm("x", [edge + 1e-6] * 3).learned(FLOOR)


def test_c18_every_branch() -> None:
    close, far, noisy = comp(lm("nope", CLOSE), lm("best", GOOD)), comp(lm("nope", FAR), lm("best", GOOD)), None
    fails = comp(lm("best", GOOD), lm("nope", UNLEARNED))  # masked: A = best, B = NoPE (may not learn)
    ties = comp(lm("best", GOOD), lm("nope", CLOSE))
    verdict, causal, masked = rule_c18([close], [fails], FLOOR, MARGIN)
    assert (verdict, causal.verdict, masked.verdict) == (SUPPORTED, SUPPORTED, SUPPORTED)
    assert causal.rows[0].test.metric.key == "bpb"
    assert causal.rows[0].notes[-1] == GAP_WORDS[SUPPORTED]
    # causal NoPE far behind: not close. SCIENCE.md's "or trailing it by a stated amount" is the gap the row
    # states, never a way to hold: read so, any causal model that uses its context would pass
    verdict, causal, _ = rule_c18([far], [fails], FLOOR, MARGIN)
    assert causal.verdict == NOT_SUPPORTED and verdict == NOT_SUPPORTED
    assert causal.rows[0].notes[-1] == GAP_WORDS[NOT_SUPPORTED] and causal.rows[0].interval[0] > 0.1
    assert row_records(causal)[0]["verdict"] == NOT_SUPPORTED
    # causal NoPE that did not learn while the best did: the causal half fails (the one floor policy)
    verdict, causal, _ = rule_c18([comp(lm("nope", UNLEARNED), lm("best", GOOD))], [fails], FLOOR, MARGIN)
    assert (verdict, causal.verdict) == (NOT_SUPPORTED, NOT_SUPPORTED)
    # masked NoPE as good as the best: not supported
    assert rule_c18([close], [ties], FLOOR, MARGIN)[0] == NOT_SUPPORTED
    # masked NoPE only slightly worse (beyond the interval, inside the margin): not "far" worse
    slight = comp(lm("best", GOOD), lm("nope", [g * f for g, f in zip(GOOD, SLIGHT, strict=True)]))
    assert rule_c18([close], [slight], FLOOR, MARGIN)[2].verdict == NOT_SUPPORTED
    # ... but with three seeds, "inside the margin" is an equivalence-type conclusion: inconclusive
    slight3 = comp(lm("best", GOOD[:3]), lm("nope", [g * f for g, f in zip(GOOD[:3], SLIGHT[:3], strict=True)]))
    assert rule_c18([close], [slight3], FLOOR, MARGIN)[2].verdict == INCONCLUSIVE
    # a noisy causal gap is not settled, and neither is the claim; nor with a noisy masked comparison
    noisy = comp(lm("nope", NOISY), lm("best", GOOD))
    verdict, causal, _ = rule_c18([noisy], [fails], FLOOR, MARGIN)
    assert causal.rows[0].notes[-1] == GAP_WORDS[INCONCLUSIVE] and verdict == INCONCLUSIVE
    noisy_masked = comp(lm("best", GOOD), lm("nope", NOISY))
    assert rule_c18([close], [noisy_masked], FLOOR, MARGIN)[0] == INCONCLUSIVE
    # the scheme with positions did not learn: both halves too small
    bad = comp(lm("nope", UNLEARNED), lm("best", UNLEARNED))
    assert rule_c18([bad], [comp(lm("best", UNLEARNED), lm("nope", UNLEARNED))], FLOOR, MARGIN)[0] == TOO_SMALL
    # "within the margin" needs five seeds either way (an equivalence-type test): with three, a close gap and a
    # far one both stay inconclusive, and the row says which side of the margin it fell and why it is not decided
    three = comp(lm("nope", CLOSE[:3]), lm("best", GOOD[:3]))
    fails3 = comp(lm("best", GOOD[:3]), lm("nope", UNLEARNED[:3]))
    verdict, causal, _ = rule_c18([three], [fails3], FLOOR, MARGIN)
    assert verdict == INCONCLUSIVE
    assert causal.rows[0].notes == ["NoPE within the margin on 3 seeds; the rule needs ≥ 5 to decide"]
    far3 = comp(lm("nope", FAR[:3]), lm("best", GOOD[:3]))
    verdict, causal, _ = rule_c18([far3], [fails3], FLOOR, MARGIN)
    assert verdict == INCONCLUSIVE and causal.verdict == INCONCLUSIVE
    assert causal.rows[0].notes == ["NoPE trails the best beyond the margin on 3 seeds; the rule needs ≥ 5 to decide"]
    # the masked arm with positions failing where NoPE learned refutes the masked half (the one floor policy)
    assert rule_c18([close], [comp(lm("best", UNLEARNED), lm("nope", GOOD))], FLOOR, MARGIN)[0] == NOT_SUPPORTED


def test_c18_halves_combine() -> None:
    assert combine_halves(SUPPORTED, SUPPORTED) == SUPPORTED
    assert combine_halves(NOT_SUPPORTED, SUPPORTED) == NOT_SUPPORTED  # causal NoPE did not learn
    assert combine_halves(SUPPORTED, NOT_SUPPORTED) == NOT_SUPPORTED
    assert combine_halves(INCONCLUSIVE, SUPPORTED) == INCONCLUSIVE
    assert combine_halves(NOT_SUPPORTED, TOO_SMALL) == NOT_SUPPORTED  # a half that fails refutes either way
    assert combine_halves(SUPPORTED, TOO_SMALL) == INCONCLUSIVE  # masked half too small: never refuted
    assert combine_halves(TOO_SMALL, TOO_SMALL) == TOO_SMALL
    assert combine_halves(NOT_RUN, NOT_RUN) == NOT_RUN  # neither half in the study: no budget was tried
    assert combine_halves(TOO_SMALL, NOT_RUN) == TOO_SMALL
    # masked half not run: never refuted, never supported, and said so: "partly run", the run half's verdict beside
    assert combine_halves(SUPPORTED, NOT_RUN) == PARTLY_RUN
    assert combine_halves(INCONCLUSIVE, NOT_RUN) == PARTLY_RUN
    assert combine_halves(NOT_SUPPORTED, NOT_RUN) == NOT_SUPPORTED
    assert combine_halves(SUPPORTED, TOO_SMALL) == INCONCLUSIVE
    assert combine_halves(TOO_SMALL, SUPPORTED) == INCONCLUSIVE
    assert combine_halves(SUPPORTED, INCONCLUSIVE) == INCONCLUSIVE


def _frame(arms: dict[tuple[str, str], tuple[list[float], list[float]]]) -> pd.DataFrame:
    rows = []
    for (scheme, combine), (test, val) in arms.items():
        for seed, (t, v) in enumerate(zip(test, val, strict=True)):
            rows.append({"run_id": f"{scheme}-{seed}", "status": "done", "seed": seed, "task.name": "charlm",
                         "model.position.scheme": scheme, "model.combine": combine, "m.bpb": t, "m.loss": t * LN2,
                         "m.val_loss": v * LN2, "m.baseline_loss": BASELINE, "m.acc": 0.5, "params": 1,
                         "flops_per_token": 1})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_best_scheme_is_chosen_on_validation_among_arms_that_learned() -> None:
    frame = _frame(
        {
            ("none", "none"): (FAR, FAR),
            # rotary is best on test but not on validation: it must not be the one chosen
            ("rotary", "none"): ([2.0] * 5, [2.6] * 5),
            ("learned", "add"): (GOOD, [2.4] * 5),
            # sinusoidal has the best validation loss of all but did not learn on test
            ("sinusoidal", "add"): (UNLEARNED, [1.0] * 5),
        }
    )
    (c,) = best_against_nope(frame)
    assert c.a.label == "none + none" and c.b.label == "learned + add"
    (r,) = best_against_nope(frame, reverse=True)
    assert r.a.label == "learned + add" and r.b.label == "none + none"


def test_c19_every_branch() -> None:
    def acc(label: str, values: list[float]) -> Side:
        return Side(label, {"acc": dict(enumerate(values))}, params=1, flops=1, run_ids=(label,))

    win = Comparison(
        {"task.name": "cell2d"}, acc("concat", [0.99, 1.0, 0.98, 0.99, 1.0]), acc("add", [0.62] * 4 + [0.63])
    )
    tie = Comparison({"task.name": "digits"}, acc("concat", [0.900, 0.905, 0.902, 0.898, 0.903]),
                     acc("add", [0.901, 0.903, 0.900, 0.900, 0.902]))  # fmt: skip
    lose = Comparison({"task.name": "digits"}, acc("concat", [0.86, 0.88, 0.89, 0.86, 0.88]),
                      acc("add", [0.93, 0.95, 0.97, 0.94, 0.96]))  # fmt: skip
    assert rule_c19([tie, win], FLOOR, MARGIN).verdict == SUPPORTED
    assert rule_c19([tie, lose], FLOOR, MARGIN).verdict == NOT_SUPPORTED
    low = Comparison({"task.name": "cell2d"}, acc("concat", [0.5] * 5), acc("add", [0.5] * 5))
    assert rule_c19([low], FLOOR, MARGIN).verdict == TOO_SMALL


def _kaz(task: str, taus: list[float]) -> dict:
    from pelab.study.stats import t_interval

    mean, lo, hi = t_interval(taus) if len(taus) >= 2 else (math.nan, math.nan, math.nan)
    return {"task": task, "arms": [("none", 0.9), ("t5", 0.8)], "tau": mean, "lo": lo, "hi": hi,
            "seeds": len(taus), "size": "10"}  # fmt: skip


def test_kazemnejad_outcome_needs_taus_interval_on_every_task() -> None:
    up, down = _kaz("dsort", [0.6, 0.8, 0.7, 0.9, 0.6]), _kaz("addition", [-0.4, -0.6, -0.5, -0.3, -0.5])
    wide = _kaz("count", [0.8, -0.6, 0.4])  # mean > 0, interval spans 0: an order of means is not a result
    few = {"task": "copy", "arms": [("none", 0.9)], "tau": math.nan, "lo": math.nan, "hi": math.nan, "seeds": 0,
           "size": "10"}  # fmt: skip
    assert kazemnejad_outcome([up, few])[0] == CONSISTENT
    assert "not read" in kazemnejad_outcome([up, few])[1] and "copy (1 learned)" in kazemnejad_outcome([up, few])[1]
    assert kazemnejad_outcome([down])[0] == DIFFERS
    # τ's intervals exist and do not decide: inconclusive, not "not tested"
    assert kazemnejad_outcome([up, down])[0] == UNDECIDED
    assert kazemnejad_outcome([up, wide])[0] == UNDECIDED
    assert kazemnejad_outcome([few])[0] == UNTESTED  # runs, but no task could be read
    assert kazemnejad_outcome([])[0] == "not run"  # nothing ran (quick): "not run", never "not tested"
    assert "τ = +0.72 [" in kazemnejad_outcome([up])[1] and "over 5 seeds" in kazemnejad_outcome([up])[1]
    # what the criterion covers: which tasks, which schemes, how many seeds
    assert kazemnejad_outcome([up])[1].startswith("τ covers 1 decoder task(s) (dsort), the schemes that learned at the "
                                                  "training length (none, t5; ")  # fmt: skip
    assert "5–5 seeds a task" in kazemnejad_outcome([up])[1]


def test_kazemnejad_reads_no_task_where_no_arm_extrapolates() -> None:
    # A positive τ among arms none of which beats a model right only where it trained is an order of failures
    # (dreverse in full): left unread and said so; with it the only task read, the row is not tested.
    up = _kaz("dsort", [0.6, 0.8, 0.7, 0.9, 0.6])
    failed = dict(_kaz("dreverse", [0.5, 0.4, 0.6, 0.5, 0.5]), extrapolates=False, reference=0.23)
    down = _kaz("addition", [-0.4, -0.6, -0.5, -0.3, -0.5])
    outcome, text = kazemnejad_outcome([up, failed])
    assert outcome == CONSISTENT and "not read (no arm extrapolates" in text
    assert "dreverse (τ = +0.50; reference 23%)" in text
    assert kazemnejad_outcome([failed])[0] == UNTESTED
    # An unread task cannot turn a difference elsewhere into "not tested" either.
    assert kazemnejad_outcome([down, failed])[0] == DIFFERS


def test_per_seed_tau_against_scipy() -> None:
    """One τ per seed, from the published tiers against that seed's accuracies (an arm order matching the tiers
    exactly gives τ = 1, the reverse −1); a seed some arm lacks is left out."""
    acc = {"none": {0: 0.9, 1: 0.1, 2: 0.5}, "t5": {0: 0.8, 1: 0.2, 2: 0.6}, "alibi": {0: 0.7, 1: 0.3},
           "rotary": {0: 0.6, 1: 0.4, 2: 0.9}, "learned": {0: 0.5, 1: 0.5, 2: 0.1}}  # fmt: skip
    taus = per_seed_tau(acc)
    assert len(taus) == 2 and taus[0] == pytest.approx(1.0)  # seed 2 lacks alibi
    # seed 1: accuracies rise against the tiers; learned ties none of them, tiers tie nothing: τ-b by hand
    from scipy import stats as st

    tiers = {"alibi": -2, "learned": -4, "none": 0, "rotary": -3, "t5": -1}
    order = sorted(acc)
    assert taus[1] == st.kendalltau([tiers[s] for s in order], [acc[s][1] for s in order]).statistic
    assert taus[1] == pytest.approx(-1.0)


def test_a_row_beside_its_anchor_is_not_counted_as_a_published_result() -> None:
    """Haviv et al. compared NoPE with learned positions: that row is the anchor; C18's comparison against the
    best scheme run here is shown beside it and must not count the same paper twice (nor stand in for it)."""
    from pelab.report.published import BESIDE, tally

    rows = [
        ["Haviv et al. 2022 (causal)", "", "", CONSISTENT, ""],
        [f"Haviv et al. 2022 (causal), {BESIDE}", "", "", DIFFERS, ""],
        ["Vaswani et al. 2017", "", "", DIFFERS, ""],
        ["Kazemnejad et al. 2023", "", "", CONSISTENT, ""],
        ["Wang & Chen 2020", "", "", "not run", ""],
    ]
    counts, counted = tally(rows)
    assert (counts[CONSISTENT], counts[DIFFERS], counts["not run"], len(counted)) == (2, 1, 1, 4)


def test_the_masked_key_names_a_nope_model_that_did_not_learn_without_quoting_it() -> None:
    from pelab.report.claims.c18_causal_nope import gap_text, rule_c18

    _, _, masked = rule_c18([], [comp(lm("rotary", GOOD), lm("nope", UNLEARNED))], FLOOR, MARGIN)
    text = gap_text(masked, False, FLOOR)
    assert text.startswith("NoPE did not learn") and "rotary 2.504 bits/byte" in text
    assert "4.4" not in text  # NoPE's own bits per byte are not quoted
    assert "NoPE 4.422" in gap_text(masked, False)  # without a floor (the tables), its numbers are shown


def test_kazemnejad_arms_are_one_per_scheme_as_the_paper_ran_them() -> None:
    # learned + concat_split beside learned + add must not be pooled by scheme (one would shadow the other seed
    # by seed): the absolute tables count added, the relative schemes and NoPE with no input combiner.
    import pandas as pd

    from pelab.report.published import kazemnejad_arms

    arms = [("none", "none"), ("t5", "none"), ("rotary", "none"), ("learned", "add"), ("learned", "concat_split"),
            ("sinusoidal", "add"), ("sinusoidal", "concat_split"), ("rotary", "add"), ("sincos2d", "add")]  # fmt: skip
    frame = pd.DataFrame([{"model.position.scheme": s, "model.combine": c} for s, c in arms])
    kept = list(zip(*(kazemnejad_arms(frame)[k] for k in ("model.position.scheme", "model.combine")), strict=True))
    assert kept == [("none", "none"), ("t5", "none"), ("rotary", "none"), ("learned", "add"), ("sinusoidal", "add")]


def test_a_published_row_held_back_by_the_seed_count_says_so() -> None:
    # quick's Vaswani row: 3 seeds, the interval wholly outside the margin; only the 5-seed rule keeps it from
    # "differs", and the reason column says that, not "the interval does not decide"; an interval exists, so the
    # outcome is "inconclusive" with its resolution, never "not tested"
    from pelab.report.published import _why
    from pelab.rules import family

    three = comp(lm("learned", FAR[:3]), lm("sinusoidal", GOOD[:3]))
    fam = family([three], ("bpb",), FLOOR, MARGIN, kind="equivalent", combine="all")
    outcome, why = _why(fam, "a byte model, not a translation model")
    assert outcome == UNDECIDED and why.startswith("a byte model, not a translation model; outside the margin, but "
                                                   "equivalence needs ≥ 5 seeds (3 here); within ±")  # fmt: skip
    assert why.endswith("(a margin decides only on ≥ 5 seeds; 3 here)")  # its resolution
    assert _why(None) == ["not run", "not run in this study (the full preset runs it)"]


def test_published_outcomes_never_say_agree_or_disagree_and_haviv_says_which_arm_is_ahead() -> None:
    """SCIENCE.md, "Published results in their setting": a result measured in another setting is "consistent" or
    "differs at this budget (not comparable)"; Haviv's rows say which way it runs, which arm is ahead."""
    from pelab.report.published import OUTCOMES, _why
    from pelab.rules import family

    assert not any(o in ("agree", "disagree") or o.startswith(("agree", "disagree")) for o in OUTCOMES)
    close = family([comp(lm("nope", CLOSE), lm("learned", GOOD))], ("bpb",), FLOOR, MARGIN, kind="not_worse",
                   combine="all")  # fmt: skip
    outcome, why = _why(close, "small models", ahead=True)
    assert outcome in OUTCOMES and why.startswith("small models; ")
    assert any(w in why for w in ("nope ahead of learned", "learned ahead of nope", "neither nope nor learned ahead"))
    far = family([comp(lm("nope", FAR), lm("learned", GOOD))], ("bpb",), FLOOR, MARGIN, kind="not_worse", combine="all")
    outcome, why = _why(far, "small models", ahead=True)
    assert outcome == DIFFERS and "learned ahead of nope" in why


def test_a_published_cell_shows_first_the_comparisons_that_decided_its_outcome() -> None:
    # full's Vaswani row (2026-11-29): "differs" beside three inconclusive intervals, the deciding comparison fifth
    # and out of the cell; the cell must open with the comparison whose verdict is the row's
    from pelab.report.published import _family_cell, _why
    from pelab.rules import family

    noisy = [comp(lm(f"noisy{i}", NOISY), lm("sinusoidal", GOOD)) for i in range(3)]
    far = comp(lm("far", FAR), lm("sinusoidal", GOOD))
    fam = family([*noisy, far], ("bpb",), FLOOR, MARGIN, kind="equivalent", combine="all")
    assert [r.verdict for r in fam.rows] == [INCONCLUSIVE] * 3 + [NOT_SUPPORTED]
    assert _why(fam)[0] == DIFFERS
    cell = _family_cell(fam)
    assert cell.startswith("far vs sinusoidal") and cell.count("vs sinusoidal (") == 3


def test_the_vaswani_setting_states_the_steps_its_runs_trained() -> None:
    # full's report (2026-11-29) called its 4,000-step language models "trained for a few hundred steps", a phrase
    # written for quick's 150; the row reads the steps off the runs it compares
    from pelab.report.published import _steps

    assert _steps(pd.DataFrame({"train.steps": [4000, 4000]})) == "4,000"
    assert _steps(pd.DataFrame({"train.steps": [150, 4000, 600]})) == "150–4,000"
    assert _steps(pd.DataFrame({"task.name": ["charlm"]})) == "a few thousand or fewer"
