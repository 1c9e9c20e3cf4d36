"""A real in-process composition for delegation tests: store (optionally JSONL), kernel,
sandbox policy, approval, file tools, agents registry, scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compose_support import Hold, compose_kernel, settle_agents
from compose_support import HoldArgs as HoldArgs
from event_support import kinds as kinds
from event_support import plain
from script_support import call
from script_support import write as write
from tether.agent import Agent, AgentRegistry
from tether.agent._agent import AgentOptions
from tether.agent._system_prompt import plugin as system_prompt_plugin
from tether.kernel._plugin import Kernel
from tether.model import ScriptedModel
from tether.policy import SANDBOX_POLICY_SERVICE
from tether.session import Session, SessionMeta, SessionStore
from tether.session.persistence import JsonlPersistence
from tether.subagents import SUBAGENTS_SERVICE
from tether.tools._pipeline import ToolRuntime
from tether.tools.fs import file_tools


@dataclass
class World:
    kernel: Kernel
    store: SessionStore
    tools: ToolRuntime
    agents: AgentRegistry
    model: ScriptedModel
    workspace: Path
    unregister: dict[str, Any] = field(default_factory=dict)
    """Registry removers of the roots made by :meth:`root` (a root leaving the registry)."""

    @property
    def ctx(self) -> Any:
        return self.kernel.ctx

    def root(self, *, mode: str | None = None) -> Agent:
        session = self.store.prepare(meta=SessionMeta(cwd=str(self.workspace)))
        if mode is not None:
            self.ctx.get(SANDBOX_POLICY_SERVICE).set_sandbox_mode(session, mode)
        self.store.enter(session)
        self.store.announce(session)
        agent = Agent(self.ctx, session, AgentOptions(self.model), tools=self.tools)
        self.unregister[agent.id] = self.agents.register(agent)
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
    rig = compose_kernel(
        workspace,
        mode=default_mode,
        approval="ask" if approval else None,
        store=SessionStore(JsonlPersistence(tmp_path / "store") if persistence else None),
        tools=file_tools(),
        provide_tools=True,
        agents=True,
    )
    assert rig.agents is not None
    # tether's own system prompt, as Harness.open composes it: child logs record it.
    rig.kernel.load(system_prompt_plugin, {})
    model = ScriptedModel.from_dict({"agents": agents})
    return World(rig.kernel, rig.store, rig.tools, rig.agents, model, workspace)


NEVER = ("approval/policy", {"policy": "never", "source": "delegation"})
"""The approval pin every delegated child's log holds."""


def delegated(mode: str) -> tuple[str, dict[str, str]]:
    """The ``sandbox/mode`` event a delegation writes for ``mode``."""
    return ("sandbox/mode", {"mode": mode, "source": "delegation"})


def data(session: Session, event_type: str) -> list[dict[str, Any]]:
    # ``plain`` thaws nested payloads; ``json.dumps(default=list)`` turned them into key lists.
    return [plain(e) for e in session.events if e.type == event_type]


# -- continuable delegation helpers ----------------------------------------------------------------


def subagents(w: World, config: dict[str, Any] | None = None) -> Any:
    """Load the real ``subagents`` plugin (manager + delegation tools) and return the manager."""
    from tether.subagents._plugin import plugin

    w.kernel.load(plugin, config or {})
    return w.ctx.get(SUBAGENTS_SERVICE)


async def settle(w: World) -> None:
    await settle_agents(w.ctx, w.agents)


async def stored(w: World, session_id: str) -> Any:
    """What persistence holds for ``session_id`` (not the live session): the durable log."""
    live = w.store.get(session_id)
    if live is not None:
        await w.store.flush(live)
    assert w.store.persistence is not None
    return await w.store.persistence.inspect(session_id)


async def stored_headers(w: World) -> list[Any]:
    """The headers persistence holds, once every live session's events are committed (the
    write-behind commits a moment after an append)."""
    for session in w.store.live():
        await w.store.commit(session)
    assert w.store.persistence is not None
    return await w.store.persistence.list()


def pre_turn(events: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(type, data)`` of every event before the first ``agent/inbox/spliced``."""
    out: list[tuple[str, dict[str, Any]]] = []
    for event in events:
        if event.type == "agent/inbox/spliced":
            break
        out.append((event.type, plain(event)))
    return out


def policy_events(events: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, plain(e)) for e in events if e.type in ("sandbox/mode", "approval/policy")]


def texts(events: Any, event_type: str = "tool/result") -> list[str]:
    return [str(e.data.get("content")) for e in events if e.type == event_type]


def child(
    steps: Sequence[Mapping[str, Any]], *, depth: int = 1, label: str | None = None
) -> dict[str, Any]:
    match: dict[str, Any] = {"depth": depth}
    if label is not None:
        match["label"] = label
    return {"match": match, "steps": list(steps)}


def hold_tool(w: World) -> Hold:
    tool = Hold()
    w.tools.register(tool)
    return tool


def hold(key: str) -> dict[str, Any]:
    return call("hold", key=key)


async def until(predicate: Any, what: str = "condition", limit: int = 100_000) -> None:
    """Yield to the loop until ``predicate()`` holds (a bounded number of turns, no clock)."""
    for _ in range(limit):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never reached: {what}")


def holding(agent: Any) -> bool:
    """Whether ``agent`` is inside a ``hold`` call right now (its turn has really started)."""
    events = agent.session.events
    return bool(events) and events[-1].type == "tool/call" and events[-1].data["name"] == "hold"
