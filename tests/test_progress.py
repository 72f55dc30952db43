"""Progress as plain lines where no terminal is (a log file): every tenth of the work and at least once a minute,
with what is done, what failed and the time left at the pace so far."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from pelab.study.progress import PlainProgress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_line_every_tenth_and_every_minute_with_the_time_left() -> None:
    out, clock = io.StringIO(), Clock()
    console = Console(file=out, width=200)
    with PlainProgress(console, clock=clock) as p:
        task = p.add_task("runs", total=40, completed=10)  # 10 stored already: the pace counts the 30 that run
        for i in range(30):
            clock.t += 2.0
            p.update(task, advance=1, failed="[red]1 failed[/]" if i >= 5 else "")
    lines = out.getvalue().splitlines()
    assert len(lines) == 8  # 10/40 -> 40/40 in steps of 4 runs (a tenth), the last at the end
    # 4 runs in 8 s: 26 runs, 52 s; the share counts the 10 stored, so the line also says 4 of the 30 to run
    assert lines[0] == "runs: 14/40 (35%; 4 of 30 to run), 0:08 elapsed, about 0:52 left"
    assert lines[-1] == "runs: 40/40 (100%), 1 failed, 1:00 elapsed"
    assert "[red]" not in out.getvalue()


def test_a_slow_study_still_says_something_every_minute() -> None:
    out, clock = io.StringIO(), Clock()
    p = PlainProgress(Console(file=out, width=200), clock=clock)
    task = p.add_task("runs", total=1000)
    clock.t = 61.0
    p.update(task, advance=1)
    assert out.getvalue() == "runs: 1/1000 (0%), 1:01 elapsed, about 1015:39 left\n"


def test_the_study_ends_with_one_line_a_claim_of_at_most_100_characters() -> None:
    from types import SimpleNamespace

    from pelab.report.console import LINE, summary_lines

    claims = [
        SimpleNamespace(id="C1", verdict="supported", key="20 of 512 dims vary"),
        SimpleNamespace(id="C6", verdict="inconclusive at this budget", key="A − B +0.4 pp [−1.5, +3.1]\n" * 20),
    ]
    lines = summary_lines(claims)
    assert lines[0] == "C1  ✓ supported                   20 of 512 dims vary"
    assert len(lines[1]) == LINE and lines[1].endswith("…") and "\\n" not in lines[1]
    assert all(len(x) <= 100 for x in lines)


def test_a_decided_claim_line_leads_with_its_deciding_interval() -> None:
    """The number behind a verdict, not a count of rows: "+62.0 pp [+35.5, +88.5] accuracy" first, then where."""
    from types import SimpleNamespace

    from pelab.report.claim_lines import key_interval
    from pelab.report.console import summary_lines

    key = (
        "concat_split vs add (task=reverse, scheme=sinusoidal, d=32): A − B +62.0 pp [+35.5 pp, +88.5 pp] accuracy "
        "(98.75% (Holm)); sequential seeds"
    )
    assert key_interval(key) == ("+62.0 pp [+35.5, +88.5] accuracy", "concat_split vs add (reverse, sinusoidal, d=32)")
    lm = "learned vs sinusoidal (task=charlm, d=64): A's bits per byte +5.3% [+3.5%, +7.1%] relative to B's (98%)"
    assert key_interval(lm) == ("+5.3% [+3.5%, +7.1%] bits per byte", "learned vs sinusoidal (charlm, d=64)")
    assert key_interval("356 of 512 dimensions vary by > 0.1") == ("", "")
    (line,) = summary_lines([SimpleNamespace(id="C6", verdict="supported", key=key)])
    assert line.startswith("C6  ✓ supported +62.0 pp [+35.5, +88.5] accuracy; concat_split vs add (reverse")


def test_the_time_left_is_weighted_by_each_runs_estimated_cost() -> None:
    """Costliest runs go first: after the one 90-second run of ten, a count would say 13.5 min left; the work
    left is 9 of 99 estimated seconds, about 9 s at the pace so far."""
    from pelab.study.progress import Pace

    clock = SimpleNamespace(t=0.0)
    pace = Pace({"big": 90.0, **{f"r{i}": 1.0 for i in range(9)}}, clock=lambda: clock.t)
    assert pace.left() is None and pace.text() == ""
    clock.t = 90.0
    pace.finished("big")
    assert pace.left() == 9.0 and pace.text() == "about 0:09 left"
    pace.finished("big")  # a run reported twice (a retry) counts once
    assert pace.left() == 9.0


def test_the_expected_time_follows_this_machines_pace_once_it_has_one(tmp_path, monkeypatch) -> None:
    """The fit is one machine's (AVX-512); a machine without it ran the full preset at 1.85x the fit. After a
    study of at least a minute, the next expected line is scaled by the pace measured here (sums, older halved)."""
    from test_study import STUDY

    from pelab.study import estimate
    from pelab.study.driver import expected_line
    from pelab.study.grid import parse_study

    monkeypatch.setenv("PELAB_CACHE", str(tmp_path))
    runs = parse_study(STUDY.format(steps=30)).runs
    assert estimate.read_pace() is None
    plain = expected_line(runs, "local", 2, "cpu")
    assert "(at pelab's 2-core reference CPU's speed)" in plain
    estimate.record_pace(100.0, 30.0)  # under a minute: start-up, not pace
    assert estimate.read_pace() is None
    estimate.record_pace(100.0, 200.0)
    assert estimate.read_pace() == 2.0
    estimate.record_pace(100.0, 100.0)  # the older study counts half: (100 + 100) / (50 + 100)
    assert estimate.read_pace() == (100.0 + 100.0) / (50.0 + 100.0)
    line = expected_line(runs, "local", 2, "cpu")
    assert "(its pace: 1.33x the reference)" in line and len(line) <= 100
    monkeypatch.setattr(estimate, "CPU_FIT", (*estimate.CPU_FIT[:-1], estimate.CPU_FIT[-1] * 2))
    assert estimate.read_pace() is None  # a pace against another fit is not this fit's
    estimate.record_pace(100.0, 300.0)
    assert estimate.read_pace() == 3.0  # and a new fit's pace starts afresh
    (tmp_path / estimate.PACE_FILE).write_text("[1, 2")  # damaged: one line says so, and the fit is used
    assert estimate.read_pace() is None


def test_on_a_gpu_the_expected_line_says_the_cpu_fit_is_not_a_gpu_estimate() -> None:
    """The paper preset on an H100 said "about 1.7 h on 16 CPU workers" while it ran 8 runs at a time on the GPU."""
    from test_study import STUDY

    from pelab.study.driver import expected_line
    from pelab.study.grid import parse_study

    runs = parse_study(STUDY.format(steps=30)).runs
    for device in ("cuda", "cuda:1"):
        line = expected_line(runs, "local", None, device)
        assert line.startswith("expected: no GPU estimate") and "progress lines" in line


def test_a_reports_items_count_once_and_weight_the_time_left() -> None:
    """A report's items end on worker threads and may be told twice (a measure read again); each counts once, an
    item never expected counts not at all, and the time left weighs a language model's probes above small ones."""
    from pelab.report.progress import ReportWork, measure_cost

    lm, small = measure_cost("layer_probes", 64, 64, 2), measure_cost("overlap", 16, 32, 2)
    assert 1.5 < lm < 2.5 and lm > 10 * small  # the full preset's folder: 2.0 s against 0.12 s on one core
    assert 1.2 < measure_cost("input_probes", 16, 256, 2) < 1.9  # sort at d = 256: 1.6 s
    assert 0.2 < measure_cost("input_probes", 16, 32, 2) < 0.35  # sort at d = 32: 0.27 s
    clock = SimpleNamespace(t=0.0)
    told: list[tuple[int, int, str]] = []
    work = ReportWork(lambda *x: told.append(x), clock=lambda: clock.t)
    work.expect("probes of a language model", 2.0)
    work.expect("overlap", 0.1)
    work.expect("overlap", 0.1)  # expected twice: one item
    work.expect("cross share", 0.1)
    assert told[-1] == (0, 3, "")
    clock.t = 5.0  # loading the study and starting workers: no item's work, so not the pace's
    work.finished("overlap")
    work.finished("overlap")
    work.finished("never expected")
    assert work.done == 1 and told[-1] == (1, 3, "")  # no pace yet: one item, no time since the first
    clock.t = 6.0
    work.finished("cross share")
    assert told[-1] == (2, 3, "about 0:20 left")  # 0.1 s of work a second since the first: 2 s of work left


