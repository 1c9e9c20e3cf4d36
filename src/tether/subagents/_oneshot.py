"""The one-shot in-process driver for the ``spawn`` and ``fork`` providers.

The child is prepared by :func:`~tether.subagents._composition.prepare_child` (so the parent's
scope is captured before any await) and composed unpublished; this driver then only publishes
it (entered, announced, owned by the parent in the agents registry), drives it to idle, reads
its result from its own events, and disposes it.
"""

from __future__ import annotations

import asyncio
from dataclasses import KW_ONLY, dataclass

from tether._signals import AbortSignal
from tether.agent import AGENTS_SERVICE, PRE_STEP, Agent, PreStep, PreStepDecision
from tether.kernel import Next
from tether.session import SessionStore
from tether.subagents._composition import (
    ChildSpec,
    SubagentError,
    compose_child_agent,
    prepare_child,
)
from tether.subagents._lifecycle import SubagentLifecycle
from tether.subagents._results import SubagentResult, result_from_events
from tether.subagents._seams import SUBAGENT_END, SUBAGENT_START


@dataclass(frozen=True, slots=True)
class OneShotRequest(ChildSpec):
    """One one-shot delegation as a value: the child's spec, plus who delegates, the task, and
    the signal that aborts the child."""

    parent: Agent
    prompt: str
    _: KW_ONLY
    signal: AbortSignal | None = None


async def run_one_shot(request: OneShotRequest) -> SubagentResult:
    """Run one child to completion (see :func:`run_child`)."""
    return await run_child(request.parent, request.prompt, request, signal=request.signal)


async def run_child(
    parent: Agent, prompt: str, spec: ChildSpec, *, signal: AbortSignal | None = None
) -> SubagentResult:
    """Prepare, publish and drive one child of ``parent`` until it is idle, then dispose it.

    Raises :class:`SubagentError` when the child cannot start (aborted before publication, too
    deep, no store, unknown tools); once it has started, a failure is its stop reason.
    Cancelling the caller cancels the child and waits until it has stopped.
    """
    ctx = parent.ctx
    signal = signal or AbortSignal()
    if signal.aborted:
        raise SubagentError("subagent start was aborted before child publication", code="CANCELLED")
    prepared = prepare_child(parent, spec, mode="one-shot")
    agent = compose_child_agent(
        ctx, parent, prepared.session, prepared.descriptor, options=spec.options
    )
    descriptor, store = prepared.descriptor, prepared.store
    child_ctx = agent.scope_ctx
    assert child_ctx is not None
    written = False

    async def descriptor_gate(step: PreStep, next_: Next[PreStepDecision]) -> PreStepDecision:
        nonlocal written
        decision = await next_()
        if decision == "enter" and not written:
            written = True
            agent.session.append(descriptor.TYPE, descriptor.to_data())
        return decision

    child_ctx.on(PRE_STEP, descriptor_gate, scope=agent)
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
    child_id = agent.id
    ctx.emit(
        SUBAGENT_START,
        SubagentLifecycle(parent, child_id, spec.provider, "one-shot", spec.label),
        scope=parent,
    )
    remove_forward = signal.add_callback(lambda _reason: agent.cancel("parent"))
    try:
        agent.followup(prompt)
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
            SUBAGENT_END,
            SubagentLifecycle(
                parent,
                child_id,
                spec.provider,
                "one-shot",
                spec.label,
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
