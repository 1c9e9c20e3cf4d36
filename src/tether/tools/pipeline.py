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

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from tether.kernel import Context, Disposable
from tether.policy import (
    ESCALATION_TARGETS,
    ApprovalPolicy,
    ApprovalRequest,
    SandboxExecutionPolicy,
    SandboxMode,
)
from tether.policy.escalation import (
    EffectNoun,
    EscalationRefused,
    approve_escalation,
    denial_hint,
)
from tether.session import JsonValue
from tether.signals import AbortedError, AbortSignal
from tether.tools.base import (
    AgentLike,
    PostDecision,
    PreDecision,
    Tool,
    ToolArgs,
    ToolCall,
    ToolResult,
)

log = logging.getLogger(__name__)

ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH: the call was cancelled before it ran"
ESCALATION_ASK_EVENT = "sandbox/escalation-ask"
ESCALATION_ROUTED_EVENT = "sandbox/escalation-routed"
"""Listeners return True for an agent whose escalations a plugin routes elsewhere."""
"""Waterfall over the approval request of a sandbox escalation (fallback: the service)."""


def tool_schema(tool: Tool, *, escalation: bool = False) -> dict[str, Any]:
    """The JSON schema advertised to the model for ``tool``'s arguments.

    With ``escalation`` (a confining sandbox is mounted and the tool supports it), the paired
    ``sandbox_permissions``/``justification`` parameters are added.
    """
    schema = dict(_args_schema(tool.Args))
    if escalation and escalation_noun(tool) is not None:
        properties = dict(schema.get("properties", {}))
        properties["sandbox_permissions"] = {
            "type": "string",
            "enum": [mode.value for mode in ESCALATION_TARGETS],
            "description": "Run this one call under a wider sandbox mode; the user is asked "
            "to approve. Give it only after a sandbox denial, together with justification.",
        }
        properties["justification"] = {
            "type": "string",
            "description": "Why this call needs the wider mode (shown to the approver).",
        }
        schema["properties"] = properties
    return schema


@functools.lru_cache(maxsize=256)
def _args_schema(args: type[ToolArgs]) -> dict[str, Any]:
    """The argument model's JSON schema; built once per model (it is costly and immutable)."""
    schema = args.model_json_schema()
    schema.pop("title", None)
    return schema


