"""The report's first screen and its forest plots, checked against hand-made claims.json rows.

What is drawn is read back from the matplotlib figure itself (caught before it is saved) and compared with the
rows' intervals computed here by hand; the sentences are checked for their count, numbers and links; tables for
short cells whose full text is kept in the notes.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib.pyplot as plt
import pytest

from pelab.report import forest
from pelab.report.claim_lines import MAX_WORDS, claim_line
from pelab.report.compact import WORDS, compact, measured_head, published
from pelab.report.first_screen import answer_sentences, overview_rows
from pelab.rules import INCONCLUSIVE, LOSS, NOT_RUN, NOT_SUPPORTED, SUPPORTED, TOO_SMALL, UNCONFIRMED, margin_for

FLOOR, MARGIN = 0.8, 0.01


def row(family: str, a: str, b: str, lo: float, hi: float, verdict: str, metric: str = "acc", **kw: Any) -> dict:
    """A claims.json row; the resolution is oriented (positive: A better) as ``resolution.resolve`` makes it."""
    diff = (lo + hi) / 2
    olo, ohi = (lo, hi) if metric == "acc" else (-hi, -lo)
    within = max(abs(olo), abs(ohi))
    return {
        "family": family, "a": a, "b": b, "a_runs": kw.pop("a_runs", [f"{a}-{lo}"]),
        "b_runs": kw.pop("b_runs", [f"{b}-{lo}"]), "a_acc": kw.pop("a_acc", 0.95), "b_acc": kw.pop("b_acc", 0.9),
        "where": kw.pop("where", {"task.name": "reverse", "model.d": 32, "model.position.scheme": "learned"}),
        "metric": metric, "diff": diff, "lo": lo, "hi": hi, "level": 0.95, "seeds": 5, "verdict": verdict,
        "resolution": {"lo": olo, "hi": ohi, "within": within, "level": 0.95, "unit": metric,
                       "within_text": "", "text": f"within ±{within}"},
        **kw,
    }  # fmt: skip


def said(answer: dict) -> str:
    """An answer's sentence and its details, as one text: what a reader of the first screen reads."""
    return " ".join([answer["text"], *answer["details"]])


def claim(cid: str, verdict: str, rows: list[dict], title: str = "a claim", key: str = "") -> SimpleNamespace:
    return SimpleNamespace(id=cid, verdict=verdict, rows=rows, title=title, key=key, halves={}, resolution=None,
                           open=verdict == INCONCLUSIVE)  # fmt: skip


def caught(monkeypatch: pytest.MonkeyPatch) -> list[plt.Figure]:
    """Figures forest_plot draws, kept instead of saved."""
    figs: list[plt.Figure] = []
    monkeypatch.setattr(forest, "save", lambda fig, path, tight=True: figs.append(fig) or Path(path))
    return figs


def drawn(fig: plt.Figure) -> list[tuple[float, float, float]]:
    """(lo, hi, mid) of every interval on every axis, top to bottom, read from the figure's lines."""
    out = []
    for ax in fig.axes:
        bars = [ln for ln in ax.lines if len(ln.get_xdata()) == 2 and ln.get_ydata()[0] == ln.get_ydata()[1]]
        dots = {float(ln.get_ydata()[0]): float(ln.get_xdata()[0]) for ln in ax.lines if len(ln.get_xdata()) == 1}
        for bar in sorted(bars, key=lambda ln: ln.get_ydata()[0]):
            y = float(bar.get_ydata()[0])
            out.append((float(bar.get_xdata()[0]), float(bar.get_xdata()[1]), dots[y]))
    return out


