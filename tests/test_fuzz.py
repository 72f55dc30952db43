"""Property-based fuzzing of the two ways in (issue 15): study files and command lines.

Hypothesis builds malformed study files from the real settable keys (wrong types, hostile values, keys in
the wrong table, in a grid's ``set`` or ``axes``, unknown keys, broken bytes) and bad command lines from
the real commands and options. Every one must end in exit 0 (it was valid) or exit 2 with one line on
stderr, no traceback, and nothing written; where the file's only faults are values of the wrong type or
keys in the wrong place, the line must name the key.

The CLI runs in-process and nothing trains: the study backend, ``train_run``, the analyses and the
report are replaced by stubs, so each example costs milliseconds. ``PELAB_FUZZ_EXAMPLES`` raises the
number of examples (CI runs the default, derandomised); ``PELAB_FUZZ_TALLY=FILE`` records every
outcome in FILE (JSON) instead of stopping at the first failure, for a campaign's figures.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
import traceback
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pelab.cli as cli_module
import pelab.cli.report as cli_report
from pelab.config import ModelConfig, PositionConfig, TaskConfig, TrainConfig
from pelab.records import RunResult
from pelab.study.grid import SEQUENTIAL_KEYS, TOP_KEYS, settable_keys
from pelab.study.store import Store

DEFAULT_EXAMPLES = 100
EXAMPLES = int(os.environ.get("PELAB_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
TALLY_FILE = os.environ.get("PELAB_FUZZ_TALLY")
TALLY: Counter[str] = Counter()
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=EXAMPLES <= DEFAULT_EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

SETTABLE = settable_keys()
#: Tasks that read a corpus or a pretrained tokenizer are left out: the pre-flight of a valid draw would load them.
FAST_TASKS = ["reverse", "copy", "sort", "offset", "rotate", "lookup", "same", "addition", "recall"]
NAMES = FAST_TASKS + ["add", "concat_split", "concat_wide", "none", "matrix", "multiply", "gated"]
NAMES += ["sinusoidal", "learned", "rotary", "alibi", "t5", "untied", "sincos2d", "encoder", "decoder", "pool"]
NAMES += ["paper", "tensor2tensor", "concat", "fastest", "minilm", "digits", "charlm", "wordorder"]
HOSTILE_TEXT = ["", "[bold red]x", "[/]", "scratch [/tmp/runs]", "x" * 300, "é\u2028ü", "a\tb", "\\", '"', "\n"]


# --- values ------------------------------------------------------------------------------------------------
ints = st.one_of(
    st.sampled_from([0, -1, 1, 2, 3, 4, 7, 16, 64, 2**31, 2**62, 2**63 - 1, -(2**63), 10**9, 100000]),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
floats = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -0.0, 0.0, 5e-324, 0.5, 1.0, 1.5, 2.0, 1e9]),
    st.floats(),
)
texts = st.one_of(st.sampled_from(NAMES + HOSTILE_TEXT), st.text(max_size=12))
atoms = st.one_of(ints, floats, st.booleans(), texts)
keys = st.one_of(st.sampled_from([k.split(".")[-1] for k in SETTABLE]), st.text(min_size=1, max_size=8))
values = st.recursive(
    atoms, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=3)), max_leaves=6
)


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml_string(s: str) -> str:
    """JSON's escapes are TOML's, but for DEL, which TOML wants escaped too."""
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else toml_string(k)


def toml_doc(doc: dict[str, Any]) -> str:
    """Dotted keys at the top level: every nesting as ``a.b.c = value``, tables of grids inline."""
    lines: list[str] = []

    def emit(prefix: list[str], v: Any) -> None:
        if isinstance(v, dict) and v:
            for k, x in v.items():
                emit([*prefix, k], x)
        else:
            lines.append(f"{'.'.join(toml_key(p) for p in prefix)} = {toml_value(v)}")

    for k, v in doc.items():
        emit([k], v)
    return "\n".join(lines) + "\n"


# --- which values are of the wrong type for a key: those errors must name it ------------------------------
MODELS = {"task": TaskConfig, "model": ModelConfig, "train": TrainConfig, "model.position": PositionConfig}


def annotation(key: str) -> str:
    section, leaf = key.rsplit(".", 1)
    return str(MODELS[section].model_fields[leaf].annotation)


def wrong_type(key: str, v: Any) -> bool:
    """A value no field of this kind accepts, whatever the rest of the study says."""
    kind = annotation(key)
    if isinstance(v, bool | dict):
        return True
    if isinstance(v, list):
        return "tuple" not in kind
    if "str" in kind or "Literal" in kind:
        return not isinstance(v, str)
    return isinstance(v, str)  # numbers


def set_path(doc: dict[str, Any], path: list[str], v: Any) -> None:
    node = doc
    for p in path[:-1]:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    node[path[-1]] = v


def base_doc() -> dict[str, Any]:
    return {
        "seeds": [0],
        "task": {"name": "reverse", "length": 4, "vocab": 8},
        "model": {"d": 16, "n_layers": 1},
        "train": {"steps": 1, "eval_batches": 1, "eval_batch_size": 4, "batch_size": 4},
    }


@st.composite
def mutation(draw: st.DrawFn) -> tuple[dict[str, Any] | None, str, bool]:
    """(changes to make, the key it is about, whether the error must name it)."""
    kinds = ["own", "own", "valid", "section", "top", "grid-set", "grid-axes", "junk", "topkey", "sequential"]
    kind = draw(st.sampled_from(kinds))
    key = draw(st.sampled_from(SETTABLE))
    leaf = key.split(".")[-1]
    v = draw(values)
    if kind == "own":
        return {"path": key.split("."), "value": v}, key, wrong_type(key, v)
    if kind == "valid":
        v = draw(st.one_of(st.sampled_from(NAMES), st.integers(1, 64), st.sampled_from([0.5, 1.0, 2.0, 1e-3])))
        return {"path": key.split("."), "value": v}, key, False
    if kind == "section":  # a real key in a table where it does not belong
        home = key.rsplit(".", 1)[0]
        other = draw(st.sampled_from([s for s in ("task", "model", "train", "model.position") if s != home]))
        return {"path": [*other.split("."), leaf], "value": v}, leaf, True
    if kind == "top":
        return {"path": [leaf], "value": v}, leaf, leaf not in TOP_KEYS
    if kind == "grid-set":
        return {"grid": {"name": "g", "set": {key: v}}}, key, wrong_type(key, v)
    if kind == "grid-axes":
        axis = draw(st.one_of(st.just(v), st.lists(values, max_size=3)))
        must = not isinstance(axis, list) or not axis or all(wrong_type(key, x) for x in axis)
        return {"grid": {"name": "g", "axes": {key: axis}}}, key, must
    if kind == "sequential":  # [sequential]: a key of its own or a stray one, with any value
        name = draw(st.sampled_from([*SEQUENTIAL_KEYS, "cap", "seeds"]))
        return {"path": ["sequential", name], "value": v}, f"sequential.{name}", False
    if kind == "junk":
        where = draw(st.sampled_from(["", "task.", "model.", "train.", "model.position.", "report."]))
        name = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=10))
        if name in {k.split(".")[-1] for k in SETTABLE} | set(TOP_KEYS):
            return None, "", False
        return {"path": [*where.rstrip(".").split("."), name] if where else [name], "value": v}, name, True
    top = draw(st.sampled_from([k for k in TOP_KEYS if k not in ("task", "model", "train")]))
    return {"path": [top], "value": v}, top, False


@st.composite
def study_files(draw: st.DrawFn) -> tuple[bytes, list[str], bool]:
    doc, named, strict = base_doc(), [], True
    for change, key, must in draw(st.lists(mutation(), min_size=1, max_size=3)):
        if change is None:
            continue
        if "grid" in change:
            grids = doc.get("grid")
            doc["grid"] = [*grids, change["grid"]] if isinstance(grids, list) else [change["grid"]]
        else:
            set_path(doc, change["path"], change["value"])
        named.append(key)
        strict = strict and must
    data = toml_doc(doc).encode()
    damage = draw(st.sampled_from(["none"] * 8 + ["truncate", "byte", "bom", "duplicate"]))
    if damage != "none":
        strict = False
        at = draw(st.integers(0, len(data)))
        if damage == "truncate":
            data = data[:at]
        elif damage == "byte":
            data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at:]
        elif damage == "bom":
            data = b"\xef\xbb\xbf" + data
        else:
            data = data + data
    return data, named, strict and bool(named)


# --- running the CLI in-process, with nothing trained ---------------------------------------------------------
@contextmanager
def stubs() -> Any:
    """No training, analysis or report: valid invocations stop at the point where the work would start."""
    import pelab.analysis as analysis
    import pelab.sizes as sizes
    import pelab.study.driver as driver
    import pelab.train as train

    @contextmanager
    def backend(*args: object, **kwargs: object):
        yield "a stub", lambda groups, on_result: None, 1  # where, execute, slots (as driver._backend)

    def report(out: Path) -> None:
        Store(out, create=False).close()

    saved = [
        (driver, "_backend", backend),
        (train, "train_run", lambda cfg, **kw: RunResult(run_id=cfg.run_id, status="done")),
        (analysis, "run_analyses", lambda *a, **kw: {}),
        (sizes, "combiner_sizes", lambda *a, **kw: []),
        (cli_report, "_report", report),
        (cli_report, "_results_table", lambda out, **kw: None),
    ]
    originals = [(m, name, getattr(m, name)) for m, name, _ in saved]
    for m, name, new in saved:
        setattr(m, name, new)
    try:
        yield
    finally:
        for m, name, old in originals:
            setattr(m, name, old)


def invoke(args: list[str]) -> tuple[int | str, str, str]:
    """``pelab ARGS`` in-process: (exit code, or 'traceback: ...' when an exception escaped; stdout; stderr)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    out, err = io.StringIO(), io.StringIO()
    argv, sys.argv = sys.argv, ["pelab", *args]
    try:
        with redirect_stdout(out), redirect_stderr(err), stubs():
            try:
                cli_module.main()
                rc: int | str = 0
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:
                rc = "traceback: " + traceback.format_exc(limit=-3).replace("\n", " | ")
    finally:
        sys.argv = argv
    return rc, out.getvalue(), err.getvalue()


def tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def problems(
    rc: int | str, out: str, err: str, written: bool, named: list[str], strict: bool, field: bool = True
) -> list[str]:
    """What breaks the promise: no traceback, exit 0 or 2, one line (led by the field it is about, when
    ``field``; naming one of ``named`` when ``strict``), nothing written."""
    found = []
    if isinstance(rc, str) or "Traceback (most recent call last)" in out + err:
        found.append(f"traceback: {rc if isinstance(rc, str) else err[-300:]}")
        return found
    if rc not in (0, 2):
        found.append(f"exit {rc}: {err.strip()[-200:]}")
    if rc == 2:
        lines = err.strip().splitlines()
        if len(lines) != 1 or not re.match(r"pelab: error: \S.*:" if field else r"pelab: error: \S", lines[0]):
            found.append(f"not one line{' naming a field' if field else ''}: {err.strip()[:300]!r}")
        elif strict and not any(
            re.search(rf"(^|[^A-Za-z0-9_]){re.escape(k.split('.')[-1])}([^A-Za-z0-9_]|$)", lines[0]) for k in named
        ):
            found.append(f"does not name {named}: {lines[0][:300]}")
        if written:
            found.append(f"wrote files on refusal: {lines[:1]}")
    return found


def record(kind: str, rc: int | str, found: list[str]) -> None:
    TALLY[f"{kind}: tried"] += 1
    TALLY[f"{kind}: exit {rc if isinstance(rc, int) else 'traceback'}"] += 1
    for f in found:
        TALLY[f"{kind}: problem: {f.split(':')[0]}"] += 1
    if found and TALLY_FILE:
        with open(TALLY_FILE + ".examples", "a") as fh:
            fh.write(json.dumps({"kind": kind, "problems": found}) + "\n")
    assert TALLY_FILE or not found, found


