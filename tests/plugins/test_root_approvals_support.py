"""Shared pieces of the ``root_approvals`` tests (no tests here).

:class:`Rig` is a real in-process composition: a JSONL store (optionally behind a backend that
can be told to fail), the kernel, the sandbox policy, the approval service, the file tools,
the agents registry, the scripted model and the plugin under test. Agents are either made by
hand with fixed session ids (``root``, ``child``, ...), so lineage shapes a real delegation
cannot produce (a parent that left the registry) can be built, or by the real ``subagents``
plugin driven by the scripted model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from compose_support import Hold as Hold
from compose_support import compose_kernel, settle_agents
from event_support import plain
from script_support import call as call
from script_support import write as write
from tether.agent import AGENTS_SERVICE, Agent, AgentRegistry
from tether.agent._agent import AgentOptions
from tether.model import ScriptedModel
from tether.plugins._root_approvals import plugin as root_approvals_plugin
from tether.policy import APPROVAL_SERVICE, SANDBOX_POLICY_SERVICE
from tether.policy._approval import ApprovalRequest, register_answerer
from tether.session import Event, Session, SessionHeader, SessionMeta, SessionStore
from tether.session.persistence import JsonlPersistence
from tether.tools.fs import file_tools

NOTICE = {"kind": "plugin", "plugin": "root_approvals", "form": "notice"}


class FailingPersistence(JsonlPersistence):
    """A real JSONL backend whose appends for the ids in :attr:`failing` raise, as a full
    disk would."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.failing: set[str] = set()

    async def append(self, session_id: str, events: Sequence[Event]) -> None:
        if session_id in self.failing:
            raise OSError(28, "No space left on device")
        await super().append(session_id, events)

    async def create_with_events(self, header: SessionHeader, events: Sequence[Event]) -> None:
        if header.id in self.failing:
            raise OSError(28, "No space left on device")
        await super().create_with_events(header, events)

    async def append_deferred(self, session_id: str, events: Sequence[Event]) -> None:
        if session_id in self.failing:
            raise OSError(28, "No space left on device")
        await super().append_deferred(session_id, events)

    async def create_deferred(self, header: SessionHeader, events: Sequence[Event]) -> None:
        if header.id in self.failing:
            raise OSError(28, "No space left on device")
        await super().create_deferred(header, events)


