"""The tool pipeline: one home for how a call is parsed, decided, audited and dispatched.

:meth:`ToolRuntime.execute` takes one call through these steps, each a method below; the first
step that stops the call returns its error result (a result the model reads, never an
exception):

1. **look up and parse** (``_look_up_and_parse``): the tool this agent sees, the raw JSON
   arguments, the escalation ladder's paired arguments taken out (``policy/_escalation.py``),
   the rest validated against the tool's model; a call already aborted stops here;
2. **pre-execute**: the permission rules first (``_screen``, through the approval service): a
   ``deny`` rule stops the call, an ``ask`` rule makes the waterfall's fallback ``ask``; then
   (``_pre_execute``) the ``tools/pre-execute`` waterfall, scoped to the agent, fallback allow
   (or that ask); a throwing listener, an invalid decision and a deny stop the call;
3. **ask** (``_ask``): an ``ask`` decision goes through the approval service, which writes the
   audit pair (a session grant or an ``allow`` rule may decide it there); a refusal is worded
   by ``policy/_outcome_text.py``;
4. **guards** (``_guard``): ``tools/guard`` listeners run synchronously after an allow and may
   only deny, so listener order can never resurrect a forbidden call; an abort that arrived
   while deciding stops the call;
5. **resolve the policy** (``_resolve_policy``): the effective sandbox policy, resolved once
   and stamped on the call; an escalation is granted for this call only, or refused, here;
6. **run** (``_run``): the body, raced against the call's signal; a sandbox denial of a tool
   on the ladder gets its hint (``_with_hint``);
7. **post-execute** (``_post_execute``): ``tools/post-execute`` may accept (optionally
   replacing the result) or block.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from pydantic import ValidationError

from tether._signals import AbortedError, AbortSignal
from tether.kernel import Context, Disposable, ServiceKey
from tether.policy._approval import APPROVAL_SERVICE, ApprovalRequest
from tether.policy._escalation import (
    JUSTIFICATION_ARGUMENT,
    PERMISSIONS_ARGUMENT,
    EffectNoun,
    EscalationRefused,
    EscalationRequest,
    InvalidEscalation,
    escalation_hint,
    escalation_noun,
    grant_escalation,
    take_escalation,
    with_escalation_parameters,
)
from tether.policy._modes import ApprovalOutcome, AskFailure, as_outcome
from tether.policy._outcome_text import ToolAsk, outcome_text, rule_refusal_text
from tether.policy._permissions import cite
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE, SandboxExecutionPolicy
from tether.sandbox import SANDBOX_SERVICE
from tether.session import JsonValue
from tether.tools._base import (
    AgentLike,
    PostDecision,
    PreDecision,
    Tool,
    ToolArgs,
    ToolCall,
    ToolResult,
)
from tether.tools._seams import POST_EXECUTE, PRE_EXECUTE, TOOL_GUARD

log = logging.getLogger(__name__)

ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH: the call was cancelled before it ran"


def tool_schema(tool: Tool, *, escalation: bool = False) -> dict[str, JsonValue]:
    """The JSON schema advertised to the model for ``tool``'s arguments.

    With ``escalation`` (a confining sandbox is mounted), a tool on the escalation ladder also
    advertises its paired parameters.
    """
    schema = _args_schema(tool.Args)
    if escalation and escalation_noun(tool) is not None:
        return with_escalation_parameters(schema)
    return dict(schema)


@functools.lru_cache(maxsize=256)
def _args_schema(args: type[ToolArgs]) -> dict[str, JsonValue]:
    """The argument model's JSON schema; built once per model (it is costly and immutable)."""
    schema = args.model_json_schema()
    schema.pop("title", None)
    return schema


def _invalid_arguments(name: str, problem: str) -> str:
    return f'invalid arguments for tool "{name}": {problem}'


def format_validation_error(name: str, err: ValidationError) -> str:
    problems = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(arguments)"
        problems.append(f"{where}: {item['msg']}")
    return _invalid_arguments(name, "; ".join(problems))


AdvertisedTool = tuple[str, str, Mapping[str, JsonValue]]
"""``(name, description, parameters)`` of one tool, as advertised to the model."""


