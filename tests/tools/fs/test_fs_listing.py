"""``ls`` and ``glob``."""

from __future__ import annotations

from pathlib import Path

from tether.policy import SandboxExecutionPolicy
from tether.tools.fs import GlobTool, LsTool
from tether.tools.fs._glob_pattern import compile_glob, expand_braces, split_pattern

from .conftest import Host, run_tool

LS = LsTool()
GLOB = GlobTool()


def tree(root: Path, files: list[str]) -> None:
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)


async def test_ls_sorted_with_directories_and_links_marked(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    tree(host.ws, ["b.txt", "a/x", ".hidden", "Z.md"])
    (host.ws / "link").symlink_to("a")
    result = await run_tool(LS, policy)
    assert result.content == ".hidden\nZ.md\na/\nb.txt\nlink -> a"
    assert dict(result.details) == {"path": str(host.ws), "entries": 5}
    sub = await run_tool(LS, policy, path="a")
    assert sub.content == "x"


async def test_ls_outside_the_workspace_and_errors(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    tree(host.ws, ["f"])
    (host.ws / "empty").mkdir()
    results = [await run_tool(LS, policy, path=p) for p in ("../outside", "empty", "nope", "f")]
    assert [r.content for r in results] == [
        "secret.txt\nsub/",
        "[empty directory]",
        "Error: directory not found: nope",
        "Error: f is not a directory",
    ]
    assert [r.is_error for r in results] == [False, False, True, True]


async def test_ls_is_capped(host: Host, policy: SandboxExecutionPolicy) -> None:
    tree(host.ws, [f"f{i:02d}" for i in range(12)])
    result = await run_tool(LsTool(max_entries=10), policy)
    assert result.content.splitlines()[-2:] == ["f09", "[truncated: showing 10 of 12 entries]"]


async def test_glob_patterns(host: Host, policy: SandboxExecutionPolicy) -> None:
    tree(
        host.ws,
        [
            "a.py",
            "b.txt",
            "src/c.py",
            "src/d.pyi",
            "src/deep/e.py",
            ".git/hooks/x.py",
            "src/.git/y.py",
        ],
    )
    cases = {
        "*.py": "a.py",
        "**/*.py": "a.py\nsrc/c.py\nsrc/deep/e.py",
        "src/**/*.py": "src/c.py\nsrc/deep/e.py",
        "src/*.{py,pyi}": "src/c.py\nsrc/d.pyi",
        "src/*": "src/c.py\nsrc/d.pyi\nsrc/deep/",
        "?.txt": "b.txt",
        "[ab].*": "a.py\nb.txt",
        "[!a]*.txt": "b.txt",
        "src/deep/e.py": "src/deep/e.py",
        "*.rs": "no paths match *.rs",
    }
    got = {p: (await run_tool(GLOB, policy, pattern=p)).content for p in cases}
    assert got == cases


async def test_glob_relative_to_a_directory_or_outside(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    tree(host.ws, ["src/c.py", "src/deep/e.py"])
    in_dir = await run_tool(GLOB, policy, pattern="**/*.py", path="src/deep")
    outside = await run_tool(GLOB, policy, pattern="../outside/*.txt")
    absolute = await run_tool(GLOB, policy, pattern=str(host.outside / "*"))
    missing = await run_tool(GLOB, policy, pattern="*", path="nope")
    not_dir = await run_tool(GLOB, policy, pattern="*", path="src/c.py")
    assert in_dir.content == "src/deep/e.py"
    assert outside.content == f"{host.outside}/secret.txt"
    assert absolute.content == f"{host.outside}/secret.txt\n{host.outside}/sub/"
    assert missing.content == "Error: directory not found: nope"
    assert not_dir.content == "Error: src/c.py is not a directory"


async def test_glob_caps_results_and_visits(host: Host, policy: SandboxExecutionPolicy) -> None:
    tree(host.ws, [f"d/f{i:02d}.txt" for i in range(12)])
    capped = await run_tool(GlobTool(max_results=5), policy, pattern="**/*.txt")
    assert capped.content.splitlines()[-2:] == [
        "d/f04.txt",
        "[truncated: showing 5 of 12 matches]",
    ]
    stopped = await run_tool(GlobTool(max_visited=4), policy, pattern="**")
    assert stopped.content.endswith(
        "\n[search stopped after visiting 4 entries; narrow the pattern or path]"
    )


async def test_glob_bad_pattern(host: Host, policy: SandboxExecutionPolicy) -> None:
    result = await run_tool(GLOB, policy, pattern="[z-a]")
    assert result.content == "Error: invalid glob pattern [z-a]: bad character range z-a"


def test_glob_helpers() -> None:
    assert expand_braces("a.{py,{pyi,pyx}}") == ["a.py", "a.pyi", "a.pyx"]
    assert expand_braces("a.{py") == ["a.{py"]
    assert split_pattern("src/**/*.py") == ("src", "**/*.py")
    assert split_pattern("/etc/*.conf") == ("/etc", "*.conf")
    assert split_pattern("/*") == ("/", "*")
    assert compile_glob("**/x").fullmatch("x")
    assert compile_glob("**/x").fullmatch("a/b/x")
    assert not compile_glob("*/x").fullmatch("a/b/x")
    assert compile_glob("[]]").fullmatch("]")
    assert compile_glob("src/**").fullmatch("src/a/b")
    assert not compile_glob("src/**").fullmatch("src")
    assert compile_glob("a/**/**/b").fullmatch("a/b")
    assert compile_glob("*.p[!a-x]").fullmatch("x.py")
    assert not compile_glob("*.p[!a-y]").fullmatch("x.py")
    assert compile_glob("a*b?c[[]").fullmatch("a//bxc[".replace("/", ""))
    assert not compile_glob("*a").fullmatch("a/a")
    assert compile_glob("[a").fullmatch("[a")
