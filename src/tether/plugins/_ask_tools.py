"""``ask_tools``: ask before running the listed tools.

A ``tools/pre-execute`` gate that returns ``ask`` for every call of a configured tool, so the
approval service (and its answerers, or the ``never`` policy) decides. Other tools pass
through untouched. This is the simplest way to say "ask me before any write"::

    [[plugins]]
    name = "ask_tools"
    config = { tools = ["write", "edit", "bash"] }
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from tether.kernel import AnyServiceKey, Context, Next
from tether.tools._base import PreDecision, ToolCall
from tether.tools._seams import PRE_EXECUTE


class AskToolsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tools: list[str] = Field(default_factory=lambda: ["write", "edit", "bash"], min_length=1)
    """Tool names that always ask (default: the tools that change things)."""


def ask_reason(call: ToolCall) -> str:
    """One line naming what the call wants to do (approval panels collapse whitespace)."""
    args = call.arguments()
    target = args.get("command") or args.get("path")
    return f'run "{call.name}"' + (f": {' '.join(str(target).split())}" if target else "")


class AskToolsPlugin:
    name = "ask_tools"
    requires: tuple[AnyServiceKey, ...] = ()
    config_model = AskToolsConfig

    def apply(self, ctx: Context, config: AskToolsConfig) -> None:
        guarded = frozenset(config.tools)

        async def gate(call: ToolCall, next_: Next[PreDecision]) -> PreDecision:
            if call.name in guarded:
                return PreDecision.ask(ask_reason(call))
            return await next_()

        ctx.on(PRE_EXECUTE, gate)


plugin: Final = AskToolsPlugin()
