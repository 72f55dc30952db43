"""The `pelab` command, run as a user runs it (``python -m pelab`` in a subprocess).

Each subprocess pays for importing torch, so they all start at once in one
fixture and the tests read their results. Every user mistake must end as exit
code 2 and exactly one line on stderr that names the field (and, where the
set is finite, the allowed values), never a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pelab.cli import main

SCHEMES = ["sinusoidal", "learned", "none", "rotary", "alibi", "t5", "untied", "sincos2d"]
COMBINERS = [
    "add", "scaled_add", "concat_split", "concat_wide", "concat_project", "gated", "none", "multiply", "matrix"
]  # fmt: skip
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

COMMANDS: dict[str, list[str]] = {
    "unknown_scheme": ["show", "fourier"],
    "unknown_combiner": ["run", "--combine", "sum", "--steps", "1"],
    "d_position_too_wide": ["params", "--d", "16", "--d-position", "16"],
    "width_not_divisible": ["show", "sincos2d", "--d", "6", "--length", "16"],
    "longer_than_table": ["show", "learned", "--length", "600", "--max-len", "512"],
    "show": ["show", "sinusoidal", "--d", "12", "--length", "20", "--csv", "out/table.csv", "--png", "out/table.png"],
}


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    cwd: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Result]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    procs = {}
    for name, args in COMMANDS.items():
        cwd = tmp_path_factory.mktemp(name)
        procs[name] = (
            cwd,
            subprocess.Popen(
                [sys.executable, "-m", "pelab", *args],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
    results = {}
    for name, (cwd, p) in procs.items():
        out, err = p.communicate(timeout=180)
        results[name] = Result(p.returncode, out, err, cwd)
    return results


def assert_one_line_error(r: Result, field: str | tuple[str, ...], *mentions: str) -> str:
    assert r.rc == 2, (r.rc, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    fields = (field,) if isinstance(field, str) else field
    assert any(line.startswith(f"pelab: error: {f}: ") for f in fields), line
    for m in mentions:
        assert m in line, (m, line)
    return line


def test_unknown_scheme(runs) -> None:
    assert_one_line_error(runs["unknown_scheme"], ("position", "scheme"), "fourier", *SCHEMES)


def test_unknown_combiner(runs) -> None:
    assert_one_line_error(runs["unknown_combiner"], "combine", "sum", *COMBINERS)


def test_concat_split_needs_d_position_below_d(runs) -> None:
    assert_one_line_error(runs["d_position_too_wide"], "d_position", "16")


def test_width_a_scheme_cannot_take(runs) -> None:
    assert_one_line_error(runs["width_not_divisible"], "d", "divisible by 4", "6")


def test_length_above_the_learned_table(runs) -> None:
    assert_one_line_error(runs["longer_than_table"], "length", "600", "512")


def test_errors_write_nothing(runs) -> None:
    for name in ("unknown_scheme", "width_not_divisible", "longer_than_table"):
        assert list(runs[name].cwd.iterdir()) == [], name


def test_show_writes_the_closed_form_as_csv(runs) -> None:
    r = runs["show"]
    assert r.rc == 0, r.stderr
    path = r.cwd / "out" / "table.csv"
    first = path.read_text().splitlines()[0]
    [float(v) for v in first.split(",")]  # no header: the first line is numbers
    table = np.loadtxt(path, delimiter=",", ndmin=2)
    assert table.shape == (20, 12)
    pos, ch = np.arange(20)[:, None], np.arange(12)[None, :]
    angle = pos / 10000 ** (2 * (ch // 2) / 12)
    expected = np.where(ch % 2 == 0, np.sin(angle), np.cos(angle))
    np.testing.assert_allclose(table, expected, rtol=0, atol=1e-12)


def test_show_writes_a_png(runs) -> None:
    data = (runs["show"].cwd / "out" / "table.png").read_bytes()
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 100 and height > 100


def first_cells(text: str) -> list[str]:
    """First cell of every body row of the rich tables in ``text``."""
    return [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]


def run_in_process(args: list[str], monkeypatch, capsys) -> Result:
    """The same entry point without a new interpreter, for commands whose output is all we check."""
    monkeypatch.setattr(sys, "argv", ["pelab", *args])
    with pytest.raises(SystemExit) as e:
        main()
    captured = capsys.readouterr()
    return Result(e.value.code, captured.out, captured.err, Path.cwd())


def test_list_names_every_scheme_combiner_and_task(monkeypatch, capsys) -> None:
    from pelab.tasks import TASKS

    r = run_in_process(["list"], monkeypatch, capsys)
    assert r.rc == 0, r.stderr
    schemes_part, rest = r.stdout.split("\ncombiners")
    combiners_part, tasks_part = rest.split("\ntasks")
    assert set(SCHEMES) <= set(first_cells(schemes_part))
    assert set(first_cells(combiners_part)) == set(COMBINERS)
    assert set(first_cells(tasks_part)) == set(TASKS)


def test_params_prints_a_row_per_combiner_with_hand_counted_sizes(monkeypatch, capsys) -> None:
    """d=16, 2 layers, vocab 16, T=64 (the defaults). Per layer with width C: 3C² + C² + 8C² + 4C
    parameters and 2·(12C²) + 4·64·C FLOPs/token; head C·16 (2·C·16 FLOPs); tokens 16·d_token."""
    r = run_in_process(["params", "--d", "16"], monkeypatch, capsys)
    assert r.rc == 0, r.stderr
    rows = {
        cells[1].strip().split(" ")[0]: [c.strip() for c in cells[2:-1]]
        for cells in (line.split("│") for line in r.stdout.splitlines() if line.startswith("│"))
    }
    assert list(rows) == COMBINERS
    # combine: (d_token, d_position, d_model, parameters, FLOPs/token)
    expected = {
        "add": ("16", "16", "16", "6,816", "20,992"),
        "scaled_add": ("16", "16", "16", "6,816", "20,992"),
        "concat_split": ("12", "4", "16", "6,752", "20,992"),  # 64 fewer token parameters
        "concat_wide": ("16", "4", "20", "10,376", "30,080"),  # C = 20 everywhere
        "concat_project": ("16", "4", "16", "7,136", "21,632"),  # + W: 20 x 16
        "gated": ("16", "16", "16", "6,832", "20,992"),  # + 16 gates
        "none": ("16", "0", "16", "6,816", "20,992"),
    }
    for name, (d_token, d_position, d_model, n_params, flops) in expected.items():
        cells = rows[name]
        assert cells[0:4] == [d_token, d_position, d_model, n_params], (name, cells)
        assert cells[5] == flops, (name, cells)


def test_params_prints_what_multiply_and_matrix_cost(monkeypatch, capsys) -> None:
    """The same settings (d=16, 2 layers, T=64, max_len 512): multiply adds nothing to add; matrix runs with
    position=none and adds one full 16 x 16 map per position, 512·256 parameters and 2·256 FLOPs/token."""
    r = run_in_process(["params", "--d", "16"], monkeypatch, capsys)
    assert r.rc == 0, r.stderr
    rows = {
        cells[1].strip(): [c.strip() for c in cells[2:-1]]
        for cells in (line.split("│") for line in r.stdout.splitlines() if line.startswith("│"))
    }
    assert rows["multiply"][:4] == ["16", "16", "16", "6,816"] and rows["multiply"][5] == "20,992"
    matrix = rows["matrix (position=none, rank 16)"]
    assert matrix[:4] == ["16", "0", "16", f"{6816 + 512 * 16 * 16:,}"] and matrix[5] == f"{20992 + 2 * 16 * 16:,}"


@pytest.mark.parametrize("rank", [0, 2])
def test_params_matrix_rank_sizes_the_low_rank_maps(rank, monkeypatch, capsys) -> None:
    """Rank r: U, V of 512 x 16 x r each, 2·512·16·r parameters, and 4·16·r FLOPs/token; other rows unchanged."""
    r = run_in_process(["params", "--d", "16", "--matrix-rank", str(rank)], monkeypatch, capsys)
    assert r.rc == 0, r.stderr
    rows = {
        cells[1].strip(): [c.strip() for c in cells[2:-1]]
        for cells in (line.split("│") for line in r.stdout.splitlines() if line.startswith("│"))
    }
    assert rows["add"][3] == "6,816"
    matrix = rows[f"matrix (position=none, rank {rank})"]
    assert matrix[3] == f"{6816 + 2 * 512 * 16 * rank:,}" and matrix[5] == f"{20992 + 4 * 16 * rank:,}"


def test_params_matrix_rank_past_d_is_one_line(monkeypatch, capsys) -> None:
    r = run_in_process(["params", "--d", "16", "--matrix-rank", "17"], monkeypatch, capsys)
    assert_one_line_error(r, "matrix-rank", "17", "0..d=16")


def test_run_matrix_rank_sets_the_models_rank(monkeypatch, capsys, tmp_path) -> None:
    """--matrix-rank 2 at d=16, length 4: the maps serve max_len positions, 2·max_len·16·2 parameters over none."""
    import json

    monkeypatch.chdir(tmp_path)
    common = ["--length", "4", "--d", "16", "--steps", "1", "--threads", "1", "--device", "cpu", "--json"]
    got = {}
    for args in (["--combine", "none"], ["--combine", "matrix", "--matrix-rank", "2"]):
        r = run_in_process(["run", "--position", "none", *args, *common], monkeypatch, capsys)
        assert r.rc in (0, None), r.stderr
        got[args[1]] = json.loads(r.stdout)
    extra = got["matrix"]["params"] - got["none"]["params"]
    assert extra > 0 and extra % (2 * 16 * 2) == 0


def test_run_matrix_rank_with_another_combiner_is_one_line(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    r = run_in_process(["run", "--combine", "add", "--matrix-rank", "2", "--steps", "1"], monkeypatch, capsys)
    assert_one_line_error(r, "matrix_rank", "combine=add")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args", [["--combine", "multiply", "--task", "copy"], ["--combine", "matrix", "--position", "none"]]
)
def test_run_trains_with_multiply_and_matrix(args, monkeypatch, capsys, tmp_path) -> None:
    import json

    monkeypatch.chdir(tmp_path)
    common = ["--length", "4", "--d", "16", "--steps", "3", "--threads", "1", "--device", "cpu", "--json"]
    r = run_in_process(["run", *args, *common], monkeypatch, capsys)
    assert r.rc in (0, None), r.stderr
    assert json.loads(r.stdout)["status"] == "done"


def test_matrix_beside_an_input_table_is_one_line(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    r = run_in_process(["run", "--combine", "matrix", "--steps", "1"], monkeypatch, capsys)
    assert_one_line_error(r, "combine", "combine=matrix", "sinusoidal", "position=none")
    assert list(tmp_path.iterdir()) == []


# --- more mistakes, through the same entry point in-process (no torch import per case) -------------------


@pytest.mark.parametrize(
    "args, field, mentions",
    [
        (["show", "sinusoidal", "--layout", "bogus"], "layout", ["paper", "tensor2tensor"]),
        (["show", "rotary"], "scheme", ["sinusoidal", "learned", "sincos2d"]),
        (["show", "sinusoidal", "--d", "0"], "d", []),
        (["show", "sincos2d", "--grid", "4by4"], "grid", ["4by4"]),
        (["show", "sincos2d", "--d", "8", "--length", "15"], "length", ["15"]),
        (["params", "--kind", "bogus"], "kind", ["encoder", "decoder"]),
        (["params", "--d", "16", "--heads", "3"], "n_heads", ["3"]),
    ],
)
def test_more_mistakes_are_one_line(args, field, mentions, monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    assert_one_line_error(run_in_process(args, monkeypatch, capsys), field, *mentions)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "cudas", "CPU", "cuda:"])
def test_device_names_share_one_spelling_check(name: str) -> None:
    from pelab.device import check_device_name, resolve_device
    from pelab.errors import PelabError

    msg = rf"^device: unknown value '{name}'; allowed: auto, cpu, cuda, cuda:N$"
    with pytest.raises(PelabError, match=msg):
        check_device_name(name)
    with pytest.raises(PelabError, match=msg):
        resolve_device(name)  # the same check, before asking whether CUDA is there


def test_device_cpu_and_auto() -> None:
    import torch

    from pelab.device import check_device_name, resolve_device

    for name in ("auto", "cpu", "cuda", "cuda:1"):
        check_device_name(name)
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
