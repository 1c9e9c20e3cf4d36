"""Names on disk that are not UTF-8: the file tools show them escaped (``\\xff``) and take the
escaped form back, while a file that really has the escaped text as its name wins."""

from __future__ import annotations

import os

import pytest

from tether.tools.fs import GlobTool, GrepTool, LsTool, ReadTool, WriteTool
from tether.tools.fs._fence import shown_name

from .conftest import Host, run_tool


def create(path: bytes, content: bytes) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, content)
    finally:
        os.close(fd)


@pytest.fixture
def odd(host: Host) -> Host:
    """``\\xff\\xfe.txt``, a directory ``d\\xff`` holding ``in.txt``, and a link whose target is
    not UTF-8, all made from raw bytes."""
    ws = os.fsencode(host.ws)
    create(ws + b"/\xff\xfe.txt", b"hello\n")
    os.mkdir(ws + b"/d\xff")
    create(ws + b"/d\xff/in.txt", b"hello there\n")
    os.symlink(b"target\xfe", ws + b"/link")
    return host


def test_shown_name_escapes_only_what_is_not_utf8() -> None:
    assert shown_name("plain.txt") == "plain.txt"
    assert shown_name("caf\u00e9.txt") == "caf\u00e9.txt"
    assert shown_name(os.fsdecode(b"\xff\xfe.txt")) == "\\xff\\xfe.txt"
    assert shown_name("lone \ud800") == "lone \\ud800"


async def test_listings_show_the_names_escaped(odd: Host) -> None:
    policy = odd.policy("read-only")
    ls = await run_tool(LsTool(), policy)
    glob = await run_tool(GlobTool(), policy, pattern="**/*.txt")
    grep = await run_tool(GrepTool(), policy, pattern="hello")
    assert ls.content == "\\xff\\xfe.txt\nd\\xff/\nlink -> target\\xfe"
    assert glob.content == "\\xff\\xfe.txt\nd\\xff/in.txt"
    assert grep.content == "d\\xff/in.txt:1:hello there\n\\xff\\xfe.txt:1:hello"
    sub = await run_tool(LsTool(), policy, path="d\\xff")
    assert sub.content == "in.txt"
    assert sub.details["path"] == f"{odd.ws}/d\\xff"
    for result in (ls, glob, grep, sub):
        result.content.encode("utf-8")  # storable as it is


async def test_the_escaped_name_reads_and_writes_that_file(odd: Host) -> None:
    policy = odd.policy("workspace-write")
    read = await run_tool(ReadTool(), policy, path="\\xff\\xfe.txt")
    assert read.content == "hello\n"
    assert read.details["path"] == f"{odd.ws}/\\xff\\xfe.txt"
    wrote = await run_tool(WriteTool(), policy, path="d\\xff/in.txt", content="changed\n")
    assert wrote.content == "Wrote 8 bytes to d\\xff/in.txt"
    ws = os.fsencode(odd.ws)
    with open(ws + b"/d\xff/in.txt", "rb") as f:
        assert f.read() == b"changed\n"
    assert sorted(os.listdir(ws)) == [b"d\xff", b"link", b"\xff\xfe.txt"]


async def test_a_file_whose_name_is_the_escape_text_wins(odd: Host) -> None:
    (odd.ws / "\\xff\\xfe.txt").write_text("the literal one\n")
    read = await run_tool(ReadTool(), odd.policy("read-only"), path="\\xff\\xfe.txt")
    assert read.content == "the literal one\n"


async def test_a_new_file_gets_the_name_as_written(odd: Host) -> None:
    policy = odd.policy("workspace-write")
    await run_tool(WriteTool(), policy, path="new\\xff.txt", content="x")
    assert (odd.ws / "new\\xff.txt").read_text() == "x"
    assert not os.path.lexists(os.fsencode(odd.ws) + b"/new\xff.txt")


async def test_the_escape_leads_nowhere_the_fence_forbids(odd: Host) -> None:
    """An escaped name is resolved like any other: outside the workspace is still outside."""
    outside = os.fsencode(odd.outside)
    create(outside + b"/s\xff.txt", b"outside\n")
    before = odd.snapshot_outside()
    result = await run_tool(
        WriteTool(), odd.policy("workspace-write"), path="../outside/s\\xff.txt", content="x"
    )
    assert result.is_error
    assert result.content.startswith("Error: cannot write ../outside/s\\xff.txt: it is outside")
    assert "[sandbox: file access denied under workspace-write mode]" in result.content
    assert odd.snapshot_outside() == before
