"""`pelab analyze`, run as a user runs it, on models trained here and stored as a study stores them.

Tiny models are trained in-process (learned + add; rotary + none, which has no input
table; and the two multiplicative combiners, learned + multiply and matrix of rank 2) and
written to a results store with their checkpoints where
`pelab study --checkpoints` puts them. `analyze all` on the trained model and a
scheme-alone analysis run in fresh interpreters, as a user runs them; the rest call the
same entry point in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pelab.cli import main
from pelab.config import RunConfig
from pelab.study.store import Store
from pelab.train import train_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_config(scheme: str, combine: str, steps: int, **model: object) -> RunConfig:
    return RunConfig(
        task={"name": "reverse", "length": 6, "vocab": 8},
        model={"d": 16, "n_heads": 2, "position": {"scheme": scheme}, "combine": combine, **model},
        train={"steps": steps, "lr": 3e-3, "batch_size": 32, "eval_batches": 2},
    )


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    out: Path


@dataclass
class Trained:
    root: Path
    db: Path  # a study folder with checkpoints
    bare: Path  # the same rows, as a study run without --checkpoints leaves them
    learned: RunConfig
    rotary: RunConfig
    multiply: RunConfig
    matrix: RunConfig


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    root = tmp_path_factory.mktemp("analyze")
    db, bare = root / "study", root / "bare"
    (db / "checkpoints").mkdir(parents=True)
    learned, rotary = run_config("learned", "add", 120), run_config("rotary", "none", 20)
    multiply, matrix = run_config("learned", "multiply", 20), run_config("none", "matrix", 20, matrix_rank=2)
    store, bare_store = Store(db), Store(bare)
    for cfg in (learned, rotary, multiply, matrix):
        result = train_run(cfg, threads=1, checkpoint=db / "checkpoints" / f"{cfg.run_id}.safetensors")
        assert result.status == "done", result.reason
        store.write(cfg, result)
        bare_store.write(cfg, result)
    store.close()
    bare_store.close()
    table = np.sin(np.arange(24)[:, None] * np.array([1.0, 0.5, 0.25, 0.1])[None, :])
    np.savetxt(root / "table.csv", table, delimiter=",", fmt="%.17g")
    return Trained(root, db, bare, learned, rotary, multiply, matrix)


@pytest.fixture(scope="module")
def runs(trained: Trained) -> dict[str, Result]:
    """The user's path, in fresh interpreters: every analysis on the trained model, and a scheme alone."""
    commands = {
        "all": ["all", "--run", trained.learned.run_id[:8], "--db", str(trained.db)],
        "spectrum": ["spectrum", "--position", "sinusoidal", "--d", "64", "--length", "32"],
    }
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    procs = {}
    for name, args in commands.items():
        out = trained.root / f"out-{name}"
        cmd = [sys.executable, "-m", "pelab", "analyze", *args, "--out", str(out)]
        procs[name] = (out, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = {}
    for name, (out, proc) in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        results[name] = Result(proc.returncode, stdout, stderr, out)
    return results


def in_process(args: list[str], out: Path, monkeypatch, capsys) -> Result:
    """The same entry point without a new interpreter (each costs seconds of imports)."""
    monkeypatch.setattr(sys, "argv", ["pelab", "analyze", *args, "--out", str(out)])
    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit) as e:
        main()
    captured = capsys.readouterr()
    return Result(e.value.code, captured.out, captured.err, out)


def written(res: Result, name: str) -> dict:
    assert res.rc == 0, res.stderr
    data = json.loads((res.out / f"{name}.json").read_text())
    pngs = [f for f in data["files"] if f.endswith(".png")]
    assert pngs and f"{name}.json" in data["files"]
    for f in pngs:
        path = res.out / f
        assert path.read_bytes()[:8] == PNG_MAGIC, f
        with Image.open(path) as im:
            im.verify()  # a whole, decodable image, not just a header
        with Image.open(path) as im:
            assert im.size[0] > 200 and im.size[1] > 200
    return data


def test_all_analyses_on_a_trained_model(runs: dict[str, Result]) -> None:
    res = runs["all"]
    names = ("spectrum", "geometry", "attention", "probes", "symmetry", "linearity")
    data = {name: written(res, name) for name in names}
    for name in data:
        assert f"{name}:" in res.stdout
    att = data["attention"]
    assert att["max_abs_diff"] < 1e-10 and att["terms"] == ["tt", "tp", "pt", "pp", "bias"]
    for kind in ("variance", "variance_within_query", "covariance", "covariance_within_query"):
        assert sum(att["shares"][kind].values()) == pytest.approx(1.0)
    assert "LayerNorm" in att["definition"]
    p = data["probes"]
    assert len(p["position"]) == 3  # layer-1 input and after each of 2 blocks
    assert p["position"][0]["accuracy"] > p["position"][0]["chance"] + 0.5  # learned positions are added: readable
    assert abs(p["shuffled"]["accuracy"] - p["shuffled"]["chance"]) < 0.1
    assert p["token"]["chance"] < p["token"]["accuracy"] and p["collisions"]["points"] == 8 * 6
    assert data["symmetry"]["equivariant_schemes"] == ["none"] and not data["symmetry"]["trained"]["equivariant"]
    g = data["geometry"]["overlap"]
    assert set(g) == {"init", "trained"} and 0 <= g["trained"]["overlap"] <= 1
    lin = data["linearity"]
    assert lin["subject"] == "trained" and {"trained", "initial", "sinusoidal (reference)"} <= set(lin["tables"])
    assert data["spectrum"]["d"] == 16 and data["spectrum"]["length"] == 6


