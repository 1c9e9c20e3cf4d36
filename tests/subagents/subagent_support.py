"""A real in-process composition for delegation tests: store (optionally JSONL), kernel,
sandbox policy, approval, file tools, agents registry, scripted model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.agent import AGENTS_SERVICE, Agent, AgentOptions, AgentRegistry
from tether.kernel import Kernel
from tether.model import ScriptedModel
from tether.policy.approval import approval_plugin
from tether.policy.sandbox_policy import sandbox_policy_plugin
from tether.session import Session, SessionMeta, SessionStore
from tether.session.persistence import JsonlPersistence
from tether.tools.fs import file_tools
from tether.tools.pipeline import ToolRuntime


@dataclass
class World:
    kernel: Kernel
    store: SessionStore
    tools: ToolRuntime
    agents: AgentRegistry
    model: ScriptedModel
    workspace: Path

    @property
    def ctx(self) -> Any:
        return self.kernel.ctx

    def root(self, *, mode: str | None = None) -> Agent:
        session = self.store.prepare(meta=SessionMeta(cwd=str(self.workspace)))
        if mode is not None:
            self.ctx.get("sandbox_policy").set_sandbox_mode(session, mode)
        self.store.enter(session)
        self.store.announce(session)
        agent = Agent(self.ctx, session, AgentOptions(self.model), tools=self.tools)
        self.agents.register(agent)
        return agent


def world(
    tmp_path: Path,
    agents: list[dict[str, Any]],
    *,
    default_mode: str = "workspace-write",
    approval: bool = True,
    persistence: bool = True,
) -> World:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    kernel = Kernel()
    store = SessionStore(JsonlPersistence(tmp_path / "store") if persistence else None)
    kernel.ctx.provide("sessions", store)
    kernel.load(sandbox_policy_plugin, {"mode": default_mode, "workspace_root": str(workspace)})
    if approval:
        kernel.load(approval_plugin, {"policy": "ask"})
    tools = ToolRuntime(kernel.ctx)
    kernel.ctx.provide("tools", tools)
    for tool in file_tools():
        tools.register(tool)
    registry = AgentRegistry()
    kernel.ctx.provide(AGENTS_SERVICE, registry)
    model = ScriptedModel.from_dict({"agents": agents})
    return World(kernel, store, tools, registry, model, workspace)


def kinds(session: Session, start: int = 0) -> list[str]:
    return [e.type for e in session.events[start:]]


def data(session: Session, event_type: str) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(dict(e.data), default=list)) for e in session.events if e.type == event_type]


def write(path: str, content: str = "x", **extra: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write", "arguments": {"path": path, "content": content, **extra}}]}
