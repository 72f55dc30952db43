"""`pelab verify`: a study folder's numbers recomputed from its models and compared with its database.

The independent computation here is the run itself: a study trains and stores its records, and verify must give
every number back bit for bit from the weights (or by training again) on this machine; then one number at a time
is edited in a copy, as a forger would, and verify must name exactly that number and exit 1."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from scripts import load_script
from typer.testing import CliRunner

from pelab.cli import app
from pelab.report.build import keep_measures
from pelab.report.verify import Checked, compare, relative, verify
from pelab.study.driver import run_study
from pelab.study.grid import parse_study

STUDY = """name = "verify"
seeds = [900, 901]
[task]
name = "charlm"
length = 16
[model]
d = 16
n_layers = 1
n_heads = 2
[train]
steps = 12
batch_size = 4
eval_batches = 2
eval_batch_size = 8
lr = 1e-3
[[grid]]
name = "g"
axes = { "model.combine" = ["add", "concat_split"] }
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four runs (two arms, two seeds stacked), with checkpoints and every measure a report could keep."""
    out = tmp_path_factory.mktemp("verify") / "s"
    run_study(parse_study(STUDY), out, workers=1, threads=1, checkpoints=True, quiet=True)
    keep_measures(out)
    return out


@pytest.fixture
def copy(study: Path, tmp_path: Path) -> Path:
    shutil.copytree(study, tmp_path / "s")
    return tmp_path / "s"


def _edit(folder: Path, sql: str, *args: object) -> None:
    with closing(sqlite3.connect(folder / "results.sqlite")) as c, c:
        c.execute(sql, args)


def _row(folder: Path, column: str) -> tuple[str, object]:
    with closing(sqlite3.connect(folder / "results.sqlite")) as c:
        rid, text = c.execute(f"SELECT run_id, {column} FROM runs WHERE status = 'done' ORDER BY run_id").fetchone()
    return rid, json.loads(text)


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def test_relative_difference_by_hand() -> None:
    assert relative(2.0, 2.00002) == pytest.approx(0.00002 / 2.00002)  # over the larger of the two
    assert relative(0.0, 1e-9) == pytest.approx(1e-9)  # below 1, the difference itself
    assert relative(-4.0, 4.0) == 2.0
    assert relative(math.nan, math.nan) == 0.0 and relative(math.inf, math.inf) == 0.0
    assert relative(1.0, math.nan) == math.inf and relative(math.inf, 1e300) == math.inf


def test_compare_names_every_leaf_that_differs_or_is_missing() -> None:
    c = Checked("r", "arm")
    stored = {"loss": 2.0, "acc": 0.5, "rows": [1.0, 2.0], "name": "x", "ok": True}
    ours = {"loss": 2.0 + 1e-7, "acc": 0.75, "rows": [1.0, 2.0, 3.0], "name": "y", "ok": 1, "new": 0.0}
    compare(stored, ours, 1e-5, c, "m")
    assert [d.where for d in c.differences] == ["m.acc", "m.name", "m.ok", "m.rows[2]", "m.new"]
    assert c.compared == 8 and c.largest == pytest.approx(0.25)


def test_every_stored_number_is_given_back_bit_for_bit(study: Path) -> None:
    before = _tree(study)
    found = verify(study, tol=0.0)
    assert found.runs == 4 and len(found.checked) == 4 and not found.unchecked and not found.design
    assert not found.differing and max(c.largest for c in found.checked) == 0.0
    assert not any(c.trained for c in found.checked)
    with closing(sqlite3.connect(study / "results.sqlite")) as conn:
        kept = conn.execute("SELECT COUNT(*) FROM measures").fetchone()[0]
    assert kept > 0  # the measures were compared too: each run's count covers its record and its measures
    per_run = {c.run_id: c.compared for c in found.checked}
    _, metrics = _row(study, "metrics")
    assert min(per_run.values()) > len(metrics)
    assert _tree(study) == before  # nothing in the folder was written


@pytest.mark.parametrize(
    ("column", "path", "change", "named"),
    [
        ("metrics", ("acc",), lambda v: v + 0.25, "metrics.acc"),
        ("metrics", ("val_loss",), lambda v: v * 1.001, "metrics.val_loss"),
        ("evals", ("16", "bpb"), lambda v: v - 0.01, "evals.16.bpb"),
        ("curve", (-1, "val_loss"), lambda v: v + 0.5, "curve[-1].val_loss"),
    ],
)
def test_an_edited_number_is_named(copy: Path, column: str, path: tuple, change, named: str) -> None:
    rid, value = _row(copy, column)
    leaf = value
    for key in path[:-1]:
        leaf = leaf[key]
    leaf[path[-1]] = change(leaf[path[-1]])
    _edit(copy, f"UPDATE runs SET {column} = ? WHERE run_id = ?", json.dumps(value), rid)
    found = verify(copy)
    assert [(c.run_id, d.where) for c in found.differing for d in c.differences] == [(rid, named)]


def test_an_edited_parameter_count_and_measure_are_named(copy: Path) -> None:
    rid, _ = _row(copy, "metrics")
    _edit(copy, "UPDATE runs SET params = params + 1 WHERE run_id = ?", rid)
    with closing(sqlite3.connect(copy / "results.sqlite")) as c, c:
        mrid, key, text = c.execute("SELECT run_id, key, value FROM measures ORDER BY run_id, key").fetchone()
        value = json.loads(text)
        name = next(k for k, v in value.items() if isinstance(v, float))
        value[name] += 0.1
        c.execute("UPDATE measures SET value = ? WHERE run_id = ? AND key = ?", (json.dumps(value), mrid, key))
    found = verify(copy)
    where = {(c.run_id, d.where) for c in found.differing for d in c.differences}
    assert where == {(rid, "params"), (mrid, f"measure {json.loads(key)[1]}.{name}")}


def test_a_run_without_weights_is_unchecked_until_trained_again(copy: Path) -> None:
    """Trained again, a run must give its record bit for bit, and the measures a report reads of it without its
    weights (the kept ones) are taken of the new model: a forged measure of a weightless run is named."""
    with closing(sqlite3.connect(copy / "results.sqlite")) as c:
        rid, key, text = c.execute("SELECT run_id, key, value FROM measures ORDER BY run_id").fetchone()
        metrics = json.loads(c.execute("SELECT metrics FROM runs WHERE run_id = ?", (rid,)).fetchone()[0])
    os.unlink(copy / "checkpoints" / f"{rid}.safetensors")
    found = verify(copy)
    assert not found.differing and [ids for ids in found.unchecked.values()] == [[rid]]
    again = verify(copy, tol=0.0, retrain=[rid])  # seeds 900 and 901 trained in one stack; 900 alone is the same
    assert not again.unchecked and not again.differing
    checked = next(c for c in again.checked if c.run_id == rid)
    assert checked.trained and any(n.startswith("measure") for n, _ in _compared(copy, rid))
    value = json.loads(text)
    name = next(k for k, v in value.items() if isinstance(v, float))
    value[name] += 0.1
    _edit(copy, "UPDATE measures SET value = ? WHERE run_id = ? AND key = ?", json.dumps(value), rid, key)
    metrics["train_loss"] += 1e-3  # what only training gives back
    _edit(copy, "UPDATE runs SET metrics = ? WHERE run_id = ?", json.dumps(metrics), rid)
    found = verify(copy, retrain=[rid])
    assert [d.where for c in found.differing for d in c.differences] == [
        "metrics.train_loss",
        f"measure {json.loads(key)[1]}.{name}",
    ]


def _compared(folder: Path, rid: str) -> list[tuple[str, object]]:
    """Every number verify compares for one run trained again, by name (``compare`` recorded with a tolerance of
    -1, so each is a difference)."""
    found = verify(folder, tol=-1.0, retrain=[rid])
    return [(d.where, d.stored) for c in found.checked for d in c.differences + c.moved if c.run_id == rid]


def test_a_damaged_checkpoint_is_unchecked_not_a_crash(copy: Path) -> None:
    rid, _ = _row(copy, "metrics")
    (copy / "checkpoints" / f"{rid}.safetensors").write_bytes(b"\0" * 100)
    found = verify(copy)
    assert [(why.split(",")[0], ids) for why, ids in found.unchecked.items()] == [("a damaged checkpoint", [rid])]
    assert len(found.checked) == 3


def test_the_command_exit_codes_and_lines(copy: Path) -> None:
    r = CliRunner().invoke(app, ["verify", str(copy)])
    assert r.exit_code == 0, r.output
    assert "4 of 4 run(s) checked (0 of them trained again)" in r.output
    assert "matches" in r.output and "checked only by training again" in r.output
    rid, _ = _row(copy, "metrics")
    os.unlink(copy / "checkpoints" / f"{rid}.safetensors")
    r = CliRunner().invoke(app, ["verify", str(copy)])
    assert r.exit_code == 3 and "1 run(s) not checked: no checkpoint" in r.output
    written = copy.parent / "v.json"
    r = CliRunner().invoke(app, ["verify", str(copy), "--retrain-some", "4", "--draw", "7", "--json", str(written)])
    assert r.exit_code == 0 and "trained again 4 run(s) drawn at random (--draw 7)" in r.output, r.output
    assert "checked only by training again" not in r.output
    record = json.loads(written.read_text())
    assert record["drawn"][0] == rid and len(record["checked"]) == 4  # the run without weights is drawn first
    _edit(copy, "UPDATE runs SET flops_per_token = flops_per_token * 2 WHERE run_id = ?", rid)
    r = CliRunner().invoke(app, ["verify", str(copy), "--retrain", rid[:6]])
    assert r.exit_code == 1 and "flops_per_token" in r.output and "1 number(s) in 1 run(s) differ" in r.output


def test_bad_input_is_one_line_and_exit_2(study: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "results.sqlite").symlink_to(study / "results.sqlite")
    cases = {
        "tol": ["verify", str(study), "--tol", "2"],
        "retrain": ["verify", str(study), "--retrain", "ffff"],
        "retrain-some": ["verify", str(study), "--retrain-some", "-1"],
        "draw": ["verify", str(study), "--draw", "3"],
        "device": ["verify", str(study), "--device", "tpu"],
        "out": ["verify", str(tmp_path)],
        "results.sqlite": ["verify", str(linked)],
    }
    procs = {k: subprocess.Popen([sys.executable, "-m", "pelab", *a], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for k, a in cases.items()}  # fmt: skip
    for field, p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 2, (field, out, err)
        assert err.count("\n") == 1 and field in err and "Traceback" not in err, (field, err)


def test_a_run_of_an_older_computation_is_left_as_the_report_leaves_it(copy: Path) -> None:
    """The report leaves out an older computation's runs beside the current one's, and reads them when there are
    no others (``records.same_computation``): verify checks what the report reads."""
    rid, versions = _row(copy, "versions")
    versions["engine"] = "stacked-1"
    _edit(copy, "UPDATE runs SET versions = ? WHERE run_id = ?", json.dumps(versions), rid)
    found = verify(copy)
    assert [(why.split(" (")[0], ids) for why, ids in found.unchecked.items()] == [
        ("trained by an older computation", [rid])
    ]
    _edit(copy, "UPDATE runs SET versions = ?", json.dumps(versions))
    found = verify(copy)
    assert len(found.checked) == 4 and not found.unchecked


def test_which_runs_trained_again_must_match_bit_for_bit() -> None:
    """Only on the kind of machine a run recorded training on; the kind is the folder's own word, so it decides
    nothing of a check from the weights (judged everywhere)."""
    import torch

    from pelab.device import cpu_kind
    from pelab.report.verify import unjudged

    cpu, other = torch.device("cpu"), "AMD EPYC; AVX512; flags 0"
    here = {"versions": {"cpu": cpu_kind()}, "device": "cpu"}
    assert unjudged(here, cpu) is None
    assert unjudged({**here, "versions": {"cpu": other}}, cpu) == other
    assert unjudged({**here, "versions": {}}, cpu) == "a CPU it did not record"  # pelab before it recorded kinds
    assert unjudged({**here, "device": "cuda:0"}, cpu) == "cuda:0, trained again on cpu"
    gpu = {**here, "device": "cuda:0", "versions": {"cpu": cpu_kind(), "gpu": "NVIDIA H200"}}
    assert unjudged(gpu, torch.device("meta")) == "cuda:0, trained again on meta"


def test_a_run_trained_elsewhere_drifts_and_is_shown_not_judged(copy: Path) -> None:
    """Training is bit for bit on one CPU kind only: a run of another kind trained again that moved is a
    measurement (exit 3, with the number that moved most), never "differs"; the same run trained here must match.
    The recorded kind cannot shelter an edit from its weights: with its checkpoint there, the edit is named."""
    rid, row = _row(copy, "versions")
    _, metrics = _row(copy, "metrics")
    metrics["bpb"] *= 1.01
    _edit(copy, "UPDATE runs SET metrics = ? WHERE run_id = ?", json.dumps(metrics), rid)
    row["cpu"] = "Another CPU; AVX2; flags 12345678"
    _edit(copy, "UPDATE runs SET versions = ?, device = 'cuda:0' WHERE run_id = ?", json.dumps(row), rid)
    r = CliRunner().invoke(app, ["verify", str(copy)])
    assert r.exit_code == 1 and f"{rid}  metrics.bpb" in r.output  # its weights: judged wherever it was made
    _edit(copy, "UPDATE runs SET device = 'cpu' WHERE run_id = ?", rid)
    os.unlink(copy / "checkpoints" / f"{rid}.safetensors")
    r = CliRunner().invoke(app, ["verify", str(copy), "--retrain", rid])
    assert r.exit_code == 3, r.output
    assert "1 run(s) trained again on another kind of machine than theirs moved" in r.output
    assert f"{rid}  metrics.bpb: stored" in r.output and "(made on Another CPU; AVX2" in r.output
    del row["cpu"]
    _edit(copy, "UPDATE runs SET versions = ? WHERE run_id = ?", json.dumps({**row, "cpu": cpu_kind_here()}), rid)
    r = CliRunner().invoke(app, ["verify", str(copy), "--retrain", rid])
    assert r.exit_code == 1 and f"{rid}  metrics.bpb" in r.output  # trained here: it had to match


def cpu_kind_here() -> str:
    from pelab.device import cpu_kind

    return cpu_kind()


def test_worker_processes_give_what_one_process_gives(study: Path) -> None:
    """A large check runs on the report's worker processes (one per core): the same runs, in the folder's order,
    the same numbers compared and found."""
    before = _tree(study)
    alone, pooled = verify(study, workers=1), verify(study, workers=2)
    assert [(c.run_id, c.compared, c.largest) for c in pooled.checked] == [
        (c.run_id, c.compared, c.largest) for c in alone.checked
    ]
    assert _tree(study) == before


def test_the_kernels_bench_prints_each_stand_in_for_another_cpu(study: Path, monkeypatch, capsys) -> None:
    """bench/verify_isa.py: each environment's recomputation in a subprocess of its own, as a table row; here the
    machine as it is (every number bit for bit, so 0) and PyTorch's kernels without vectors (not above 1e-5)."""
    bench = load_script("bench/verify_isa.py")
    kernels = {k: bench.KERNELS[k] for k in ("as this machine, 2 threads", "PyTorch kernels: no vectors")}
    monkeypatch.setattr(bench, "KERNELS", kernels)
    monkeypatch.setattr("sys.argv", ["verify_isa", str(study)])
    bench.main()
    rows = [
        line.split(" | ")
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and "---" not in line
    ]
    assert [r[0] for r in rows[1:]] == ["| as this machine, 2 threads", "| PyTorch kernels: no vectors"]
    assert [r[1] for r in rows[1:]] == ["4", "4"]
    assert float(rows[1][3]) == 0.0 and float(rows[2][3]) <= 1e-5


