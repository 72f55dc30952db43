"""Writes respect what is there (issue 30, part 6): a target that is not a regular file (a device, a FIFO, a
folder, a socket) is refused in one line and left as it was; a link at the target is replaced, never followed;
a written file gets the mode a plain open gives it (the umask's, or the existing file's own), not mkstemp's
0600; and the messages of a wrong path or a full disk name the path the user gave."""

from __future__ import annotations

import errno
import os
import socket
import sqlite3
import stat
from pathlib import Path

import pytest
from test_hardening import cli, one_line
from test_stored_rows import folder  # noqa: F401  (a fixture: a study folder of three stored runs)

from pelab.errors import PelabError
from pelab.files import write_atomic


def special(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"target-{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    elif kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers, made here
        except OSError as e:
            pytest.skip(f"cannot make a device node here ({e.strerror})")
    return path


@pytest.mark.parametrize("kind", ["fifo", "folder", "socket", "device"])
def test_a_special_target_is_refused_and_left_as_it_was(tmp_path: Path, kind: str) -> None:
    path = special(tmp_path, kind)
    before = os.lstat(path)
    with pytest.raises(PelabError, match=f"^{path}: is (a|not) .*; pelab writes only regular files"):
        write_atomic(path, "data")
    after = os.lstat(path)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp file left either


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_umasks_mode(tmp_path: Path, mask: int, mode: int) -> None:
    old = os.umask(mask)
    try:
        write_atomic(tmp_path / "report.html", "<html></html>")
        with open(tmp_path / "plain.html", "w") as f:
            f.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "report.html").st_mode) == mode
    assert stat.S_IMODE(os.stat(tmp_path / "plain.html").st_mode) == mode


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    path.write_text("a,b\n")
    os.chmod(path, 0o640)
    write_atomic(path, "a,b\n1,2\n")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640 and path.read_text() == "a,b\n1,2\n"


def test_a_full_disk_names_the_target_not_the_temp_file(tmp_path: Path, monkeypatch) -> None:
    from pelab.cli import environment_message

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")  # no file name, as a write() error has none

    monkeypatch.setattr("pelab.files.os.fsync", full)
    with pytest.raises(OSError) as e:
        write_atomic(tmp_path / "report.html", "x")
    assert e.value.filename == str(tmp_path / "report.html")
    assert environment_message(e.value).startswith(f"{tmp_path / 'report.html'}: the disk is full")
    assert list(tmp_path.iterdir()) == []


def test_results_csv_into_a_folder_names_the_folder(folder: Path, tmp_path: Path, capsys, monkeypatch) -> None:  # noqa: F811
    target = tmp_path / "exports"
    target.mkdir()
    line = one_line(cli(capsys, monkeypatch, "results", str(folder), "--csv", str(target)), str(target), "a folder")
    assert ".tmp" not in line and list(target.iterdir()) == []


def test_a_full_disk_at_the_database_does_not_say_move_it_away(tmp_path: Path, capsys, monkeypatch) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr("pelab.report.console.results_table", full)
    line = one_line(cli(capsys, monkeypatch, "results", str(tmp_path)), "results database: the disk is full")
    assert "move" not in line
