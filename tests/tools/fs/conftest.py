"""Fixtures for the file-tool tests: a real workspace next to a real "outside" on the host."""

from __future__ import annotations

import ctypes
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether._signals import AbortSignal
from tether.kernel import Context, Runtime
from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.tools._base import Tool, ToolCall, ToolResult

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
def policy(host: Host, request: pytest.FixtureRequest) -> SandboxExecutionPolicy:
    """The file tools' policy over ``host``: read-only, or the test module's ``POLICY_MODE``."""
    return host.policy(getattr(request.module, "POLICY_MODE", "read-only"))


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


def make_call(
    tool: Tool, policy: SandboxExecutionPolicy | None, *, ctx: Context | None = None, **args: Any
) -> ToolCall:
    """A call as the pipeline would build it (arguments validated by the tool's model)."""
    return ToolCall(
        call_id="call-1",
        name=str(tool.name),
        args=tool.Args.model_validate(args),
        raw_arguments=json.dumps(args),
        agent=None,
        signal=AbortSignal(),
        ctx=ctx or Context(Runtime()),
        policy=policy,
    )


async def run_tool(
    tool: Tool, policy: SandboxExecutionPolicy | None, *, ctx: Context | None = None, **args: Any
) -> ToolResult:
    return await tool.run(make_call(tool, policy, ctx=ctx, **args))


_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> None:
    """Atomically swap two names (renameat2 RENAME_EXCHANGE): ``a`` is never missing."""
    rc = _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


@dataclass
class Swapper:
    """A thread that keeps swapping two names (``real`` and ``link``) until ``stop``."""

    real: Path
    link: Path
    stop: threading.Event
    swaps: int = 0

    def run(self) -> None:
        while not self.stop.is_set():
            exchange(self.real, self.link)
            self.swaps += 1


def marker(mode: str) -> str:
    return f"[sandbox: file access denied under {mode} mode]"