def test_a_removed_row_or_a_seed_said_to_diverge_is_not_passed(copy: Path) -> None:
    """Dropping a bad seed changes a verdict as an edit does: a run of the study's design that the database lacks
    is unchecked, a run said to have diverged is unchecked until trained again, and trained again it must end so."""
    rid, _ = _row(copy, "metrics")
    _edit(copy, "UPDATE runs SET status = 'diverged', reason = 'non-finite loss at step 3' WHERE run_id = ?", rid)
    found = verify(copy)
    assert {why.split(" (")[0]: ids for why, ids in found.unchecked.items()} == {"ended diverged": [rid]}
    r = CliRunner().invoke(app, ["verify", str(copy), "--retrain", rid])
    assert r.exit_code == 1 and "status" in r.output and "diverged" in r.output, r.output
    _edit(copy, "DELETE FROM runs WHERE run_id = ?", rid)
    found = verify(copy)
    assert {why.split(" (")[0]: ids for why, ids in found.unchecked.items()} == {
        "in the study's design, not in its database": [rid]
    }
    assert CliRunner().invoke(app, ["verify", str(copy)]).exit_code == 3


def test_a_run_that_diverged_is_trained_again_to_the_same_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that starts with a NaN weight diverges: trained again, it diverges at the same step with the same
    curve, and a row that says otherwise (another step, or that it finished) is a difference. The independent
    record is the run's own result."""
    import torch

    from pelab import train
    from pelab.device import cpu_kind
    from pelab.report.verify import retrain_one

    real = train.Transformer

    def poisoned(cfg):  # noqa: ANN001, ANN202
        m = real(cfg)
        with torch.no_grad():
            m.head.weight[0, 0] = math.nan
        return m

    monkeypatch.setattr(train, "Transformer", poisoned)
    run = parse_study(STUDY).runs[0]
    result = train.train_run(run, device="cpu", threads=1)
    assert result.status == "diverged" and result.versions["cpu"] == cpu_kind(), result
    row = {**result.model_dump(), "config": run.model_dump()}
    cpu = torch.device("cpu")

    def again(changed: dict) -> Checked:
        out = Checked(row["run_id"], "arm")
        assert retrain_one(Path("."), {**row, **changed}, run, 0.0, cpu, out, {}, False) is None
        return out

    same = again({})
    assert same.differences == [] and same.compared > 0 and same.drift is None
    assert [d.where for d in again({"reason": "non-finite loss at step 7"}).differences] == ["reason"]
    assert [(d.where, d.stored) for d in again({"status": "done"}).differences] == [("status", "done")]
    out = Checked(row["run_id"], "arm")  # a machine's failure says nothing of the config: not judged
    why = retrain_one(Path("."), {**row, "status": "failed", "reason": "OSError: disk full"}, run, 0.0, cpu, out, {},
                      False)  # fmt: skip
    assert why is not None and why.startswith("it failed when it trained") and out.differences == []


