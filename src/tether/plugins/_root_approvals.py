"""``root_approvals``: a subagent's approval question goes to the root session's human.

A ``tools/pre-execute`` gate for the configured guarded tools:

- A call is a subagent's when its session header's ``delegation_depth`` is above 0 (not
  ``origin``, not ``parent_session``: a top-level fork has a parent too).
- A top-level or agent-less call returns ``ask``, so the harness resolves it as usual.
- A subagent's call walks ``parent_session`` up to the top-level session of its delegation tree
  and asks the approval service *for the deepest live ancestor on that chain* (normally the
  root): that session's policy and answerers decide. A hop that is no longer live is crossed
  through its durable header; when the root itself is gone, the live ancestor nearest to it
  decides. The request carries a structured :class:`~tether.policy._approval.RoutedOrigin` and
  a one-line headline.
- Every failure denies with its own reason: no approval service, no agents registry, no live
  ancestor, rejected by the user, rejected by a ``never`` policy, cancelled, unavailable, or an
  exception from the request.

Ordering (docs/decisions/0016): the gate is *prepended* and calls the rest of the chain first.
Another listener's deny stands; its ``ask`` (say a Claude Code hook asking about a child's
call) or allow is converted into the routed question. Were the gate after such a listener, the
ask would short-circuit it and reach the child's own ``never``-pinned service: rejected
without the root ever seeing it.

Opt-in ``route_escalations`` routes a child's ``sandbox_permissions`` escalation the same way;
an answer that allows still widens that one call only: a grant it makes is the root's, and
never decides the child's next question (docs/decisions/0056). The plugin also keeps blocked children
visible: it notifies a child's parent when the child has waited longer than
``blocked_notice_seconds``, when a routed question was denied, and when a child's action was
denied by its sandbox.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from tether._signals import AbortSignal, cancel_and_wait
from tether.agent import AGENTS_SERVICE, Agent, AgentRegistry
from tether.errors import TetherError
from tether.kernel import SESSIONS_SERVICE, AnyServiceKey, Context, Next
from tether.plugins._headline import arguments_summary, escalation_headline, headline
from tether.policy._approval import APPROVAL_SERVICE, ApprovalRequest, ApprovalService, RoutedOrigin
from tether.policy._escalation import ESCALATION_ASK, ESCALATION_ROUTED
from tether.policy._modes import (
    ApprovalOutcome,
    ApprovalPolicy,
    AskFailure,
    SandboxMode,
    allows,
    as_outcome,
)
from tether.policy._outcome_text import RoutedAsk, outcome_text
from tether.policy._protocols import HasSession
from tether.session import JsonValue, SessionHeader, SessionStore
from tether.subagents._visibility import is_denial
from tether.tools._base import PostDecision, PreDecision, ToolCall, ToolResult
from tether.tools._pipeline import describe_action
from tether.tools._seams import POST_EXECUTE, PRE_EXECUTE

log = logging.getLogger(__name__)

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
    """Also route a subagent's ``sandbox_permissions`` escalation to the root."""
    blocked_notice_seconds: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    """Tell the parent when its child has waited this long for an answer."""
    notify_denials: bool = True
    """Tell the parent when its child's action was denied (routed denial or sandbox)."""


def one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class Lineage:
    """The asking child's ancestry as far as it reaches a live decider."""

    ids: tuple[str, ...]
    """Session ids from the child up to the decider (dead hops in between included)."""
    decider: Agent | None
    """The live ancestor nearest to the top-level session, or ``None``."""


async def resolve_lineage(
    agents: AgentRegistry, store: SessionStore | None, child: HasSession
) -> Lineage:
    """Walk ``parent_session`` from ``child`` to the top-level session of its delegation tree.

    Liveness comes from the agents registry. A hop that is not live is crossed through its
    durable header (the session store), so a grandchild whose parent has gone still reaches a
    live root. The walk stops at the first session with ``delegation_depth`` 0 (a top-level
    fork's own ``parent_session`` belongs to another conversation), at a repeated id, and at a
    header nobody can read. The decider is the last live session reached.
    """
    chain = [child.session.id]
    seen = {child.session.id}
    decider: Agent | None = None
    upto = 0
    header: SessionHeader = child.session.header
    while header.delegation_depth > 0 and header.parent_session is not None:
        parent_id = header.parent_session
        if parent_id in seen:
            break
        seen.add(parent_id)
        live = agents.get(parent_id)
        found = live.session.header if live is not None else await stored_header(store, parent_id)
        if found is None:
            break
        chain.append(parent_id)
        if live is not None:
            decider, upto = live, len(chain)
        header = found
    return Lineage(tuple(chain[:upto]), decider)


