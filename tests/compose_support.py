"""A real in-process composition: kernel, session store, the policy plugins, a tool runtime
(no tests here). Each test family's own rig (an agent, hooks, subagents) builds on it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.agent import AGENTS_SERVICE, Agent, AgentRegistry
from tether.kernel import SESSIONS_SERVICE, Context, Next
from tether.kernel._plugin import Kernel
from tether.policy._approval import ApprovalRequest, approval_plugin, register_answerer
from tether.policy._sandbox_policy import sandbox_policy_plugin
from tether.sandbox import SANDBOX_SERVICE
from tether.session import Session, SessionMeta, SessionStore
from tether.subagents import SUBAGENTS_SERVICE
from tether.tools._base import Tool, ToolArgs, ToolCall, ToolResult
from tether.tools._pipeline import TOOLS_SERVICE, ToolRuntime


@dataclass
class Composition:
    kernel: Kernel
    store: SessionStore
    tools: ToolRuntime
    workspace: Path
    agents: AgentRegistry | None = None
    """The agents registry, when one was provided."""
    asked: list[ApprovalRequest] = field(default_factory=list)
    """Every request the answerer of ``answer=`` saw, in order."""

    @property
    def ctx(self) -> Context:
        return self.kernel.ctx

    def session(self, *, turn: bool = False) -> Session:
        """A new session in the workspace; with ``turn``, a turn is open in it."""
        session = self.store.create(meta=SessionMeta(cwd=str(self.workspace)))
        if turn:
            session.append("turn/start", {"turn": 1})
        return session


def record_answers(ctx: Context, answer: str) -> list[ApprovalRequest]:
    """Answer every approval request with ``answer``; the list fills with the requests."""
    asked: list[ApprovalRequest] = []

    async def answerer(request: ApprovalRequest, _next: Next[object]) -> str:
        asked.append(request)
        return answer

    register_answerer(ctx, answerer)
    return asked


def compose_kernel(
    workspace: Path,
    *,
    mode: str | None = "workspace-write",
    approval: str | None = "ask",
    store: SessionStore | None = None,
    sandbox: object | None = None,
    answer: str | None = None,
    tools: Iterable[Tool] = (),
    provide_tools: bool = False,
    agents: bool = False,
) -> Composition:
    """The store as ``sessions``; the sandbox policy (``mode`` in ``workspace``) and the
    approval service (policy ``approval``) unless ``None``; ``sandbox`` as the ``sandbox``
    service; an answerer of ``answer``; ``tools`` registered in a runtime (provided as
    ``tools`` with ``provide_tools``); an agents registry with ``agents``. In that order."""
    kernel = Kernel()
    store = store if store is not None else SessionStore()
    kernel.ctx.provide(SESSIONS_SERVICE, store)
    if mode is not None:
        kernel.load(sandbox_policy_plugin, {"mode": mode, "workspace_root": str(workspace)})
    if approval is not None:
        kernel.load(approval_plugin, {"policy": approval})
    if sandbox is not None:
        kernel.ctx.provide(SANDBOX_SERVICE, sandbox)
    asked = record_answers(kernel.ctx, answer) if answer is not None else []
    runtime = ToolRuntime(kernel.ctx)
    if provide_tools:
        kernel.ctx.provide(TOOLS_SERVICE, runtime)
    for tool in tools:
        runtime.register(tool)
    registry = AgentRegistry() if agents else None
    if registry is not None:
        kernel.ctx.provide(AGENTS_SERVICE, registry)
    return Composition(kernel, store, runtime, workspace, registry, asked)


class FollowUpArgs(ToolArgs):
    pass


class FollowUpTool:
    """Queues a follow-up turn on the calling agent, as a ``Stop`` hook's continuation does."""

    name = "follow_up"
    description = "Queue another turn."
    Args = FollowUpArgs

    async def run(self, call: ToolCall) -> ToolResult:
        agent: Any = call.agent
        agent.followup("keep going")
        return ToolResult("queued")


class HoldArgs(ToolArgs):
    key: str


class Hold:
    """A real tool that blocks its caller until the test opens ``gates[key]``: it keeps an agent
    *running* at a known point (busy parent, running child) without timing assumptions.
    ``entered`` holds the keys of the calls that have reached it."""

    name = "hold"
    description = "Wait until released."
    Args = HoldArgs

    def __init__(self) -> None:
        self.gates: dict[str, asyncio.Event] = {}
        self.entered: set[str] = set()

    def gate(self, key: str) -> asyncio.Event:
        return self.gates.setdefault(key, asyncio.Event())

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, HoldArgs)
        self.entered.add(args.key)
        await self.gate(args.key).wait()
        return ToolResult(f"released {args.key}")


async def settle_agents(ctx: Context, agents: Iterable[Agent]) -> None:
    """Wait until every agent of ``agents`` is idle and no continuable child is resident (as
    ``Harness.settle`` does)."""
    manager = ctx.get(SUBAGENTS_SERVICE)
    while True:
        for agent in list(agents):
            await agent.when_idle()
        if manager is not None:
            await manager.when_quiescent()
        await asyncio.sleep(0)
        if all(a.status == "idle" and not a.inbox.has_work() for a in agents) and (
            manager is None or not manager.resident()
        ):
            return