def escalation_noun(tool: Tool) -> EffectNoun | None:
    """``command``/``operation`` for tools that support escalation, else ``None``."""
    noun = getattr(tool, "escalation_noun", None)
    return noun if noun in ("command", "operation") else None


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
        self._scoped: dict[int, dict[str, Tool]] = {}

    def register(
        self, tool: Tool, *, scope: object | None = None, ctx: Context | None = None
    ) -> Disposable:
        """Add ``tool``; with ``scope`` only that agent sees it (a child's ``report`` tool).

        The registration is disposed with ``ctx`` (default: the runtime's context).
        """
        table = self._tools if scope is None else self._scoped.setdefault(id(scope), {})
        if tool.name in table:
            raise ValueError(f"tool {tool.name!r} is already registered")
        table[tool.name] = tool

        def remove() -> None:
            if table.get(tool.name) is tool:
                del table[tool.name]
            if scope is not None and not table:
                self._scoped.pop(id(scope), None)

        return (ctx or self.ctx).effect(remove)

    def get(self, name: str, agent: object | None = None) -> Tool | None:
        if agent is not None:
            scoped = self._scoped.get(id(agent), {}).get(name)
            if scoped is not None:
                return scoped
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(
        self, allowed: frozenset[str] | None = None, agent: object | None = None
    ) -> list[Tool]:
        table = dict(self._tools)
        if agent is not None:
            table.update(self._scoped.get(id(agent), {}))
        return [t for n, t in table.items() if allowed is None or n in allowed]

    def schemas(
        self, allowed: frozenset[str] | None = None, agent: object | None = None
    ) -> list[tuple[str, str, dict[str, Any]]]:
        """``(name, description, parameters)`` for every tool ``agent`` sees, as advertised now."""
        escalation = self.escalation_enabled()
        return [
            (t.name, t.description, tool_schema(t, escalation=escalation))
            for t in self.tools(allowed, agent)
        ]

    def escalation_enabled(self) -> bool:
        """Escalation parameters exist only while a confining sandbox backend is mounted."""
        sandbox = self.ctx.get("sandbox")
        return sandbox is not None and bool(getattr(sandbox, "confining", False))

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
        tool = self.get(name, agent)
        if tool is None or (allowed is not None and name not in allowed):
            return ToolResult.error(f'unknown tool "{name}"')
        parsed = _parse_arguments(name, raw_arguments)
        if isinstance(parsed, ToolResult):
            return parsed
        noun = escalation_noun(tool) if self.escalation_enabled() else None
        requested: tuple[SandboxMode, str] | None = None
        if noun is not None:
            parsed = dict(parsed)
            pair = _escalation_request(name, parsed)
            if isinstance(pair, ToolResult):
                return pair
            requested = pair
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
        if requested is not None and noun is not None:
            if policy is None:
                return ToolResult.error("sandbox escalation requires a sandbox policy service")
            approval = self.ctx.get("approval")

            async def ask(request: ApprovalRequest) -> object:
                # A routing plugin may answer an escalation for a subagent (opt-in); by default
                # the executing agent's own approval service decides. (Only reached when an
                # approval service is composed: the ladder refuses earlier otherwise.)
                service: Any = approval
                return await self.ctx.waterfall(
                    ESCALATION_ASK_EVENT,
                    request,
                    lambda: service.request(request),
                    scope=agent,
                )

            granted = await approve_escalation(
                approval=approval,
                ask=ask,
                agent=agent,
                policy=policy,
                target=requested[0],
                justification=requested[1],
                tool_name=name,
                call_id=call_id,
                noun=noun,
                signal=signal,
                action=describe_action(call),
            )
            if isinstance(granted, EscalationRefused):
                if granted.cancelled and signal.aborted:
                    return ToolResult.error(ABORTED_BEFORE_DISPATCH, cancelled=True)
                return ToolResult.error(granted.reason, cancelled=granted.cancelled)
            policy = granted
        call = ToolCall(call_id, name, args, raw_arguments, agent, signal, self.ctx, policy)
        try:
            result = await signal.race(tool.run(call))
        except AbortedError:
            return ToolResult.error(f'tool "{name}" was cancelled', cancelled=True)
        except Exception as err:
            log.exception("tool %s raised", name)
            return ToolResult.error(f'tool "{name}" failed: {type(err).__name__}: {err}')
        if noun is not None and result.details.get("sandbox_denied") and policy is not None:
            result = self._with_hint(result, noun, policy, agent)
        return await self._post(call, result)

    def _with_hint(
        self,
        result: ToolResult,
        noun: EffectNoun,
        policy: SandboxExecutionPolicy,
        agent: AgentLike | None,
    ) -> ToolResult:
        approval = self.ctx.get("approval")
        effective = (
            approval.effective_policy(agent.session)
            if approval is not None and agent is not None
            else ApprovalPolicy.NEVER
        )
        if (
            effective is ApprovalPolicy.NEVER
            and agent is not None
            and any(self.ctx.collect(ESCALATION_ROUTED_EVENT, agent, scope=agent))
        ):
            # A plugin answers this agent's escalations elsewhere (the root's user): the
            # pinned session may still ask, so the hint says how.
            effective = ApprovalPolicy.ASK
        hint = denial_hint(noun, policy.mode, effective)
        if not hint:
            return result
        return replace(result, content=f"{result.content}\n{hint}")

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


def _escalation_request(
    name: str, parsed: dict[str, Any]
) -> tuple[SandboxMode, str] | ToolResult | None:
    """Pop and validate the paired escalation arguments (both, or neither)."""
    target = parsed.pop("sandbox_permissions", None)
    justification = parsed.pop("justification", None)
    if target is None and justification is None:
        return None
    if target is None or justification is None:
        return ToolResult.error(
            f'invalid arguments for tool "{name}": sandbox_permissions and justification must '
            "be given together"
        )
    if target not in [mode.value for mode in ESCALATION_TARGETS]:
        allowed = ", ".join(mode.value for mode in ESCALATION_TARGETS)
        return ToolResult.error(
            f'invalid arguments for tool "{name}": sandbox_permissions must be one of {allowed}'
        )
    if not isinstance(justification, str) or not justification.strip():
        return ToolResult.error(
            f'invalid arguments for tool "{name}": justification must be a non-empty string'
        )
    return SandboxMode(target), justification


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
