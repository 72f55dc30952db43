"""Stored rows that lie (issue 30, part 3): a `runs` row of results.sqlite that is damaged or edited by hand
(invalid JSON, the wrong type, NaN, inf, absurd or 5,001-digit metrics, a config from a newer pelab) is left
out of every table and comparison, counted in one line, never a traceback, never averaged in; a damaged stored
study text is named as the database's damage. Nothing trains: the backend stores what the test says.
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hardening import TINY, cli, one_line

from pelab.records import ENGINE, RunResult
from pelab.study.store import DB_NAME, Store, row_problem

#: A stub backend's runs name the current computation, as real ones do (else a resume trains them again).
STUB_VERSIONS = {"engine": ENGINE}


@contextmanager
def stored(metrics: dict[str, float]):
    import pelab.study.driver as driver

    @contextmanager
    def fake(*args: object, **kwargs: object):
        def execute(groups, on_result) -> None:  # groups of one arm's seeds, as driver._backend's execute
            for cfg in (c for g in groups for c in g):
                on_result(
                    cfg, RunResult(run_id=cfg.run_id, status="done", metrics=metrics, params=10, versions=STUB_VERSIONS)
                )

        yield "a stub", execute, 1

    original = driver._backend
    driver._backend = fake
    try:
        yield
    finally:
        driver._backend = original


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A study folder of three finished runs (acc 0.5), stored by the stub backend."""
    from pelab.study.driver import run_study
    from pelab.study.grid import parse_study

    with stored({"acc": 0.5, "loss": 1.0}):
        run_study(parse_study(TINY), tmp_path / "o", quiet=True)
    return tmp_path / "o"


def tamper(out: Path, column: str, value: object) -> str:
    """Set ``column`` of the first stored run to ``value`` (as SQLite stores it); its run id."""
    with sqlite3.connect(out / DB_NAME) as conn:
        run_id = conn.execute("SELECT run_id FROM runs ORDER BY run_id LIMIT 1").fetchone()[0]
        conn.execute(f"UPDATE runs SET {column} = ? WHERE run_id = ?", (value, run_id))
    return run_id


LIES = {
    "invalid JSON": ("metrics", '{"acc": 0.9'),
    "config not an object": ("config", "[1, 2]"),
    "config a string": ("config", '"reverse"'),
    "metrics a list": ("metrics", "[0.9]"),
    "metrics a string": ("metrics", '"high"'),
    "metric a string": ("metrics", '{"acc": "0.9"}'),
    "NaN": ("metrics", '{"acc": NaN}'),
    "inf": ("metrics", '{"acc": 0.5, "loss": Infinity}'),
    "huge": ("metrics", '{"acc": 0.5, "loss": 1e300}'),
    "accuracy above 1": ("metrics", '{"acc": 7.0}'),
    "5001 digits": ("metrics", '{"acc": ' + "9" * 5001 + "}"),
    "deep": ("metrics", "[" * 50_000 + "]" * 50_000),
    "newer pelab": ("versions", '{"pelab": "99.0.0"}'),
    "unknown status": ("status", "finished"),
    "params a string": ("params", "many"),
    "curve an object": ("curve", '{"step": 1}'),
    "evals a number": ("evals", "3"),
    "seconds negative": ("seconds", -5.0),
    # a curve the report draws and sums (stats.curve_auc, figures.curves_plot): a point without step or loss was a
    # KeyError that ended the report
    "curve point without step": ("curve", '[{"loss": 1.0, "acc": 0.5}]'),
    "curve point without loss": ("curve", '[{"step": 1, "acc": 0.5}]'),
    "curve step backwards": ("curve", '[{"step": 2, "loss": 1.0}, {"step": 1, "loss": 0.9}]'),
    "curve step NaN": ("curve", '[{"step": NaN, "loss": 1.0}]'),
    "curve loss inf": ("curve", '[{"step": 1, "loss": Infinity}]'),
    # a finished run without its metrics was dropped from the means while the table still counted it
    "done without metrics": ("metrics", "{}"),
    "done without loss": ("metrics", '{"acc": 0.5}'),
    "done without accuracy": ("metrics", '{"loss": 1.9}'),  # its arm's table said 3 seeds, its mean was over 2
}


def config_from_newer_pelab(out: Path) -> tuple[str, str]:
    with sqlite3.connect(out / DB_NAME) as conn:
        config = json.loads(conn.execute("SELECT config FROM runs ORDER BY run_id LIMIT 1").fetchone()[0])
    config["model"]["rope_scaling"] = 2.0
    return "config", json.dumps(config)


