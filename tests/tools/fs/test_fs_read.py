"""``read``: text as it is, bounded by lines and bytes, binary and odd files reported."""

from __future__ import annotations

import io
import os

import pytest

from tether.policy import SandboxExecutionPolicy
from tether.tools.fs import ReadTool
from tether.tools.fs._common import read_some
from tether.tools.fs._fence import FileToolError

from .conftest import Host, run_tool

READ = ReadTool()


POLICY_MODE = "workspace-write"
"""The mode of the ``policy`` fixture (``conftest.py``) here."""


async def test_reads_a_whole_small_file(host: Host, policy: SandboxExecutionPolicy) -> None:
    (host.ws / "a.txt").write_bytes(b"one\r\ntwo\nthree")
    result = await run_tool(READ, policy, path="a.txt")
    assert result.content == "one\r\ntwo\nthree"
    assert not result.is_error
    assert dict(result.details) == {
        "path": str(host.ws / "a.txt"),
        "first_line": 1,
        "last_line": 3,
        "truncated": False,
    }


async def test_offset_and_limit_select_lines_with_a_continuation_note(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await run_tool(READ, policy, path="n.txt", offset=3, limit=4)
    assert result.content == (
        "line 3\nline 4\nline 5\nline 6\n"
        "[truncated: showing lines 3-6; reached the 4-line limit; continue with offset=7]"
    )
    assert result.details["truncated"] is True
    tail = await run_tool(READ, policy, path="n.txt", offset=9, limit=4)
    assert tail.content == "line 9\nline 10\n"


async def test_byte_limit_stops_at_a_whole_line(host: Host, policy: SandboxExecutionPolicy) -> None:
    (host.ws / "big.txt").write_text("".join(f"{i:04d}56789\n" for i in range(100)))  # 10 B/line
    result = await run_tool(ReadTool(max_bytes=35), policy, path="big.txt")
    assert result.content == (
        "000056789\n000156789\n000256789\n"
        "[truncated: showing lines 1-3; reached the 35-byte limit; continue with offset=4]"
    )


async def test_default_byte_limit_is_256_kib(host: Host, policy: SandboxExecutionPolicy) -> None:
    line = "x" * 1023 + "\n"
    (host.ws / "huge.txt").write_text(line * 1000)  # ~1 MiB, 1000 lines
    result = await run_tool(READ, policy, path="huge.txt")
    body, note = result.content.rsplit("\n[", 1)
    assert len((body + "\n").encode()) == 256 * 1024
    assert note == (
        "truncated: showing lines 1-256; reached the 262144-byte limit; continue with offset=257]"
    )


async def test_a_line_longer_than_the_limit_is_cut(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "long.txt").write_text("é" * 40 + "\nnext\n")  # 80 bytes of 2-byte chars
    tool = ReadTool(max_bytes=25)
    result = await run_tool(tool, policy, path="long.txt")
    # 25 bytes would split a character: the cut backs off to 24 bytes (12 chars).
    assert result.content == (
        "é" * 12 + "\n[truncated: line 1 is longer than 25 bytes; showing its start; "
        "continue with offset=2]"
    )
    nxt = await run_tool(tool, policy, path="long.txt", offset=2)
    assert nxt.content == "next\n"
    (host.ws / "last.txt").write_text("z" * 30)
    last = await run_tool(tool, policy, path="last.txt")
    assert (
        last.content
        == "z" * 25 + "\n[truncated: line 1 is longer than 25 bytes; showing its start]"
    )


async def test_invalid_utf8_is_replaced_not_fatal(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    result = await run_tool(READ, policy, path="latin1.txt")
    assert result.content == "caf\ufffd\n"


async def test_binary_file_is_reported_not_shown(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "img.bin").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(100))
    result = await run_tool(READ, policy, path="img.bin")
    assert (
        result.content == "Error: img.bin is a binary file (116 bytes); read shows text files only"
    )
    assert result.is_error


async def test_empty_file_and_offset_past_end(host: Host, policy: SandboxExecutionPolicy) -> None:
    (host.ws / "empty.txt").write_text("")
    (host.ws / "two.txt").write_text("a\nb\n")
    empty = await run_tool(READ, policy, path="empty.txt")
    past = await run_tool(READ, policy, path="two.txt", offset=3)
    past_empty = await run_tool(READ, policy, path="empty.txt", offset=2)
    assert (empty.content, empty.is_error) == ("[empty file]", False)
    assert past.content == "Error: offset 3 is past the end of two.txt (2 lines)"
    assert past_empty.content == "Error: offset 2 is past the end of empty.txt (0 lines)"


async def test_missing_directory_and_special_files(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "dir").mkdir()
    (host.ws / "file").write_text("x")
    os.mkfifo(host.ws / "fifo")
    results = [
        await run_tool(READ, policy, path=p)
        for p in ("nope.txt", "dir", "fifo", "file/below", "/dev/zero")
    ]
    assert [r.content for r in results] == [
        "Error: file not found: nope.txt",
        "Error: dir is a directory; use ls to list it",
        "Error: fifo is not a regular file",
        "Error: not a directory: a parent of file/below is a file",
        "Error: /dev/zero is not a regular file",
    ]
    assert all(r.is_error for r in results)


class _NothingYet(io.RawIOBase):
    """A file opened without blocking that has no data to give (``/proc/kmsg``)."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: object) -> None:
        return None


def test_a_file_with_nothing_to_read_now_is_a_clear_error() -> None:
    with pytest.raises(FileToolError) as err:
        read_some(io.BufferedReader(_NothingYet()), 8192, "/proc/kmsg")
    assert str(err.value) == (
        "cannot read /proc/kmsg: it has no data to give now (it waits for data, like a device "
        "or a kernel interface); the file tools read ordinary files only"
    )
