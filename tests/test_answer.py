"""The answer where it lives (``pelab.report.answer``): C6's language-model rows as the gap against width, the gap
along training from each run's validation curve, and the sentences before the picture, checked against hand-made
rows and curves whose numbers are computed here independently."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from pelab.report import answer
from pelab.report.answer import (
    along_training,
    answer_facts,
    cost_sentence,
    gap_figure,
    gap_points,
    lm_sentences,
    pairing_sentence,
    percent,
    scale_sentence,
    unread_cells,
)
from pelab.rules import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED


def lm_row(family: str, d: int, scheme: str, lo: float, hi: float, verdict: str, task: str = "charlm") -> dict:
    """A claims.json row of C6 between language models (A concatenates, B adds), on log-ratios of bits per byte."""
    a = f"{task}-{family[:12]}-{d}-{scheme}-a"
    b = f"{task}-{family[:12]}-{d}-{scheme}-b"
    return {
        "family": family, "where": {"task.name": task, "model.position.scheme": scheme, "model.d": d},
        "a": "concat", "b": "add", "a_runs": [f"{a}{s}" for s in range(3)], "b_runs": [f"{b}{s}" for s in range(3)],
        "metric": "bpb", "diff": (lo + hi) / 2, "lo": lo, "hi": hi, "level": 0.95, "seeds": 3, "verdict": verdict,
    }  # fmt: skip


def claims_of(rows: list[dict]) -> list[Any]:
    return [SimpleNamespace(id="C6", rows=rows)]


def frame_of(rows: list[dict]) -> pd.DataFrame:
    ids = [(r, row["where"].get("model.d", 0)) for row in rows for r in (*row["a_runs"], *row["b_runs"])]
    return pd.DataFrame({"run_id": [i for i, _ in ids], "model.d": [d for _, d in ids]})


def first_screen_words(where: str, sentences: list[str]) -> int:
    """The words of the first screen up to its figure, as the templates lay it out: heading, question, lead, the
    answer's sentences (issue 38: at most 150)."""
    heading = "What this run says Why are positional encodings added to token embeddings rather than concatenated? "
    return len((heading + f"In language models on natural text ({where}; C6): " + " ".join(sentences)).split())


def test_percent_reads_a_log_ratio() -> None:
    assert percent(math.log(1.05)) == pytest.approx(5.0)
    assert percent(math.log(0.5)) == pytest.approx(-50.0)
    assert percent(0.0) == 0.0 and math.isnan(percent(math.nan))


def test_points_take_the_language_model_rows_and_the_other_direction() -> None:
    rows = [
        lm_row("concat_split vs add", 32, "learned", 0.01, 0.03, INCONCLUSIVE),
        lm_row("concat_split vs add", 64, "learned", -0.005, 0.005, NOT_SUPPORTED),
        lm_row("concat_wide vs add at its width", 32, "learned", -0.05, -0.03, SUPPORTED),
        lm_row("concat_split vs add", 64, "learned", 0.1, 0.2, SUPPORTED, task="mlm"),
        {**lm_row("concat_split vs add", 16, "learned", 0.1, 0.2, SUPPORTED), "where": {"task.name": "reverse"}},
    ]
    # the other direction of the first row: add better beyond its interval
    rows.append({**rows[0], "family": "add vs concat_split", "a_runs": rows[0]["b_runs"],
                 "b_runs": rows[0]["a_runs"], "verdict": SUPPORTED})  # fmt: skip
    points = gap_points(claims_of(rows), frame_of(rows))
    assert [(p.kind, p.pairing, p.d, p.reading) for p in points] == [
        ("causal", "concat_split vs add", 32, "add better"),
        ("causal", "concat_split vs add", 64, "equal within the margin"),
        ("causal", "concat_wide vs add at its width", 32, "concat better"),
        ("masked", "concat_split vs add", 64, "concat better"),
    ]
    assert all(p.decided for p in points)


