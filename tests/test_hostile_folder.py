"""A study folder from someone else is untrusted input (issue 40): a link, a FIFO or a folder where pelab keeps a
file, an escape code in a name, a path that is not UTF-8. Every refusal is one line on stderr and exit 2, with no
traceback and no raw control character; a victim file planted outside the folder is byte for byte the same after,
and no file appears outside the folder. CI runs this as root, where a write through a link reaches any file.

Nothing trains: the study backend is a stub (or the folder holds three stub-stored runs). Every case that plants a
FIFO runs under a watchdog (SIGALRM), so a regression that opened one would fail, not hang; subprocesses have a
timeout.
"""

from __future__ import annotations

import errno
import html
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hardening import TINY, Result, cli, one_line, stub_backend
from test_stored_rows import stored, tamper

from pelab.errors import PelabError, visible
from pelab.study.store import DB_NAME

#: What must never reach a terminal raw: C0 controls but newline and tab, DEL, C1 controls.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
VICTIM = b"victim: pelab must not touch this\n"
#: What the stub backend stores for each run (``test_stored_rows.stored``): enough for `pelab results`.
METRICS = {"acc": 0.5, "loss": 1.0}


@pytest.fixture
def study_dir(tmp_path: Path) -> Path:
    """A study folder of three finished runs, stored by the stub backend (``test_stored_rows``)."""
    from pelab.study.driver import run_study
    from pelab.study.grid import parse_study

    with stored(METRICS):
        run_study(parse_study(TINY), tmp_path / "o", quiet=True)
    return tmp_path / "o"


def outside_of(tmp_path: Path) -> Path:
    """A folder beside the study, with a victim file and a victim database (a copy of a pelab one)."""
    out = tmp_path / "outside"
    out.mkdir(exist_ok=True)
    (out / "victim.txt").write_bytes(VICTIM)
    return out


def snapshot(tmp_path: Path, study: Path) -> dict[str, bytes | str | None]:
    """Every path under ``tmp_path`` but the study folder: a file's bytes, a link's target, None for a folder."""
    seen: dict[str, bytes | str | None] = {}
    for root, dirs, files in os.walk(tmp_path):
        if Path(root) == study or study in Path(root).parents:
            continue
        for name in dirs + files:
            p = Path(root, name)
            if p == study:
                continue
            if p.is_symlink():
                seen[str(p)] = os.readlink(p)
            elif p.is_file():
                seen[str(p)] = p.read_bytes()
            else:
                seen[str(p)] = None
    return seen


def refused(r: Result, *mentions: str) -> str:
    """One line, exit 2, no traceback (``one_line``), and no raw control character anywhere in the output."""
    line = one_line(r, *mentions)
    assert not RAW_CONTROL.search(r.err + r.out), (r.err, r.out[-500:])
    return line


