"""The tool pipeline: one home for how a call is parsed, decided, audited and dispatched.

Order for one call (behaviour.md §4.1):

1. look the tool up, parse the raw JSON arguments and validate them against the tool's model
   (a bad argument is an error result the model can read);
2. ``tools/pre-execute`` waterfall, scoped to the agent, fallback allow; a throwing listener
   gives an error result;
3. ``ask`` goes through the approval service (texts of §3.5);
4. guards (``tools/guard`` listeners) run synchronously after an allow and may only deny, so
   listener order can never resurrect a forbidden call;
5. the effective sandbox policy is resolved once and stamped on the call;
6. the body runs, raced against the call's signal;
7. ``tools/post-execute`` may accept (optionally replacing the result) or block.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tether.kernel import Context, Disposable
from tether.policy import ApprovalRequest, SandboxExecutionPolicy
from tether.session import JsonValue
from tether.signals import AbortedError, AbortSignal
from tether.tools.base import AgentLike, PostDecision, PreDecision, Tool, ToolCall, ToolResult

log = logging.getLogger(__name__)

ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH: the call was cancelled before it ran"


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The JSON schema advertised to the model for ``tool``'s arguments."""
    schema = tool.Args.model_json_schema()
    schema.pop("title", None)
    return schema


def format_validation_error(name: str, err: ValidationError) -> str:
    problems = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(arguments)"
        problems.append(f"{where}: {item['msg']}")
    return f'invalid arguments for tool "{name}": ' + "; ".join(problems)


class ToolRuntime:
    """The registry of tools and the pipeline that executes their calls."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Disposable:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool

        def remove() -> None:
            if self._tools.get(tool.name) is tool:
                del self._tools[tool.name]

        return self.ctx.effect(remove)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self, allowed: frozenset[str] | None = None) -> list[Tool]:
        return [t for n, t in self._tools.items() if allowed is None or n in allowed]

    async def execute(
        self,
        agent: AgentLike | None,
        call_id: str,
        name: str,
        raw_arguments: str,
        signal: AbortSignal,
        *,
        allowed: frozenset[str] | None = None,
    ) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None or (allowed is not None and name not in allowed):
            return ToolResult.error(f'unknown tool "{name}"')
        parsed = _parse_arguments(name, raw_arguments)
        if isinstance(parsed, ToolResult):
            return parsed
        try:
            args = tool.Args.model_validate(parsed)
        except ValidationError as err:
            return ToolResult.error(format_validation_error(name, err))
        call = ToolCall(call_id, name, args, raw_arguments, agent, signal, self.ctx, None)
        if signal.aborted:
            return ToolResult.error(ABORTED_BEFORE_DISPATCH, cancelled=True)

        try:
            decision = await self.ctx.waterfall(
                "tools/pre-execute", call, PreDecision.allow(), scope=agent
            )
        except Exception as err:
            log.warning("tools/pre-execute listener failed for %s: %s", name, err)
            return ToolResult.error(f'a pre-execute hook failed for tool "{name}": {err}')
        denied = await self._decide(call, decision)
        if denied is not None:
            return denied

        try:
            vetoes = self.ctx.collect("tools/guard", call, scope=agent)
        except Exception as err:
            return ToolResult.error(f'a guard failed for tool "{name}": {err}')
        for veto in vetoes:
            if veto:
                return ToolResult.error(str(veto))
        if signal.aborted:
            return ToolResult.error(ABORTED_BEFORE_DISPATCH, cancelled=True)

        policy = self._resolve_policy(agent)
        call = ToolCall(call_id, name, args, raw_arguments, agent, signal, self.ctx, policy)
        try:
            result = await signal.race(tool.run(call))
        except AbortedError:
            return ToolResult.error(f'tool "{name}" was cancelled', cancelled=True)
        except Exception as err:
            log.exception("tool %s raised", name)
            return ToolResult.error(f'tool "{name}" failed: {type(err).__name__}: {err}')
        return await self._post(call, result)

    async def _decide(self, call: ToolCall, decision: object) -> ToolResult | None:
        """``None`` to proceed, or the denial result."""
        if not isinstance(decision, PreDecision):
            return ToolResult.error(
                f'a pre-execute hook returned an invalid decision for tool "{call.name}"'
            )
        if decision.kind == "allow":
            return None
        if decision.kind == "deny":
            return ToolResult.error(decision.reason or f'tool "{call.name}" was denied')
        return await self.service_ask(call, decision.reason)

    async def service_ask(self, call: ToolCall, reason: str | None) -> ToolResult | None:
        """Route an ``ask`` through the approval service (behaviour.md §3.5)."""
        name = call.name
        approval = self.ctx.get("approval")
        if approval is None:
            return ToolResult.error(
                reason or f'tool "{name}" requires approval (not yet supported)'
            )
        if call.agent is None:
            return ToolResult.error(
                f'tool "{name}" requires approval, but the call has no agent to route it through'
            )
        request = ApprovalRequest(
            agent=call.agent,
            tool_name=name,
            call_id=call.call_id,
            reason=reason,
            signal=call.signal,
            action=describe_action(call),
        )
        try:
            outcome = await approval.request(request)
        except Exception as err:
            return ToolResult.error(f'approval for tool "{name}" failed: {err}')
        if outcome == "allowed-once":
            return None
        if outcome == "rejected":
            return ToolResult.error(f'the user rejected tool "{name}"')
        if outcome == "cancelled":
            if call.signal.aborted:
                return ToolResult.error(ABORTED_BEFORE_DISPATCH, cancelled=True)
            return ToolResult.error(f'approval for tool "{name}" was cancelled', cancelled=True)
        if outcome == "unavailable":
            return ToolResult.error(
                f'tool "{name}" requires approval, but no approval channel is available'
            )
        return ToolResult.error(f'approval for tool "{name}" returned an unknown outcome')

    def _resolve_policy(self, agent: AgentLike | None) -> SandboxExecutionPolicy | None:
        service = self.ctx.get("sandbox_policy")
        if service is None:
            return None
        session = agent.session if agent is not None else None
        policy: SandboxExecutionPolicy = service.resolve(session=session)
        return policy

    async def _post(self, call: ToolCall, result: ToolResult) -> ToolResult:
        try:
            decision = await self.ctx.waterfall(
                "tools/post-execute", (call, result), PostDecision("accept"), scope=call.agent
            )
        except Exception as err:
            return ToolResult.error(f'a post-execute hook failed for tool "{call.name}": {err}')
        if not isinstance(decision, PostDecision):
            return ToolResult.error(
                f'a post-execute hook returned an invalid decision for "{call.name}"'
            )
        if decision.kind == "block":
            return ToolResult.error(decision.feedback or f'tool "{call.name}" result was blocked')
        return decision.result or result


def _parse_arguments(name: str, raw: str) -> Mapping[str, Any] | ToolResult:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as err:
        return ToolResult.error(f'arguments for tool "{name}" are not valid JSON: {err.msg}')
    if not isinstance(value, dict):
        return ToolResult.error(f'arguments for tool "{name}" must be a JSON object')
    return value


def describe_action(call: ToolCall) -> dict[str, JsonValue]:
    """What an answerer may show: the tool's own description of the action, else its args."""
    args = call.arguments()
    action: dict[str, JsonValue] = {"tool": call.name}
    for key in ("command", "path", "description", "justification", "sandbox_permissions"):
        value = args.get(key)
        if isinstance(value, str):
            action[key] = value
    return action


__all__ = ["ABORTED_BEFORE_DISPATCH", "ToolRuntime", "describe_action", "tool_schema"]
