"""The ``subagents`` plugin: the continuation manager and the delegation tools.

::

    [[plugins]]
    name = "subagents"
    config = { max_depth = 3, instances = [
        { name = "subagent" },
        { name = "subagent_fork", provider = "fork", background_mode = "one-shot" },
        { name = "reviewer", sandbox = "read-only", background_mode = "one-shot" },
    ] }
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from tether.agent._system_prompt import SYSTEM_PROMPT, ToolGuide
from tether.kernel import SESSIONS_SERVICE, AnyServiceKey, Context
from tether.policy import SandboxMode
from tether.subagents._composition import DEFAULT_MAX_DEPTH, ChildSpec, Provider
from tether.subagents._continuation import SUBAGENTS_SERVICE, ContinuationManager
from tether.subagents._events import ToolFilter
from tether.subagents._tools import (
    BackgroundMode,
    InterruptAgentTool,
    ListAgentsTool,
    ReportTool,
    SendMessageTool,
    SubagentTool,
)
from tether.tools._pipeline import TOOLS_SERVICE

DELEGATION_GUIDE: Final = (
    "Your delegation tools (each tool in your list that starts a subagent) hand a task to a "
    "subagent that works in the same workspace, within your permission scope or narrower, and "
    "cannot ask for approvals. Delegate self-contained work (a review, an independent change, "
    "a search across many files), and put everything the subagent needs in its prompt: it "
    "sees your conversation only when its tool says it starts with a copy. A background "
    "subagent's result arrives as a message when it finishes; send_message gives it more to "
    "do, interrupt_agent stops it, list_agents shows where each one is. Check a subagent's "
    "result before you rely on it."
)


class ToolFilterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


class InstanceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    provider: Provider = "spawn"
    background_mode: BackgroundMode = "continuable"
    sandbox: SandboxMode | None = None
    """A cap: children of this instance run at most this wide (never wider than the parent)."""
    persona: str | None = None
    tools: ToolFilterConfig | None = None
    max_depth: int | None = Field(default=None, ge=0)


def _default_instances() -> list[InstanceConfig]:
    return [
        InstanceConfig(name="subagent"),
        InstanceConfig(name="subagent_fork", provider="fork", background_mode="one-shot"),
    ]


class SubagentsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=0)
    instances: list[InstanceConfig] = Field(default_factory=_default_instances)


class SubagentsPlugin:
    name = "subagents"
    requires: tuple[AnyServiceKey, ...] = (TOOLS_SERVICE, SESSIONS_SERVICE)
    config_model = SubagentsConfig

    def apply(self, ctx: Context, config: SubagentsConfig) -> None:
        manager = ContinuationManager(ctx)
        manager.report_tool_factory = ReportTool
        ctx.provide(SUBAGENTS_SERVICE, manager)
        tools = ctx.require(TOOLS_SERVICE)
        for instance in config.instances:
            tool_filter = (
                ToolFilter(
                    tuple(instance.tools.allow) if instance.tools.allow is not None else None,
                    tuple(instance.tools.deny),
                )
                if instance.tools
                else None
            )
            spec = ChildSpec(
                provider=instance.provider,
                max_depth=instance.max_depth
                if instance.max_depth is not None
                else config.max_depth,
                persona=instance.persona,
                tool_filter=tool_filter,
                sandbox_cap=instance.sandbox,
            )
            tools.register(
                SubagentTool(instance.name, spec, background_mode=instance.background_mode),
                ctx=ctx,
            )
        for tool in (SendMessageTool(), InterruptAgentTool(), ListAgentsTool()):
            tools.register(tool, ctx=ctx)
        prompt = ctx.get(SYSTEM_PROMPT)
        if prompt is not None:
            prompt.guide(ctx, ToolGuide(ListAgentsTool.name, DELEGATION_GUIDE))


plugin: Final = SubagentsPlugin()
