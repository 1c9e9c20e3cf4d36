"""Fixtures for the file-tool tests: a real workspace next to a real "outside" on the host."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.kernel import Context, Runtime
from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.signals import AbortSignal
from tether.tools.base import Tool, ToolCall, ToolResult

RESTRICTED = ["read-only", "workspace-write"]


@dataclass
class Host:
    """``top`` holds ``ws`` (the workspace) and ``outside`` (must never change when fenced)."""

    top: Path
    ws: Path
    outside: Path

    def policy(self, mode: str) -> SandboxExecutionPolicy:
        return SandboxExecutionPolicy(SandboxMode(mode), str(self.ws), "s-test")

    def snapshot_outside(self) -> dict[str, tuple[str, Any, int]]:
        """Everything on the host under ``top`` except the workspace: kind, content, mode."""
        shot: dict[str, tuple[str, Any, int]] = {}
        for dirpath, dirnames, filenames in os.walk(self.top):
            if Path(dirpath) == self.top and "ws" in dirnames:
                dirnames.remove("ws")
            for name in dirnames + filenames:
                path = Path(dirpath, name)
                rel = str(path.relative_to(self.top))
                st = path.lstat()
                if path.is_symlink():
                    shot[rel] = ("link", os.readlink(path), st.st_mode)
                elif path.is_dir():
                    shot[rel] = ("dir", None, st.st_mode)
                else:
                    shot[rel] = ("file", path.read_bytes(), st.st_mode)
        return shot


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    top = Path(os.path.realpath(tmp_path))
    ws = top / "ws"
    outside = top / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("outside secret\n")
    (outside / "sub").mkdir()
    yield Host(top, ws, outside)


def make_call(tool: Tool, policy: SandboxExecutionPolicy | None, **args: Any) -> ToolCall:
    """A call as the pipeline would build it (arguments validated by the tool's model)."""
    return ToolCall(
        call_id="call-1",
        name=str(tool.name),
        args=tool.Args.model_validate(args),
        raw_arguments=json.dumps(args),
        agent=None,
        signal=AbortSignal(),
        ctx=Context(Runtime()),
        policy=policy,
    )


async def run_tool(tool: Tool, policy: SandboxExecutionPolicy | None, **args: Any) -> ToolResult:
    return await tool.run(make_call(tool, policy, **args))


def marker(mode: str) -> str:
    return f"[sandbox: file access denied under {mode} mode]"
