"""``grep``."""

from __future__ import annotations

from pathlib import Path

from tether.policy import SandboxExecutionPolicy
from tether.tools.fs import GrepTool
from tether.tools.fs._grep import MAX_LINE_CHARS

from .conftest import Host, run_tool

GREP = GrepTool()


def files(root: Path, contents: dict[str, str | bytes]) -> None:
    for rel, content in contents.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


async def test_grep_prints_path_line_text_in_path_order(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    files(
        host.ws,
        {
            "b.py": "x = 1\ndef todo():\n    pass  # TODO later\n",
            "a/z.txt": "TODO first\n",
            "a/b/y.txt": "nothing\r\nTODO: crlf\r\n",
            ".git/config": "TODO in git\n",
            "blob.bin": b"TODO\0binary",
        },
    )
    (host.ws / "link.txt").symlink_to(host.ws / "a" / "z.txt")
    result = await run_tool(GREP, policy, pattern="TODO")
    assert result.content == (
        "a/b/y.txt:2:TODO: crlf\na/z.txt:1:TODO first\nb.py:3:    pass  # TODO later\n"
        "[skipped 1 binary file]"
    )
    assert dict(result.details) == {"matches": 3, "truncated": False}


async def test_grep_options(host: Host, policy: SandboxExecutionPolicy) -> None:
    files(host.ws, {"a.py": "Alpha\nalpha\n", "b.txt": "alpha\n", "src/c.py": "ALPHA\n"})
    glob = await run_tool(GREP, policy, pattern="alpha", glob="*.py")
    nocase = await run_tool(GREP, policy, pattern="^alpha$", ignore_case=True, glob="*.{py,txt}")
    path_glob = await run_tool(GREP, policy, pattern="(?i)alpha", glob="src/*.py")
    one_file = await run_tool(GREP, policy, pattern="Al", path="a.py")
    subdir = await run_tool(GREP, policy, pattern="A", path="src")
    assert glob.content == "a.py:2:alpha"
    assert nocase.content == "a.py:1:Alpha\na.py:2:alpha\nb.txt:1:alpha\nsrc/c.py:1:ALPHA"
    assert path_glob.content == "src/c.py:1:ALPHA"
    assert one_file.content == "a.py:1:Alpha"
    assert subdir.content == "src/c.py:1:ALPHA"


async def test_grep_outside_the_workspace_shows_absolute_paths(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    result = await run_tool(GREP, policy, pattern="secret", path="../outside")
    assert result.content == f"{host.outside}/secret.txt:1:outside secret"


async def test_grep_caps(host: Host, policy: SandboxExecutionPolicy) -> None:
    files(host.ws, {"many.txt": "hit\n" * 10, "long.txt": "hit" + "x" * 1000 + "\n"})
    capped = await run_tool(GrepTool(max_matches=3), policy, pattern="hit", path="many.txt")
    assert capped.content == (
        "many.txt:1:hit\nmany.txt:2:hit\nmany.txt:3:hit\n[truncated: showing the first 3 matches]"
    )
    assert dict(capped.details) == {"matches": 3, "truncated": True}
    long = await run_tool(GREP, policy, pattern="hit", path="long.txt")
    assert long.content == "long.txt:1:hit" + "x" * (MAX_LINE_CHARS - 3) + "…"
    stopped = await run_tool(GrepTool(max_visited=1), policy, pattern="hit")
    assert stopped.content.endswith(
        "[search stopped after visiting 1 entries; narrow the path or glob]"
    )


async def test_grep_errors_and_no_matches(host: Host, policy: SandboxExecutionPolicy) -> None:
    files(host.ws, {"a.txt": "a\n"})
    results = [
        await run_tool(GREP, policy, pattern="zzz"),
        await run_tool(GREP, policy, pattern="(unclosed"),
        await run_tool(GREP, policy, pattern="a", path="nope"),
        await run_tool(GREP, policy, pattern="a", path="/dev/null"),
        await run_tool(GREP, policy, pattern="a", path="a.txt", glob="[z-a]"),
    ]
    assert [r.content for r in results] == [
        "no matches for zzz",
        "Error: invalid regular expression (unclosed: missing ) at position 9",
        "Error: path not found: nope",
        "Error: /dev/null is not a regular file or directory",
        "Error: invalid glob pattern [z-a]: bad character range z-a",
    ]