def test_the_report_says_which_kinds_of_machine_trained_its_runs() -> None:
    from pelab.report.build import machine_facts

    a, b = "Intel Xeon; AVX512; flags 1", "AMD EPYC; AVX512; flags 2"
    rows = [{"status": "done", "device": "cpu", "versions": {"cpu": v}} for v in (a, a, b)]
    rows += [
        {"status": "done", "device": "cpu", "versions": {}},  # pelab before it recorded them
        {"status": "done", "device": "cuda:0", "versions": {"cpu": a, "gpu": "NVIDIA H200"}},
        {"status": "diverged", "device": "cpu", "versions": {"cpu": b}},  # made no number the report reads
    ]
    assert machine_facts(rows)["runs trained on"] == (
        f"{a}: 2 run(s); {b}: 1 run(s); cpu, not recorded: 1 run(s); NVIDIA H200: 1 run(s)"
    )
    assert "runs trained on" not in machine_facts([])


def test_a_seeds_checkpoint_copied_over_anothers_is_named(copy: Path) -> None:
    """A bad seed's weights replaced by a good seed's of the same arm, its numbers honestly recomputed from them:
    every number matches its file, but two seeds never train to one file; trained again, the weights differ too."""
    import torch

    from pelab.config import RunConfig
    from pelab.report.verify import stored_weights
    from pelab.tasks import make_task
    from pelab.train import curve_val_loss, end_metrics

    with closing(sqlite3.connect(copy / "results.sqlite")) as c:
        rows = c.execute("SELECT run_id, config FROM runs ORDER BY run_id").fetchall()
    arms: dict[str, list[str]] = {}
    for rid, text in rows:
        arms.setdefault(RunConfig.model_validate_json(text).arm_id, []).append(rid)
    good, bad = next(ids for ids in arms.values() if len(ids) == 2)
    shutil.copyfile(copy / "checkpoints" / f"{good}.safetensors", copy / "checkpoints" / f"{bad}.safetensors")
    cfg = RunConfig.model_validate_json(dict(rows)[bad])
    model, task = stored_weights(copy, bad, cfg), make_task(cfg.task)
    with torch.no_grad():  # the forger's tool: pelab's own functions, on the copied weights, with the bad run's windows
        metrics, evals = end_metrics(cfg, model, task, torch.device("cpu"))
        _, old = _row_of(copy, bad, "metrics")
        _, curve = _row_of(copy, bad, "curve")
        curve[-1]["val_loss"] = curve_val_loss(model, task, cfg, torch.device("cpu"))
    metrics["train_loss"] = old["train_loss"]
    _edit(copy, "UPDATE runs SET metrics = ?, evals = ?, curve = ? WHERE run_id = ?", json.dumps(metrics),
          json.dumps(evals), json.dumps(curve), bad)  # fmt: skip
    _edit(copy, "DELETE FROM measures WHERE run_id = ?", bad)
    found = verify(copy)
    named = {(c.run_id, d.where) for c in found.differing for d in c.differences}
    assert named == {(good, "checkpoint"), (bad, "checkpoint")}
    found = verify(copy, retrain=[bad])
    assert (bad, "weights") in {(c.run_id, d.where) for c in found.differing for d in c.differences}


