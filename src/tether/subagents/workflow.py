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

from tether.agent import Agent
from tether.policy import SandboxMode
from tether.signals import AbortSignal
from tether.subagents.composition import ToolFilter
from tether.subagents.oneshot import OneShotRequest, Provider, run_one_shot
from tether.subagents.results import SubagentResult


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
    """One child run to completion. A failure is a stop reason, never an exception."""
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
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    gate = asyncio.Semaphore(limit)

    async def one(index: int, prompt: str) -> SubagentResult:
        async with gate:
            return await run(
                parent,
                prompt,
                label=f"{label}-{index}" if label else None,
                sandbox=sandbox,
                signal=signal,
            )

    return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts))))