async def stored_header(store: SessionStore | None, session_id: str) -> SessionHeader | None:
    """A session's header from the session store (live or stored), or ``None``."""
    if store is None:
        return None
    live = store.get(session_id)
    if live is not None:
        return live.header
    try:
        stored = await store.inspect(session_id)
    except Exception:
        return None
    return stored.header


@dataclass(frozen=True, slots=True)
class Routed:
    """What became of a routed question."""

    outcome: ApprovalOutcome | AskFailure
    """The decider's outcome; ``never`` when the decider's policy rejected it without asking;
    or why it could not be asked (no ``approval`` service, no ``agents`` registry, no live
    ancestor on the lineage, or the request raised: ``error``)."""
    decider: str | None = None
    detail: str | None = None
    """For ``error``: what the request raised; for ``answerer-failed``: what the answerer
    did."""

    def as_escalation_outcome(self) -> ApprovalOutcome:
        """What the escalation ladder is answered: ``never`` is a rejection, and a question
        that could not be asked had no channel (the ladder words its own refusals)."""
        if self.outcome is AskFailure.NEVER:
            return ApprovalOutcome.REJECTED
        if isinstance(self.outcome, ApprovalOutcome):
            return self.outcome
        return ApprovalOutcome.UNAVAILABLE


class Router:
    def __init__(self, ctx: Context, config: RootApprovalsConfig) -> None:
        self.ctx = ctx
        self.config = config
        self.guarded = frozenset(config.guarded)

    async def gate(self, call: ToolCall, next_: Next[PreDecision]) -> PreDecision:
        if call.name not in self.guarded:
            return await next_()
        downstream = await next_()
        if not isinstance(downstream, PreDecision):
            return downstream  # the pipeline reports an invalid decision; never route it
        if downstream.kind == "deny":
            return downstream
        agent = call.agent
        arguments = call.arguments()
        if agent is None or agent.session.header.delegation_depth == 0:
            return PreDecision.ask(
                downstream.reason or headline(call.name, arguments, subagent=False)
            )
        routed = await self.route(
            agent,
            tool_name=call.name,
            call_id=call.call_id,
            reason=headline(call.name, arguments),
            arguments=arguments,
            signal=call.signal,
            action=describe_action(call),
        )
        if allows(routed.outcome):
            return PreDecision.allow()
        reason = denial_reason(call.name, routed)
        if routed.outcome is not ApprovalOutcome.CANCELLED and self.config.notify_denials:
            self._notify_parent(
                agent, f"Subagent {agent.session.id}'s {call.name} call was denied: {reason}"
            )
        return PreDecision.deny(reason)

    async def escalation(
        self, request: ApprovalRequest, next_: Next[ApprovalOutcome]
    ) -> ApprovalOutcome:
        """Route a subagent's sandbox escalation to its root (``route_escalations``)."""
        agent = request.agent
        if agent.session.header.delegation_depth == 0:
            return await next_()
        action = dict(request.action or {})
        reason = escalation_headline(action, request.reason)
        routed = await self.route(
            agent,
            tool_name=request.tool_name,
            call_id=request.call_id,
            reason=reason,
            arguments=action,
            signal=request.signal,
            action=request.action,
            target_mode=request.target_mode,
        )
        return routed.as_escalation_outcome()

    async def route(
        self,
        child: HasSession,
        *,
        tool_name: str,
        call_id: str | None,
        reason: str,
        arguments: Mapping[str, object],
        signal: AbortSignal | None,
        action: Mapping[str, JsonValue] | None,
        target_mode: SandboxMode | None = None,
    ) -> Routed:
        """Ask the deepest live ancestor of ``child``; never raises."""
        approval = self.ctx.get(APPROVAL_SERVICE)  # looked up now: a service mounted later counts
        if approval is None:
            return Routed(AskFailure.NO_APPROVAL)
        agents = self.ctx.get(AGENTS_SERVICE)
        if agents is None:
            return Routed(AskFailure.NO_AGENTS)
        lineage = await resolve_lineage(agents, self.ctx.get(SESSIONS_SERVICE), child)
        root = lineage.decider
        if root is None:
            return Routed(AskFailure.BROKEN_LINEAGE)
        request = ApprovalRequest(
            root,
            tool_name,
            call_id=call_id,
            reason=reason,
            signal=signal,
            action=action,
            target_mode=target_mode,
            origin=RoutedOrigin(
                child, call_id, tool_name, arguments_summary(arguments), lineage.ids
            ),
        )
        # Owned by the runtime, and stopped (awaited) once the question is answered.
        watcher = self.ctx.spawn(
            self._notice_if_slow(child, reason), name="root_approvals: slow notice", report=False
        )
        try:
            decided = await approval.decide(request)
        except Exception as err:
            log.warning("routed approval for %s failed: %s", child.session.id, err)
            code = f"{err.code}: " if isinstance(err, TetherError) else ""
            return Routed(AskFailure.ERROR, root.session.id, f"{code}{err}")
        finally:
            await cancel_and_wait(watcher)
        outcome = as_outcome(decided.outcome)
        if decided.failure is not None:
            return Routed(AskFailure.ANSWERER_FAILED, root.session.id, decided.failure.describe())
        if outcome is None:
            # Another approval service answered outside the vocabulary: a failed request, with
            # nothing raised to show.
            return Routed(AskFailure.ERROR, root.session.id)
        if (
            outcome is ApprovalOutcome.REJECTED
            and _policy_of(approval, root) is ApprovalPolicy.NEVER
        ):
            return Routed(AskFailure.NEVER, root.session.id)
        return Routed(outcome, root.session.id)

    async def _notice_if_slow(self, child: HasSession, reason: str) -> None:
        await asyncio.sleep(self.config.blocked_notice_seconds)
        self._notify_parent(
            child,
            f"Subagent {child.session.id} has been waiting for approval for more than "
            f"{self.config.blocked_notice_seconds:g}s: {reason}",
        )

    def on_result(
        self, payload: tuple[ToolCall, ToolResult], next_: Next[PostDecision]
    ) -> Awaitable[PostDecision]:
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

    def _notify_parent(self, child: HasSession, text: str) -> None:
        agents = self.ctx.get(AGENTS_SERVICE)
        parent_id = child.session.header.parent_session
        parent = agents.get(parent_id) if agents is not None and parent_id else None
        if parent is None:
            return
        try:
            parent.inject(text, source=NOTICE_SOURCE)
        except Exception:
            log.exception("could not notify %s", parent_id)


