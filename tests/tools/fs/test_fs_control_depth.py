"""Control names at any depth, and git directories by their content, in the write fence.

``write`` and ``edit`` refuse, in both restricted modes, a path with a control name at any
depth (``sub/.git/config``, ``pkg/.claude/settings.json``, ``deep/er/tether.toml``, any case),
anything inside a directory git takes for a git directory (``HEAD`` beside ``objects`` and
``refs``), and what would make one. Reading stays allowed. Every attempt is checked on disk.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.sandbox import PathRules
from tether.sandbox._paths import default_rules
from tether.tools._base import Tool, ToolResult
from tether.tools.fs import EditTool, ReadTool, SandboxDenied, WriteTool
from tether.tools.fs._fence import (
    CONTROL_NAME_REASON,
    GIT_DIR_REASON,
    open_parent,
    plan_write,
    replace_file,
)

from .conftest import RESTRICTED, Host, run_tool
from .test_fs_fence import assert_denied, denied

WRITE = WriteTool()
EDIT = EditTool()
TOOLS = [pytest.param(WRITE, id="write"), pytest.param(EDIT, id="edit")]


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def attempt(tool: Tool, host: Host, mode: str, path: str) -> ToolResult:
    if tool is WRITE:
        return await run_tool(WRITE, host.policy(mode), path=path, content="pwned\n")
    return await run_tool(
        EDIT, host.policy(mode), path=path, old_string="trusted", new_string="pwned"
    )


# -- control names ------------------------------------------------------------------------------
NAMED = [
    ("sub/.git/config", ".git"),
    ("sub/.git/hooks/pre-commit", ".git"),
    ("a/b/c/.GIT/config", ".GIT"),
    ("pkg/.claude/settings.json", ".claude"),
    ("pkg/.Claude/settings.local.json", ".Claude"),
    ("app/.codex/config.toml", ".codex"),
    ("app/.mcp.json", ".mcp.json"),
    ("deep/er/tether.toml", "tether.toml"),
    ("deep/TETHER.TOML", "TETHER.TOML"),
    ("lib/.husky/pre-commit", ".husky"),
    ("lib/.pre-commit-config.yaml", ".pre-commit-config.yaml"),
    ("lib/.config/lefthook.yml", "lefthook.yml"),
    ("lib/lefthook-local.toml", "lefthook-local.toml"),
]


@pytest.mark.parametrize(("path", "component"), NAMED)
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_control_names_at_any_depth_are_refused(
    host: Host, mode: str, tool: Tool, path: str, component: str
) -> None:
    existing = host.ws / path
    existing.parent.mkdir(parents=True)
    existing.write_text("trusted\n")
    before = files(host.ws)

    result = await attempt(tool, host, mode, path)

    assert_denied(result, mode, denied(mode, path, f"{component} {CONTROL_NAME_REASON}"))
    assert files(host.ws) == before
    read = await run_tool(ReadTool(), host.policy(mode), path=path)
    assert read.content == "trusted\n"


@pytest.mark.parametrize(("path", "component"), NAMED)
async def test_missing_control_names_at_any_depth_are_not_created(
    host: Host, path: str, component: str
) -> None:
    result = await run_tool(WRITE, host.policy("workspace-write"), path=path, content="pwned\n")

    assert_denied(
        result,
        "workspace-write",
        denied("workspace-write", path, f"{component} {CONTROL_NAME_REASON}"),
    )
    assert list(host.ws.iterdir()) == []


async def test_names_that_only_look_alike_stay_writable(host: Host) -> None:
    policy = host.policy("workspace-write")
    for path in ("sub/.gitignore", "sub/.github/workflows/ci.yml", "sub/x.git/y", "sub/claude/a",
                 "sub/tether.toml.example", "sub/.gitmodules", "sub/.codex-notes.md"):  # fmt: skip
        result = await run_tool(WRITE, policy, path=path, content="x")
        assert result.content == f"Wrote 1 byte to {path}"
        assert (host.ws / path).read_text() == "x"


async def test_a_submodule_worktree_stays_editable(host: Host) -> None:
    """A submodule's ``.git`` is a file naming the superproject's ``.git/modules/NAME``: the
    worktree beside it is the project's code, and editing it must keep working."""
    (host.ws / "vendor" / "lib").mkdir(parents=True)
    (host.ws / "vendor" / "lib" / ".git").write_text("gitdir: ../../.git/modules/lib\n")
    (host.ws / "vendor" / "lib" / "lib.c").write_text("int trusted;\n")
    policy = host.policy("workspace-write")

    edited = await run_tool(
        EDIT, policy, path="vendor/lib/lib.c", old_string="trusted", new_string="edited"
    )
    added = await run_tool(WRITE, policy, path="vendor/lib/src/new.c", content="int x;\n")
    planted = await run_tool(WRITE, policy, path="vendor/lib/.git", content="gitdir: /tmp/x\n")

    assert not edited.is_error and not added.is_error, (edited.content, added.content)
    assert (host.ws / "vendor" / "lib" / "lib.c").read_text() == "int edited;\n"
    assert_denied(
        planted,
        "workspace-write",
        denied("workspace-write", "vendor/lib/.git", f".git {CONTROL_NAME_REASON}"),
    )
    assert (host.ws / "vendor" / "lib" / ".git").read_text() == "gitdir: ../../.git/modules/lib\n"