@contextmanager
def watchdog(seconds: int = 60) -> Iterator[None]:
    """In-process pelab on a FIFO: should it ever block opening one, SIGALRM ends the wait (the open fails with
    TimeoutError, so the test fails on its message) instead of hanging the suite."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(errno.ETIMEDOUT, "blocked on a FIFO: pelab must never open one")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_pelab(*args: str | bytes, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    p = subprocess.run(
        [sys.executable, "-m", "pelab", *args], capture_output=True, timeout=timeout, env=env or dict(os.environ)
    )
    return Result(p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))


# --- links where pelab keeps a file: refused, never followed ----------------------------------------------------
def _plant_link(out: Path, outside: Path, where: str, dangling: bool) -> Path:
    """A link at ``out/where`` to the victim (or, ``dangling``, to a name outside that does not exist yet)."""
    path = out / where
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(path):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if where == DB_NAME and not dangling:  # the victim is a database pelab could write: a copy of its own
        shutil.copy(out.parent / "db-copy", outside / "victim.sqlite")
        path.symlink_to(outside / "victim.sqlite")
    elif where in ("checkpoints", "analyses", "figures", "analyses/spectrum-x"):
        (outside / "dir").mkdir(exist_ok=True)
        path.symlink_to(outside / ("nowhere" if dangling else "dir"))
    else:
        path.symlink_to(outside / ("nowhere" if dangling else "victim.txt"))
    return path


LINKED = [
    "study.lock",
    DB_NAME,
    f"{DB_NAME}-wal",
    f"{DB_NAME}-shm",
    f"{DB_NAME}-journal",
    "checkpoints",
    "checkpoints/0123456789abcdef.safetensors",
    "analyses",
    "analyses/spectrum-x",
    "analyses/spectrum-x/spectrum.json",
    "figures",
    "figures/curves-reverse.png",
    "report.html",
    "report.md",
    "claims.json",
    "sequential.json",
    "protocol.json",
]


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-victim", "dangling"])
@pytest.mark.parametrize("where", LINKED)
@pytest.mark.parametrize("command", ["study", "report", "results"])
def test_a_link_in_the_folder_is_refused_and_nothing_outside_changes(
    study_dir: Path,
    tmp_path: Path,
    capsys,
    monkeypatch,
    command: str,
    where: str,
    dangling: bool,
) -> None:
    shutil.copy(study_dir / DB_NAME, tmp_path / "db-copy")
    outside = outside_of(tmp_path)
    (tmp_path / "s.toml").write_text(TINY)
    _plant_link(study_dir, outside, where, dangling)
    before = snapshot(tmp_path, study_dir)
    args = {"study": ("study", str(tmp_path / "s.toml"), "--out", str(study_dir), "--no-report")}
    with stored(METRICS):
        r = cli(capsys, monkeypatch, *args.get(command, (command, str(study_dir))))
    line = refused(r, str(study_dir / where), "symbolic link", "remove the link")
    assert "through a link" in line
    assert snapshot(tmp_path, study_dir) == before  # the victim byte for byte, and no new file outside


def test_a_link_anywhere_in_the_folder_is_refused_by_analyze(
    study_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    outside = outside_of(tmp_path)
    (study_dir / "checkpoints").mkdir()
    (study_dir / "checkpoints" / "abc.safetensors").symlink_to(outside / "victim.txt")
    before = snapshot(tmp_path, study_dir)
    r = cli(
        capsys, monkeypatch, "analyze", "spectrum", "--run", "abc", "--db", str(study_dir), "--out", str(tmp_path / "a")
    )
    refused(r, "abc.safetensors", "symbolic link")
    assert snapshot(tmp_path, study_dir) == before


def test_a_link_pelab_does_not_keep_is_left_alone(study_dir: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    """A link of the user's own beside pelab's files (notes -> elsewhere) is none of pelab's business."""
    outside = outside_of(tmp_path)
    (study_dir / "notes").symlink_to(outside / "victim.txt")
    r = cli(capsys, monkeypatch, "results", str(study_dir))
    assert r.rc == 0, r.err
    assert (outside / "victim.txt").read_bytes() == VICTIM


def test_the_lock_is_opened_without_following_a_link_planted_after_the_check(tmp_path: Path) -> None:
    """Race-aware: the lock's opener refuses a link on its own, not only the folder check before it."""
    from pelab.study.store import StudyLock

    outside = outside_of(tmp_path)
    out = tmp_path / "o"
    out.mkdir()
    (out / "study.lock").symlink_to(outside / "victim.txt")
    with pytest.raises(PelabError, match="study.lock: is a symbolic link, not a lock file"):
        StudyLock(out).__enter__()
    assert (outside / "victim.txt").read_bytes() == VICTIM


def test_the_database_is_checked_again_after_sqlite_opens_it(tmp_path: Path, monkeypatch) -> None:
    """Race-aware: a -wal link that appears while SQLite connects is refused before the connection is used."""
    import sqlite3

    from pelab.study.store import Store

    outside = outside_of(tmp_path)
    out = tmp_path / "o"
    Store(out).close()
    real = sqlite3.connect

    def connect_then_plant(*args, **kwargs):
        conn = real(*args, **kwargs)
        (out / f"{DB_NAME}-wal").symlink_to(outside / "victim.txt")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_then_plant)
    with pytest.raises(PelabError, match="-wal: is a symbolic link"):
        Store(out)
    assert (outside / "victim.txt").read_bytes() == VICTIM


# --- FIFOs, folders and devices where a file belongs: named as what they are -------------------------------------
@pytest.mark.parametrize(
    "where, command, words",
    [
        ("study.lock", "study", "study.lock: is a FIFO (named pipe), not a lock file; remove it"),
        (DB_NAME, "results", f"{DB_NAME}: is a FIFO (named pipe), not a results database; move it away"),
        (DB_NAME, "study", f"{DB_NAME}: is a FIFO (named pipe), not a results database; move it away"),
        ("checkpoints/0123456789abcdef.safetensors", "report", "is a FIFO (named pipe), not a file pelab wrote"),
        ("analyses/spectrum.json", "report", "is a FIFO (named pipe), not a file pelab wrote"),
        ("report.html", "report", "report.html: is a FIFO (named pipe), not a report page"),
    ],
)
def test_a_fifo_in_the_folder_is_named_and_never_blocks(
    study_dir: Path, tmp_path: Path, capsys, monkeypatch, where: str, command: str, words: str
) -> None:
    path = study_dir / where
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    (tmp_path / "s.toml").write_text(TINY)
    args = {"study": ("study", str(tmp_path / "s.toml"), "--out", str(study_dir), "--no-report")}
    with watchdog():
        r = cli(capsys, monkeypatch, *args.get(command, (command, str(study_dir))))
    refused(r, words)
    assert "not seekable" not in r.err and "disk I/O" not in r.err