@pytest.mark.parametrize("lie", [*LIES, "unknown config setting"])
def test_a_lying_row_is_left_out_and_counted(folder: Path, capsys, monkeypatch, lie: str) -> None:
    column, value = LIES[lie] if lie in LIES else config_from_newer_pelab(folder)
    run_id = tamper(folder, column, value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no raw NumPy overflow warning either
        r = cli(capsys, monkeypatch, "results", str(folder))
    assert r.rc == 0 and "Traceback" not in r.err + r.out, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pelab: warning: results database: 1 stored run(s) left out")
    assert run_id in lines[0]
    assert " 2 " in r.out and "0.500" in r.out  # two seeds averaged, the lie not among them
    with Store(folder, create=False) as store:
        assert len(store.rows(quiet=True)) == 2 and store.excluded[0][0] == run_id


@pytest.mark.parametrize("value", ["[", '[{"loss": 1.0, "acc": 0.5}]'], ids=["metrics", "curve-without-step"])
def test_the_report_context_counts_what_it_left_out(folder: Path, capsys, value: str) -> None:
    from pelab.report.build import load_context

    tamper(folder, "metrics" if value == "[" else "curve", value)
    ctx = load_context(folder)  # runs_frame sums each curve (curve_auc): a point without its step was a KeyError
    assert ctx.excluded == 1 and len(ctx.rows) == 2
    assert "1 stored run(s) left out" in capsys.readouterr().err


def test_the_templates_say_how_many_were_left_out() -> None:
    from pelab.report.build import template_env

    for name in ("report.html.j2", "report.md.j2"):
        source = template_env(Path(".")).loader.get_source(template_env(Path(".")), name)[0]
        assert "{{ excluded }} stored run(s) left out" in source


def test_a_damaged_stored_study_text_names_the_database(folder: Path, capsys, monkeypatch) -> None:
    with sqlite3.connect(folder / DB_NAME) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'study'", ('name = "x"\n[task\n',))
    for command in ("results", "report"):
        line = one_line(cli(capsys, monkeypatch, command, str(folder)), "results database: the study text stored in")
        assert "study file: not valid TOML" not in line and "is damaged" in line


def test_whole_rows_have_no_problem(folder: Path) -> None:
    with Store(folder, create=False) as store:
        assert len(store.rows()) == 3 and store.excluded == []


# --- the fuzzer: any value in any column is a row or a reason, never an exception -------------------------------
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
CELL = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.text(max_size=20),
    st.binary(max_size=12),
    JSONISH.map(lambda v: json.dumps(v, allow_nan=True)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    column=st.sampled_from(
        ["config", "status", "metrics", "evals", "curve", "versions", "params", "seconds", "reason"]
    ),
    value=CELL,
    metrics=st.dictionaries(st.sampled_from(["acc", "loss", "ppl", "acc_at_8"]), st.floats(), max_size=3),
)
def test_fuzzed_rows_are_a_row_or_a_reason(column: str, value: object, metrics: dict) -> None:
    from pelab.config import RunConfig

    row = {
        "run_id": "r",
        "config": RunConfig().canonical_json(),
        "status": "done",
        "metrics": json.dumps(metrics),
        "evals": "{}",
        "curve": "[]",
        "versions": "{}",
        "params": 1,
        "seconds": 1.0,
        "reason": None,
        column: value,
    }
    why = row_problem(row)
    assert why is None or (isinstance(why, str) and "\n" not in why and len(why) < 400)
    if why is None and row["status"] == "done":
        import math

        assert all(math.isfinite(v) for v in (row["metrics"] or {}).values())


# --- measures of stored models (kept by one report for the next) ------------------------------------------------
MEASURE = {"accuracy": [0.25, 0.5, float("nan")], "chance": 0.125}


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",  # not an object
        '{"accuracy": "high"}',  # a string where a number goes
        '{"accuracy": [0.5, "x"]}',
        '{"accuracy": true}',  # a bool is not a number
        '{"not_applicable": 3}',
        '{"accuracy": {"nested": 1}}',
    ],
)
def test_a_stored_measure_that_does_not_hold_together_is_not_read(tmp_path: Path, text: str) -> None:
    """A received folder's measures table is untrusted: a value a claim would trip on is left out (and so measured
    again), and a table of another shape reads as none; never a crash."""
    with Store(tmp_path) as store:
        assert store.put_measure("r1", "k", "sha", MEASURE, "code")
        store.conn.execute("INSERT INTO measures VALUES ('r2', 'k', 'sha', ?, 'code')", (text,))
        store.conn.commit()
        got = store.stored_measures("code")
    assert set(got) == {("r1", "k")}
    checkpoint, value = got[("r1", "k")]
    assert checkpoint == "sha" and json.dumps(value) == json.dumps(MEASURE)  # NaN included, numbers exact
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("DROP TABLE measures")
        db.execute("CREATE TABLE measures (other TEXT)")
    with Store(tmp_path) as store:
        assert store.stored_measures("code") == {}
        assert store.put_measure("r1", "k", "sha", MEASURE, "code") is False  # a cache that cannot be kept is skipped