def _row_of(folder: Path, rid: str, column: str) -> tuple[str, object]:
    with closing(sqlite3.connect(folder / "results.sqlite")) as c:
        return rid, json.loads(c.execute(f"SELECT {column} FROM runs WHERE run_id = ?", (rid,)).fetchone()[0])


def test_nothing_in_a_received_folder_is_written(copy: Path) -> None:
    """SQLite writes to a database it opens (its journal mode, a missing table, a received -wal merged and
    deleted): verify reads a private copy, so the folder is byte for byte as it came, its -wal included."""
    with closing(sqlite3.connect(copy / "results.sqlite")) as c:
        c.execute("PRAGMA journal_mode=DELETE")
    before = _tree(copy)
    assert verify(copy).checked and _tree(copy) == before
    with closing(sqlite3.connect(copy / "results.sqlite")) as c:  # a sender's last transaction, still in its -wal
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA wal_autocheckpoint=0")
        c.execute("UPDATE runs SET params = params + 1 WHERE run_id = (SELECT MIN(run_id) FROM runs)")
        c.commit()
        shutil.copytree(copy, copy.parent / "sent")  # as it was sent: the database and its -wal, unmerged
    sent = copy.parent / "sent"
    before = _tree(sent)
    assert (sent / "results.sqlite-wal").stat().st_size > 0
    found = verify(sent)
    assert [d.where for c in found.differing for d in c.differences] == ["params"]  # the -wal was read
    assert _tree(sent) == before