@pytest.mark.parametrize("command", ["results", "report", "study"])
def test_a_folder_in_place_of_the_database_is_named(
    study_dir: Path, tmp_path: Path, capsys, monkeypatch, command
) -> None:
    (study_dir / DB_NAME).unlink()
    (study_dir / DB_NAME).mkdir()
    (tmp_path / "s.toml").write_text(TINY)
    args = {"study": ("study", str(tmp_path / "s.toml"), "--out", str(study_dir), "--no-report")}
    line = refused(
        cli(capsys, monkeypatch, *args.get(command, (command, str(study_dir)))),
        "is a folder, not a results database",
    )
    assert "writable" not in line


def test_a_study_file_that_is_a_fifo_or_a_device_is_named(tmp_path: Path, capsys, monkeypatch) -> None:
    fifo, zero = tmp_path / "fifo.toml", tmp_path / "zero.toml"
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    for path, kind in ((fifo, "a FIFO (named pipe)"), (zero, "a device")):
        with watchdog():
            r = cli(capsys, monkeypatch, "study", str(path), "--out", str(tmp_path / "o"))
        line = refused(r, f"{kind}, not a study file")
        assert "no such file" not in line
    assert not (tmp_path / "o").exists()


# --- escape codes: shown, never acted on ---------------------------------------------------------------------------
ESCAPES = "a\x1b[31mRED\x1b[0m\x1b]0;TITLE\x07b\x9bc"


def test_visible_shows_controls_and_keeps_letters() -> None:
    assert visible("a\x1b[31mb") == "a\\x1b[31mb"
    assert visible("é位\u202eé") == "é位\\u202eé"
    assert visible(os.fsdecode(b"x\xff")) == "x\\xff"  # a byte that is not UTF-8, as the path holds it
    assert visible("a\nb\tc") == "a\\nb\\tc" and visible("a\nb\tc\x07", lines=True) == "a\nb\tc\\x07"


@pytest.mark.parametrize(
    "study_text",
    [
        f"name = {ESCAPES!r}\n".replace("'", '"').replace("\\x", "\\u00") + TINY,
        '[[grid]]\nname = "g\\u001b]0;TITLE\\u0007"\n[grid.axes]\n"model.d" = [16]\n' + TINY,
    ],
    ids=["study-name", "grid-name"],
)
def test_escape_codes_in_names_reach_no_terminal(tmp_path: Path, capsys, monkeypatch, study_text: str) -> None:
    (tmp_path / "s.toml").write_text(study_text)
    with stored(METRICS):
        r = cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--no-report")
    assert r.rc == 0, r.err
    assert not RAW_CONTROL.search(r.out + r.err), r.out
    r = cli(capsys, monkeypatch, "results", str(tmp_path / "o"))
    assert r.rc == 0 and not RAW_CONTROL.search(r.out + r.err), r.out


def test_escape_codes_in_the_out_path_and_in_an_error_are_shown(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "s.toml").write_text(TINY)
    out = tmp_path / "o\x1b[2J\x1b]0;owned\x07"
    with stored(METRICS):
        r = cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(out), "--no-report")
    assert r.rc == 0 and not RAW_CONTROL.search(r.out + r.err), r.out
    assert "\\x1b[2J" in r.out
    (out / "study.lock").unlink()
    (out / "study.lock").symlink_to(outside_of(tmp_path) / "victim.txt")
    line = refused(cli(capsys, monkeypatch, "report", str(out)), "study.lock: is a symbolic link")
    assert "o\\x1b[2J\\x1b]0;owned\\x07" in line


def test_a_stored_failure_reason_with_escape_codes_prints_as_text(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "s.toml").write_text(TINY)
    with stub_backend(["failed"], reason="RuntimeError: \x1b]0;owned\x07planted"):
        r = cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--no-report")
    assert r.rc == 1 and not RAW_CONTROL.search(r.out + r.err), r.err
    assert "\\x1b]0;owned\\x07planted" in r.err