def test_a_forgotten_run_forgets_its_measures(tmp_path: Path) -> None:
    """A run trained again (its checkpoint was damaged) is measured again: its stored measures go with its row."""
    import numpy as np

    with Store(tmp_path) as store:
        store.put_measure("r1", "k", "sha", {"x": np.float64(0.5), "y": np.arange(3)}, "c")  # NumPy's as JSON
        store.put_measure("r2", "k", "sha", {"x": 1}, "c")
        assert store.stored_measures("c")[("r1", "k")][1] == {"x": 0.5, "y": [0, 1, 2]}
        store.forget(["r1"])
        assert set(store.stored_measures("c")) == {("r2", "k")}


def test_a_run_trained_again_loses_the_measures_of_its_old_weights(folder: Path) -> None:
    """A run stored again (trained again: an older engine's row, a damaged checkpoint) has other weights; where
    its weights are gone later, the report must not read the old ones' measures as this model's."""
    with Store(folder) as store:
        run_id = store.rows()[0]["run_id"]
        store.put_measure(run_id, "k", "sha", MEASURE, "c")
        store.put_measure("other", "k", "sha", MEASURE, "c")
        cfg = next(r for r in store.study().runs if r.run_id == run_id)
        store.write(
            cfg, RunResult(run_id=run_id, status="done", metrics={"acc": 0.5, "loss": 1.0}, versions=STUB_VERSIONS)
        )
        assert set(store.stored_measures("c")) == {("other", "k")}


def test_a_measure_taken_by_other_measuring_code_is_not_read(tmp_path: Path) -> None:
    """A measure counts only under the code that took it: one kept by a pelab whose probe changed since is not
    this pelab's measure. A table kept before measures named their code takes the column, its rows matching no
    code, and so are measured again where the weights are."""
    with Store(tmp_path) as store:
        store.put_measure("r1", "k", "sha", MEASURE, "old")
        store.put_measure("r2", "k", "sha", MEASURE, "new")
        assert set(store.stored_measures("new")) == {("r2", "k")}
        assert set(store.stored_measures("old")) == {("r1", "k")}
        store.put_measure("r1", "k", "sha", MEASURE, "new")  # measured again by this code: the one row replaced
        assert set(store.stored_measures("new")) == {("r1", "k"), ("r2", "k")}
    with sqlite3.connect(tmp_path / DB_NAME) as db:  # the table as 400a38b made it
        db.execute("DROP TABLE measures")
        db.execute("CREATE TABLE measures (run_id TEXT NOT NULL, key TEXT NOT NULL, checkpoint TEXT NOT NULL, "
                   "value TEXT NOT NULL, PRIMARY KEY (run_id, key))")  # fmt: skip
        db.execute("INSERT INTO measures VALUES ('r1', 'k', 'sha', ?)", (json.dumps(MEASURE),))
    with Store(tmp_path) as store:
        assert store.stored_measures("new") == {}  # its rows name no code: none is this pelab's
        assert store.put_measure("r1", "k", "sha", MEASURE, "new")
        assert set(store.stored_measures("new")) == {("r1", "k")}


def test_a_folder_whose_weightless_runs_were_measured_by_other_code_is_refused_before_training(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A study carried without its weights whose measures another pelab kept would stop at its first look, hours
    in: ``pelab study`` says so in one line before anything trains, and stores nothing."""
    from pelab.report.context import measuring_code

    with Store(folder) as store:
        run_id = store.rows()[0]["run_id"]
        store.put_measure(run_id, "k", "sha", MEASURE, "another pelab's")
        before = store.conn.execute("SELECT COUNT(*) FROM runs").fetchone()
    tiny = folder.parent / "tiny.toml"
    tiny.write_text(TINY)
    line = one_line(cli(capsys, monkeypatch, "study", str(tiny), "--out", str(folder)), "measures kept by other")
    assert run_id in line
    with Store(folder) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM runs").fetchone() == before
        store.put_measure(run_id, "k", "sha", MEASURE, measuring_code())  # measured by this pelab: no objection
    with stored({"acc": 0.5, "loss": 1.0}):
        r = cli(capsys, monkeypatch, "study", str(tiny), "--out", str(folder), "--no-report")
    assert r.rc == 0, r.err