def test_a_cell_with_an_arm_below_the_floor_is_counted_as_no_verdict() -> None:
    """full's masked d=128 cells did not learn: their rows have no interval, are no point of the figure, and the
    sentence still counts them ("no verdict in 1 of 3"), never "of 2" as if the cell had not been designed."""
    rows = [
        lm_row("concat_split vs add", 32, "learned", math.log(0.97), math.log(0.99), SUPPORTED),
        lm_row("concat_split vs add", 64, "learned", math.log(0.99), math.log(1.01), NOT_SUPPORTED),
        {**lm_row("concat_split vs add", 128, "learned", 0, 0, INCONCLUSIVE, task="mlm"), "diff": None, "lo": None,
         "hi": None, "verdict": "budget too small: arms did not learn"},
        {**lm_row("concat_wide vs add at its width", 128, "learned", 0, 0, INCONCLUSIVE), "diff": None},
    ]  # fmt: skip
    claims, frame = claims_of(rows), frame_of(rows)
    points = gap_points(claims, frame)
    assert [p.d for p in points] == [32, 64]
    unread = unread_cells(claims, "concat_split vs add", frame)
    assert unread == [("masked", 128, "learned")]
    assert pairing_sentence(points, "concat_split vs add", unread) == (
        "Same width (concat_split against add), 3 cells: concatenating better in 1 (by at least 1.0%); equal within "
        "±2% in 1; no verdict in 1 (did not learn) (causal and masked, d=32, 64 and "
        "128, learned positions; bits per byte)."
    )
    wide = unread_cells(claims, "concat_wide vs add at its width", frame)
    assert pairing_sentence(points, "concat_wide vs add at its width", wide) == (
        "Wider (concat_wide against add at its width), 1 cell: no verdict in 1 (did not learn) (causal, d=128, learned "
        "positions; bits per byte)."
    )


def test_the_sentence_counts_each_reading_with_its_least_established_size() -> None:
    rows = [
        lm_row("concat_split vs add", 32, "learned", math.log(1.02), math.log(1.06), INCONCLUSIVE),
        lm_row("concat_split vs add", 64, "learned", math.log(1.01), math.log(1.03), INCONCLUSIVE),
        lm_row("concat_split vs add", 32, "sinusoidal", math.log(0.99), math.log(1.01), NOT_SUPPORTED),
        lm_row("concat_split vs add", 64, "sinusoidal", math.log(0.97), math.log(1.03), INCONCLUSIVE),
    ]
    for r in rows[:2]:
        rows.append({**r, "family": "add vs concat_split", "a_runs": r["b_runs"], "b_runs": r["a_runs"],
                     "verdict": SUPPORTED})  # fmt: skip
    points = gap_points(claims_of(rows), frame_of(rows))
    text = pairing_sentence(points, "concat_split vs add")
    assert text == (
        "Same width (concat_split against add), 4 cells: adding better in 2 (by at least 1.0–2.0%); equal within ±2% "
        "in 1; undecided in 1 (causal, d=32 and 64, learned and sinusoidal positions; bits per byte)."
    )
    assert pairing_sentence(points, "concat_wide vs add at its width") is None
    # rows read as exploratory (a grid not marked confirmatory, or rules changed since its runs) say so in the sentence
    for r in rows:
        r["reading"] = "confirmatory"
    confirmed = pairing_sentence(gap_points(claims_of(rows), frame_of(rows)), "concat_split vs add")
    assert confirmed == text and "xploratory" not in confirmed
    rows[0]["reading"] = "exploratory"
    tagged = pairing_sentence(gap_points(claims_of(rows), frame_of(rows)), "concat_split vs add")
    assert tagged == text + " Exploratory in 1 of 4: see the protocol line."
    for r in rows:
        r["reading"] = "exploratory"
    assert pairing_sentence(gap_points(claims_of(rows), frame_of(rows)), "concat_split vs add") == (
        text + " Exploratory: see the protocol line."
    )


def curve(step_losses: list[float], batch: int = 32, length: int = 64) -> list[dict[str, float]]:
    return [{"step": 10 * (i + 1), "loss": 0.0, "acc": 0.0, "val_loss": v} for i, v in enumerate(step_losses)]


def stored(run_id: str, seed: int, losses: list[float], d: int = 32, combine: str = "add", params: int = 1000,
           flops: int = 2000, scheme: str = "learned") -> dict:  # fmt: skip
    return {
        "run_id": run_id, "status": "done", "curve": curve(losses), "params": params, "flops_per_token": flops,
        "config": {"seed": seed, "task": {"name": "charlm", "length": 64},
                   "train": {"batch_size": 32, "steps": 10 * len(losses), "lr": 0.01},
                   "model": {"d": d, "combine": combine, "n_layers": 2, "position": {"scheme": scheme}}},
    }  # fmt: skip


