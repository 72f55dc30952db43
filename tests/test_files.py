"""Atomic writes: whole or absent, links replaced rather than followed, no temp file left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from pelab.files import write_atomic


def test_write_atomic_replaces_whole(tmp_path: Path) -> None:
    p = tmp_path / "report.html"
    write_atomic(p, "old")
    write_atomic(p, "new" * 1000)
    assert p.read_text() == "new" * 1000
    assert [x.name for x in tmp_path.iterdir()] == ["report.html"]


def test_write_atomic_does_not_follow_a_planted_link(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("keep me")
    link = tmp_path / "figure.png"
    link.symlink_to(secret)
    write_atomic(link, b"\x89PNG")
    assert secret.read_text() == "keep me" and not link.is_symlink() and link.read_bytes() == b"\x89PNG"


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "claims.json"
    write_atomic(p, "[]")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pelab.files.os.fsync", full_disk)
    with pytest.raises(OSError):
        write_atomic(p, "[1, 2, 3]")
    assert p.read_text() == "[]" and [x.name for x in tmp_path.iterdir()] == ["claims.json"]


def test_figures_replace_a_planted_link(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from pelab.plots import save

    secret = tmp_path / "secret.txt"
    secret.write_text("keep me")
    link = tmp_path / "figures" / "curves-reverse.png"
    link.parent.mkdir()
    link.symlink_to(secret)
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    save(fig, link)
    assert secret.read_text() == "keep me" and link.read_bytes()[:4] == b"\x89PNG"


def test_the_report_embeds_no_linked_or_non_png_file(tmp_path: Path) -> None:
    from pelab.report.render import figure

    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    link = tmp_path / "positions_pca.png"
    link.symlink_to(secret)
    fake = tmp_path / "fake.png"
    fake.write_text("password")
    assert figure(link) == ("", "a symbolic link") and figure(fake) == ("", "not a PNG image")
    assert figure(tmp_path / "missing.png") == ("", "missing")


def test_markdown_user_text_cannot_break_out() -> None:
    """A name with a newline, a pipe and HTML stays one inert line; a study file with a code fence inside cannot
    close the fence the report puts around it."""
    from pelab.report.render import _md_escape, fence

    text = "tiny\n# injected heading | cell <script>alert(1)</script>"
    out = _md_escape(text)
    assert "\n" not in out and "<script>" not in out and "\\|" in out
    source = 'name = "x"\n# ```\n# ````` five\n'
    f = fence(source)
    assert f == "``````" and f not in source
    assert fence("plain") == "```"


def test_nested_past_names_the_first_value_below_the_limit() -> None:
    from pelab.files import nested_past

    assert nested_past({"a": {"b": [1, [2]]}}, 4) is None  # a's value (1), b's (2), the list's items (3), the 2 (4)
    assert nested_past({"a": {"b": [1, [2]]}}, 3) == "a.b[1][0]"
    assert nested_past([[[]]], 2) is None and nested_past([[[0]]], 2) == "[0][0][0]"
    deep: list = []
    for _ in range(100_000):  # walked without recursion: no RecursionError
        deep = [deep]
    assert nested_past(deep, 32) is not None
