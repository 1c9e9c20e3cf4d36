"""Model-facing delegation tools: ``subagent``, ``subagent_fork``, ``send_message``,
``interrupt_agent``, ``list_agents`` and (continuable children only) ``report``.

None of them takes a permission parameter: a child's scope is captured from its parent, pinned,
and possibly narrowed by the tool instance's configured cap; it is never chosen by the model.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import Field

from tether.agent import Agent
from tether.errors import TetherError
from tether.session import JsonValue
from tether.subagents._composition import ChildSpec, SubagentError
from tether.subagents._continuation import SUBAGENTS_SERVICE, AncestorAuthority, ContinuationManager
from tether.subagents._oneshot import run_child
from tether.subagents._results import failure_text
from tether.tools._base import ToolArgs, ToolCall, ToolResult

BackgroundMode = Literal["continuable", "one-shot"]
"""``continuable``: background by default, resumable with send_message. ``one-shot``: runs
in the foreground and is disposed."""


class SubagentArgs(ToolArgs):
    description: str = Field(min_length=1, description="A short (3-5 word) label for the task.")
    prompt: str = Field(min_length=1, description="The complete, self-contained task.")
    run_in_background: bool | None = Field(
        default=None,
        description="Continuable subagents run in the background unless this is false.",
    )


def _agent(call: ToolCall) -> Agent:
    if not isinstance(call.agent, Agent):
        raise SubagentError("delegation needs a calling agent", code="NO_AGENT")
    return call.agent


def _manager(call: ToolCall) -> ContinuationManager:
    manager = call.ctx.get(SUBAGENTS_SERVICE)
    if manager is None:
        raise SubagentError("no subagent manager is composed", code="CONTINUATION_UNAVAILABLE")
    return manager


class SubagentTool:
    Args = SubagentArgs

    def __init__(
        self,
        name: str,
        spec: ChildSpec,
        *,
        background_mode: BackgroundMode = "continuable",
    ) -> None:
        """``spec`` is the instance's configuration; each call adds the model's label."""
        self.name = name
        self.spec = spec
        self.background_mode = background_mode
        context = (
            "It starts with a copy of your conversation so far."
            if spec.provider == "fork"
            else "It starts fresh: give it everything it needs in the prompt."
        )
        scope = (
            f" It always runs under at most the {spec.sandbox_cap.value} sandbox mode."
            if spec.sandbox_cap
            else ""
        )
        background = (
            " It runs in the background by default and you are notified when it finishes; "
            "start independent delegations together."
            if background_mode == "continuable"
            else " It runs to completion and returns its final reply."
        )
        self.description = (
            f"Delegate a task to a subagent. {context}{background} The subagent acts within "
            f"your current permission scope or narrower; it cannot ask for approvals.{scope}"
        )

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, SubagentArgs)
        spec = replace(self.spec, label=args.description)
        try:
            parent = _agent(call)
            if self.background_mode == "continuable" and args.run_in_background is not False:
                child_id = await _manager(call).start_child(
                    parent, args.prompt, spec, signal=call.signal
                )
                return ToolResult(f"started subagent {child_id}", details={"subagent_id": child_id})
            if args.run_in_background:
                return ToolResult.error(
                    f'tool "{self.name}" runs one-shot subagents in the foreground only'
                )
            result = await run_child(parent, args.prompt, spec, signal=call.signal)
        except TetherError as err:
            return ToolResult.error(str(err), code=err.code)
        details: dict[str, JsonValue] = {
            "subagent_id": result.child_id,
            "stop_reason": result.stop_reason,
        }
        if result.stop_reason != "completed":
            return ToolResult.error(failure_text(result), **details)
        return ToolResult(
            result.output or "(the subagent finished without a reply)", details=details
        )


class SendMessageArgs(ToolArgs):
    subagent_id: str = Field(min_length=1)
    message: str = Field(min_length=1)


class SendMessageTool:
    name = "send_message"
    description = (
        "Send a follow-up message to one of your background subagents. It is queued or wakes "
        "the subagent; you are notified when it finishes. There is no direct answer."
    )
    Args = SendMessageArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, SendMessageArgs)
        try:
            parent = _agent(call)
            await _manager(call).followup(
                parent,
                args.subagent_id,
                args.message,
                source={"kind": "coordinator", "form": "relay", "sender_session_id": parent.id},
            )
        except TetherError as err:
            return ToolResult.error(str(err), code=err.code)
        # The reference harness's text: the message becomes the child's next turn (or joins
        # the running one at its next step); its outcome arrives as a notice, not here.
        return ToolResult(f"message queued as the next turn for subagent {args.subagent_id}")


class InterruptArgs(ToolArgs):
    agent_id: str = Field(min_length=1)


class InterruptAgentTool:
    name = "interrupt_agent"
    description = (
        "Stop the current work of one of your background subagents (queued messages stay)."
    )
    Args = InterruptArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, InterruptArgs)
        try:
            _manager(call).interrupt(args.agent_id, AncestorAuthority(_agent(call)))
        except TetherError as err:
            return ToolResult.error(str(err), code=err.code)
        return ToolResult(f"interrupt accepted for {args.agent_id}")


class ListAgentsArgs(ToolArgs):
    scope: Literal["children", "descendants"] = "children"


class ListAgentsTool:
    name = "list_agents"
    description = "List your background subagents (or all descendants) and their status."
    Args = ListAgentsArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, ListAgentsArgs)
        try:
            parent = _agent(call)
            rows = await _manager(call).list_children(
                parent.id, descendants=args.scope == "descendants"
            )
        except TetherError as err:
            return ToolResult.error(str(err), code=err.code)
        if not rows:
            return ToolResult("no background subagents")
        lines = []
        for row in rows:
            if row.diagnostic:
                lines.append(f"{row.id} [diagnostic: {row.diagnostic}]")
                continue
            line = f"{row.id} {row.label or '(no label)'}: {row.status}"
            if args.scope == "descendants":
                line += f" (depth {row.depth}, parent {row.parent})"
            if row.blocked:
                line += f"; {row.blocked}"
            if row.denied:
                line += f"; {row.denied}"
            lines.append(line)
        return ToolResult("\n".join(lines))


class ReportArgs(ToolArgs):
    output: str = Field(min_length=1, description="A complete, self-contained report.")


class ReportTool:
    name = "report"
    description = (
        "Send your delegating agent a self-contained report now (you may continue working). "
        "Your final reply is delivered to it automatically when you finish."
    )
    Args = ReportArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, ReportArgs)
        try:
            _manager(call).report_from(_agent(call), args.output)
        except TetherError as err:
            return ToolResult.error(str(err), code=err.code)
        return ToolResult("report delivered")
