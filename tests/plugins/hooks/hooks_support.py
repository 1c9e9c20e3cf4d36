"""Shared pieces of the hook tests: real hook scripts in tmp dirs, small real tools, and a
composition of kernel + store + sandbox policy + approval + tools + hooks + agent."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from compose_support import compose_kernel
from event_support import kinds
from script_support import write
from tether.agent import Agent
from tether.agent._agent import AgentOptions
from tether.kernel import PluginEntry, WorkspaceTrust
from tether.kernel._plugin import Kernel
from tether.kernel._trust_store import TrustStore
from tether.kernel._workspace_files import WorkspaceFiles
from tether.kernel._workspace_trust import inspect_workspace
from tether.model import ScriptedModel
from tether.plugins.hooks import HookService, plugin
from tether.plugins.hooks._service import HOOKS_SERVICE
from tether.policy._approval import ApprovalRequest
from tether.session import Event, Persistence, Session, SessionStore
from tether.session._json import thaw
from tether.tools._base import ToolArgs, ToolCall, ToolResult

PY = sys.executable


def script(directory: Path, name: str, body: str) -> str:
    """Write an executable script and return its absolute path."""
    path = directory / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def py_hook(directory: Path, name: str, body: str) -> str:
    """A Python hook; returns the command line that runs it (interpreter spelled out, since
    hooks get a scrubbed PATH)."""
    path = script(directory, name, "import json, os, sys\n" + body)
    return f"{PY} {path}"


def dump_hook(directory: Path, name: str, out: Path) -> str:
    """A hook that appends its raw stdin (one payload per line) to ``out`` and says nothing."""
    return py_hook(
        directory,
        name,
        f"data = sys.stdin.read()\nopen({str(out)!r}, 'a').write(data)\n",
    )


def reply_hook(directory: Path, name: str, reply: Mapping[str, Any]) -> str:
    """A hook that prints ``reply`` as JSON and exits 0."""
    return py_hook(directory, name, f"sys.stdin.read()\nprint(json.dumps({dict(reply)!r}))\n")


def payloads(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def group(command: str, matcher: str | None = None, timeout: float | None = None) -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        handler["timeout"] = timeout
    out: dict[str, Any] = {"hooks": [handler]}
    if matcher is not None:
        out["matcher"] = matcher
    return out


# -- tools ---------------------------------------------------------------------------------
class WriteArgs(ToolArgs):
    path: str
    content: str


class MarkerWrite:
    """A real ``write``: creates the file under the call's workspace."""

    name = "write"
    description = "Write a file."
    Args = WriteArgs

    async def run(self, call: ToolCall) -> ToolResult:
        assert isinstance(call.args, WriteArgs)
        assert call.policy is not None
        target = Path(call.policy.workspace_root, call.args.path)
        target.write_text(call.args.content)
        return ToolResult(f"wrote {call.args.path}")


class BashArgs(ToolArgs):
    command: str
    timeout: int | None = None
    description: str | None = None


class Bash:
    name = "bash"
    description = "Pretend to run a command."
    Args = BashArgs

    async def run(self, call: ToolCall) -> ToolResult:
        assert isinstance(call.args, BashArgs)
        return ToolResult(f"ran: {call.args.command}", details={"exit_code": 0})


class EditArgs(ToolArgs):
    path: str
    old_string: str
    new_string: str
    replace_all: bool = False


class ReadArgs(ToolArgs):
    path: str
    offset: int = 1
    limit: int = 2000


class LsArgs(ToolArgs):
    path: str = "."


class GlobArgs(ToolArgs):
    pattern: str
    path: str | None = None


class GrepArgs(ToolArgs):
    pattern: str
    path: str | None = None
    glob: str | None = None
    ignore_case: bool = False


class CustomArgs(ToolArgs):
    x: int