class Rig:
    def __init__(
        self,
        tmp_path: Path,
        agents: list[dict[str, Any]],
        *,
        config: dict[str, Any] | None = None,
        plugin: bool = True,
        approval: bool = True,
        policy: str = "ask",
        registry: bool = True,
        default_mode: str = "workspace-write",
        subagents: dict[str, Any] | None = None,
    ) -> None:
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir(exist_ok=True)
        self.persistence = FailingPersistence(tmp_path / "store")
        composed = compose_kernel(
            self.workspace,
            mode=default_mode,
            approval=policy if approval else None,
            store=SessionStore(self.persistence),
            tools=file_tools(),
            provide_tools=True,
        )
        self.kernel, self.store, self.tools = composed.kernel, composed.store, composed.tools
        self.registry = AgentRegistry()
        if registry:
            self.ctx.provide(AGENTS_SERVICE, self.registry)
        self.model = ScriptedModel.from_dict({"agents": agents or [{"steps": [{"text": "-"}]}]})
        self.asked: list[ApprovalRequest] = []
        self.removers: dict[str, Callable[[], None]] = {}
        if subagents is not None:
            from tether.subagents._plugin import plugin as subagents_plugin

            self.kernel.load(subagents_plugin, subagents)
        if plugin:
            self.kernel.load(root_approvals_plugin, config or {"guarded": ["write"]})

    @property
    def ctx(self) -> Any:
        return self.kernel.ctx

    @property
    def approval(self) -> Any:
        return self.ctx.get(APPROVAL_SERVICE)

    # -- agents ----------------------------------------------------------------------------
    def agent(
        self,
        session_id: str,
        *,
        parent: Agent | None = None,
        parent_id: str | None = None,
        depth: int | None = None,
        mode: str | None = None,
        register: bool = True,
    ) -> Agent:
        """A live agent on a fresh session. A subagent (``depth`` > 0, default: parent's + 1)
        is pinned the way delegation pins it: ``approval/policy {never, delegation}``."""
        if depth is None:
            depth = parent.depth + 1 if parent is not None else 0
        meta = SessionMeta(
            cwd=str(self.workspace),
            parent_session=parent.id if parent is not None else parent_id,
            delegation_depth=depth,
            origin="subagent" if depth > 0 else None,
        )
        session = self.store.prepare(session_id, meta=meta)
        self.pin(session, depth, mode)
        self.store.enter(session)
        self.store.announce(session)
        return self.adopt(session, register=register)

    def pin(self, session: Session, depth: int, mode: str | None) -> None:
        if mode is not None:
            source = "delegation" if depth > 0 else None
            self.ctx.get(SANDBOX_POLICY_SERVICE).set_sandbox_mode(session, mode, source)
        if depth > 0 and self.approval is not None:
            self.approval.set_approval_policy(session, "never", "delegation")

    def adopt(self, session: Session, *, register: bool = True) -> Agent:
        agent = Agent(self.ctx, session, AgentOptions(self.model), tools=self.tools)
        if register:
            self.removers[agent.id] = self.registry.register(agent)
        return agent

    def leave(self, agent: Agent) -> None:
        """The agent leaves the registry (its host disposed it); its session stays stored."""
        self.removers.pop(agent.id)()

    # -- answerers -------------------------------------------------------------------------
    def answer(self, outcome: str | Callable[[ApprovalRequest], Any]) -> None:
        """Register a global answerer that records every request it sees."""

        async def answerer(request: ApprovalRequest, _next: Any) -> Any:
            self.asked.append(request)
            if callable(outcome):
                value = outcome(request)
                return await value if asyncio.iscoroutine(value) else value
            return outcome

        register_answerer(self.ctx, answerer)

    def held(self, outcome: str) -> asyncio.Event:
        """Register an answerer that holds its answer until the returned event is set."""
        gate = asyncio.Event()

        async def wait(_request: ApprovalRequest) -> str:
            await gate.wait()
            return outcome

        self.answer(wait)
        return gate

    # -- reading ---------------------------------------------------------------------------
    async def durable(self, session_id: str) -> list[Event]:
        """What the backend holds for ``session_id`` (flushed first when live)."""
        live = self.store.get(session_id)
        if live is not None:
            await self.store.flush(live)
        return list((await self.persistence.inspect(session_id)).events)

    async def children_of(self, parent_id: str) -> list[SessionHeader]:
        for live in self.store.live():  # the write-behind may not have committed them yet
            await self.store.commit(live)
        headers = await self.persistence.list()
        return [h for h in headers if h.parent_session == parent_id]


def layout(
    events: Sequence[Event], types: Sequence[str] = ("approval/", "tool/", "turn/")
) -> list[tuple[str, dict[str, Any]]]:
    """``(type, data)`` of the events whose type starts with one of ``types``."""
    return [(e.type, plain(e)) for e in events if e.type.startswith(tuple(types))]


def results(events: Sequence[Event]) -> list[str]:
    return [str(e.data["content"]) for e in events if e.type == "tool/result"]


def notices(events: Sequence[Event]) -> list[str]:
    return [
        str(e.data["content"])
        for e in events
        if e.type == "user/message" and plain(e)["source"] == NOTICE
    ]


def args(**arguments: Any) -> str:
    return json.dumps(arguments)


async def eventually(predicate: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    """Wait (real time, polling) until ``predicate()`` holds; for waits that involve a clock,
    such as the blocked notice."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"never reached: {what}")
        await asyncio.sleep(0.005)


async def settle(rig: Rig) -> None:
    """Until every live agent is idle and no continuable child is resident."""
    await settle_agents(rig.ctx, rig.registry)
