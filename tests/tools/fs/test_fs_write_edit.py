"""``write`` and ``edit`` inside the workspace: atomic replacement, exact-match edits."""

from __future__ import annotations

import os
import stat

from tether.policy import SandboxExecutionPolicy
from tether.tools.fs import EditTool, WriteTool
from tether.tools.fs._edit import DIFF_TRUNCATED, MAX_DIFF_CHARS

from .conftest import Host, run_tool

WRITE = WriteTool()
EDIT = EditTool()


POLICY_MODE = "workspace-write"
"""The mode of the ``policy`` fixture (``conftest.py``) here."""


def temp_files(host: Host) -> list[str]:
    return [p.name for p in host.ws.rglob(".tether-*")]


async def test_write_creates_parents_and_reports_bytes(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    result = await run_tool(WRITE, policy, path="a/b/c.txt", content="héllo\n")
    assert result.content == "Wrote 7 bytes to a/b/c.txt"
    assert not result.is_error
    assert dict(result.details) == {
        "path": str(host.ws / "a" / "b" / "c.txt"),
        "bytes": 7,
        "created": True,
    }
    assert (host.ws / "a" / "b" / "c.txt").read_text() == "héllo\n"
    assert temp_files(host) == []


async def test_write_replaces_atomically_and_keeps_the_mode(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    target = host.ws / "run.sh"
    target.write_text("old\n")
    target.chmod(0o750)
    inode = target.stat().st_ino

    result = await run_tool(WRITE, policy, path="run.sh", content="")

    assert result.content == "Wrote 0 bytes to run.sh"
    assert result.details["created"] is False
    assert target.read_text() == ""
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert target.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert temp_files(host) == []


async def test_write_errors(host: Host, policy: SandboxExecutionPolicy) -> None:
    (host.ws / "dir").mkdir()
    (host.ws / "file").write_text("x")
    results = [
        await run_tool(WRITE, policy, path="dir", content="x"),
        await run_tool(WRITE, policy, path="file/inner.txt", content="x"),
        await run_tool(WRITE, policy, path=".", content="x"),
        await run_tool(WRITE, policy, path="bad.txt", content="\ud800"),
    ]
    assert [r.content for r in results] == [
        "Error: dir is a directory",
        "Error: cannot write file/inner.txt: file is not a directory",
        "Error: . is a directory",
        "Error: content cannot be written as UTF-8 (invalid character at position 0)",
    ]
    assert sorted(p.name for p in host.ws.iterdir()) == ["dir", "file"]


async def test_edit_replaces_one_exact_match_with_a_diff(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    result = await run_tool(EDIT, policy, path="m.py", old_string="b = 2", new_string="b = 20")
    assert result.content == "Edited m.py: 1 replacement"
    assert (host.ws / "m.py").read_text() == "a = 1\nb = 20\nc = 3\n"
    assert dict(result.details) == {
        "path": str(host.ws / "m.py"),
        "replacements": 1,
        "diff": ("--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 20\n c = 3\n"),
    }


async def test_edit_zero_and_multiple_matches(host: Host, policy: SandboxExecutionPolicy) -> None:
    (host.ws / "m.txt").write_text("x x x\n")
    missing = await run_tool(EDIT, policy, path="m.txt", old_string="y", new_string="z")
    several = await run_tool(EDIT, policy, path="m.txt", old_string="x", new_string="z")
    assert missing.content == "Error: old_string not found in m.txt"
    assert several.content == (
        "Error: old_string occurs 3 times in m.txt; add surrounding context to make it unique, "
        "or set replace_all to replace every occurrence"
    )
    assert (host.ws / "m.txt").read_text() == "x x x\n"

    every = await run_tool(
        EDIT, policy, path="m.txt", old_string="x", new_string="z", replace_all=True
    )
    assert every.content == "Edited m.txt: 3 replacements"
    assert (host.ws / "m.txt").read_text() == "z z z\n"
    assert every.details["diff"] == "--- a/m.txt\n+++ b/m.txt\n@@ -1 +1 @@\n-x x x\n+z z z\n"


async def test_edit_diff_marks_a_missing_final_newline(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "n.txt").write_text("end")
    result = await run_tool(EDIT, policy, path="n.txt", old_string="end", new_string="fin")
    assert result.details["diff"] == (
        "--- a/n.txt\n+++ b/n.txt\n@@ -1 +1 @@\n-end\n\\ No newline at end of file\n"
        "+fin\n\\ No newline at end of file\n"
    )


async def test_edit_diff_is_capped(host: Host, policy: SandboxExecutionPolicy) -> None:
    (host.ws / "w.txt").write_text("a\n" * 20_000)
    result = await run_tool(
        EDIT, policy, path="w.txt", old_string="a", new_string="b", replace_all=True
    )
    diff = result.details["diff"]
    assert isinstance(diff, str)
    assert diff.endswith(DIFF_TRUNCATED)
    assert len(diff) <= MAX_DIFF_CHARS + len(DIFF_TRUNCATED)
    assert result.content == "Edited w.txt: 20000 replacements"


async def test_edit_keeps_the_file_mode(host: Host, policy: SandboxExecutionPolicy) -> None:
    (host.ws / "x.sh").write_text("echo a\n")
    (host.ws / "x.sh").chmod(0o755)
    await run_tool(EDIT, policy, path="x.sh", old_string="a", new_string="b")
    assert stat.S_IMODE((host.ws / "x.sh").stat().st_mode) == 0o755
    assert temp_files(host) == []


async def test_edit_errors(host: Host, policy: SandboxExecutionPolicy) -> None:
    (host.ws / "bin").write_bytes(b"ab\0cd")
    (host.ws / "latin").write_bytes("café".encode("latin-1"))
    (host.ws / "dir").mkdir()
    os.mkfifo(host.ws / "fifo")
    cases = [
        ("nope.txt", "a", "b"),
        ("no/such/dir.txt", "a", "b"),
        ("bin", "ab", "xy"),
        ("latin", "caf", "tea"),
        ("dir", "a", "b"),
        ("fifo", "a", "b"),
        ("same.txt", "a", "a"),
    ]
    results = [
        await run_tool(EDIT, policy, path=p, old_string=old, new_string=new)
        for p, old, new in cases
    ]
    assert [r.content for r in results] == [
        "Error: file not found: nope.txt",
        "Error: file not found: no/such/dir.txt",
        "Error: bin is a binary file; edit changes text files only",
        "Error: latin is not valid UTF-8 text (byte 3); edit refuses to rewrite it",
        "Error: dir is a directory",
        "Error: fifo is not a regular file",
        "Error: old_string and new_string are identical; nothing to change",
    ]
    assert not (host.ws / "no").exists()
    assert (host.ws / "bin").read_bytes() == b"ab\0cd"