def test_a_design_edited_in_the_database_is_said(copy: Path) -> None:
    """Dropping a seed from every arm and from the study text stored beside the runs: the design no longer is the
    one protocol.json fixed before training, which verify says (exit 3), with the protocol's line."""
    with closing(sqlite3.connect(copy / "results.sqlite")) as c, c:
        text = c.execute("SELECT value FROM meta WHERE key = 'study'").fetchone()[0]
        c.execute("UPDATE meta SET value = ? WHERE key = 'study'", (text.replace("[900, 901]", "[900]"),))
        c.execute("DELETE FROM runs WHERE json_extract(config, '$.seed') = 901")
    found = verify(copy)
    assert len(found.checked) == 2 and any("study file changed" in p for p in found.design), found.design
    r = CliRunner().invoke(app, ["verify", str(copy)])
    assert r.exit_code == 3 and "verify: protocol: rules sha256" in r.output and "the design:" in r.output


def test_hostile_rows_are_left_out_or_unchecked_never_a_traceback(copy: Path) -> None:
    rid, _ = _row(copy, "metrics")
    with closing(sqlite3.connect(copy / "results.sqlite")) as c, c:
        code, ck = c.execute("SELECT code, checkpoint FROM measures").fetchone()[:2]
        keys = ["not json", '["measure", "cross_share", "x"]', json.dumps(["measure", "no_such", rid, False]),
                '{"a": 1}', json.dumps(["measure", "cross_share", rid, "yes"])]  # fmt: skip
        for key in keys:
            c.execute("INSERT INTO measures (run_id, key, code, checkpoint, value) VALUES (?, ?, ?, ?, ?)",
                      (rid, key, code, ck, '{"cross": 1.0}'))  # fmt: skip
    found = verify(copy)
    assert (
        not found.differing
        and not found.unchecked
        and found.notes == ["5 kept measure(s) no report reads (another run's, or no measure): left out"]
    )
    _edit(copy, "UPDATE runs SET threads = NULL WHERE run_id = ?", rid)
    os.unlink(copy / "checkpoints" / f"{rid}.safetensors")
    found = verify(copy, retrain=[rid])
    assert [c.run_id for c in found.checked if c.trained] == [rid] and not found.differing