def test_a_minute_without_a_finished_run_still_says_a_line_with_the_time_left_asked_again() -> None:
    """A d=160 language model trains for minutes: the timer says the line again after a minute without one, with
    the caller's estimate asked anew (it grows with the wait), and says nothing sooner, nor once the work is done."""
    out, clock = io.StringIO(), Clock()
    asked = iter(["about 9:00 left", "about 9:30 left"])
    p = PlainProgress(Console(file=out, width=200), clock=clock, estimate=lambda: next(asked), timer=False)
    task = p.add_task("runs", total=10, completed=4, left="")
    clock.t = 30.0
    p.update(task, advance=1, left="about 8:00 left")  # a tenth: a line
    clock.t = 89.0
    p.tick()  # 59 s since the last line: nothing
    clock.t = 90.0
    p.tick()
    clock.t = 120.0
    p.tick()  # 30 s since the timer's line: nothing
    clock.t = 150.0
    p.tick()
    assert out.getvalue().splitlines() == [
        "runs: 5/10 (50%; 1 of 6 to run), 0:30 elapsed, about 8:00 left",
        "runs: 5/10 (50%; 1 of 6 to run), 1:30 elapsed, about 9:00 left",
        "runs: 5/10 (50%; 1 of 6 to run), 2:30 elapsed, about 9:30 left",
    ]
    p.update(task, advance=5, left="")
    clock.t = 400.0
    p.tick()  # all done: the timer says nothing more
    assert out.getvalue().splitlines()[-1].startswith("runs: 10/10 (100%)")
    # without the caller's estimate a timer line leaves the time left out rather than repeat a stale one
    out2 = io.StringIO()
    q = PlainProgress(Console(file=out2, width=200), clock=clock, timer=False)
    q.add_task("report", total=4, completed=0, left="")
    q.update(0, advance=1, left="about 3:00 left")
    clock.t += 61.0
    q.tick()
    assert out2.getvalue().splitlines()[-1] == "report: 1/4 (25%), 1:01 elapsed"


def test_the_timer_thread_says_the_line_and_stops_with_the_block() -> None:
    out = io.StringIO()
    with PlainProgress(Console(file=out, width=200), every_s=0.2) as p:
        p.add_task("runs", total=3, completed=0, left="")
        p.update(0, advance=1)
        import time

        time.sleep(0.7)
        said = len(out.getvalue().splitlines())
    assert said >= 2  # the update's line and at least one of the timer's
    assert p._timer is not None and not p._timer.is_alive()