def test_all_on_a_model_without_an_input_table_skips_what_needs_one(trained: Trained, monkeypatch, capsys) -> None:
    args = ["all", "--run", trained.rotary.run_id, "--db", str(trained.db)]
    res = in_process(args, trained.root / "out-rotary", monkeypatch, capsys)
    for name in ("probes", "symmetry", "geometry"):
        written(res, name)
    for name in ("spectrum", "attention", "linearity"):
        assert not (res.out / f"{name}.json").exists()
        assert f"{name}: skipped" in res.stdout
    assert "overlap" not in json.loads((res.out / "geometry.json").read_text())["summary"]


@pytest.mark.parametrize("combine", ["multiply", "matrix"])
def test_all_on_a_multiplicative_combiner_says_what_does_not_apply(
    trained: Trained, combine: str, monkeypatch, capsys
) -> None:
    """The four terms are skipped with the reason, geometry keeps its random cosines and says why it has no
    overlap, and the probes read token and position from the layer-1 input as for any combiner."""
    cfg = getattr(trained, combine)
    res = in_process(
        ["all", "--run", cfg.run_id, "--db", str(trained.db)], trained.root / f"out-{combine}", monkeypatch, capsys
    )
    assert not (res.out / "attention.json").exists()
    assert f"attention: skipped: does not apply to combine={combine}, a multiplicative combiner" in " ".join(
        res.stdout.split()
    )
    g = written(res, "geometry")
    assert g["overlap"] == {} and f"combine={combine}" in g["not_applicable"]
    assert "does not apply" in g["summary"]
    p = written(res, "probes")
    assert p["token"]["accuracy"] > p["token"]["chance"] + 0.5
    assert p["position"][0]["accuracy"] > p["position"][0]["chance"] + 0.2
    assert p["collisions"]["points"] == 8 * 6
    written(res, "symmetry")
    table_analyses = ("spectrum", "linearity")
    if combine == "multiply":  # its position table is a table like any other
        for name in table_analyses:
            written(res, name)
    else:
        for name in table_analyses:
            assert f"{name}: skipped: combine=matrix carries position in its own per-position maps" in " ".join(
                res.stdout.split()
            )


def test_scheme_alone(runs: dict[str, Result]) -> None:
    s = written(runs["spectrum"], "spectrum")
    assert s["d"] == 64 and s["length"] == 32 and len(s["range"]) == 64
    assert s["values"][0] == {"position": 0, "dimension": 0, "value": 0.0}


def test_a_users_table(trained: Trained, monkeypatch, capsys) -> None:
    args = ["linearity", "--table", str(trained.root / "table.csv")]
    lin = written(in_process(args, trained.root / "out-table", monkeypatch, capsys), "linearity")
    assert lin["subject"] == "table table.csv"
    first = lin["tables"]["table table.csv"][0]
    assert first["determined"] and first["residual"] > 1e-3  # sines alone (no cosines) are not closed under shift


MISTAKES = {
    "no_checkpoints": (["probes", "--run", "{learned}", "--db", "{bare}"], "--checkpoints"),
    "needs_model": (["attention", "--position", "sinusoidal"], "attention: needs a trained model"),
    "no_table": (["attention", "--run", "{rotary}", "--db", "{db}"], "attention: position=rotary"),
    "unknown": (["shape", "--position", "sinusoidal"], "analysis: unknown value 'shape'; allowed: all, attention"),
    "both": (["spectrum", "--run", "{learned}", "--db", "{db}", "--position", "learned"], "leave them out with --run"),
    "half": (["spectrum", "--run", "{learned}"], "give both --run RUN_ID and --db"),
    "no_run": (["spectrum", "--run", "zzz", "--db", "{db}"], "no run 'zzz'"),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_mistakes_end_in_one_line_and_exit_2(trained: Trained, name: str, monkeypatch, capsys) -> None:
    args, needle = MISTAKES[name]
    ids = dict(learned=trained.learned.run_id, rotary=trained.rotary.run_id, db=trained.db, bare=trained.bare)
    res = in_process([a.format(**ids) for a in args], trained.root / f"out-{name}", monkeypatch, capsys)
    assert res.rc == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], res.stderr
    assert not res.out.exists()