def test_escape_codes_in_stored_names_reach_neither_report(tmp_path: Path, capsys, monkeypatch) -> None:
    """The study's name and description and a grid's name, as the results database stores them, reach report.html
    and report.md as text (``\\x1b[31m``), never as the bytes a terminal showing the page acts on: not in the
    <title>, the <h1>, the description, nor anywhere else."""
    study = (
        'name = "n\\u001b[31mRED\\u001b]0;TITLE\\u0007 ![p](https://evil.example/p.png) [x](javascript:alert(1))"\n'
        'description = "d\\u001b[2Jd"\n'
        '[[grid]]\nname = "g\\u001b[2Jg"\n[grid.axes]\n"model.d" = [16]\n' + TINY
    )
    (tmp_path / "s.toml").write_text(study)
    with stored(METRICS):
        r = cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--no-report")
    assert r.rc == 0, r.err
    r = cli(capsys, monkeypatch, "report", str(tmp_path / "o"))
    assert r.rc == 0, r.err
    for page in ("report.html", "report.md"):
        text = (tmp_path / "o" / page).read_text()
        assert not RAW_CONTROL.search(text), (page, RAW_CONTROL.findall(text))
        for shown in ("n\\x1b[31mRED\\x1b]0;TITLE\\x07", "d\\x1b[2Jd"):
            assert shown in text, (page, shown)
    heading = (tmp_path / "o" / "report.md").read_text().splitlines()[0]
    assert heading.startswith("# n\\x1b[31m") and not LIVE.search(_markdown(heading).removeprefix("<h1>")), heading


# --- Markdown in names: report.md shows it as typed, and pelab's own text as before -------------------------------
#: What no user text may make of report.md: a link or an image (a remote pixel, javascript:), emphasis, a heading,
#: a list, a quote, a code block, a rule, raw HTML.
LIVE = re.compile(r"<(a|img|em|strong|s|del|h[1-6]|ul|ol|li|blockquote|pre|hr|script|iframe)\b")
HOSTILE_MD = [
    "x ![p](https://evil.example/pixel.png) [x](javascript:alert(1)) **b**",
    "# heading",
    "- item",
    "1. item",
    "```",
    "> quote",
    "[r]: https://evil.example\n[r]",
    "[a][r] [b][] [c] [^1] <https://evil.example> https://evil.example www.evil.example",
    "_u_ __v__ *w* ~x~ ~~y~~ ***z***",
    "\\[a](b) \\*c\\* a\\|b \\`[d](e)` `f` [`g`](h)",
    "<img src=x onerror=alert(1)> &lt;b&gt; &#106;avascript:",
    "---",
]


def _markdown(text: str) -> str:
    markdown_it = pytest.importorskip("markdown_it")
    return markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)


@pytest.mark.parametrize("text", HOSTILE_MD)
def test_markdown_in_a_name_renders_as_typed(text: str) -> None:
    """A name's Markdown, wherever report.md puts it (a heading, a paragraph, a table's cell), renders as the text
    it is: no link, image, emphasis or block of its own, and a table row keeps its one cell."""
    from pelab.report.render import _md_escape

    shown = _md_escape(text)
    heading = _markdown(f"# {shown}\n").strip()
    assert heading.startswith("<h1>") and not LIVE.search(heading.removeprefix("<h1>")), (text, shown, heading)
    for page in (f"{shown}\n", f"| a |\n|---|\n| {shown} |\n"):
        out = _markdown(page)
        assert not LIVE.search(out), (text, shown, out)
    assert _markdown(f"| a |\n|---|\n| {shown} |\n").count("<td>") == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="[]()!*_~`\\|#-+>:/.1 ahw<&\n", max_size=24))
def test_no_markdown_in_a_name_acts(text: str) -> None:
    from pelab.report.render import _md_escape

    out = _markdown(f"{_md_escape(text)}\n")
    assert not LIVE.search(out), (text, _md_escape(text), out)


def test_pelabs_own_text_is_written_as_before() -> None:
    """The escaping acts where Markdown would, and nowhere else: what pelab writes (published in docs/results.md)
    comes out byte for byte as it did before names were escaped for Markdown."""
    from pelab.report.render import _md_escape

    for text in [
        "language models at d=32: add or concatenate",
        "C6",
        "concat_split − add along training, at d=32 → 64 ± 2%",
        "its 95% interval [−1.8%, −0.8%] lies inside ±2%; only its Holm-widened one [−2.4%, −0.2%]",
        "task=sort, d=16 (task.length=16, task.vocab=16)",
        "A − B -0.026 [-0.045, -0.007] token/position subspace overlap",
        "`pelab study --preset full` runs it; `~/.cache/pelab/*.png`",
        "max |drawn − closed form| = 1.4e-14",
        "seeds 0–9 (sequential; 5 or 30 on a grid's own seeds) & 1,540 finished runs <",
    ]:
        old = html.escape(" ".join(text.splitlines()), quote=False).replace("|", "\\|")
        assert _md_escape(text) == old, text