def _policy_of(approval: ApprovalService, agent: HasSession) -> ApprovalPolicy | None:
    try:
        return approval.effective_policy(agent.session)
    except Exception:
        return None


def denial_reason(tool: str, routed: Routed) -> str:
    """The model-facing reason of a routed denial (each ending has its own); a granted question
    has none (``ValueError``)."""
    outcome = routed.outcome
    match outcome:
        case (
            ApprovalOutcome.ALLOWED_ONCE
            | ApprovalOutcome.ALLOWED_FOR_SESSION
            | ApprovalOutcome.ALLOWED_ALWAYS
        ):
            raise ValueError(f'the routed question for "{tool}" was allowed, not denied')
    return outcome_text(outcome, RoutedAsk(tool, routed.decider), detail=routed.detail)


def is_scope_denial(result: ToolResult) -> bool:
    """A sandbox denial, or an approval the child's scope refused."""
    return bool(result.details.get("sandbox_denied")) or is_denial(result.content)


ROUTED_CONTEXT_NAME: Final = "root_approvals:escalation"
ROUTED_CONTEXT_ORDER: Final = 121
ROUTED_ESCALATION_TEXT: Final = (
    "Exception to the approval policy above: in this deployment, a sandbox escalation you "
    "request is sent to the root session's user, who may allow it for that one call. If a "
    "necessary operation was denied by the sandbox, you may retry it once with "
    "sandbox_permissions and a justification; if that is refused, report the limitation."
)


def is_subagent(agent: HasSession) -> bool:
    return bool(agent.session.header.delegation_depth > 0)


def routed_escalation_text(agent: HasSession | None) -> str:
    """Follows the delegation statement (120) for subagents only; roots are unaffected."""
    return ROUTED_ESCALATION_TEXT if agent is not None and is_subagent(agent) else ""


class RootApprovalsPlugin:
    name = "root_approvals"
    requires: tuple[AnyServiceKey, ...] = ()
    config_model = RootApprovalsConfig

    def apply(self, ctx: Context, config: RootApprovalsConfig) -> None:
        router = Router(ctx, config)
        ctx.on(PRE_EXECUTE, router.gate, prepend=True)
        ctx.on(POST_EXECUTE, router.on_result, prepend=True)
        if config.route_escalations:
            ctx.on(ESCALATION_ASK, router.escalation, prepend=True)
            ctx.on(ESCALATION_ROUTED, is_subagent)
            ctx.context(ROUTED_CONTEXT_NAME, ROUTED_CONTEXT_ORDER, routed_escalation_text)


plugin: Final = RootApprovalsPlugin()