@pytest.fixture(scope="module", autouse=True)
def _tally() -> Any:
    yield
    if TALLY_FILE:
        Path(TALLY_FILE).write_text(json.dumps(dict(sorted(TALLY.items())), indent=1))


# --- the properties -------------------------------------------------------------------------------------------
@FUZZ
@given(study_files())
def test_fuzzed_study_files(case: tuple[bytes, list[str], bool]) -> None:
    data, named, strict = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "study.toml").write_bytes(data)
        out = root / "out"
        rc, stdout, stderr = invoke(["study", str(root / "study.toml"), "--out", str(out), "--no-report"])
        written = out.exists() or tree(root) != {"study.toml"}
        record("study file", rc, problems(rc, stdout, stderr, written, named, strict))


def make_fixtures(root: Path) -> None:
    """Files and folders a fuzzed command line may point at."""
    (root / "study.toml").write_text("seeds = [0]\n[task]\nlength = 4\n[model]\nd = 16\n[train]\nsteps = 1\n")
    (root / "bad.toml").write_bytes(b"name = '\xff'\n")
    (root / "dir").mkdir()
    (root / "file.txt").write_text("a file, not a folder")
    (root / "garbage").mkdir()
    (root / "garbage" / "results.sqlite").write_bytes(b"not a database" * 50)
    (root / "empty").mkdir()
    Store(root / "empty").close()
    (root / "table.csv").write_text("1,2\n3,x\n")


