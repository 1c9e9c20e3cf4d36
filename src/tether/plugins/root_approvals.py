"""``root_approvals``: a subagent's approval question goes to the root session's human.

A ``tools/pre-execute`` gate for the configured guarded tools:

- A call is a subagent's when its session header's ``delegation_depth`` is above 0 (not
  ``origin``, not ``parent_session``: a top-level fork has a parent too).
- A top-level or agent-less call returns ``ask``, so the harness resolves it as usual.
- A subagent's call walks ``parent_session`` to the live root through the agents registry (a
  broken chain stops at the deepest live ancestor), then asks the approval service *for that
  root*: the root's policy and the root's answerers decide. The request carries a structured
  :class:`~tether.policy.approval.RoutedOrigin` and a one-line headline.
- Every failure denies with its own reason: no approval service, no agents registry, no live
  ancestor, rejected, cancelled, unavailable, or an exception from the request.

Ordering (docs/decisions/0016): the gate is *prepended* and calls the rest of the chain first.
Another listener's deny stands; its ``ask`` (say a Claude Code hook asking about a child's
call) or allow is converted into the routed question. Were the gate after such a listener, the
ask would short-circuit it and reach the child's own ``never``-pinned service: rejected
without the root ever seeing it.

Opt-in ``route_escalations`` routes a child's ``sandbox_permissions`` escalation the same way;
an allowed-once grant still widens that one call only. The plugin also keeps blocked children
visible: it notifies a child's parent when the child has waited longer than
``blocked_notice_seconds`` and when a child's action was denied by its scope.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from tether.kernel import Context, Next
from tether.policy.approval import ApprovalRequest, RoutedOrigin
from tether.session import JsonValue
from tether.tools.base import PreDecision, ToolCall, ToolResult
from tether.tools.pipeline import ESCALATION_ASK_EVENT, describe_action

log = logging.getLogger(__name__)

HEADLINE_SUMMARY_LIMIT: Final = 200
NOTICE_SOURCE: Final[Mapping[str, JsonValue]] = {
    "kind": "plugin",
    "plugin": "root_approvals",
    "form": "notice",
}


class RootApprovalsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    guarded: list[str] = Field(default_factory=lambda: ["bash", "write", "edit"])
    """Tool names whose calls ask (and, from a subagent, ask the root)."""
    route_escalations: bool = False
    blocked_notice_seconds: float = Field(default=30.0, gt=0)
    notify_denials: bool = True


def one_line(text: str) -> str:
    return " ".join(text.split())


def arguments_summary(arguments: Mapping[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    if len(text) > HEADLINE_SUMMARY_LIMIT:
        text = text[: HEADLINE_SUMMARY_LIMIT - 1] + "…"
    return text


def headline(tool: str, arguments: Mapping[str, Any]) -> str:
    """``Subagent approval: run "bash" · Why: … · Command: …`` on one line."""
    why = arguments.get("description") or arguments.get("justification")
    command = arguments.get("command")
    parts = [f'Subagent approval: run "{tool}"']
    if isinstance(why, str) and why.strip():
        parts.append(f"Why: {one_line(why)}")
    if isinstance(command, str) and command.strip():
        parts.append(f"Command: {one_line(command)}")
    if len(parts) == 1:
        parts.append(f"Arguments: {arguments_summary(arguments)}")
    return " · ".join(parts)


def live_lineage(agents: Any, child: Any) -> tuple[list[str], Any | None]:
    """Ids from ``child`` up to the deepest live ancestor, and that ancestor (or ``None``)."""
    chain = [child.session.id]
    root = None
    parent_id = child.session.header.parent_session
    while parent_id is not None and parent_id not in chain:
        live = agents.get(parent_id)
        if live is None:
            break
        chain.append(parent_id)
        root = live
        parent_id = live.session.header.parent_session
    return chain, root


class Router:
    def __init__(self, ctx: Context, config: RootApprovalsConfig) -> None:
        self.ctx = ctx
        self.config = config
        self.guarded = frozenset(config.guarded)

    async def gate(self, call: ToolCall, next_: Next) -> object:
        if call.name not in self.guarded:
            return await next_()
        downstream = await next_()
        if isinstance(downstream, PreDecision) and downstream.kind == "deny":
            return downstream
        agent = call.agent
        if agent is None or agent.session.header.delegation_depth == 0:
            reason = downstream.reason if isinstance(downstream, PreDecision) else None
            return PreDecision.ask(reason or headline(call.name, call.arguments()))
        arguments = call.arguments()
        outcome = await self.route(
            agent,
            tool_name=call.name,
            call_id=call.call_id,
            reason=headline(call.name, arguments),
            arguments=arguments,
            signal=call.signal,
            action=describe_action(call),
        )
        if isinstance(outcome, str) and outcome == "allowed-once":
            return PreDecision.allow()
        return PreDecision.deny(self.denial_reason(call.name, outcome))

    async def escalation(self, request: ApprovalRequest, next_: Next) -> object:
        """Route a subagent's sandbox escalation to its root (``route_escalations``)."""
        agent = request.agent
        if agent.session.header.delegation_depth == 0:
            return await next_()
        outcome = await self.route(
            agent,
            tool_name=request.tool_name,
            call_id=request.call_id,
            reason="Subagent approval: " + one_line(request.reason or request.tool_name),
            arguments=dict(request.action or {}),
            signal=request.signal,
            action=request.action,
        )
        # The ladder maps outcomes to its own texts; a routing failure is "unavailable".
        return outcome if outcome in ("allowed-once", "rejected", "cancelled") else "unavailable"

    async def route(
        self,
        child: Any,
        *,
        tool_name: str,
        call_id: str | None,
        reason: str,
        arguments: Mapping[str, Any],
        signal: Any,
        action: Mapping[str, JsonValue] | None,
    ) -> str:
        """The outcome, or a routing failure code (``no-approval``, ``no-agents``,
        ``broken-lineage``, ``error``)."""
        approval = self.ctx.get("approval")  # looked up now: a service mounted later counts
        if approval is None:
            return "no-approval"
        agents = self.ctx.get("agents")
        if agents is None:
            return "no-agents"
        lineage, root = live_lineage(agents, child)
        if root is None:
            return "broken-lineage"
        request = ApprovalRequest(
            root,
            tool_name,
            call_id=call_id,
            reason=reason,
            signal=signal,
            action=action,
            origin=RoutedOrigin(
                child, call_id, tool_name, arguments_summary(arguments), tuple(lineage)
            ),
        )
        watcher = asyncio.ensure_future(self._notice_if_slow(child, reason))
        try:
            outcome = await approval.request(request)
        except Exception as err:
            log.warning("routed approval for %s failed: %s", child.session.id, err)
            return "error"
        finally:
            watcher.cancel()
        return str(getattr(outcome, "value", outcome))

    @staticmethod
    def denial_reason(tool: str, outcome: object) -> str:
        reasons = {
            "rejected": f"the root session's user rejected the subagent's \"{tool}\" call",
            "cancelled": f'the routed approval for "{tool}" was cancelled',
            "unavailable": f'"{tool}" needs the root session\'s approval, but no approval '
            "channel is available there",
            "no-approval": f'"{tool}" needs approval, but no approval service is composed '
            "(routed approvals fail closed)",
            "no-agents": f'"{tool}" needs the root session\'s approval, but no agents registry '
            "is composed to find it",
            "broken-lineage": f'"{tool}" needs the root session\'s approval, but no live '
            "ancestor of this subagent was found",
            "error": f'the routed approval for "{tool}" failed',
        }
        return reasons.get(str(outcome), f'the routed approval for "{tool}" failed')

    async def _notice_if_slow(self, child: Any, reason: str) -> None:
        await asyncio.sleep(self.config.blocked_notice_seconds)
        self._notify_parent(
            child,
            f"Subagent {child.session.id} has been waiting for approval for more than "
            f"{self.config.blocked_notice_seconds:g}s: {reason}",
        )

    def on_result(self, payload: tuple[ToolCall, ToolResult], next_: Next) -> object:
        call, result = payload
        agent = call.agent
        if (
            self.config.notify_denials
            and agent is not None
            and agent.session.header.delegation_depth > 0
            and result.is_error
            and is_scope_denial(result)
        ):
            self._notify_parent(
                agent,
                f"Subagent {agent.session.id}'s {call.name} call was denied by its scope: "
                f"{one_line(result.content)[:300]}",
            )
        return next_()

    def _notify_parent(self, child: Any, text: str) -> None:
        agents = self.ctx.get("agents")
        parent_id = child.session.header.parent_session
        parent = agents.get(parent_id) if agents is not None and parent_id else None
        if parent is None:
            return
        try:
            parent.inject(text, source=NOTICE_SOURCE)
        except Exception:
            log.exception("could not notify %s", parent_id)


def is_scope_denial(result: ToolResult) -> bool:
    """A sandbox denial, or an approval the child's scope refused."""
    if result.details.get("sandbox_denied"):
        return True
    content = result.content
    return content.startswith("Error: the user rejected") or "needs the root session" in content


class RootApprovalsPlugin:
    name = "root_approvals"
    requires: tuple[str, ...] = ()
    config_model = RootApprovalsConfig

    def apply(self, ctx: Context, config: RootApprovalsConfig) -> None:
        router = Router(ctx, config)
        ctx.on("tools/pre-execute", router.gate, prepend=True)
        ctx.on("tools/post-execute", router.on_result, prepend=True)
        if config.route_escalations:
            ctx.on(ESCALATION_ASK_EVENT, router.escalation, prepend=True)


plugin: Final = RootApprovalsPlugin()
