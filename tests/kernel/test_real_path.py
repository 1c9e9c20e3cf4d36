"""``real_path`` (``kernel/_real_path.py``) answers what ``os.path.realpath`` answers, for
every kind of path, and as the filesystem stands at each call: a link swapped between two
calls is followed where it now leads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.kernel._real_path import real_path


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "file").write_text("x")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "to_b").symlink_to("a/b")
    (tmp_path / "to_to_b").symlink_to(tmp_path / "to_b")
    (tmp_path / "dangling").symlink_to("nowhere/at/all")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "up").symlink_to("..")
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


CASES = [
    ".",
    "a/b",
    "a/b/",
    "a/b/file",
    "a/b/file/",
    "a/b/file/more",
    "a/./b/../b/file",
    "to_b",
    "to_b/file",
    "to_b/..",
    "to_to_b/file",
    "dangling",
    "dangling/deeper",
    "loop1",
    "loop1/x",
    "up/" + "x",
    "missing",
    "missing/",
    "missing/deeper/file",
    "missing/../a",
    "to_b/missing",
    "fifo",
    "",
]


@pytest.mark.parametrize("relative", CASES)
def test_it_agrees_with_realpath(layout: Path, relative: str) -> None:
    absolute = str(layout / relative) if relative else ""
    assert real_path(absolute) == os.path.realpath(absolute)


@pytest.mark.parametrize("relative", CASES)
def test_a_relative_path_is_resolved_from_the_working_directory(
    layout: Path, relative: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(layout)
    assert real_path(relative) == os.path.realpath(relative)


def test_a_removed_directory_is_named_as_realpath_names_it(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    gone.rmdir()
    assert real_path(str(gone)) == os.path.realpath(gone) == str(gone)


def test_a_link_swapped_between_two_calls_is_followed_where_it_now_leads(tmp_path: Path) -> None:
    inside, outside = tmp_path / "workspace", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    link = tmp_path / "current"
    link.symlink_to(inside)
    assert real_path(str(link / "file")) == str(inside / "file")
    link.unlink()
    link.symlink_to(outside)
    assert real_path(str(link / "file")) == str(outside / "file")
    assert real_path(str(link)) == str(outside)