def test_bf16_weights_made_on_another_kind_of_device_are_sent_there_not_judged(tmp_path: Path) -> None:
    """bf16 rounds differently on a GPU than on a CPU (by an amount not measured here): such a run is left
    unchecked with where to check it, never accused; fp32 runs are judged wherever they say they were made."""
    from pelab.train import bf16_supported

    if not bf16_supported(__import__("torch").device("cpu")):
        pytest.skip("this CPU has no bf16")
    text = STUDY.replace("lr = 1e-3", 'lr = 1e-3\nprecision = "bf16"').replace("seeds = [900, 901]", "seeds = [900]")
    run_study(parse_study(text), tmp_path / "s", workers=1, threads=1, checkpoints=True, quiet=True)
    assert not verify(tmp_path / "s", tol=0.0).unchecked  # made here: bit for bit
    rid, _ = _row(tmp_path / "s", "metrics")
    _edit(tmp_path / "s", "UPDATE runs SET device = 'cuda:0' WHERE run_id = ?", rid)
    found = verify(tmp_path / "s")
    assert found.unchecked == {"evaluated in bf16 on cuda: run verify there (--device)": [rid]}


def test_a_forged_measure_on_a_damaged_checkpoint_is_named_when_trained_again(copy: Path) -> None:
    """The report reads a kept measure whose sha256 is the checkpoint file's, whole or not: a truncated file keyed
    so hides a forged measure from the weights, and training the run again takes that measure of the new model."""
    import hashlib

    with closing(sqlite3.connect(copy / "results.sqlite")) as c:
        rid, key, text = c.execute("SELECT run_id, key, value FROM measures ORDER BY run_id").fetchone()
    path = copy / "checkpoints" / f"{rid}.safetensors"
    path.write_bytes(path.read_bytes()[:200])
    value = json.loads(text)
    name = next(k for k, v in value.items() if isinstance(v, float))
    value[name] += 0.1
    _edit(copy, "UPDATE measures SET value = ?, checkpoint = ? WHERE run_id = ? AND key = ?", json.dumps(value),
          hashlib.sha256(path.read_bytes()).hexdigest(), rid, key)  # fmt: skip
    found = verify(copy, retrain=[rid])
    assert [(c.run_id, d.where) for c in found.differing for d in c.differences] == [
        (rid, f"measure {json.loads(key)[1]}.{name}")
    ]