def test_along_training_is_the_mean_log_ratio_with_its_t_band() -> None:
    rng = np.random.default_rng(0)
    a = rng.uniform(1.5, 2.5, size=(4, 6))
    b = rng.uniform(1.5, 2.5, size=(4, 6))
    rows = [stored(f"a{s}", s, list(a[s])) for s in range(4)] + [stored(f"b{s}", s, list(b[s])) for s in range(4)]
    point = answer.GapPoint("causal", "concat_split vs add", "learned", 32, 0, 0, 0, INCONCLUSIVE, False, 4, 0.95,
                            [f"a{s}" for s in range(4)], [f"b{s}" for s in range(4)])  # fmt: skip
    got = along_training(point, rows)
    assert got is not None and got.seeds == 4
    logs = np.log(a / b)
    half = st.t.ppf(0.975, 3) * logs.std(axis=0, ddof=1) / 2
    assert np.allclose(got.mean, logs.mean(axis=0)) and np.allclose(got.hi, logs.mean(axis=0) + half)
    assert got.tokens == tuple(10.0 * (i + 1) * 32 * 64 for i in range(6))
    # runs stored without a curve: no band
    assert along_training(point, [{**r, "curve": []} for r in rows]) is None
    # runs whose curves carry no validation loss (trained before curves had it): no band
    for r in rows:
        for p in r["curve"]:
            p.pop("val_loss")
    assert along_training(point, rows) is None


