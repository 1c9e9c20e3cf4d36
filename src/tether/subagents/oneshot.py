"""The one-shot in-process driver for the ``spawn`` and ``fork`` providers (behaviour.md §5.4).

Everything up to the child's first prompt happens synchronously, so the parent's scope is
captured before any await. The child is built unpublished (its delegation events and
composition first), then entered and announced, owned by the parent in the agents registry,
driven to idle, read from its own events, and disposed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tether.agent import AGENTS_SERVICE, Agent, AgentOptions, PreStep
from tether.kernel import Next
from tether.policy import SandboxMode
from tether.session import Event, Session, SessionStore
from tether.signals import AbortSignal
from tether.subagents.composition import (
    DEFAULT_MAX_DEPTH,
    DelegatedPolicy,
    SubagentError,
    ToolFilter,
    append_delegated_policy_overrides,
    apply_child_composition,
    capture_delegated_policy_overrides,
    check_max_depth,
    child_session_meta,
    delegation_depth_of,
    narrow_delegated_policy,
    resolve_child_agent_options,
    resolve_child_depth,
    resolve_tool_filter,
)
from tether.subagents.descriptor import Descriptor
from tether.subagents.lifecycle import SubagentLifecycle
from tether.subagents.results import SubagentResult, result_from_events

Provider = Literal["spawn", "fork"]
"""``spawn``: a fresh child. ``fork``: seeded with the parent's log up to its last
``turn/end`` (the in-flight turn that delegates is not inherited)."""


@dataclass(frozen=True, slots=True)
class OneShotRequest:
    parent: Agent
    prompt: str
    provider: Provider = "spawn"
    label: str | None = None
    max_depth: int | None = DEFAULT_MAX_DEPTH
    """``None``: no cap (workflows pass none, as in the reference)."""
    persona: str | None = None
    tool_filter: ToolFilter | None = None
    sandbox_cap: SandboxMode | None = None
    """Narrow the child below the parent's mode (never wider)."""
    options: AgentOptions | None = None
    signal: AbortSignal | None = None


def fork_seed(parent: Session) -> list[Event]:
    """The parent's log up to and including its last ``turn/end`` (empty if none)."""
    last_end = parent.last("turn/end")
    return [] if last_end is None else list(parent.events[: last_end.seq + 1])


def require_store(parent: Agent) -> SessionStore:
    store = parent.ctx.get("sessions")
    if store is None:
        raise SubagentError("no session store is composed", code="PERSISTENCE_UNAVAILABLE")
    assert isinstance(store, SessionStore)
    return store


def build_child(
    parent: Agent,
    *,
    child_id: str,
    seed: Sequence[Event],
    seed_length: int,
    depth: int,
    descriptor: Descriptor,
    persona: str | None,
    tool_filter: ToolFilter | None,
    sandbox_cap: SandboxMode | None,
    options: AgentOptions | None,
    captured: DelegatedPolicy | None = None,
) -> Agent:
    """Prepare the child session and agent (unpublished). Synchronous on purpose."""
    ctx = parent.ctx
    store = require_store(parent)
    session = store.prepare(
        child_id, seed=seed, meta=child_session_meta(parent, depth, seed_length)
    )
    if captured is not None:
        sandbox = ctx.get("sandbox_policy")
        default = sandbox.default_mode if sandbox is not None else SandboxMode.READ_ONLY
        append_delegated_policy_overrides(
            session, narrow_delegated_policy(captured, sandbox_cap, default)
        )
    allowed = resolve_tool_filter(parent.tools.names() if parent.tools else [], tool_filter)
    child_options = resolve_child_agent_options(
        parent, label=descriptor.label, overrides=options, allowed_tools=allowed
    )
    child_ctx = ctx.child(f"subagent:{child_id}")
    agent = Agent(ctx, session, child_options, tools=parent.tools)
    agent.scope_ctx = child_ctx
    apply_child_composition(child_ctx, agent, persona=persona)
    return agent


async def run_one_shot(request: OneShotRequest) -> SubagentResult:
    parent = request.parent
    ctx = parent.ctx
    if request.max_depth is not None:
        check_max_depth(request.max_depth)
    signal = request.signal or AbortSignal()
    if signal.aborted:
        raise SubagentError("subagent start was aborted before child publication", code="CANCELLED")
    depth = (
        resolve_child_depth(parent, request.max_depth)
        if request.max_depth is not None
        else delegation_depth_of(parent) + 1
    )
    child_id = str(uuid.uuid4())
    captured = capture_delegated_policy_overrides(ctx, parent)  # before any await
    seed = fork_seed(parent.session) if request.provider == "fork" else []
    descriptor = Descriptor("one-shot", request.provider, request.label)
    store = require_store(parent)
    agent = build_child(
        parent,
        child_id=child_id,
        seed=seed,
        seed_length=len(seed),
        depth=depth,
        descriptor=descriptor,
        persona=request.persona,
        tool_filter=request.tool_filter,
        sandbox_cap=request.sandbox_cap,
        options=request.options,
        captured=captured,
    )
    child_ctx = agent.scope_ctx
    assert child_ctx is not None
    written = False

    async def descriptor_gate(step: PreStep, next_: Next[object]) -> object:
        nonlocal written
        decision = await next_()
        if decision == "enter" and not written:
            written = True
            agent.session.append("subagent/descriptor", descriptor.to_data())
        return decision

    child_ctx.on("agent/pre-step", descriptor_gate, scope=agent)
    boundary = agent.session.first_live_seq
    registry = ctx.get(AGENTS_SERVICE)
    unregister = registry.register(agent, owner=parent) if registry is not None else None
    try:
        store.enter(agent.session)
        store.announce(agent.session)
    except BaseException:
        if unregister is not None:
            unregister()
        child_ctx.dispose()
        raise
    lifecycle = SubagentLifecycle(parent, child_id, request.provider, "one-shot", request.label)
    ctx.emit("subagent/start", lifecycle, scope=parent)
    remove_forward = signal.add_callback(lambda _reason: agent.cancel("parent"))
    try:
        agent.followup(request.prompt)
        await agent.when_idle()
    except asyncio.CancelledError:
        agent.cancel("parent")
        await asyncio.shield(agent.when_idle())
        raise
    finally:
        remove_forward()
        result = result_from_events(
            child_id, agent.session.events[boundary:], cancelled=signal.aborted
        )
        await dispose_child(agent, store, unregister)
        ctx.emit(
            "subagent/end",
            SubagentLifecycle(
                parent,
                child_id,
                request.provider,
                "one-shot",
                request.label,
                result.stop_reason,
                result.output,
            ),
            scope=parent,
        )
    return result


async def dispose_child(agent: Agent, store: SessionStore, unregister: object) -> None:
    """Idempotent teardown: scoped registrations, registry entry, then flush and detach."""
    if agent.scope_ctx is not None:
        agent.scope_ctx.dispose()
    if callable(unregister):
        unregister()
    if store.get(agent.id) is agent.session:
        await store.dispose(agent.session)