def test_the_private_copy_carries_the_journals_and_follows_no_link(copy: Path, tmp_path: Path) -> None:
    """A hot rollback journal changes what SQLite reads (it rolls the database back on opening): the copy verify
    reads carries it, and the -wal, as they are; a link at either is refused, never followed."""
    from pelab.errors import PelabError
    from pelab.report.verify import private_database

    (copy / "results.sqlite-journal").write_bytes(b"journal")
    with private_database(copy) as there:
        assert (there / "results.sqlite-journal").read_bytes() == b"journal"
        assert (there / "results.sqlite").read_bytes() == (copy / "results.sqlite").read_bytes()
    (copy / "results.sqlite-journal").unlink()
    (tmp_path / "elsewhere").write_bytes(b"x")
    (copy / "results.sqlite-journal").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PelabError, match="results.sqlite-journal"), private_database(copy):
        pass


def test_a_row_outside_the_design_changes_nothing_the_report_reads(copy: Path) -> None:
    """The report reads the design's rows alone: a stored row of another design (an older engine's, or one that
    failed) is neither read by it nor made to look unread here, nor drawn to train again."""
    rid, row = _row(copy, "config")
    other = {**row, "seed": 4242}
    from pelab.config import RunConfig

    new_id = RunConfig.model_validate(other).run_id
    with closing(sqlite3.connect(copy / "results.sqlite")) as c, c:
        cols = [r[1] for r in c.execute("PRAGMA table_info(runs)")]
        values = dict(zip(cols, c.execute("SELECT * FROM runs WHERE run_id = ?", (rid,)).fetchone(), strict=True))
        values.update(run_id=new_id, config=json.dumps(other), status="failed", reason="OSError: disk full")
        c.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", list(values.values()))
    found = verify(copy, retrain_some=1, draw=0)
    assert found.unchecked == {"failed when it trained (a machine's failure: nothing of its config to check)": [new_id]}
    assert found.drawn != [new_id] and len(found.checked) == 4


