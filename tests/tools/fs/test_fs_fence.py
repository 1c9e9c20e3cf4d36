"""The write fence: in both restricted modes nothing outside the workspace is ever written.

Every escape attempt is checked on the host filesystem afterwards (a snapshot of everything
next to the workspace), not only through the result text.
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.sandbox._paths import default_rules
from tether.tools._base import Tool, ToolResult
from tether.tools.fs import EditTool, ReadTool, SandboxDenied, WriteTool
from tether.tools.fs._fence import (
    CONTROL_NAME_REASON,
    existing_entry,
    open_existing,
    open_parent,
    plan_write,
)

from .conftest import RESTRICTED, Host, Swapper, exchange, marker, run_tool

WRITE = WriteTool()
EDIT = EditTool()


def denied(mode: str, path: str, workspace_reason: str) -> str:
    """The exact denial text: read-only refuses by mode, workspace-write by ``reason``."""
    if mode == "read-only":
        reason = f"cannot write {path}: the sandbox is read-only"
    else:
        reason = f"cannot write {path}: {workspace_reason}"
    return f"Error: {reason} {marker(mode)}"


def assert_denied(result: ToolResult, mode: str, text: str) -> None:
    assert result.content == text
    assert result.is_error
    assert dict(result.details) == {"sandbox_denied": True, "mode": mode}


def no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob(".tether-*.tmp")]


async def attempt(tool: Tool, host: Host, mode: str, path: str) -> ToolResult:
    if tool is WRITE:
        return await run_tool(WRITE, host.policy(mode), path=path, content="pwned\n")
    return await run_tool(
        EDIT, host.policy(mode), path=path, old_string="outside", new_string="pwned"
    )


TOOLS = [pytest.param(WRITE, id="write"), pytest.param(EDIT, id="edit")]


# -- symbolic links ---------------------------------------------------------------------------


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_symlink_to_outside_file_is_refused(host: Host, mode: str, tool: Tool) -> None:
    (host.ws / "link").symlink_to(host.outside / "secret.txt")
    before = host.snapshot_outside()

    result = await attempt(tool, host, mode, "link")

    assert_denied(
        result,
        mode,
        denied(
            mode,
            "link",
            f"it is outside the workspace {host.ws} (it resolves to {host.outside}/secret.txt)",
        ),
    )
    assert host.snapshot_outside() == before
    assert (host.ws / "link").is_symlink()
    assert os.readlink(host.ws / "link") == str(host.outside / "secret.txt")


@pytest.mark.parametrize("path", ["ldir/new.txt", "ldir/sub/deeper/new.txt", "ldir/secret.txt"])
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_symlink_to_outside_directory_is_refused(
    host: Host, mode: str, tool: Tool, path: str
) -> None:
    (host.ws / "ldir").symlink_to(host.outside)
    before = host.snapshot_outside()

    result = await attempt(tool, host, mode, path)

    resolved = host.outside / path.removeprefix("ldir/")
    assert_denied(
        result,
        mode,
        denied(mode, path, f"it is outside the workspace {host.ws} (it resolves to {resolved})"),
    )
    assert host.snapshot_outside() == before
    assert sorted(p.name for p in host.ws.iterdir()) == ["ldir"]


@pytest.mark.parametrize("mode", RESTRICTED)
async def test_dangling_symlink_to_outside_is_refused(host: Host, mode: str) -> None:
    # Writing through a dangling link would create the file at its target.
    (host.ws / "dangling").symlink_to(host.outside / "created-by-link.txt")
    before = host.snapshot_outside()

    result = await attempt(WRITE, host, mode, "dangling")

    assert_denied(
        result,
        mode,
        denied(
            mode,
            "dangling",
            f"it is outside the workspace {host.ws} "
            f"(it resolves to {host.outside}/created-by-link.txt)",
        ),
    )
    assert host.snapshot_outside() == before


# -- `..` and absolute paths -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "lands"),
    [
        ("../outside/secret.txt", "secret.txt"),
        ("../outside/new.txt", "new.txt"),
        ("sub/../../outside/new.txt", "new.txt"),
        ("../outside/sub/../new.txt", "new.txt"),
    ],
)
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_dotdot_traversal_is_refused(
    host: Host, mode: str, tool: Tool, path: str, lands: str
) -> None:
    before = host.snapshot_outside()

    result = await attempt(tool, host, mode, path)

    assert_denied(
        result,
        mode,
        denied(
            mode,
            path,
            f"it is outside the workspace {host.ws} (it resolves to {host.outside}/{lands})",
        ),
    )
    assert host.snapshot_outside() == before
    assert list(host.ws.iterdir()) == []


@pytest.mark.parametrize("name", ["secret.txt", "new.txt", "sub/new.txt"])
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_absolute_path_outside_is_refused(
    host: Host, mode: str, tool: Tool, name: str
) -> None:
    before = host.snapshot_outside()
    path = str(host.outside / name)

    result = await attempt(tool, host, mode, path)

    assert_denied(result, mode, denied(mode, path, f"it is outside the workspace {host.ws}"))
    assert host.snapshot_outside() == before


@pytest.mark.parametrize("mode", RESTRICTED)
async def test_workspace_root_itself_through_dotdot_is_not_outside(host: Host, mode: str) -> None:
    # "sub/.." is the workspace itself: a directory, never a way out.
    result = await attempt(WRITE, host, mode, "sub/..")
    if mode == "read-only":
        assert_denied(result, mode, denied(mode, "sub/..", ""))
    else:
        assert result.content == "Error: sub/.. is a directory"
        assert dict(result.details) == {}


# -- hard links ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_hard_link_to_outside_file_is_never_written_through(
    host: Host, mode: str, tool: Tool
) -> None:
    outside_file = host.outside / "secret.txt"
    os.link(outside_file, host.ws / "hl")
    before = host.snapshot_outside()
    inode = outside_file.stat().st_ino

    result = await attempt(tool, host, mode, "hl")

    assert host.snapshot_outside() == before
    assert outside_file.read_text() == "outside secret\n"
    assert outside_file.stat().st_ino == inode
    if mode == "read-only":
        assert_denied(result, mode, denied(mode, "hl", ""))
        assert (host.ws / "hl").stat().st_ino == inode
        return
    # workspace-write: the name in the workspace is replaced (new inode), the link is cut.
    assert not result.is_error
    if tool is WRITE:
        assert result.content == "Wrote 6 bytes to hl"
        assert (host.ws / "hl").read_text() == "pwned\n"
    else:
        assert result.content == "Edited hl: 1 replacement"
        assert (host.ws / "hl").read_text() == "pwned secret\n"
    assert (host.ws / "hl").stat().st_ino != inode
    assert outside_file.stat().st_nlink == 1
    assert no_temp_files(host.ws)


# -- rename races -------------------------------------------------------------------------------


def _race_layout(host: Host) -> Swapper:
    (host.ws / "d").mkdir()
    (host.ws / "d" / "target.txt").write_text("outside\n")
    (host.outside / "target.txt").write_text("outside\n")
    (host.ws / "swap").symlink_to(host.outside)
    return Swapper(host.ws / "d", host.ws / "swap", threading.Event())


@pytest.mark.parametrize("mode", RESTRICTED)
async def test_rename_race_never_writes_outside(host: Host, mode: str) -> None:
    swapper = _race_layout(host)
    before = host.snapshot_outside()
    thread = threading.Thread(target=swapper.run)
    thread.start()
    outcomes: dict[str, int] = {}
    try:
        for i in range(150):
            write, edit = await asyncio.gather(
                run_tool(WRITE, host.policy(mode), path=f"d/f{i}.txt", content="pwned\n"),
                run_tool(
                    EDIT,
                    host.policy(mode),
                    path="d/target.txt",
                    old_string="outside\n",
                    new_string=f"outside\n{i}\n",
                ),
            )
            for result in (write, edit):
                kind = _classify(result, mode)
                outcomes[kind] = outcomes.get(kind, 0) + 1
    finally:
        swapper.stop.set()
        thread.join()

    assert host.snapshot_outside() == before
    assert not (host.outside / "f0.txt").exists()
    assert set(outcomes) <= {
        "written",
        "denied: outside",
        "denied: symlink",
        "denied: changing",
        "denied: read-only",
    }
    if mode == "read-only":
        assert outcomes == {"denied: read-only": 300}
    assert swapper.swaps > 0
    assert no_temp_files(host.ws)


def _classify(result: ToolResult, mode: str) -> str:
    if not result.is_error:
        return "written"
    text = result.content
    assert text.endswith(" " + marker(mode)), text
    if "the sandbox is read-only" in text:
        return "denied: read-only"
    if "is outside the workspace" in text:
        return "denied: outside"
    if "the path kept changing while it was checked" in text:
        return "denied: changing"
    if text.endswith(f"changed while it was being written {marker(mode)}"):
        return "denied: changing"
    assert "is a symbolic link (the path changed while it was being written)" in text, text
    return "denied: symlink"


async def test_directory_swapped_for_link_after_the_check_is_refused(host: Host) -> None:
    """Deterministic form of the race: the swap lands between plan and walk."""
    swapper = _race_layout(host)
    before = host.snapshot_outside()
    plan = plan_write(host.policy("workspace-write"), "d/new/f.txt", rules=default_rules())
    assert plan.parts == ("d", "new", "f.txt")

    exchange(swapper.real, swapper.link)  # ws/d is now a link to outside
    with pytest.raises(SandboxDenied) as caught, open_parent(plan, create=True):
        pass

    assert str(caught.value) == (
        "cannot write d/new/f.txt: d is a symbolic link (the path changed while it was being "
        "written)"
    )
    assert caught.value.mode == "workspace-write"
    assert host.snapshot_outside() == before


async def test_file_swapped_for_link_after_the_check_is_refused(host: Host) -> None:
    (host.ws / "f.txt").write_text("inside\n")
    before = host.snapshot_outside()
    plan = plan_write(host.policy("workspace-write"), "f.txt", rules=default_rules())

    (host.ws / "f.txt").unlink()
    (host.ws / "f.txt").symlink_to(host.outside / "secret.txt")
    expected = (
        "cannot write f.txt: f.txt is a symbolic link (the path changed while it was being written)"
    )
    with open_parent(plan, create=False) as parent:
        with pytest.raises(SandboxDenied) as on_replace:
            existing_entry(plan, parent)
        with pytest.raises(SandboxDenied) as on_read:
            open_existing(plan, parent)

    assert str(on_replace.value) == expected
    assert str(on_read.value) == expected
    assert host.snapshot_outside() == before


# -- .git ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".git/hooks/pre-commit",
        "sub/.git/HEAD",
        "gitlink/config",
        "sub/../.git/config",
        ".GIT/config",
    ],
)
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_git_directory_is_protected(host: Host, mode: str, tool: Tool, path: str) -> None:
    (host.ws / ".git").mkdir()
    (host.ws / ".git" / "config").write_text("[core] outside\n")
    (host.ws / "sub" / ".git").mkdir(parents=True)
    (host.ws / "sub" / ".git" / "HEAD").write_text("ref: outside\n")
    (host.ws / "gitlink").symlink_to(host.ws / ".git")
    files_before = {p: p.read_bytes() for p in host.ws.rglob("*") if p.is_file()}

    result = await attempt(tool, host, mode, path)

    component = ".GIT" if path.startswith(".GIT") else ".git"
    assert_denied(result, mode, denied(mode, path, f"{component} {CONTROL_NAME_REASON}"))
    assert {p: p.read_bytes() for p in host.ws.rglob("*") if p.is_file()} == files_before
    assert not (host.ws / ".git" / "hooks").exists()


async def test_git_named_files_that_are_not_components_are_writable(host: Host) -> None:
    result = await run_tool(WRITE, host.policy("workspace-write"), path=".gitignore", content="x")
    assert result.content == "Wrote 1 byte to .gitignore"
    result = await run_tool(WRITE, host.policy("workspace-write"), path="a.git/x", content="x")
    assert result.content == "Wrote 1 byte to a.git/x"


# -- read-only inside the workspace -----------------------------------------------------------


async def test_read_only_refuses_writes_inside_the_workspace(host: Host) -> None:
    (host.ws / "a.txt").write_text("outside\n")
    policy = host.policy("read-only")

    write = await run_tool(WRITE, policy, path="new/file.txt", content="x")
    edit = await run_tool(EDIT, policy, path="a.txt", old_string="outside", new_string="in")
    absolute = await run_tool(WRITE, policy, path=str(host.ws / "b.txt"), content="x")

    assert_denied(write, "read-only", denied("read-only", "new/file.txt", ""))
    assert_denied(edit, "read-only", denied("read-only", "a.txt", ""))
    assert_denied(absolute, "read-only", denied("read-only", str(host.ws / "b.txt"), ""))
    assert sorted(p.name for p in host.ws.iterdir()) == ["a.txt"]
    assert (host.ws / "a.txt").read_text() == "outside\n"


@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "danger-full-access"])
async def test_reads_are_not_fenced(host: Host, mode: str) -> None:
    result = await run_tool(ReadTool(), host.policy(mode), path="../outside/secret.txt")
    assert result.content == "outside secret\n"
    assert not result.is_error


# -- workspace-write inside the workspace -------------------------------------------------------


async def test_workspace_write_allows_links_that_stay_inside(host: Host) -> None:
    (host.ws / "real").mkdir()
    (host.ws / "alias").symlink_to(host.ws / "real")
    (host.ws / "file-alias").symlink_to(host.ws / "real" / "f.txt")
    policy = host.policy("workspace-write")

    via_dir = await run_tool(WRITE, policy, path="alias/g.txt", content="g")
    via_file = await run_tool(WRITE, policy, path="file-alias", content="f")
    absolute = await run_tool(WRITE, policy, path=str(host.ws / "deep/er/h.txt"), content="h")

    assert [via_dir.content, via_file.content, absolute.content] == [
        "Wrote 1 byte to alias/g.txt",
        "Wrote 1 byte to file-alias",
        f"Wrote 1 byte to {host.ws}/deep/er/h.txt",
    ]
    assert (host.ws / "real" / "g.txt").read_text() == "g"
    assert (host.ws / "real" / "f.txt").read_text() == "f"
    assert (host.ws / "file-alias").is_symlink()
    assert (host.ws / "deep" / "er" / "h.txt").read_text() == "h"
    assert dict(via_file.details) == {
        "path": str(host.ws / "real" / "f.txt"),
        "bytes": 1,
        "created": True,
    }


# -- danger-full-access, no policy, unknown mode ----------------------------------------------


async def test_danger_full_access_writes_outside(host: Host) -> None:
    (host.ws / "link").symlink_to(host.outside / "secret.txt")
    (host.ws / ".git").mkdir()
    policy = host.policy("danger-full-access")
    outside_new = str(host.outside / "new" / "made.txt")

    absolute = await run_tool(WRITE, policy, path=outside_new, content="made\n")
    through_link = await run_tool(
        EDIT, policy, path="link", old_string="outside", new_string="edited"
    )
    git = await run_tool(WRITE, policy, path=".git/config", content="[core]\n")
    dotdot = await run_tool(WRITE, policy, path="../outside/up.txt", content="up")

    assert [absolute.content, through_link.content, git.content, dotdot.content] == [
        f"Wrote 5 bytes to {outside_new}",
        "Edited link: 1 replacement",
        "Wrote 7 bytes to .git/config",
        "Wrote 2 bytes to ../outside/up.txt",
    ]
    assert Path(outside_new).read_text() == "made\n"
    assert (host.outside / "secret.txt").read_text() == "edited secret\n"
    assert (host.ws / "link").is_symlink()
    assert (host.ws / ".git" / "config").read_text() == "[core]\n"
    assert (host.outside / "up.txt").read_text() == "up"


@pytest.mark.parametrize("tool", TOOLS)
async def test_no_policy_fails_closed(host: Host, tool: Tool) -> None:
    (host.ws / "a.txt").write_text("outside\n")
    before = host.snapshot_outside()
    path = str(host.ws / "a.txt")
    if tool is WRITE:
        result = await run_tool(WRITE, None, path=path, content="x")
    else:
        result = await run_tool(EDIT, None, path=path, old_string="outside", new_string="x")

    assert result.content == "Error: no sandbox policy is composed; file writes are refused"
    assert result.is_error
    assert dict(result.details) == {}
    assert (host.ws / "a.txt").read_text() == "outside\n"
    assert host.snapshot_outside() == before


async def test_no_policy_still_reads(host: Host) -> None:
    result = await run_tool(ReadTool(), None, path=str(host.outside / "secret.txt"))
    assert result.content == "outside secret\n"


@dataclass(frozen=True)
class OddPolicy:
    mode: Any
    workspace_root: str
    session_id: str | None = None


async def test_unknown_mode_fails_closed(host: Host) -> None:
    policy = OddPolicy("full-yolo", str(host.ws))
    result = await run_tool(WRITE, policy, path="a.txt", content="x")  # type: ignore[arg-type]

    assert result.content == 'Error: unknown sandbox mode "full-yolo"; file writes are refused'
    assert list(host.ws.iterdir()) == []