class Failing:
    """Returns an error result (the tool ran and reported failure)."""

    name = "fail"
    description = "Always fails."
    Args = CustomArgs

    async def run(self, call: ToolCall) -> ToolResult:
        return ToolResult.error("it broke")


def _noop(name: str, args: type[ToolArgs]) -> Any:
    class Noop:
        description = f"The {name} tool."
        Args = args

        async def run(self, call: ToolCall) -> ToolResult:
            return ToolResult(f"{name} ok")

    tool = Noop()
    tool.name = name  # type: ignore[attr-defined]
    return tool


def all_tools() -> list[Any]:
    return [
        MarkerWrite(),
        Bash(),
        _noop("edit", EditArgs),
        _noop("read", ReadArgs),
        _noop("ls", LsArgs),
        _noop("glob", GlobArgs),
        _noop("grep", GrepArgs),
        _noop("custom", CustomArgs),
        Failing(),
    ]


# -- composition ---------------------------------------------------------------------------
def trusted_files(root: str, config: Mapping[str, Any]) -> WorkspaceFiles:
    """What a harness composes for settings files: the workspace's, trusted for this one
    composition (``once``, the explicit argument)."""
    inspected = inspect_workspace(
        os.path.realpath(root),
        plugins=[PluginEntry(name="hooks", config=dict(config))],
        trust=WorkspaceTrust.ONCE,
        store=TrustStore.for_user(),
    )
    inspected.require()
    return inspected.files


@dataclass
class Rig:
    kernel: Kernel
    store: SessionStore
    agent: Agent
    workspace: Path
    asked: list[ApprovalRequest]

    @property
    def session(self) -> Session:
        return self.agent.session

    @property
    def hooks(self) -> HookService:
        service = self.kernel.ctx.get(HOOKS_SERVICE)
        assert isinstance(service, HookService)
        return service

    def events(self, *types: str) -> list[Event]:
        return [e for e in self.session.events if not types or e.type in types]

    def layout(self) -> list[str]:
        return kinds(self.session)


def compose(
    tmp_path: Path,
    hooks: Mapping[str, Any] | None = None,
    steps: list[dict[str, Any]] | None = None,
    *,
    answer: str | None = None,
    config: Mapping[str, Any] | None = None,
    before_hooks: Callable[[Kernel], None] | None = None,
    after_hooks: Callable[[Kernel], None] | None = None,
    approval_policy: str = "ask",
    persistence: Persistence | None = None,
    script: Mapping[str, Any] | None = None,
) -> Rig:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    rig = compose_kernel(
        workspace,
        approval=approval_policy,
        store=SessionStore(persistence),
        answer=answer,
        tools=all_tools(),
        provide_tools=True,
        agents=True,
    )
    kernel = rig.kernel
    if before_hooks is not None:
        before_hooks(kernel)
    kernel.load(plugin, {**(config or {}), "hooks": dict(hooks or {})})
    if after_hooks is not None:
        after_hooks(kernel)
    model = ScriptedModel.from_dict(
        script or {"agents": [{"match": {}, "steps": steps or [{"text": "ok"}]}]}
    )
    agent = Agent(kernel.ctx, rig.session(), AgentOptions(model), tools=rig.tools)
    return Rig(kernel, rig.store, agent, workspace, rig.asked)


write_call = partial(write, path="marker.txt")
"""A step that writes ``marker.txt`` (``content`` may be given)."""


def normalized(event: Event) -> dict[str, Any]:
    """An event's data with the run-dependent fields replaced."""
    data = dict(thaw(event.data))
    if "duration_ms" in data:
        assert isinstance(data["duration_ms"], int) and data["duration_ms"] >= 0
        data["duration_ms"] = "<ms>"
    if event.type == "approval/asked" or event.type == "approval/decided":
        data["id"] = "<id>"
    return data


async def wait_for_file(path: Path) -> None:
    """Poll until a hook script has created ``path`` (it signals the script has started)."""
    for _ in range(2000):
        if path.exists():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{path} never appeared")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