def test_the_forest_draws_each_rows_interval_oriented_in_its_units(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        row("f", "concat_split", "add", 0.02, 0.10, SUPPORTED),
        row("f", "concat_split", "add", -0.05, 0.01, INCONCLUSIVE, a_acc=0.5),  # an arm below the floor
        row("f", "concat_split", "add", 0.10, 0.30, NOT_SUPPORTED, metric="loss"),  # A's loss higher: A worse
        {**row("f", "concat_split", "add", 0, 0, TOO_SMALL), "metric": None, "lo": None, "hi": None},
    ]
    ranking = {"family": "encoder reverse", "metric": "acc", "lo": 0.1, "hi": 0.2}  # C17's: not a comparison
    points = forest.points_from_rows("C6", [*rows, ranking], FLOOR, MARGIN)
    figs = caught(monkeypatch)
    shown = forest.forest_plot(Path("x.png"), points, "t")
    assert len(points) == 3 and forest.undrawn(rows) == 1
    # By hand: accuracy in pp as it is; held-out loss as 100 × its log-ratio, sign flipped (lower is better), on an
    # axis labelled in the percent each log-ratio stands for.
    expected = [(2.0, 10.0, 6.0), (-5.0, 1.0, -2.0), (-30.0, -10.0, -20.0)]
    got = drawn(figs[0])
    assert len(got) == 3
    for (lo, hi, mid), (glo, ghi, gmid) in zip(expected, got, strict=True):
        assert (glo, ghi, gmid) == pytest.approx((lo, hi, mid))
    assert [p.below_floor for p in shown] == [False, True, False]
    lm = row("f", "none", "rotary", -0.1, -0.05, INCONCLUSIVE, metric="bpb", a_acc=0.4, where={"task.name": "charlm"})
    assert not forest.below_floor(lm, FLOOR)  # a language model learns by loss: its accuracy says nothing here
    assert [p.verdict for p in shown] == [SUPPORTED, INCONCLUSIVE, NOT_SUPPORTED]
    # The margin each was read against: the study's for accuracy; for loss ±2% as a log-ratio, whatever B's value.
    assert [p.margin for p in shown] == pytest.approx([100 * MARGIN, 100 * MARGIN, 100 * margin_for(LOSS, 0.01)])
    assert [p.relative for p in shown] == [False, False, True]
    assert len(figs[0].axes) == 2  # one panel per unit
    loss_axis = next(ax for ax in figs[0].axes if "log-ratio" in ax.get_xlabel())
    assert loss_axis.xaxis.get_major_formatter()(-20.0, 0) == "−22%"  # 100·(exp(0.2) − 1): A's loss 1.22 times B's
    assert forest.percent_label(100 * math.log(1.5)) == "+50%" and forest.percent_label(-100 * math.log(1.5)) == "−50%"
    plt.close(figs[0])
    # With ``empty``, the row without an interval is shown too: a cross at 0 in a panel of its own, last.
    points = forest.points_from_rows("C6", rows, FLOOR, MARGIN, empty=True)
    shown = forest.forest_plot(Path("x.png"), points, "t")
    assert [p.panel for p in shown][-1] == forest.NO_INTERVAL and math.isnan(shown[-1].mid)
    crosses = [ln for ln in figs[1].axes[-1].lines if ln.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [0]
    plt.close(figs[1])


def test_the_overview_takes_each_add_against_concat_pair_once_with_concat_as_a() -> None:
    same = row("concat_split vs add", "concat_split", "add", 0.0, 0.1, INCONCLUSIVE, a_runs=["c"], b_runs=["a"])
    back = row("add vs concat_split", "add", "concat_split", -0.1, 0.0, INCONCLUSIVE, a_runs=["a"], b_runs=["c"])
    again = row("concat_split better", "concat_split", "add", 0.0, 0.1, INCONCLUSIVE, a_runs=["c"], b_runs=["a"])
    c9 = row("concat beats add", "concat_split", "add", 0.01, 0.2, SUPPORTED, a_runs=["m"], b_runs=["n"])
    claims = [claim("C2", INCONCLUSIVE, [again]), claim("C6", INCONCLUSIVE, [same, back]), claim("C9", SUPPORTED, [c9])]
    got = overview_rows(claims)
    assert [(cid, r["family"]) for cid, _, r in got] == [("C6", "concat_split vs add"), ("C9", "concat beats add")]
    assert all("concat" in r["a"] and r["b"].startswith("add") for _, _, r in got)


def test_at_most_five_sentences_each_with_a_number_and_its_claim() -> None:
    c6 = claim("C6", SUPPORTED, [
        row("concat_split vs add", "concat_split", "add", 0.02, 0.10, SUPPORTED, a_runs=["1"], b_runs=["2"]),
        row("concat_split vs add", "concat_split", "add", -0.031, 0.02, INCONCLUSIVE, a_runs=["3"], b_runs=["4"]),
        row("add vs concat_split", "add", "concat_split", -0.10, -0.02, NOT_SUPPORTED, a_runs=["2"], b_runs=["1"]),
        row("add vs concat_split", "add", "concat_split", -0.02, 0.031, INCONCLUSIVE, a_runs=["4"], b_runs=["3"]),
        row("concat_wide vs add at its width", "concat_wide", "add", -0.01, 0.04, INCONCLUSIVE),
    ])  # fmt: skip
    c7 = claim("C7", INCONCLUSIVE, [row("learned vs sinusoidal", "learned", "sinusoidal", -0.02, 0.005, INCONCLUSIVE)])
    c9 = claim("C9", NOT_RUN, [])
    c18 = claim("C18", NOT_SUPPORTED, [row("causal", "none", "rotary", math.log(1.03), math.log(1.05), NOT_SUPPORTED,
                                           metric="loss")])  # fmt: skip
    out = answer_sentences([c6, c7, c9, c18, claim("C1", SUPPORTED, [])])
    assert 1 <= len(out) <= 5
    # C9 ran nothing: said once, with every claim that ran nothing, last and without a link of its own
    assert [s["id"] for s in out] == ["C6", "C6", "C7", "C18", ""]
    assert out[4]["text"] == (
        "Not run in this study (the full preset runs them): on frozen pretrained word vectors (MiniLM) (C9)"
    )
    out = [*out[:2], out[4], *out[2:4]]  # in the claims' order, as the checks below read them
    for s in out[:2] + out[3:]:
        assert any(ch.isdigit() for ch in s["text"]), s
    for s in out:  # one plain sentence that counts; the bounds and their caveats are the details under it
        assert len(s["text"].split()) <= 40 and "at most" not in s["text"] and ". " not in s["text"], s
    assert out[0]["details"] == [
        "Where concatenating beat adding: with learned positions; by 2.0 to 10.0 pp accuracy",
        "Undecided: it differs by at most 3.1 pp accuracy",
    ]
    # C6 at the same width: 1 of 2 won; the undecided one says its resolution, the widest |bound| (3.1 pp) by hand.
    assert "on 1 of 2 comparisons" in said(out[0]) and "differs by at most 3.1 pp accuracy" in said(out[0])
    assert "differs by at most 2.0 pp accuracy" in said(out[3])  # C7: max(|−0.02|, |0.005|)
    # loss higher: behind; the B arm of C18's causal rows is the best scheme of the run
    assert "causal ones were behind rotary, the best here, by 3.0% to 5.0% in held-out loss" in said(out[4])
    assert "Not run" in said(out[2])


def test_claim_lines_are_short_and_carry_the_verdict() -> None:
    long_key = "; ".join(["a key figure of many many words that goes on"] * 6)
    claims = [
        claim(
            "C8",
            NOT_SUPPORTED,
            [],
            title="Without position an encoder is permutation-equivariant, but a causal decoder still learns position",
            key=long_key,
        ),  # fmt: skip
        claim("C6", SUPPORTED, [row("f", "concat_split", "add", 0.02, 0.1, SUPPORTED)], title="Concatenation wins"),
        claim("C2", INCONCLUSIVE, [], title="t", key=long_key),
    ]
    claims[2].resolution = {"text": "its 3 undecided comparisons lie within ±3.1 pp accuracy at 95%"}
    for c in claims:
        line = claim_line(c)
        assert len(line.split()) <= MAX_WORDS and c.verdict in line and line.startswith(c.id), line
    assert "(1 of 1 comparisons support it)" in claim_line(claims[1])
    assert "within ±3.1 pp accuracy" in claim_line(claims[2])


def test_a_claims_count_reads_its_deciding_family_alone() -> None:
    """C7's verdict reads "learned vs sinusoidal"; its learning-speed rows are shown beside for reference, and a
    "supported" there (learned learned faster) is evidence against "the kind matters little", not for it. The
    count reads the deciding family alone, and a refuted claim says how many comparisons refute it."""
    from pelab.report.claim_lines import short_figure

    rows = [row("learned vs sinusoidal", "learned", "sinusoidal", 0.2, 0.4, NOT_SUPPORTED),
            row("learned vs sinusoidal", "learned", "sinusoidal", -0.004, 0.004, SUPPORTED)]  # fmt: skip
    rows += [row("learning speed, learned vs sinusoidal", "learned", "sinusoidal", 0.1, 0.3, SUPPORTED)] * 4
    c = claim("C7", NOT_SUPPORTED, rows)
    c.deciding = "learned vs sinusoidal"
    assert short_figure(c) == "1 of 2 comparisons refute it"
    c.verdict = SUPPORTED
    assert short_figure(c) == "1 of 2 comparisons support it"


def test_a_decided_claim_of_halves_names_them_not_an_open_halfs_bound() -> None:
    """quick's C2 read "not supported · 3 undecided, within ±148.7% …": the bound of a half still open, beside a
    verdict another half decided. A decided claim of halves names each half's verdict instead."""
    from pelab.report.claim_lines import short_figure

    c = claim("C2", NOT_SUPPORTED, [])
    c.halves = {"overlap falls": SUPPORTED, "add not worse": INCONCLUSIVE, "concat_split better somewhere": SUPPORTED}
    c.open, c.resolution = True, {"text": "its 3 undecided comparisons lie within ±148.7% of B's held-out loss"}
    assert short_figure(c) == (
        f"overlap falls: {SUPPORTED}; add not worse: {INCONCLUSIVE}; concat_split better somewhere: {SUPPORTED}"
    )


def test_a_claim_not_run_whose_other_half_ran_says_both() -> None:
    """C4 in quick: its 'removing them costs' half needs untied arms (full only), its shares half ran and is open.
    The claim is 'not run' by its rule; its line names the command first, then the measured half's resolution,
    never a bare resolution beside 'not run'."""
    from pelab.report.claim_lines import short_figure

    c = claim("C4", NOT_RUN, [])
    c.halves = {"cross terms carry ≥ 10%": INCONCLUSIVE, "removing them costs": NOT_RUN}
    c.open = True
    c.resolution = {"text": "its undecided comparison lies within ±17.6 pp cross-term share at 95%"}
    assert short_figure(c) == (
        "pelab study --preset full runs the rest; cross terms carry ≥ 10%: "
        "1 undecided, within ±17.6 pp cross-term share"
    )


def test_compact_cells_keep_their_full_text_in_the_notes() -> None:
    long = "within ±72.1% of B's held-out loss at 95% (A better by at most 24.8%, B by at most 72.1%)"
    t = compact("A family — Holm–Bonferroni across 4 comparisons", ["place", "resolution"], [["d=32", long]] * 2)
    assert t.title == "A family" and t.about.startswith("Holm")
    assert t.rows[0][0] == ("d=32", 0)
    text, n = t.rows[0][1]
    assert text == "within ±72.1% of B's held-out loss at 95%" and t.notes[n - 1] == long and len(t.notes) == 1
    assert all(len(cell.split()) <= WORDS + 1 for r in t.rows for cell, _ in r)


def test_the_published_table_keeps_numbers_and_moves_reasons_under_it() -> None:
    cell = ("none vs learned (task=charlm; 1,234 vs 1,234 params): A's bits per byte +3.1% [+1.0%, +5.2%] relative to "
            "B's (95% interval); margin ±2%")  # fmt: skip
    assert measured_head(cell) == "none vs learned: +3.1% [+1.0%, +5.2%] bits per byte"
    cols = ["result", "published", "measured here", "outcome", "why"]
    t = published(cols, [["Haviv et al. 2022 (causal)", "NoPE close", cell, "disagree", "small models"]])
    assert t.columns == cols[:4]
    (res, _), (_, _), (measured, n), (outcome, m) = t.rows[0]
    assert res == "Haviv et al. 2022 (causal)" and outcome == "disagree"
    assert t.notes[n - 1] == cell and t.notes[m - 1] == "small models"
    assert not math.isnan(len(measured))


def test_a_family_that_read_no_metric_says_why_with_its_own_count() -> None:
    small = {**row("concat_split vs add", "concat_split", "add", 0, 0, TOO_SMALL), "metric": None}
    c6 = claim("C6", INCONCLUSIVE, [small, small, row("other family", "x", "y", -0.1, 0.1, INCONCLUSIVE)])
    first = said(answer_sentences([c6])[0])
    assert first == "At the same width: no verdict: the arms did not learn at this budget (2 comparisons)"


def test_a_claim_not_run_here_points_to_the_command_that_runs_it() -> None:
    """Every claim stays present: one this study did not run (or half of one) says where its evidence is."""
    from pelab.report.summary import FULL_COMMAND, PHRASE, run_elsewhere

    c13 = claim("C13", NOT_RUN, [], title="Segments")
    c18 = claim("C18", NOT_SUPPORTED, [], title="NoPE")
    c18.halves = {"causal": NOT_SUPPORTED, "masked": NOT_RUN}
    c13.halves = {}
    c4 = claim("C4", NOT_RUN, [], title="Four jobs")  # undecided because its second half was not run; the first ran
    c4.halves = {"cross terms carry ≥ 10%": INCONCLUSIVE, "removing them costs": NOT_RUN}
    lines = run_elsewhere([c13, c4, c18, claim("C6", SUPPORTED, [])])
    # one line: the claims not run at all by id, then the halves not run of claims that ran
    assert lines == [f"C13, C4 (removing them costs), C18 (masked): not run in this study; `{FULL_COMMAND}` runs them"]
    assert FULL_COMMAND in PHRASE[NOT_RUN] and FULL_COMMAND == "pelab study --preset full"
    line = claim_line(c13)
    assert line.endswith(f"({FULL_COMMAND} runs it).") and len(line.split()) <= MAX_WORDS


def test_a_win_over_an_arm_that_had_not_learned_says_so() -> None:
    """The floor policy counts a win over an arm below the floor; the first screen says that is what it was."""
    from pelab.report.summary import win_facts

    won = row("concat_split vs add", "concat_split", "add", 0.3, 0.9, SUPPORTED)
    won |= {"a_acc": 0.99, "b_acc": 0.40}
    fair = row("concat_split vs add", "concat_split", "add", 0.01, 0.05, SUPPORTED) | {"a_acc": 0.99, "b_acc": 0.95}
    assert "had not learned" not in " ".join(win_facts([won, fair]))  # no floor given: as before
    assert win_facts([won], 0.8)[-1] == "each over an arm that had not learned at this budget: below the 80% floor"
    assert win_facts([won, fair], 0.8)[-1].startswith("1 of them over an arm that had not learned")
    assert "had not learned" not in " ".join(win_facts([fair], 0.8))
    lm = row("a vs b", "a", "b", 0.01, 0.05, SUPPORTED, metric="bpb") | {"b_acc": 0.3}
    assert "had not learned" not in " ".join(win_facts([lm], 0.8))  # language models learn by loss, not accuracy


def test_a_verdicts_budget_is_stated_beside_it() -> None:
    """budget_text: each task's steps, batch, length and seeds, from the runs themselves (a failed run not)."""
    import pandas as pd

    from pelab.report.arms import budget_text

    rows = [("reverse", 150, 32, 16, s, "done") for s in range(8)] + [("charlm", 150, 32, 64, 0, "done")]
    rows += [("charlm", 150, 32, 64, 1, "done"), ("offset", 999, 32, 16, 0, "failed")]
    frame = pd.DataFrame(
        rows, columns=["task.name", "train.steps", "train.batch_size", "task.length", "seed", "status"]
    )
    assert budget_text(frame) == (
        "budget: reverse: 150 steps of 32 sequences at length 16, seeds 0-7; "
        "charlm: 150 steps of 32 sequences at length 64, seeds 0-1"
    )
    assert budget_text(frame.iloc[0:0]) == ""


def test_an_equal_pair_is_counted_as_such_and_the_open_rest_is_resolved_per_scheme() -> None:
    """A comparison refuted inside the margin (NOT_SUPPORTED both ways, neither side ahead) is an answer: the arms are
    equal at this resolution, and the sentence counts it apart from the open ones. The open rows' widest bound is
    given per position scheme, so a wide sinusoidal interval does not speak for the learned rows (bounds by hand)."""
    sin = {"task.name": "reverse", "model.d": 32, "model.position.scheme": "sinusoidal"}
    rows = [
        row("concat_split vs add", "concat_split", "add", -0.004, 0.006, NOT_SUPPORTED, a_runs=["1"], b_runs=["2"]),
        row("concat_split vs add", "concat_split", "add", -0.014, 0.007, INCONCLUSIVE, a_runs=["3"], b_runs=["4"]),
        row("concat_split vs add", "concat_split", "add", -0.075, 0.221, INCONCLUSIVE, a_runs=["5"], b_runs=["6"],
            where=sin),
        row("add vs concat_split", "add", "concat_split", -0.006, 0.004, NOT_SUPPORTED, a_runs=["2"], b_runs=["1"]),
        row("add vs concat_split", "add", "concat_split", -0.007, 0.014, INCONCLUSIVE, a_runs=["4"], b_runs=["3"]),
        row("add vs concat_split", "add", "concat_split", -0.221, 0.075, INCONCLUSIVE, a_runs=["6"], b_runs=["5"],
            where=sin),
    ]  # fmt: skip
    answer = answer_sentences([claim("C6", INCONCLUSIVE, rows)])[0]
    assert answer["text"] == (
        "At the same width, neither side won beyond its interval on any of 3 comparisons; 1 equal within the margin, "
        "2 undecided"
    )
    assert answer["details"] == ["Undecided: both differ by at most 1.4 pp accuracy with learned positions and 22.1 pp "
                                 "accuracy with sinusoidal ones"]  # fmt: skip
    # with a win, the equal one is still counted apart
    rows[1] = {**rows[1], "verdict": SUPPORTED, "lo": 0.01, "hi": 0.03}
    answer = answer_sentences([claim("C6", SUPPORTED, rows)])[0]
    assert answer["text"].endswith("; 1 equal within the margin, 1 undecided")
    assert answer["details"][-1] == "Undecided: it differs by at most 22.1 pp accuracy"


def test_the_seeds_line_says_what_each_arm_got() -> None:
    """A sequential study lists 5 seeds and adds up to 3 more to some arms: the subtitle and the scale line say
    "seeds 0–7 (5 to 8 paired seeds per arm, sequential)", not the listed seeds alone."""
    import pandas as pd

    from pelab.report.summary import seeds_line

    runs = [
        SimpleNamespace(run_id=f"{arm}{s}", arm_id=arm, seed=s) for arm, n in (("a", 8), ("b", 5)) for s in range(n)
    ]
    frame = pd.DataFrame({"run_id": [r.run_id for r in runs], "status": ["done"] * len(runs)})
    study = SimpleNamespace(runs=runs, seeds=[0, 1, 2, 3, 4], sequential=object(), fixed={})
    ctx = SimpleNamespace(frame=frame, study=study)
    assert seeds_line(ctx) == "seeds 0–7 (5 to 8 paired seeds per arm, sequential)"
    fixed = SimpleNamespace(frame=frame[frame.run_id.str.startswith("b")],
                            study=SimpleNamespace(runs=runs[8:], seeds=[0, 1, 2, 3, 4], sequential=None,
                                                  fixed={}))  # fmt: skip
    assert seeds_line(fixed) == "seeds 0–4 (5 paired seeds per arm)"
    # an arm on a grid's own seeds (200-229) is counted apart: the rounds' counts stay 5 to 8
    own = [SimpleNamespace(run_id=f"c{s}", arm_id="c", seed=s) for s in range(200, 230)]
    frame = pd.concat([frame, pd.DataFrame({"run_id": [r.run_id for r in own], "status": ["done"] * 30})])
    fixed = {"c": list(range(200, 230))}
    study = SimpleNamespace(runs=runs + own, seeds=[0, 1, 2, 3, 4], sequential=object(), fixed=fixed)
    assert seeds_line(SimpleNamespace(frame=frame, study=study)) == (
        "seeds 0–7, 200–229 (5 to 8 paired seeds per arm, sequential; 30 on a grid's own seeds)"
    )


def test_the_language_model_sentence_reads_from_the_nope_arm_and_beside_other_schemes() -> None:
    """C18's causal rows are NoPE (A) against the best (B), its masked rows the best (A) against NoPE (B): both read
    from NoPE's side. Beside the best, where the same NoPE arm stands against sinusoidal (C7's reference rows)."""
    nope = {"a_runs": ["n"], "b_runs": ["r"]}
    log = math.log
    causal = row("causal", "none + none", "rotary + none", log(1.074), log(1.093), NOT_SUPPORTED, metric="bpb", **nope)
    masked = row("masked", "rotary + none", "none + none", -log(1.562), -log(1.471), SUPPORTED, metric="bpb",
                 a_runs=["mr"], b_runs=["mn"])  # fmt: skip
    sin = row("none vs sinusoidal", "none + none", "sinusoidal + add", log(1.004), log(1.010), NOT_SUPPORTED,
              metric="bpb", a_runs=["n"], b_runs=["s"])  # fmt: skip
    other = row("none vs sinusoidal", "none + none", "sinusoidal + add", 0.1, 0.2, NOT_SUPPORTED, metric="bpb",
                a_runs=["m"], b_runs=["s"])  # another NoPE arm (mlm): not this sentence's  # fmt: skip
    c18 = claim("C18", NOT_SUPPORTED, [causal, masked])
    c7 = claim("C7", NOT_SUPPORTED, [sin, other])
    answer = answer_sentences([c18, c7])[-1]
    assert answer["text"] == (
        "Language models without positions: causal ones were behind rotary, the best here, by 7.4% to 9.3% in bits "
        "per byte; masked ones were behind rotary, the best here, by 47.1% to 56.2% in bits per byte"
    )
    assert answer["details"] == [
        "Causal ones were also within the ±2% margin of sinusoidal (behind by 0.4% to 1.0%)"
    ]  # masked: rotary's log-ratio to NoPE in [−log 1.562, −log 1.471] is NoPE 47.1% to 56.2% above rotary, exactly


def test_a_comparison_decided_early_and_not_confirmed_is_no_win_and_is_counted_apart() -> None:
    """SCIENCE.md, "Every seed counts": a comparison the design stopped at 5 seeds whose 8 seeds do not bear it out
    is "decided early, not confirmed" (``rules.decide``): never a win, counted apart from wins and undecided rows,
    with the looks it was read at."""
    looks = {"counts": [5], "cap": 8, "spending": "pocock", "overrun": 8}
    early = row("concat_split vs add", "concat_split", "add", -0.04, 0.02, UNCONFIRMED, looks=looks, a_runs=["1"],
                b_runs=["2"])  # fmt: skip
    open_ = row("concat_split vs add", "concat_split", "add", -0.03, 0.02, INCONCLUSIVE, a_runs=["3"], b_runs=["4"])
    answer = answer_sentences([claim("C6", INCONCLUSIVE, [early, open_])])[0]
    assert answer["text"] == ("At the same width, neither side won beyond its interval on any of 2 comparisons; 1 "
                              "undecided; decided early, not confirmed: 1")  # fmt: skip
    assert answer["details"][-1] == (
        "Decided early, not confirmed: 1 (decided at the look at 5 seeds, not borne out by all 8 its arms got later)"
    )
    eq = answer_sentences([claim("C7", INCONCLUSIVE, [{**early, "family": "learned vs sinusoidal"}])])[0]
    assert eq["text"].endswith("on any of 1 comparisons; decided early, not confirmed: 1")


def test_sentences_say_which_way_failed_equivalences_point_and_what_the_floor_kept_out() -> None:
    """quick's C7: learned ahead on one comparison (reverse, held-out loss), sinusoidal on another (charlm): two
    failures of "≈" the opposite ways, which the sentence says. Comparisons with an arm below the floor take no
    part (budget too small), and the sentence counts them apart."""
    rows = [
        row("learned vs sinusoidal", "learned", "sinusoidal", 0.05, 0.3, NOT_SUPPORTED, a_runs=["1"], b_runs=["2"]),
        row("learned vs sinusoidal", "learned", "sinusoidal", 0.03, 0.07, NOT_SUPPORTED, metric="bpb",
            a_runs=["3"], b_runs=["4"]),
        row("learned vs sinusoidal", "learned", "sinusoidal", -0.004, 0.004, SUPPORTED, a_runs=["5"], b_runs=["6"]),
        {**row("learned vs sinusoidal", "learned", "sinusoidal", 0, 0, TOO_SMALL), "metric": None},
    ]  # fmt: skip
    answer = answer_sentences([claim("C7", NOT_SUPPORTED, rows)])[0]
    assert answer["text"] == (
        "Learned and sinusoidal positions were within the margin on 1 of 3 comparisons and apart beyond it on 2; "
        "1 more with an arm below the floor"
    )
    assert answer["details"] == ["Apart: learned ahead on 1, sinusoidal on 1",
                                 "No verdict on 1 more: an arm below the floor (budget too small)"]  # fmt: skip
    c9 = [row("concat beats add", "concat_split", "add", -0.003, 0.012, INCONCLUSIVE, a_runs=["7"], b_runs=["8"]),
          {**row("concat beats add", "concat_split", "add", 0, 0, TOO_SMALL), "metric": None}]  # fmt: skip
    answer = answer_sentences([claim("C9", INCONCLUSIVE, c9)])[0]
    assert answer["text"].endswith("on any of 1 comparisons; 1 undecided, 1 more with an arm below the floor")
    assert answer["details"] == ["Undecided: it differs by at most 1.2 pp accuracy",
                                 "No verdict on 1 more: an arm below the floor (budget too small)"]  # fmt: skip
    # the arm that kept a comparison out is named with its accuracy (full's C9 turned on add at 79.8%)
    c9[1] |= {"b": "add + 160", "b_acc": 0.7978, "skipped": ["add + 160 below the floor (a verdict needs both arms)"]}
    text = said(answer_sentences([claim("C9", INCONCLUSIVE, c9)])[0])
    assert text.endswith("No verdict on 1 more: an arm below the floor (add + 160 at 79.8%; budget too small)")


def test_failed_equivalences_read_on_held_out_loss_say_so() -> None:
    """quick's C7: two of its three "apart" rows were read on held-out loss (both arms at 100% accuracy, learned
    surer), which is not "learned right more often"; the sentence says how many were read that way."""
    rows = [
        row("learned vs sinusoidal", "learned", "sinusoidal", -0.6, -0.5, NOT_SUPPORTED, metric="loss",
            a_runs=["1"], b_runs=["2"]),
        row("learned vs sinusoidal", "learned", "sinusoidal", -0.7, -0.5, NOT_SUPPORTED, metric="loss",
            a_runs=["3"], b_runs=["4"]),
        row("learned vs sinusoidal", "learned", "sinusoidal", 0.04, 0.066, NOT_SUPPORTED, metric="bpb",
            a_runs=["5"], b_runs=["6"]),
    ]  # fmt: skip
    answer = answer_sentences([claim("C7", NOT_SUPPORTED, rows)])[0]
    assert answer["text"] == (
        "Learned and sinusoidal positions were within the margin on 0 of 3 comparisons and apart beyond it on 3"
    )
    assert answer["details"] == [
        "Apart: learned ahead on 2, sinusoidal on 1; 2 of them read on held-out loss, accuracy being at its ceiling"
    ]
    answer = answer_sentences([claim("C7", NOT_SUPPORTED, rows[:1])])[0]
    assert answer["details"] == ["Apart: learned ahead; read on held-out loss, accuracy being at its ceiling"]


def test_forest_points_that_read_alike_are_named_by_what_tells_them_apart() -> None:
    """full's overview had two "d=32 · sinusoidal" rows on reverse (the paper's and tensor2tensor's layouts) and
    two "d=32 · learned" on sort (lengths 16 and 12): each label now carries the setting that differs."""
    from pelab.report.overview import extras, label_of

    base = {"task.name": "reverse", "model.d": 32, "model.position.scheme": "sinusoidal", "task.length": 16,
            "model.position.layout": "paper"}  # fmt: skip
    rows = [row("f", "concat_split", "add", 0, 0.1, INCONCLUSIVE, where=base),
            row("f", "concat_split", "add", 0, 0.1, INCONCLUSIVE,
                where={**base, "model.position.layout": "tensor2tensor"}),
            row("f", "concat_split", "add", 0, 0.1, INCONCLUSIVE, where={**base, "task.name": "sort"}),
            row("f", "concat_split", "add", 0, 0.1, INCONCLUSIVE,
                where={**base, "task.name": "sort", "task.length": 12})]  # fmt: skip
    got = extras(rows)
    assert got == ["layout=paper", "layout=tensor2tensor", "length=16", "length=12"]
    assert len({label_of(r, extra=x) for r, x in zip(rows, got, strict=True)}) == 4


def test_a_row_refuted_because_b_led_at_95_percent_is_no_tie() -> None:
    """full's widened lookup row: add + 40 ahead at 95% (AUC -1.7 pp [-3.3, -0.1]), not after Holm; the forward
    row is 'not supported' (B ahead) but the arms are not equal within the margin."""
    led = row("concat_wide vs add at its width", "concat_wide", "add", -0.033, -0.001, NOT_SUPPORTED,
              a_runs=["1"], b_runs=["2"])  # fmt: skip
    back = row("add at its width vs concat_wide", "add", "concat_wide", 0.001, 0.033, INCONCLUSIVE,
               a_runs=["2"], b_runs=["1"])  # fmt: skip
    text = next(said(s) for s in answer_sentences([claim("C6", NOT_SUPPORTED, [led, back])])
                if s["text"].startswith("Widened"))  # fmt: skip
    assert "equal within the margin" not in text and "differs by at most 3.3 pp accuracy" in text


def test_wins_that_share_a_task_say_so() -> None:
    """full's C6: 3 of its 4 same-width wins were on sort; "4 of 25 comparisons" alone reads as four tasks."""
    from pelab.report.summary import where_won

    def won(task: str) -> dict:
        return {"verdict": SUPPORTED, "where": {"task.name": task}}

    assert where_won([won("sort"), won("sort"), won("sort"), won("copy")]) == "3 on sort"
    assert where_won([won("sort"), won("sort")]) == "all on sort"
    assert where_won([won("sort"), won("copy")]) == "" and where_won([won("sort")]) == ""


def test_the_open_rows_bound_is_read_on_accuracy_where_there_is_one() -> None:
    """full's C6 strung four metrics into one bound ("221.6% in held-out loss or 1.3 pp accuracy or 0.9 pp area
    under the learning curve"); where some open rows read accuracy, they give the bound and the rest are counted."""
    from pelab.report.first_screen import by_scheme

    rows = [row("f", "concat_split", "add", -0.01, 0.013, INCONCLUSIVE),
            row("f", "concat_split", "add", -2.0, 0.5, INCONCLUSIVE, metric="loss"),
            row("f", "concat_split", "add", -0.009, 0.004, INCONCLUSIVE, metric="auc")]  # fmt: skip
    assert by_scheme(rows) == (
        "1.3 pp accuracy (2 of them read on held-out loss or learning speed, accuracy being at its ceiling)"
    )
    assert by_scheme(rows[1:2]).endswith("in held-out loss")  # no accuracy row: the loss bound it has


def test_a_win_decided_early_and_confirmed_later_says_so() -> None:
    """quick's C6 win (lookup) was decided at 5 seeds; its arms got 3 more for C2 and C10. A win stands only where all
    its seeds confirm it (``rules.decide``), and the first screen says it was decided early and confirmed."""
    from pelab.rules import CONFIRMED, EARLY

    note = (f"{EARLY} 5 seeds: A − B +6.0 pp [+2.0 pp, +10.0 pp] accuracy, supported; {CONFIRMED} all 8 seeds its "
            f"arms got later (for other comparisons), read at that look's nominal level: A − B +5.5 pp [+2.1 pp, "
            f"+8.9 pp] accuracy, {SUPPORTED}")  # fmt: skip
    won = row("concat_split vs add", "concat_split", "add", 0.02, 0.1, SUPPORTED, notes=[note], a_runs=["1"],
              b_runs=["2"])  # fmt: skip
    answer = answer_sentences([claim("C6", SUPPORTED, [won])])[0]
    assert answer["text"] == ("At the same width, concatenating beat adding on 1 of 1 comparisons and adding beat "
                              "concatenating on none")  # fmt: skip
    assert answer["details"] == [
        "Where concatenating beat adding: with learned positions; by 2.0 to 10.0 pp accuracy; decided at an early "
        "look and confirmed on all the seeds its arms got later"
    ]


def test_a_win_says_by_how_much_its_interval_establishes() -> None:
    """A count of wins is never the whole answer: one win gives its interval's two ends; several give the smallest
    low end and the largest high end per metric ("each by at least X (up to Y)": no win's own interval), in the
    metric's own units; a relative metric reads "in held-out loss" (quick's C6 lookup win: 1.9% to 84.4%)."""
    from pelab.report.summary import by_how_much

    acc = row("concat_split vs add", "concat_split", "add", 0.005, 0.031, SUPPORTED)
    acc2 = row("concat_split vs add", "concat_split", "add", 0.012, 0.02, SUPPORTED)
    # a log-ratio of A's loss to B's in [log(1 / 1.844), log(1 / 1.019)]: B's loss 1.9% to 84.4% above A's
    loss = row("concat_split vs add", "concat_split", "add", -math.log(1.844), -math.log(1.019), SUPPORTED,
               metric="loss")  # fmt: skip
    assert by_how_much([acc]) == "by 0.5 to 3.1 pp accuracy"
    assert by_how_much([acc, acc2]) == "each by at least 0.5 pp accuracy (up to 3.1 pp)"  # not acc2's own interval
    assert by_how_much([loss]) == "by 1.9% to 84.4% in held-out loss"
    assert by_how_much([acc, loss]) == (
        "each by at least 0.5 pp accuracy (up to 3.1 pp) or at least 1.9% in held-out loss (up to 84.4%)"
    )
    assert by_how_much([row("x", "a", "b", -0.01, 0.02, SUPPORTED)]) == ""  # an interval across 0 is no size
    tiny = row("concat_split vs add", "concat_split", "add", 0.0001, 0.036, SUPPORTED)
    assert by_how_much([tiny]) == "by up to 3.6 pp accuracy"  # never "by 0.0 to": its low end is above 0
    assert by_how_much([tiny, acc]) == "each by up to 3.6 pp accuracy"  # nor "at least 0.0 pp"


def test_an_undecided_comparison_names_the_seeds_an_arm_failed_on() -> None:
    """Quick's sinusoidal + add learned on 7 of 8 seeds and ended at 61% on one: the paired interval spans 24 pp,
    and the sentence says why. A seed within the margin of the floor (79.6% against 80%) is no failure, an arm
    whose seeds mostly failed is the floor's to name (``_out``), and a decided row names nothing."""
    sin = {"task.name": "reverse", "model.d": 32, "model.position.scheme": "sinusoidal"}
    good = [[s, 1.0] for s in range(8)]
    bimodal = [[s, v] for s, v in enumerate([1.0, 1.0, 0.999, 1.0, 0.807, 1.0, 0.611, 0.998])]
    rows = [
        row("concat_split vs add", "concat_split", "add", -0.075, 0.221, INCONCLUSIVE, where=sin,
            a_seed_acc=good, b_seed_acc=bimodal),
        row("concat_split vs add", "concat_split", "add", -0.098, 0.244, INCONCLUSIVE,
            where={**sin, "task.name": "offset"}, a_seed_acc=good,
            b_seed_acc=[[s, v] for s, v in enumerate([1.0, 0.9, 0.994, 1.0, 1.0, 1.0, 1.0, 0.524])]),
        row("concat_split vs add", "concat_split", "add", -0.01, 0.02, INCONCLUSIVE,
            where={**sin, "task.name": "lookup"}, a_seed_acc=[[0, 0.85], [1, 0.796], [2, 0.83]],
            b_seed_acc=[[0, 0.5], [1, 0.6], [2, 0.85]]),
    ]  # fmt: skip
    answer = answer_sentences([claim("C6", INCONCLUSIVE, rows)], FLOOR, MARGIN)[0]
    assert answer["details"] == [
        "Undecided: they differ by at most 24.4 pp accuracy",
        "Failed seeds among the undecided: add with sinusoidal positions ended more than 1 pp under the 80% floor on 1 "
        "of 8 seeds in each of reverse (61.1%) and offset (52.4%)",
    ]
    rows[1]["b_seed_acc"] = [[s, v] for s, v in enumerate([1.0, 0.3, 0.994, 1.0, 1.0, 1.0, 1.0, 0.524])]
    text = said(answer_sentences([claim("C6", INCONCLUSIVE, rows)], FLOOR, MARGIN)[0])
    assert text.endswith("floor on 1 of 8 seeds in reverse (61.1%) and 2 of 8 seeds in offset (30.0%, 52.4%)"), text
    assert "80.7%" not in text and "79.6%" not in text  # above the floor, or at it
    assert "floor on" not in said(answer_sentences([claim("C6", INCONCLUSIVE, rows)])[0])  # no floor: no clause
    decided = [{**rows[0], "verdict": SUPPORTED, "lo": 0.01, "hi": 0.2}]
    assert "floor on" not in said(answer_sentences([claim("C6", SUPPORTED, decided)], FLOOR, MARGIN)[0])


def test_the_language_model_sentence_never_quotes_a_nope_model_that_did_not_learn() -> None:
    """SCIENCE.md: key figures in the summary never quote an arm below the floor. Full's masked NoPE models did not
    learn (their failure is C18's masked half): the sentence says so, and gives no gap to them (full's first screen
    read "masked ones were behind rotary, the best here, by 73.3% to 85.4%")."""
    log = math.log
    masked = row("masked", "rotary + none", "none + none", -log(1.854), -log(1.733), SUPPORTED, metric="bpb",
                 a_runs=["mr"], b_runs=["mn"], a_baseline_share=0.62, b_baseline_share=0.97)  # fmt: skip
    causal = row("causal", "none + none", "rotary + none", log(1.074), log(1.093), NOT_SUPPORTED, metric="bpb",
                 a_runs=["n"], b_runs=["r"], a_baseline_share=0.70, b_baseline_share=0.55)  # fmt: skip
    text = answer_sentences([claim("C18", SUPPORTED, [causal, masked])])[-1]["text"]
    assert text == (
        "Language models without positions: causal ones were behind rotary, the best here, by 7.4% to 9.3% in bits "
        "per byte; masked ones did not learn (held-out loss above 80% of the context-free model's) where rotary, the "
        "best here, did"
    )
    assert "73.3" not in text and "85.4" not in text


def test_the_language_model_sentence_gives_every_width_not_the_first_alone() -> None:
    """full's C18 (2026-11-29) read "causal ones were behind rotary, the best here, by 24.6% to 27.5%", d=32's
    interval alone, where d=64's was 21.2% to 24.2%: every width whose NoPE model learned is said, each with its d,
    and so are the NoPE arms' rows beside sinusoidal."""
    log = math.log
    at = {"task.name": "charlm", "model.position.scheme": "none"}
    rows = [row("causal", "none + none", "rotary + none", log(lo), log(hi), NOT_SUPPORTED, metric="bpb",
                a_runs=[f"n{d}"], b_runs=[f"r{d}"], where={**at, "model.d": d})
            for d, lo, hi in ((64, 1.212, 1.242), (32, 1.246, 1.275))]  # fmt: skip
    sin = [row("none vs sinusoidal", "none + none", "sinusoidal + add", log(lo), log(hi), NOT_SUPPORTED,
               metric="bpb", a_runs=[f"n{d}"], b_runs=[f"s{d}"], where={**at, "model.d": d})
           for d, lo, hi in ((32, 1.208, 1.228), (64, 1.193, 1.224))]  # fmt: skip
    answer = answer_sentences([claim("C18", NOT_SUPPORTED, rows), claim("C7", NOT_SUPPORTED, sin)])[-1]
    assert answer["text"] == (
        "Language models without positions: causal ones were behind rotary, the best here, by 24.6% to 27.5% at d=32 "
        "and 21.2% to 24.2% at d=64 in bits per byte"
    )
    assert answer["details"] == [
        "Causal ones were also behind sinusoidal by 20.8% to 22.8% at d=32 and 19.3% to 22.4% at d=64 in bits per byte"
    ]
    # a width whose best scheme is another: each phrase in full, never merged under one name
    rows[0] = {**rows[0], "b": "sinusoidal + add"}
    text = answer_sentences([claim("C18", NOT_SUPPORTED, rows)])[-1]["text"]
    assert "behind sinusoidal + add, the best here, by 21.2% to 24.2% in bits per byte" in text  # unmerged
    assert "24.6%" not in text and "at d=" not in text  # d=32's gap to rotary is not said under sinusoidal's name