# -- git directories by their content -----------------------------------------------------------
def bare_repository(where: Path) -> None:
    for part in ("objects", "refs/heads", "hooks"):
        (where / part).mkdir(parents=True)
    (where / "HEAD").write_text("ref: refs/heads/main\n")
    (where / "config").write_text("[core]\n\tbare = true\n")


@pytest.mark.parametrize("path", ["fixtures/repo/config", "fixtures/repo/hooks/pre-push"])
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_an_existing_git_directory_by_its_content_is_read_only(
    host: Host, mode: str, path: str
) -> None:
    bare_repository(host.ws / "fixtures" / "repo")
    before = files(host.ws)

    result = await run_tool(WRITE, host.policy(mode), path=path, content="[core]\n\tpager = x\n")

    assert_denied(
        result, mode, denied(mode, path, f"fixtures/repo is a git directory {GIT_DIR_REASON}")
    )
    assert files(host.ws) == before


@pytest.mark.parametrize(
    ("present", "path"),
    [
        (("objects", "refs"), "x/HEAD"),
        (("HEAD", "objects"), "x/refs/heads/main"),
        (("HEAD", "refs"), "x/objects/info/packs"),
        (("HEAD",), "x/commondir"),
        (("commondir",), "x/HEAD"),
    ],
)
async def test_what_would_make_a_git_directory_is_refused(
    host: Host, present: tuple[str, ...], path: str
) -> None:
    x = host.ws / "x"
    x.mkdir()
    for name in present:
        (x / name).mkdir() if name in ("objects", "refs") else (x / name).write_text("../y\n")
    before = sorted(os.listdir(x))

    result = await run_tool(WRITE, host.policy("workspace-write"), path=path, content="x\n")

    assert_denied(
        result,
        "workspace-write",
        denied("workspace-write", path, f"it would make x a git directory {GIT_DIR_REASON}"),
    )
    assert sorted(os.listdir(x)) == before


async def test_half_a_git_directory_stays_writable(host: Host) -> None:
    (host.ws / "x" / "objects").mkdir(parents=True)
    policy = host.policy("workspace-write")
    for path in ("x/HEAD", "x/config", "y/refs/r", "y/objects/o"):
        result = await run_tool(WRITE, policy, path=path, content="x")
        assert result.content == f"Wrote 1 byte to {path}"


async def test_a_git_directory_completed_meanwhile_is_undone(host: Host) -> None:
    """A command that makes ``objects`` and ``refs`` after the fence planned a ``HEAD`` (and
    after its own check saw no ``HEAD``): the fence, checking again once ``HEAD`` is made,
    takes it out and refuses."""
    (host.ws / "x").mkdir()
    plan = plan_write(host.policy("workspace-write"), "x/HEAD", rules=_rules())
    (host.ws / "x" / "objects").mkdir()
    (host.ws / "x" / "refs").mkdir()

    with open_parent(plan, create=True) as parent, pytest.raises(SandboxDenied) as refused:
        replace_file(plan, parent, b"ref: refs/heads/main\n")

    assert (
        str(refused.value)
        == f"cannot write x/HEAD: it would make x a git directory {GIT_DIR_REASON}"
    )
    assert sorted(os.listdir(host.ws / "x")) == ["objects", "refs"]


async def test_a_directory_made_on_the_way_is_undone_too(host: Host) -> None:
    (host.ws / "x").mkdir()
    plan = plan_write(host.policy("workspace-write"), "x/refs/heads/main", rules=_rules())
    (host.ws / "x" / "HEAD").write_text("ref: refs/heads/main\n")
    (host.ws / "x" / "objects").mkdir()

    with pytest.raises(SandboxDenied) as refused, open_parent(plan, create=True):
        pass

    assert str(refused.value) == (
        f"cannot write x/refs/heads/main: it would make x a git directory {GIT_DIR_REASON}"
    )
    assert sorted(os.listdir(host.ws / "x")) == ["HEAD", "objects"]


def _rules() -> PathRules:
    return default_rules()


async def test_danger_full_access_is_not_fenced(host: Host) -> None:
    result = await run_tool(
        WRITE, host.policy("danger-full-access"), path="sub/.git/config", content="x"
    )
    assert result.content == "Wrote 1 byte to sub/.git/config"
    assert (host.ws / "sub" / ".git" / "config").read_text() == "x"