def test_facts_and_the_sentences_before_the_picture_stay_short(tmp_path: Path) -> None:
    fam = "concat_split vs add"
    rows = [lm_row(fam, d, s, -0.004, 0.004, NOT_SUPPORTED) for d in (32, 64) for s in ("learned", "sinusoidal")]
    rows += [lm_row("concat_wide vs add at its width", d, s, 0.01, 0.05, INCONCLUSIVE)
             for d in (32, 64) for s in ("learned", "sinusoidal")]  # fmt: skip
    runs = []
    for r in rows:
        d, wide, scheme = r["where"]["model.d"], "wide" in r["family"], r["where"]["model.position.scheme"]
        for i, run_id in enumerate(r["a_runs"]):
            size = (1300 if wide else 990) if scheme == "learned" else (1350 if wide else 970)  # tables cost apart
            runs.append(stored(run_id, i, [3.0, 2.5, 2.4, 2.35, 2.33, 2.32], d, "concat_wide" if wide else
                               "concat_split", size, 2 * size, scheme))  # fmt: skip
        for i, run_id in enumerate(r["b_runs"]):  # add at concat_wide's width (d + d/4) for the wide rows
            width, size = (d + d // 4, 1300) if wide else (d, 1000)
            runs.append(stored(run_id, i, [3.0, 2.5, 2.4, 2.35, 2.33, 2.32], width, "add", size, 2 * size, scheme))
    study = SimpleNamespace(tuned=set())  # every arm at one rate
    ctx = SimpleNamespace(rows=runs, frame=frame_of(rows), figures=tmp_path, display=True, study=study)
    points = gap_points(claims_of(rows), ctx.frame)
    facts = answer_facts(ctx, points)
    assert facts is not None
    # one ratio per (task, width, scheme): a learned and a sinusoidal arm cost differently, and both count
    assert facts.split_params == {(t, d, s): r for d in (32, 64) for t, s, r in
                                  [("charlm", "learned", 0.99), ("charlm", "sinusoidal", 0.97)]}  # fmt: skip
    # concat_wide against add at the same base width: the add arm at d (from the same-width rows)
    assert facts.wide_cost == {(t, d, s): (r, r) for d in (32, 64) for t, s, r in
                               [("charlm", "learned", 1.3), ("charlm", "sinusoidal", 1.35)]}  # fmt: skip
    # add at concat_wide's width (40, 80) counts under its base width; tuned only where every run chose its rate
    assert facts.width_rates == {32: (0.01,), 64: (0.01,)} and facts.rates == (0.01,) and not facts.tuned
    every = SimpleNamespace(tuned={r["run_id"] for r in runs})
    assert answer_facts(SimpleNamespace(**{**vars(ctx), "study": every}), points).tuned
    some = SimpleNamespace(tuned={r["run_id"] for r in runs[1:]})
    assert not answer_facts(SimpleNamespace(**{**vars(ctx), "study": some}), points).tuned
    assert facts.last_fifth["causal"] == pytest.approx(1 - 2.32 / 2.33)
    assert cost_sentence(facts) == (
        "Cost (C5): concat_split 1.0–3.0% fewer parameters; concat_wide 30–35% more parameters, 30–35% more FLOPs per "
        "token."
    )
    assert scale_sentence(facts) == (
        "Scale: 2 layers, 970–1,350 parameters, 0.12M bytes each, 3 paired seeds; the last fifth of training still cut "
        "validation loss by 0.4%; one learning rate (0.01) for every arm."
    )
    where, sentences = lm_sentences(ctx, claims_of(rows))
    # both pairings read the same cells: said once, in the lead, and in neither sentence
    assert where == "4 cells each: causal, d=32 and 64, learned and sinusoidal positions; bits per byte"
    assert sentences[0].startswith("Same width (concat_split against add): ")
    assert "positions" not in sentences[0]
    words = first_screen_words(where, sentences)
    assert len(sentences) == 4 and words <= 150, words  # the first screen up to its figure: at most 150 words
    # pairings over different cells: no shared lead, each sentence says its own
    narrow = [r for r in rows if not ("wide" in r["family"] and r["where"]["model.d"] == 64)]
    ctx_narrow = SimpleNamespace(rows=runs, frame=frame_of(narrow), figures=tmp_path, display=True, study=study)
    where, sentences = lm_sentences(ctx_narrow, claims_of(narrow))
    assert where == ""
    assert sentences[0].endswith("(causal, d=32 and 64, learned and sinusoidal positions; bits per byte).")
    assert sentences[1].endswith("(causal, d=32, learned and sinusoidal positions; bits per byte).")
    figure = gap_figure(ctx, claims_of(rows))
    assert figure is not None and figure.path.exists()


def test_the_sentences_and_overview_beside_the_answer_leave_its_rows_to_it() -> None:
    """C6's language-model rows are the answer's (its sentences and picture); the sentences and the forest beside it
    read C6's other rows, and say nothing of C6 where it has no other."""
    from pelab.report.first_screen import answer_sentences, overview_rows

    lm = [lm_row("concat_split vs add", 32, "learned", -0.01, 0.01, NOT_SUPPORTED)]
    synthetic = {**lm_row("concat_split vs add", 16, "learned", 0.01, 0.03, SUPPORTED),
                 "where": {"task.name": "sort", "model.d": 16, "model.position.scheme": "learned"}, "metric": "acc",
                 "resolution": {"lo": 0.01, "hi": 0.03, "within": 0.03}}  # fmt: skip
    only_lm = [SimpleNamespace(id="C6", rows=lm, verdict=NOT_SUPPORTED, halves={})]
    assert answer_sentences(only_lm) == [] and overview_rows(only_lm) == []
    both = [SimpleNamespace(id="C6", rows=[*lm, synthetic], verdict=SUPPORTED, halves={})]
    said = answer_sentences(both)
    assert said[0]["text"].startswith("At the same width, concatenating beat adding on 1 of 1 comparisons")
    assert [r for *_, r in overview_rows(both)] == [synthetic]


def test_the_scale_says_one_rate_per_width_where_each_width_had_one() -> None:
    """full's second design trains every arm of a width at one rate, 3e-3 at d=32 and 64 and 1e-3 at d=128: the scale
    says so, never "learning rates 0.001, 0.003", which reads as a grid each arm chose from."""
    facts = answer.Facts(params=(1000, 2000), tokens=(4_096_000, 4_096_000), seeds=(5, 5), layers=(2,),
                         wide_cost={}, split_params={}, last_fifth={"causal": 0.014, "masked": 0.031},
                         width_rates={32: (0.003,), 64: (0.003,), 128: (0.001,)})  # fmt: skip
    assert scale_sentence(facts) == (
        "Scale: 2 layers, 1,000–2,000 parameters, 4.1M bytes each, 5 paired seeds; the last fifth of training still "
        "cut validation loss by 1.4% (causal) and 3.1% (masked); one rate per width for every arm (0.003 at d=32 and "
        "64, 0.001 at d=128)."
    )
    tuned = dataclasses.replace(facts, width_rates={32: (0.003, 0.01), 64: (0.003,)})
    assert scale_sentence(tuned).endswith("; learning rates 0.003, 0.01.")
    chose = dataclasses.replace(facts, tuned=True)  # full's second design: each arm kept its best of two rates
    assert scale_sentence(chose).endswith("; each arm's learning rate chosen on validation.")


def test_full_24_cells_fit_the_first_screen_and_the_caption_names_the_cells_with_no_verdict(tmp_path: Path) -> None:
    """full's answer: causal and masked, d=32, 64 and 128, learned and sinusoidal, both pairings (24 cells), with the
    first design's mix of readings (issue 38: 5 better, 5 equal, 11 undecided, 3 that did not learn), every arm at its
    best rate on validation. Up to its figure the first screen stays within 150 words; the cells with no verdict are
    counted there and named under the figure."""
    split, wide = "concat_split vs add", "concat_wide vs add at its width"
    readings = {split: ["cat", "cat", "eq", "eq", "eq", *["open"] * 6, "none"],
                wide: ["cat", "cat", "cat", "eq", "eq", *["open"] * 5, "none", "none"]}  # fmt: skip
    bounds = {"cat": (math.log(0.95), math.log(0.976), SUPPORTED), "eq": (-0.01, 0.01, NOT_SUPPORTED),
              "open": (-0.2, 0.3, INCONCLUSIVE)}  # fmt: skip
    cells = [(t, d, s) for t in ("charlm", "mlm") for d in (32, 64, 128) for s in ("learned", "sinusoidal")]
    rows, runs = [], []
    for fam, kinds in readings.items():
        for (task, d, scheme), k in zip(cells, kinds, strict=True):
            r = lm_row(fam, d, scheme, *(bounds[k] if k != "none" else (0, 0, INCONCLUSIVE)), task=task)
            if k == "none":
                r |= {"diff": None, "lo": None, "hi": None, "verdict": "budget too small: arms did not learn"}
            rows.append(r)
            combine = "concat_wide" if fam == wide else "concat_split"
            for i, run_id in enumerate(r["a_runs"]):
                runs.append(stored(run_id, i, [3.0, 2.5, 2.4, 2.3], d, combine, 1400 * d if fam == wide else 980 * d,
                                   3000 * d, scheme))  # fmt: skip
            for i, run_id in enumerate(r["b_runs"]):
                runs.append(stored(run_id, i, [3.0, 2.5, 2.4, 2.3], d, "add", 1000 * d, 2000 * d, scheme))
            for x in runs[-6:]:
                x["config"]["task"] |= {"name": task, "length": 32}
    ctx = SimpleNamespace(rows=runs, frame=frame_of(rows), figures=tmp_path, display=True,
                          study=SimpleNamespace(tuned={r["run_id"] for r in runs}))  # fmt: skip
    where, sentences = lm_sentences(ctx, claims_of(rows))
    assert where == (
        "12 cells each: causal and masked, d=32, 64 and 128, learned and sinusoidal positions; bits per byte"
    )
    assert sentences[0] == ("Same width (concat_split against add): concatenating better in 2 (by at least 2.4%); "
                            "equal within ±2% in 3; undecided in 6; no verdict in 1 (did not learn).")  # fmt: skip
    assert sentences[1].startswith("Wider (concat_wide against add at its width): concatenating better in 3 ")
    assert sentences[3].endswith("each arm's learning rate chosen on validation.")
    words = first_screen_words(where, sentences)
    assert words <= 150, words
    figure = gap_figure(ctx, claims_of(rows))
    assert figure is not None
    assert figure.caption.endswith(
        " Byte-level models with 32-byte contexts. No point where an arm did not learn (held-out loss above 80% of "
        "the context-free model's): concat_split vs add (same width): masked d=128 sinusoidal; concat_wide vs add at "
        "its width: masked d=128 learned and sinusoidal."
    )


def scored(run_id: str, seed: int, bpb: float) -> dict:
    return {"run_id": run_id, "status": "done", "metrics": {"bpb": bpb}, "config": {"seed": seed}}


def test_an_undecided_point_says_how_far_its_seeds_disagree_and_what_fitting_the_margin_takes() -> None:
    """The spread is read from the runs (paired by seed; a seed without its pair is left out), the seeds needed from
    the t quantile at the row's level: the fewest n whose half-width fits log(1.02), checked at n and n − 1."""
    a = [2.00, 2.10, 2.40, 1.95, 2.05, 9.0]
    b = [2.00, 2.00, 2.00, 2.00, 2.00]  # seed 5 has no add run
    rows = [scored(f"a{s}", s, v) for s, v in enumerate(a)] + [scored(f"b{s}", s, v) for s, v in enumerate(b)]
    point = answer.GapPoint("masked", "concat_split vs add", "learned", 32, 0, -0.1, 0.2, INCONCLUSIVE, False, 5,
                            0.95, [f"a{s}" for s in range(6)], [f"b{s}" for s in range(5)])  # fmt: skip
    sd = float(np.std(np.log(np.array(a[:5]) / np.array(b)), ddof=1))
    assert answer.seed_spread(point, rows) == pytest.approx(sd)
    n = answer.seeds_to_fit(sd, 0.95)
    margin = math.log(1.02)
    assert n is not None and st.t.ppf(0.975, n - 1) * sd / math.sqrt(n) <= margin
    assert st.t.ppf(0.975, n - 2) * sd / math.sqrt(n - 1) > margin
    assert answer.seeds_to_fit(sd, 0.995) > n  # a stricter level needs more
    assert answer.seeds_to_fit(1e-6, 0.95) == 2 and answer.seeds_to_fit(5.0, 0.95) is None
    # a decided masked point beside it, with seeds that agree; a causal point decided alone adds nothing
    tight = [scored(f"c{s}", s, 2.0 + 0.01 * s) for s in range(5)] + [scored(f"d{s}", s, 2.0) for s in range(5)]
    done = dataclasses.replace(point, verdict=NOT_SUPPORTED, a_runs=[f"c{s}" for s in range(5)],
                               b_runs=[f"d{s}" for s in range(5)])  # fmt: skip
    causal = dataclasses.replace(done, kind="causal")
    tight_sd = float(np.std(np.log([1 + 0.005 * s for s in range(5)]), ddof=1))
    got = answer.undecided_sentence([point, done, causal], rows + tight)
    assert got == (
        f" Undecided (hollow) points: masked, 1: their seeds disagree (the per-seed gap's standard deviation is "
        f"{100 * sd:.1f}%; the decided ones' {100 * tight_sd:.1f}%), so an interval at the level each was read at "
        f"would fit inside ±2% only from about {n} seeds (a rough floor: it takes this spread as the true one and "
        f"the true gap as zero)."
    )
    assert answer.undecided_sentence([done, causal], rows + tight) == ""
    # runs stored without the metric: nothing to say
    assert answer.undecided_sentence([point], [{**r, "metrics": {}} for r in rows]) == ""


def test_a_sequential_row_is_sized_at_the_nominal_level_its_interval_was_read_at() -> None:
    """Under a sequential design a row's interval is read at its last look's nominal level, stricter than the 95% it
    records; the seeds it would need are counted at that level, so the floor is not understated."""
    from pelab.study.sequential import Looks

    looks = Looks((5, 10), 10, "pocock")
    row = lm_row("concat_split vs add", 32, "learned", -0.1, 0.2, INCONCLUSIVE, task="mlm") | {"looks": looks.record()}
    nominal = looks.nominal_level(0.95)
    (point,) = gap_points(claims_of([row]), frame_of([row]))
    assert 0.95 < nominal < 1 and point.read_level == pytest.approx(nominal)
    assert dataclasses.replace(point, looks=None).read_level == 0.95
    rows = [scored(r, i, 2.0 + 0.1 * (i % 3)) for i, r in enumerate(row["a_runs"])]
    rows += [scored(r, i, 2.0) for i, r in enumerate(row["b_runs"])]
    sd = answer.seed_spread(point, rows)
    assert sd is not None
    n = answer.seeds_to_fit(sd, nominal)
    assert n is not None and n > answer.seeds_to_fit(sd, 0.95)
    assert f"from about {n} seeds" in answer.undecided_sentence([point], rows)