OPTIONS = {
    name: [p for p in command.params]
    for name, command in __import__("typer").main.get_command(cli_module.app).commands.items()
    if name != "pretrained"  # loads MiniLM and trains C9: pelab/pretrained has its own tests
}
ARG_VALUES = [
    "0", "-1", "1", "3", "16", "64", "4097", "1000000", str(2**31), str(2**63), str(10**30), "1e3", "inf", "nan",
    "abc", "", "[bold]x", "[/]", "x" * 300, "auto", "cpu", "cuda", "cuda:7", "ray", "local", "quick", "sinusoidal",
    "rotary", "learned", "sincos2d", "4x4", "0x3", "add", "matrix", "reverse", "charlm", "spectrum", "geometry",
    "bf16", "decoder", "paper", "acc", "task.name", "study.toml", "bad.toml", "dir", "missing.toml", "file.txt",
    "garbage", "empty", "table.csv", "t.xyz", "out.png", "out.csv", "file.txt/sub", "dir/new",
]  # fmt: skip


#: Integers a command line may give any numeric option: past every bound, past C's long, past 4300 digits.
#: Drawn as text: Python itself refuses str() of an int past 4300 digits, so 10**5000 is spelt out.
HUGE_INTS = st.one_of(
    st.sampled_from([str(x) for x in (10**30, -(10**30), 2**64, 2**1000, 4097, 1025, 65, 101)] + ["1" + "0" * 5000]),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
)


def is_int(param: Any) -> bool:
    """Whether a command's option takes an integer (``int`` or ``int | None``)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return annotation is int or int in getattr(annotation, "__args__", ())


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    name = draw(st.sampled_from(sorted(OPTIONS)))
    args = [name]
    for p in OPTIONS[name]:
        if not draw(st.booleans()):
            continue
        value = draw(st.sampled_from(ARG_VALUES))
        if is_int(p) and draw(st.booleans()):  # every count and size: huge too
            value = draw(HUGE_INTS)
        if p.param_type_name == "argument":
            args.append(value)
        elif getattr(p, "is_flag", False):
            args.append(draw(st.sampled_from(p.opts + list(getattr(p, "secondary_opts", [])))))
        else:
            args += [p.opts[0], value]
    extra = draw(st.sampled_from([[], [], [], ["--nope"], ["--d"], ["extra-arg"], ["--help"]]))
    return args + extra


@FUZZ
@given(command_lines())
def test_fuzzed_command_lines(args: list[str]) -> None:
    if "analyze" in args and "all" in args:  # every analysis of a model: valid, and slow even stubbed
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_fixtures(root)
        before = tree(root)
        cwd = os.getcwd()
        os.chdir(root)
        try:
            rc, stdout, stderr = invoke(args)
        finally:
            os.chdir(cwd)
        # Click's own errors (an extra argument) have no field to name: one line is the promise here.
        record("command line", rc, problems(rc, stdout, stderr, tree(root) != before, [], False, field=False))