@dataclass(frozen=True, slots=True)
class _Advertised:
    tool: Tool
    """Held, so that no other tool takes its identity while its schema is kept."""
    key: tuple[str, str, type[ToolArgs], bool]
    """What the schema was built from: name, description, argument model, and whether the
    escalation parameters were added."""
    schema: AdvertisedTool


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A call that passed the first step."""

    tool: Tool
    call: ToolCall
    """Without a policy yet: pre-execute listeners and guards see ``policy=None``."""
    noun: EffectNoun | None
    """The tool's noun while the escalation ladder is offered to it, else ``None``."""
    escalation: EscalationRequest | None


class ToolRuntime:
    """The registry of tools and the pipeline that executes their calls (provided under
    :data:`TOOLS_SERVICE`)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._tools: dict[str, Tool] = {}
        self._scoped: dict[int, dict[str, Tool]] = {}
        self._advertised: dict[int, _Advertised] = {}
        """What :meth:`schemas` built for each registered tool (by its identity), with what it
        was built from; forgotten when the tool is removed."""

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
            kept = self._advertised.get(id(tool))
            if kept is not None and kept.tool is tool:
                del self._advertised[id(tool)]

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
    ) -> tuple[AdvertisedTool, ...]:
        """``(name, description, parameters)`` for every tool ``agent`` sees, as advertised now.

        Each tool's entry is built once and kept while the tool is registered, so every request
        of every agent that sees it gets the same entry: it is built again when what it is
        built from changes (the tool's name, description, argument model, and whether the
        escalation parameters are offered: a sandbox mounted), all read anew on every call.
        The entries are shared: they are read-only (a client copies what it sends)."""
        escalation = self.escalation_enabled()
        out: list[AdvertisedTool] = []
        for tool in self.tools(allowed, agent):
            key = (
                tool.name,
                tool.description,
                tool.Args,
                escalation and escalation_noun(tool) is not None,
            )
            kept = self._advertised.get(id(tool))
            if kept is None or kept.tool is not tool or kept.key != key:
                schema = (tool.name, tool.description, tool_schema(tool, escalation=escalation))
                kept = self._advertised[id(tool)] = _Advertised(tool, key, schema)
            out.append(kept.schema)
        return tuple(out)

    def escalation_enabled(self) -> bool:
        """Escalation parameters exist only while a confining sandbox backend is mounted."""
        sandbox = self.ctx.get(SANDBOX_SERVICE)
        return sandbox is not None and sandbox.confining

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
        """Take one call through the steps of the module docstring; its result, or the error
        result of the step that stopped it."""
        parsed = self._look_up_and_parse(agent, call_id, name, raw_arguments, signal, allowed)
        if isinstance(parsed, ToolResult):
            return parsed
        call = parsed.call
        screened = await self._screen(call)
        if isinstance(screened, ToolResult):
            return screened
        decision = await self._pre_execute(call, screened)
        if isinstance(decision, ToolResult):
            return decision
        if decision.kind == "ask":
            refused = await self._ask(call, decision.reason)
            if refused is not None:
                return refused
        vetoed = self._guard(call)
        if vetoed is not None:
            return vetoed
        policy = await self._resolve_policy(parsed)
        if isinstance(policy, ToolResult):
            return policy
        call = replace(call, policy=policy)
        result = self._with_hint(call, parsed.noun, await self._run(parsed.tool, call))
        return await self._post_execute(call, result)

    def _look_up_and_parse(
        self,
        agent: AgentLike | None,
        call_id: str,
        name: str,
        raw_arguments: str,
        signal: AbortSignal,
        allowed: frozenset[str] | None,
    ) -> _Parsed | ToolResult:
        """Step 1: the tool ``agent`` sees as ``name`` (within ``allowed``) and the call its
        arguments make; or the unknown tool, the malformed or invalid arguments, or the abort
        that stops it."""
        tool = self.get(name, agent)
        if tool is None or (allowed is not None and name not in allowed):
            return ToolResult.error(f'unknown tool "{name}"')
        arguments = _parse_arguments(name, raw_arguments)
        if isinstance(arguments, ToolResult):
            return arguments
        noun = escalation_noun(tool) if self.escalation_enabled() else None
        escalation: EscalationRequest | None = None
        if noun is not None:
            taken = take_escalation(arguments)
            if isinstance(taken, InvalidEscalation):
                return ToolResult.error(_invalid_arguments(name, taken.problem))
            arguments, escalation = taken
        try:
            args = tool.Args.model_validate(arguments)
        except ValidationError as err:
            return ToolResult.error(format_validation_error(name, err))
        if signal.aborted:
            return _aborted_before_dispatch()
        call = ToolCall(call_id, name, args, raw_arguments, agent, signal, self.ctx, None)
        return _Parsed(tool, call, noun, escalation)

    async def _screen(self, call: ToolCall) -> PreDecision | ToolResult:
        """Step 2a: what the permission rules say before anything else: the refusal of a
        ``deny`` rule (the approval service wrote its audit pair), an ``ask`` rule's ask, or
        allow. A session whose rules cannot be read runs nothing."""
        approval = self.ctx.get(APPROVAL_SERVICE)
        if approval is None or call.agent is None:
            return PreDecision.allow()
        try:
            if not approval.screens(call.agent.session):
                return PreDecision.allow()  # no rule binds it: nothing to describe the call to
            request = ApprovalRequest(
                call.agent,
                call.name,
                call_id=call.call_id,
                signal=call.signal,
                action=describe_action(call),
            )
            screened = await approval.screen(request)
        except Exception as err:
            return ToolResult.error(
                f'the permission rules could not be applied to tool "{call.name}", so it did '
                f"not run: {err}"
            )
        if screened.denied is not None:
            return ToolResult.error(rule_refusal_text(ToolAsk(call.name), cite(screened.denied)))
        if screened.ask is not None:
            return PreDecision.ask(screened.ask.describe())
        return PreDecision.allow()

    async def _pre_execute(self, call: ToolCall, fallback: PreDecision) -> PreDecision | ToolResult:
        """Step 2b: the ``tools/pre-execute`` decision when it lets the call go on (allow or
        ask); the error result of a failing listener, an invalid decision or a deny. An ``ask``
        rule's ask is the waterfall's ``fallback``: a listener may deny, or keep asking (a
        routing gate turns it into its own question), but no listener's allow skips it."""
        try:
            decision = await self.ctx.waterfall(PRE_EXECUTE, call, fallback, scope=call.agent)
        except Exception as err:
            log.warning("tools/pre-execute listener failed for %s: %s", call.name, err)
            return ToolResult.error(f'a pre-execute hook failed for tool "{call.name}": {err}')
        if not isinstance(decision, PreDecision):
            return ToolResult.error(
                f'a pre-execute hook returned an invalid decision for tool "{call.name}"'
            )
        if decision.kind == "deny":
            return ToolResult.error(decision.reason or f'tool "{call.name}" was denied')
        return decision

    async def _ask(self, call: ToolCall, reason: str | None) -> ToolResult | None:
        """Step 3: ask the approval service about ``call``; ``None`` when it is allowed once,
        else the refusal. With no service to ask, the hook's ``reason`` (if any) says why."""
        asked = ToolAsk(call.name)
        approval = self.ctx.get(APPROVAL_SERVICE)
        if approval is None:
            return ToolResult.error(reason or outcome_text(AskFailure.NO_APPROVAL, asked))
        if call.agent is None:
            return ToolResult.error(outcome_text(AskFailure.NO_AGENT, asked))
        request = ApprovalRequest(
            agent=call.agent,
            tool_name=call.name,
            call_id=call.call_id,
            reason=reason,
            signal=call.signal,
            action=describe_action(call),
        )
        try:
            decided = await approval.decide(request)
        except Exception as err:
            return ToolResult.error(outcome_text(AskFailure.ERROR, asked, detail=str(err)))
        # The composed service may be another implementation: check what it returned.
        outcome = as_outcome(decided.outcome) or AskFailure.UNKNOWN_OUTCOME
        if outcome is ApprovalOutcome.REJECTED and decided.rule is not None:
            return ToolResult.error(rule_refusal_text(asked, decided.rule))
        match outcome:
            case (
                ApprovalOutcome.ALLOWED_ONCE
                | ApprovalOutcome.ALLOWED_FOR_SESSION
                | ApprovalOutcome.ALLOWED_ALWAYS
            ):
                return None
        if outcome is ApprovalOutcome.CANCELLED:
            return _cancelled(outcome_text(outcome, asked), call.signal)
        if decided.failure is not None:
            failed = decided.failure.describe()
            return ToolResult.error(outcome_text(AskFailure.ANSWERER_FAILED, asked, detail=failed))
        return ToolResult.error(outcome_text(outcome, asked))

    def _guard(self, call: ToolCall) -> ToolResult | None:
        """Step 4: the first veto of a ``tools/guard`` listener (a failing one vetoes too), or
        the abort that arrived while the call was being decided; ``None`` to go on."""
        try:
            vetoes = self.ctx.collect(TOOL_GUARD, call, scope=call.agent)
        except Exception as err:
            return ToolResult.error(f'a guard failed for tool "{call.name}": {err}')
        for veto in vetoes:
            if veto:
                return ToolResult.error(str(veto))
        if call.signal.aborted:
            return _aborted_before_dispatch()
        return None

    async def _resolve_policy(self, parsed: _Parsed) -> SandboxExecutionPolicy | ToolResult | None:
        """Step 5: the sandbox policy the call runs under (``None``: no sandbox policy service
        is composed), widened for this call when its escalation is granted; or the refusal."""
        call = parsed.call
        service = self.ctx.get(SANDBOX_POLICY_SERVICE)
        session = call.agent.session if call.agent is not None else None
        policy = service.resolve(session=session) if service is not None else None
        if parsed.escalation is None or parsed.noun is None:
            return policy
        granted = await grant_escalation(
            self.ctx,
            call,
            parsed.escalation,
            policy=policy,
            noun=parsed.noun,
            action=describe_action(call),
        )
        if not isinstance(granted, EscalationRefused):
            return granted
        if granted.cancelled:
            return _cancelled(granted.reason, call.signal)
        return ToolResult.error(granted.reason, cancelled=False)

    async def _run(self, tool: Tool, call: ToolCall) -> ToolResult:
        """Step 6: the tool's body, raced against the call's signal; a raising body is an error
        result."""
        try:
            return await call.signal.race(tool.run(call))
        except AbortedError:
            return ToolResult.error(f'tool "{call.name}" was cancelled', cancelled=True)
        except Exception as err:
            log.exception("tool %s raised", call.name)
            return ToolResult.error(f'tool "{call.name}" failed: {type(err).__name__}: {err}')

    def _with_hint(self, call: ToolCall, noun: EffectNoun | None, result: ToolResult) -> ToolResult:
        """``result``, with the escalation ladder's hint when it is a sandbox denial of a tool
        the ladder is offered to."""
        if noun is None or not result.details.get("sandbox_denied") or call.policy is None:
            return result
        hint = escalation_hint(self.ctx, noun, call.policy.mode, call.agent)
        return replace(result, content=f"{result.content}\n{hint}") if hint else result

    async def _post_execute(self, call: ToolCall, result: ToolResult) -> ToolResult:
        """Step 7: what ``tools/post-execute`` makes of ``result``: kept, replaced or blocked."""
        try:
            decision = await self.ctx.waterfall(
                POST_EXECUTE, (call, result), PostDecision("accept"), scope=call.agent
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


TOOLS_SERVICE: Final[ServiceKey[ToolRuntime]] = ServiceKey("tools")
"""The tool registry and pipeline of a composition."""


def _aborted_before_dispatch() -> ToolResult:
    return ToolResult.error(ABORTED_BEFORE_DISPATCH, cancelled=True)


def _cancelled(reason: str, signal: AbortSignal) -> ToolResult:
    """A cancelled ask: when the call's own signal fired, the call reads as aborted before
    dispatch rather than as an approval that went away."""
    if signal.aborted:
        return _aborted_before_dispatch()
    return ToolResult.error(reason, cancelled=True)


def _parse_arguments(name: str, raw: str) -> Mapping[str, JsonValue] | ToolResult:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as err:
        return ToolResult.error(f'arguments for tool "{name}" are not valid JSON: {err.msg}')
    except RecursionError:
        return ToolResult.error(f'arguments for tool "{name}" are nested too deeply')
    if not isinstance(value, dict):
        return ToolResult.error(f'arguments for tool "{name}" must be a JSON object')
    return value


def describe_action(call: ToolCall) -> dict[str, JsonValue]:
    """What an answerer may show: the tool's own description of the action, else its args."""
    args = call.arguments()
    action: dict[str, JsonValue] = {"tool": call.name}
    for key in ("command", "path", "description", JUSTIFICATION_ARGUMENT, PERMISSIONS_ARGUMENT):
        value = args.get(key)
        if isinstance(value, str):
            action[key] = value
    return action


__all__ = [
    "ABORTED_BEFORE_DISPATCH",
    "TOOLS_SERVICE",
    "ToolRuntime",
    "describe_action",
    "tool_schema",
]