# --- paths that are not UTF-8: they work, shown with the byte as \xff -------------------------------------------
RUNNER = """
import sys
sys.path.insert(0, {tests!r})
from test_stored_rows import stored
from pelab.cli import main
sys.argv = ["pelab", *sys.argv[1:]]
with stored({{"acc": 0.5, "loss": 1.0}}):
    main()
"""


@pytest.mark.parametrize("lang", ["C", "C.UTF-8"])
def test_paths_that_are_not_utf8_work(tmp_path: Path, lang: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_") and k not in ("LANG", "PYTHONUTF8")}
    env.update(LANG=lang, LC_ALL=lang)
    base = os.fsencode(tmp_path)
    study, out = base + b"/s\xff.toml", base + b"/o\xff"
    Path(os.fsdecode(study)).write_text(TINY)
    runner = [sys.executable, "-c", RUNNER.format(tests=str(Path(__file__).parent))]
    p = subprocess.run(
        [*runner, "study", study, "--out", out, "--no-report"], capture_output=True, env=env, timeout=120
    )
    err, text = p.stderr.decode(errors="replace"), p.stdout.decode(errors="replace")
    assert p.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "study s\\xff\n3 runs" in text and "o\\xff" in text and not RAW_CONTROL.search(text + err)  # from the stem
    assert os.path.isfile(os.fsdecode(out + b"/" + DB_NAME.encode()))
    r = run_pelab("results", out, env=env)
    assert r.rc == 0 and "Traceback" not in r.err and "0.500" in r.out, r.err[-3000:]


# --- messages that name the real cause and the user's own path -----------------------------------------------------
def test_dot_dot_through_a_missing_folder_leaves_no_stray_folder(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "s.toml").write_text(TINY)
    out = tmp_path / "a" / "nosuch" / ".." / "dd"
    (tmp_path / "a").mkdir()
    with stored(METRICS):
        r = cli(capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(out), "--no-report")
    refused(r, str(out), "nosuch does not exist")
    assert list((tmp_path / "a").iterdir()) == []
    with stored(METRICS):  # through a folder that is there, '..' means what the OS makes of it
        (tmp_path / "a" / "b").mkdir()
        r = cli(
            capsys, monkeypatch, "study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "a/b/../dd"), "--no-report"
        )
    assert r.rc == 0 and (tmp_path / "a" / "dd" / DB_NAME).is_file()


def test_a_read_only_csv_names_the_users_path(study_dir: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    def read_only(*args, dir=None, prefix="", suffix="", **kwargs):  # noqa: A002
        raise OSError(errno.EROFS, "Read-only file system", os.path.join(dir, f"{prefix}vsg25t14{suffix}"))

    monkeypatch.setattr("pelab.files.tempfile.mkstemp", read_only)
    csv = tmp_path / "a.csv"
    line = refused(
        cli(capsys, monkeypatch, "results", str(study_dir), "--csv", str(csv)), f"{csv}: Read-only file system"
    )
    assert ".tmp" not in line


def test_the_left_out_warning_is_printed_once(study_dir: Path, capsys, monkeypatch) -> None:
    """`pelab report` read the rows twice, each time saying what it left out; the report's own reading says it."""
    import pelab.report.build
    from pelab.study.store import Store

    tamper(study_dir, "status", "weird")

    def build(out: Path, on_progress=None):
        with Store(out, create=False) as store:
            store.rows()  # as the real build does, once
        return out / "report.html", out / "report.md", []

    monkeypatch.setattr(pelab.report.build, "build_report", build)
    r = cli(capsys, monkeypatch, "report", str(study_dir))
    assert r.rc == 0, r.err
    assert r.err.count("stored run(s) left out") == 1, r.err


def test_a_sparse_or_huge_checkpoint_says_so(tmp_path: Path, monkeypatch) -> None:
    from pelab.checkpoint import load, save
    from pelab.config import ModelConfig
    from pelab.model import Transformer
    from pelab.study.folder import StudyFolder

    study = StudyFolder(tmp_path)
    study.checkpoints.mkdir()
    path = study.checkpoint("0123456789abcdef")
    save(Transformer(ModelConfig(d=16)), path)
    assert study.has_checkpoint("0123456789abcdef") and load(path) is not None

    def no_memory(data: bytes) -> dict:
        raise MemoryError

    monkeypatch.setattr("safetensors.torch.load", no_memory)
    with pytest.raises(PelabError, match=f"checkpoint: {re.escape(str(path))} .* does not fit in memory"):
        load(path)
    monkeypatch.undo()
    os.truncate(path, 10 * 2**30)  # sparse: 10 GB on paper, nothing on disk
    with pytest.raises(PelabError, match=f"checkpoint: {re.escape(str(path))} .*bytes follow its last tensor"):
        load(path)
    assert not study.has_checkpoint(
        "0123456789abcdef"
    )  # damaged: the report counts it missing, a study trains it again


# --- an absurd estimate asks, or is refused ------------------------------------------------------------------------
@pytest.mark.parametrize("line", ["steps = 1000000000", "eval_batches = 1000000000"])
def test_an_absurd_estimate_is_refused_off_a_terminal(tmp_path: Path, capsys, monkeypatch, line: str) -> None:
    from test_hardening import tiny

    (tmp_path / "s.toml").write_text(tiny("train", line))
    args = ("study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--no-report", "--workers", "2")
    refused(cli(capsys, monkeypatch, *args), "study: estimated", "past the 100 h", "--allow-long")
    assert not (tmp_path / "o").exists()
    monkeypatch.setattr("pelab.cli.study._on_terminal", lambda: True)
    monkeypatch.setattr("typer.confirm", lambda *a, **k: False)
    refused(cli(capsys, monkeypatch, *args), "--allow-long")  # asked, and the answer was no
    monkeypatch.setattr("typer.confirm", lambda *a, **k: True)
    with stored(METRICS):
        assert cli(capsys, monkeypatch, *args).rc == 0  # asked, and yes
    monkeypatch.setattr("pelab.cli.study._on_terminal", lambda: False)
    with stored(METRICS):
        assert cli(capsys, monkeypatch, *args, "--allow-long").rc == 0


@pytest.mark.parametrize("preset", ["quick", "full", "gpu"])
def test_every_preset_is_within_the_bound_even_on_one_worker(preset: str) -> None:
    from pelab.cli.app import preset_path
    from pelab.study.driver import too_long
    from pelab.study.grid import load_study

    assert too_long(load_study(preset_path(preset)).runs, 1) is None


# --- Ctrl-C before the command's own handler -----------------------------------------------------------------------
def test_the_command_guards_ctrl_c_from_its_first_import_and_a_library_user_keeps_theirs() -> None:
    """``python -m pelab`` imports the package while argv[0] is "-m": from then on a Ctrl-C is the one line and
    exit 130 (tested without timing: the process sends itself SIGINT right after ``import pelab``)."""
    from pelab import INTERRUPTED

    guarded = (
        "import sys; sys.argv[0] = '-m'; import os, signal, pelab, time; os.kill(os.getpid(), signal.SIGINT); "
        "time.sleep(30)"
    )
    p = subprocess.run([sys.executable, "-c", guarded], capture_output=True, text=True, timeout=60)
    assert p.returncode == 130 and p.stderr.strip() == INTERRUPTED, p.stderr
    plain = "import signal, pelab; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    p = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "True", p.stderr


# --- sequential.json: counts the design code would trust --------------------------------------------------------
def _sequential(study_dir: Path, record: str) -> None:
    """The folder's study made sequential (at most 4 seeds per arm), with ``record`` as its sequential.json."""
    from pelab.study.store import Store

    with Store(study_dir, create=False) as store:
        store.set_meta(study=TINY + "[sequential]\nmax_seeds = 4\n")
    (study_dir / "sequential.json").write_text(record)


def _record(count: object) -> str:
    import json

    from pelab.study.grid import parse_study

    arm = parse_study(TINY).runs[0].arm_id
    return json.dumps({"design": {}, "rounds": [{"round": 1, "seeds": {arm: count}}]})


@pytest.mark.parametrize(
    "record, words",
    [
        (_record(5), "round 1 gives arm"),  # past the cap: design.py's KeyError: 4
        (_record(50_000_000), "'50000000' seeds; allowed: an integer in 0..4"),  # 50M configs built
        (_record(-1), "allowed: an integer in 0..4"),
        (_record("3"), "allowed: an integer in 0..4"),
        (_record(True), "allowed: an integer in 0..4"),
        ('{"rounds": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
        ('{"rounds": [], "design": ' + "[" * 40 + "]" * 40 + "}", "nested more than 32 deep"),
        ('{"rounds": [' + ",".join(['{"seeds": {}}'] * 5) + "]}", "5 rounds, more than"),
        ('{"rounds": {}}', "no list of rounds"),
    ],
    ids=["over-cap", "fifty-million", "negative", "text", "bool", "deep", "deep-elsewhere", "rounds", "no-rounds"],
)
def test_a_sequential_record_past_its_cap_is_refused_in_one_line(
    study_dir: Path, capsys, monkeypatch, record: str, words: str
) -> None:
    _sequential(study_dir, record)
    refused(cli(capsys, monkeypatch, "results", str(study_dir)), "sequential.json is not a sequential record", words)


def test_a_sequential_record_within_its_cap_is_read(study_dir: Path, capsys, monkeypatch) -> None:
    _sequential(study_dir, _record(4))
    r = cli(capsys, monkeypatch, "results", str(study_dir))
    assert r.rc == 0, r.err


# --- a checkpoint whose header names another model: damaged, never built -------------------------------------------
def test_a_checkpoint_naming_another_model_counts_as_damaged_and_is_never_built(study_dir: Path, monkeypatch) -> None:
    """A 591-byte file whose header names d=2048 and 24 layers had a report worker build ~5 GB of model before
    ``load`` refused it, and the refusal ended the whole report: the header is read against the run's config."""
    from safetensors.torch import save_file

    import pelab.model
    from pelab.checkpoint import save
    from pelab.config import ModelConfig
    from pelab.model import Transformer
    from pelab.report.build import load_context
    from pelab.study.folder import StudyFolder

    ctx = load_context(study_dir)
    bomb, good = sorted(ctx.configs)[:2]
    folder = StudyFolder(study_dir)
    folder.checkpoints.mkdir()
    huge = ctx.configs[bomb].model.model_copy(update={"d": 2048, "n_layers": 24, "d_ff": 8192})
    save_file({}, str(folder.checkpoint(bomb)), metadata={"pelab_model_config": huge.canonical_json()})
    assert folder.checkpoint(bomb).stat().st_size < 1000
    save(Transformer(ctx.configs[good].model), folder.checkpoint(good))

    build = pelab.model.Transformer.__init__

    def never_the_headers(self: object, cfg: ModelConfig) -> None:  # the run's own model may be built, never d=2048
        assert cfg.d < 2048, "the model a checkpoint's header names was built to check it"
        build(self, cfg)

    monkeypatch.setattr(pelab.model.Transformer, "__init__", never_the_headers)
    assert not ctx.has_checkpoint(bomb) and not ctx.measurable(bomb)  # damaged: counted, never loaded
    assert ctx.has_checkpoint(good) and ctx.measurable(good)
    assert folder.has_checkpoint(bomb)  # whole, asked without the run's config (a study's damaged-file check)
    assert not folder.has_checkpoint(bomb, ctx.configs[bomb].model)
    assert not folder.has_checkpoint(good, ModelConfig(d=32))  # a whole pelab model, but not this run's
    # the right header over another model's tensors: load refused it, and the refusal ended the whole report
    monkeypatch.undo()
    other = Transformer(ctx.configs[good].model.model_copy(update={"d": 32}))
    save_file({k: v.contiguous() for k, v in other.state_dict().items()}, str(folder.checkpoint(bomb)),
              metadata={"pelab_model_config": ctx.configs[bomb].model.canonical_json()})  # fmt: skip
    assert folder.has_checkpoint(bomb) and not folder.has_checkpoint(bomb, ctx.configs[bomb].model)
    assert not load_context(study_dir).has_checkpoint(bomb)


# --- a stored run id is a run id: 16 hex digits, its config's -----------------------------------------------------
def test_a_stored_run_id_that_is_a_path_is_left_out_and_never_read(
    study_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    """A row stored as ``<id>/../../../outside_model`` once had ``pelab analyze --run <id>`` read a checkpoint
    outside the folder; a row whose id is not its config's is no run of that config either."""
    import sqlite3

    from safetensors.torch import save_file

    from pelab.study.folder import StudyFolder, checkpoint_file
    from pelab.study.store import Store

    outside = tmp_path / "outside_model.safetensors"
    save_file({}, str(outside))
    (study_dir / "checkpoints").mkdir()
    with sqlite3.connect(study_dir / DB_NAME) as conn:
        first, second, _ = (r for (r,) in conn.execute("SELECT run_id FROM runs ORDER BY run_id"))
        conn.execute("UPDATE runs SET run_id = ? WHERE run_id = ?", (f"{first}/../../../outside_model", first))
        conn.execute("UPDATE runs SET run_id = ? WHERE run_id = ?", ("0" * 16, second))  # the id of no config
    with Store(study_dir, create=False) as store:
        kept = store.rows(quiet=True)
        assert {r["run_id"] for r in kept}.isdisjoint({first, second, "0" * 16}) and len(kept) == 1
        assert sorted(why for _, why in store.excluded) == [
            f"its config is run {second}, not the run id it is stored under",
            "its run id is not 16 hexadecimal digits",
        ]
    before = snapshot(tmp_path, study_dir)
    r = cli(capsys, monkeypatch, "analyze", "spectrum", "--run", first[:4], "--db", str(study_dir), "--out",
            str(tmp_path / "a"))  # fmt: skip
    refused(r, f"no run '{first[:4]}'")
    assert snapshot(tmp_path, study_dir) == before
    with pytest.raises(PelabError, match="is not a run id; allowed: 16 hexadecimal digits"):
        checkpoint_file(study_dir / "checkpoints", f"{first}/../../../outside_model")
    with pytest.raises(PelabError, match="is not a run id"):
        StudyFolder(study_dir).has_checkpoint("../x")


# --- a hard link where pelab writes in place: refused, never written through ---------------------------------------
@pytest.mark.parametrize("where", ["study.lock", DB_NAME], ids=["lock", "database"])
@pytest.mark.parametrize("command", ["report", "study"])
def test_a_hard_link_pelab_would_write_in_place_is_refused(
    study_dir: Path, tmp_path: Path, capsys, monkeypatch, where: str, command: str
) -> None:
    """A received study.lock hard-linked to a file outside the folder had that file truncated and overwritten with
    pelab's pid; the database, which SQLite writes in place, is the same kind of file."""
    outside = outside_of(tmp_path)
    victim = outside / "victim.txt"
    if where == DB_NAME:
        shutil.copy(study_dir / DB_NAME, outside / "victim.sqlite")
        victim = outside / "victim.sqlite"
    (study_dir / where).unlink(missing_ok=True)
    os.link(victim, study_dir / where)
    (tmp_path / "s.toml").write_text(TINY)
    before = snapshot(tmp_path, study_dir)
    args = {"study": ("study", str(tmp_path / "s.toml"), "--out", str(study_dir), "--no-report")}
    with stored(METRICS):
        r = cli(capsys, monkeypatch, *args.get(command, (command, str(study_dir))))
    refused(r, str(study_dir / where), "has 2 hard links")
    assert snapshot(tmp_path, study_dir) == before


# --- leftovers: only the temporary names pelab's own writers give, only where pelab writes -------------------------
def test_only_pelabs_own_temporary_files_are_removed(tmp_path: Path) -> None:
    """`pelab report` deleted every file ending in .tmp or .tmp2 anywhere under the folder, a user's too."""
    from pelab.study.folder import StudyFolder

    out = tmp_path / "o"
    for d in ("checkpoints", "figures", "analyses/spectrum-x", "data"):
        (out / d).mkdir(parents=True)
    ours = [
        out / ".report.html.k3j4ab_9.tmp",
        out / ".claims.json.x1y2z3w4.tmp",
        out / "checkpoints" / ".0123456789abcdef.safetensors.a1b2c3d4.tmp",
        out / "checkpoints" / "0123456789abcdef.safetensors.tmp4242",
        out / "checkpoints" / "0123456789abcdef.safetensors.part",
        out / "checkpoints" / ".tmpa1b2c3",
        out / "figures" / ".curves.png.k3j4.tmp",
        out / "analyses" / "spectrum-x" / ".spectrum.json.q8w9e0r1.tmp",
    ]
    theirs = [
        out / "notes.tmp",
        out / "draft.tmp2",
        out / ".notes.txt.abcd1234.tmp",  # the atomic writers' pattern, but of no file pelab keeps at the top
        out / ".tmpscratch",
        out / "data" / "x.tmp",
        out / "data" / ".report.html.k3j4.tmp",
        out / "data" / "0123456789abcdef.safetensors.part",
        out / "report.html",
        out / "checkpoints" / "0123456789abcdef.safetensors",
    ]
    for p in ours + theirs:
        p.write_bytes(b"x")
    assert StudyFolder(out).remove_leftovers() == len(ours)
    assert not any(p.exists() for p in ours)
    assert all(p.exists() for p in theirs)


# --- a reading command changes nothing of a received folder ---------------------------------------------------------
@pytest.mark.parametrize("kind", ["empty", "foreign"])
@pytest.mark.parametrize("command", ["results", "report"])
def test_an_empty_or_foreign_database_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys, monkeypatch, kind: str, command: str
) -> None:
    """`pelab results` on an empty results.sqlite made it a 28 KB pelab database (and a -wal beside it)."""
    import sqlite3

    out = tmp_path / "o"
    out.mkdir()
    db = out / DB_NAME
    db.write_bytes(b"")
    if kind == "foreign":
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE notes (x TEXT)")
        sqlite3.connect(db).close()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    words = "is empty, not a pelab results database" if kind == "empty" else "is not a pelab results database"
    refused(cli(capsys, monkeypatch, command, str(out)), str(db), words)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