def test_a_key_the_report_never_reads_is_never_measured(copy: Path) -> None:
    with closing(sqlite3.connect(copy / "results.sqlite")) as c, c:
        rid, key, code, ck = c.execute("SELECT run_id, key, code, checkpoint FROM measures").fetchone()
        tight = json.dumps(json.loads(key), separators=(",", ":"))  # the same list, spelled without spaces
        c.execute("INSERT INTO measures (run_id, key, code, checkpoint, value) VALUES (?, ?, ?, ?, ?)",
                  (rid, tight, code, ck, '{"cross": 9.0}'))  # fmt: skip
    found = verify(copy)
    assert not found.differing and found.notes == [
        "1 kept measure(s) no report reads (another run's, or no measure): left out"
    ]


def test_a_run_not_trained_again_keeps_its_weights_check(copy: Path) -> None:
    rid, metrics = _row(copy, "metrics")
    metrics["acc"] += 0.25
    _edit(copy, "UPDATE runs SET metrics = ?, threads = 2000 WHERE run_id = ?", json.dumps(metrics), rid)
    found = verify(copy, retrain=[rid])
    assert [(c.run_id, d.where) for c in found.differing for d in c.differences] == [(rid, "metrics.acc")]
    assert next(c for c in found.checked if c.run_id == rid).not_trained.startswith("it records 2000 threads")


def test_a_stored_reason_reaches_the_terminal_with_its_control_characters_shown(copy: Path) -> None:
    rid, _ = _row(copy, "metrics")
    os.unlink(copy / "checkpoints" / f"{rid}.safetensors")
    _edit(copy, "UPDATE runs SET status = 'failed', reason = ? WHERE run_id = ?", "OSError: \x1b[2J\x07gone", rid)
    r = CliRunner().invoke(app, ["verify", str(copy), "--retrain", rid])
    assert r.exit_code == 3 and "it failed when it trained (OSError: \\x1b[2J\\x07gone)" in r.output, r.output
    assert "\x1b" not in r.output and "\x07" not in r.output
