"""Run children from Python code, through the same one-shot driver as the ``subagent`` tool,
so the same capture, pin and depth rules apply.

::

    from tether.subagents import workflow

    result = await workflow.run(parent, "Summarise the changelog", label="summary")
    results = await workflow.fan_out(parent, ["check a", "check b"], limit=4)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tether._signals import AbortSignal
from tether.agent import Agent
from tether.policy import SandboxMode
from tether.subagents._composition import Provider
from tether.subagents._events import ToolFilter
from tether.subagents._oneshot import OneShotRequest, run_one_shot
from tether.subagents._results import SubagentResult


async def run(
    parent: Agent,
    prompt: str,
    *,
    provider: Provider = "spawn",
    label: str | None = None,
    max_depth: int | None = None,
    persona: str | None = None,
    tool_filter: ToolFilter | None = None,
    sandbox: SandboxMode | str | None = None,
    signal: AbortSignal | None = None,
) -> SubagentResult:
    """One child run to completion. Once the child has started, a failure is its stop reason,
    never an exception; a child that cannot start raises (a ``SubagentError``)."""
    cap = SandboxMode(sandbox) if sandbox is not None else None
    return await run_one_shot(
        OneShotRequest(
            parent,
            prompt,
            provider=provider,
            label=label,
            max_depth=max_depth,
            persona=persona,
            tool_filter=tool_filter,
            sandbox_cap=cap,
            signal=signal,
        )
    )


async def fan_out(
    parent: Agent,
    prompts: Sequence[str],
    *,
    limit: int = 4,
    label: str | None = None,
    sandbox: SandboxMode | str | None = None,
    signal: AbortSignal | None = None,
) -> list[SubagentResult]:
    """Run one child per prompt, at most ``limit`` at a time; results in prompt order.

    Every child's scope is captured when its run starts, so a parent switch during the fan-out
    affects only children that have not started yet.

    The children run as one task group. If one of them raises (it could not start: see
    :func:`run`), no further child starts, the others are cancelled (a running child is
    aborted with cause ``parent`` and disposed), and ``fan_out`` waits until every one has
    stopped before it raises that first error itself. Cancelling ``fan_out`` stops every child
    the same way. A child that fails after it started is not an error: the failure is its
    result's stop reason, and its siblings run on.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    gate = asyncio.Semaphore(limit)
    stopping = False

    async def one(index: int, prompt: str) -> SubagentResult:
        nonlocal stopping
        async with gate:
            if stopping:
                # The slot of a child that just failed (or was cancelled) is free before the
                # group's cancellation reaches this one: it stops without starting.
                raise asyncio.CancelledError
            try:
                return await run(
                    parent,
                    prompt,
                    label=f"{label}-{index}" if label else None,
                    sandbox=sandbox,
                    signal=signal,
                )
            except BaseException:
                stopping = True
                raise

    failure: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
            children = [group.create_task(one(i, p)) for i, p in enumerate(prompts)]
    except BaseExceptionGroup as failed:
        # Raised outside this handler, so the child's error keeps its own traceback and cause
        # and does not point back at the group that holds it.
        failure = failed.exceptions[0]
    if failure is not None:
        raise failure
    return [child.result() for child in children]
