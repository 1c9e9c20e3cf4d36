"""The escalation ladder: the one home of how a call asks to run under a wider sandbox mode, once.

A tool takes part by declaring ``escalation_noun`` (:data:`EffectNoun`); the tool pipeline
(``tools/_pipeline.py``) offers the ladder only while a confining sandbox backend is mounted,
and calls each step here at its place in a call
(``docs/decisions/0033-escalation-ladder-in-the-policy-layer.md`` says why it lives here):

1. :func:`with_escalation_parameters` advertises two paired arguments in the tool's schema:
   ``sandbox_permissions`` (a mode of :data:`ESCALATION_TARGETS`) and ``justification``;
2. :func:`take_escalation` takes them out of a call's arguments before the tool's own model
   validates the rest: both or neither, a listed mode, a non-empty justification;
3. :func:`grant_escalation`, after the call's guards, decides in this order:

   a. no sandbox policy service → refused;
   b. the target is not strictly wider than the call's current mode → refused, nobody asked;
   c. no approval service, or no agent → refused;
   d. an :class:`~tether.policy._approval.ApprovalRequest` with reason ``escalate sandbox to
      <mode>: <justification>`` (the target and justification also added to its ``action``),
      through the :data:`ESCALATION_ASK` waterfall, whose fallback is the executing
      agent's approval service;
   e. an outcome that allows → the call's policy with the granted mode, for **this call
      only** (a grant the answer made lets later escalations its scope covers skip the ask,
      never widens a call by itself); every other ending → refused, worded by
      :func:`~tether.policy._outcome_text.outcome_text`;

4. :func:`escalation_hint` is what a sandbox denial of such a call appends.

Escalation never goes through ``tools/pre-execute``: it is asked for the executing agent, so a
delegated child's ``never`` pin rejects it before any answerer runs, unless a plugin routes it
(``plugins/_root_approvals.py``, opt-in).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final, Protocol

from tether._signals import AbortSignal
from tether.kernel import Context, Gather, Waterfall
from tether.policy._approval import APPROVAL_SERVICE, ApprovalRequest
from tether.policy._events import ApprovalDecided
from tether.policy._modes import (
    ESCALATION_TARGETS,
    ApprovalOutcome,
    ApprovalPolicy,
    AskFailure,
    EffectNoun,
    SandboxMode,
    as_outcome,
    is_strictly_wider,
    narrowest_wider_mode,
)
from tether.policy._outcome_text import EscalationAsk, outcome_text, rule_refusal_text
from tether.policy._protocols import HasSession
from tether.policy._sandbox_policy import SandboxExecutionPolicy
from tether.session import JsonValue

PERMISSIONS_ARGUMENT: Final = "sandbox_permissions"
JUSTIFICATION_ARGUMENT: Final = "justification"

ESCALATION_ASK: Final = Waterfall[ApprovalRequest, ApprovalOutcome]("sandbox/escalation-ask")
"""Waterfall over the :class:`ApprovalRequest` of an escalation, answering an
:class:`ApprovalOutcome`; its fallback is the executing agent's approval service. A routing
plugin answers it for the agents whose escalations it sends elsewhere."""
ESCALATION_ROUTED: Final = Gather[HasSession, bool]("sandbox/escalation-routed")
"""Gather over an agent: a listener returns True when a plugin routes that agent's escalations
elsewhere (so a ``never``-pinned agent is still told how to escalate)."""

_NO_POLICY_SERVICE: Final = "sandbox escalation requires a sandbox policy service"


@dataclass(frozen=True, slots=True)
class EscalationRequest:
    """A call's well-formed paired arguments."""

    target: SandboxMode
    justification: str


@dataclass(frozen=True, slots=True)
class InvalidEscalation:
    """Paired arguments that do not make a request: what is wrong with them."""

    problem: str


@dataclass(frozen=True, slots=True)
class EscalationRefused:
    """Why the ladder did not grant; ``cancelled`` when the ask itself was cancelled."""

    reason: str
    cancelled: bool = False


class EscalatingCall(Protocol):
    """The call as the ladder sees it (a tool call is one)."""

    @property
    def call_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def agent(self) -> HasSession | None: ...
    @property
    def signal(self) -> AbortSignal: ...


def escalation_noun(tool: object) -> EffectNoun | None:
    """The noun of a tool that takes part in the ladder, else ``None``."""
    noun: object = getattr(tool, "escalation_noun", None)
    if noun == "command":
        return "command"
    if noun == "operation":
        return "operation"
    return None


def with_escalation_parameters(schema: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """``schema`` (a tool's JSON schema) with the paired parameters added; the argument is not
    changed (the pipeline caches it)."""
    own = schema.get("properties")
    properties: dict[str, JsonValue] = dict(own) if isinstance(own, Mapping) else {}
    properties[PERMISSIONS_ARGUMENT] = {
        "type": "string",
        "enum": [mode.value for mode in ESCALATION_TARGETS],
        "description": "Run this one call under a wider sandbox mode; the user is asked "
        "to approve. Give it only after a sandbox denial, together with justification.",
    }
    properties[JUSTIFICATION_ARGUMENT] = {
        "type": "string",
        "description": "Why this call needs the wider mode (shown to the approver).",
    }
    return {**schema, "properties": properties}


def take_escalation(
    arguments: Mapping[str, JsonValue],
) -> tuple[dict[str, JsonValue], EscalationRequest | None] | InvalidEscalation:
    """The arguments without the paired ones, and the request they make (``None``: neither was
    given); or what is wrong with them. A pair given as ``null`` counts as not given."""
    rest = dict(arguments)
    target = rest.pop(PERMISSIONS_ARGUMENT, None)
    justification = rest.pop(JUSTIFICATION_ARGUMENT, None)
    if target is None and justification is None:
        return rest, None
    if target is None or justification is None:
        return InvalidEscalation(
            f"{PERMISSIONS_ARGUMENT} and {JUSTIFICATION_ARGUMENT} must be given together"
        )
    mode = next((mode for mode in ESCALATION_TARGETS if mode.value == target), None)
    if mode is None:
        allowed = ", ".join(mode.value for mode in ESCALATION_TARGETS)
        return InvalidEscalation(f"{PERMISSIONS_ARGUMENT} must be one of {allowed}")
    if not isinstance(justification, str) or not justification.strip():
        return InvalidEscalation(f"{JUSTIFICATION_ARGUMENT} must be a non-empty string")
    return rest, EscalationRequest(mode, justification)


def _not_wider(target: SandboxMode, current: SandboxMode) -> str:
    return (
        f'sandbox escalation to "{target.value}" is not strictly wider than this call\'s '
        f'current "{current.value}" mode'
    )


async def grant_escalation(
    ctx: Context,
    call: EscalatingCall,
    wanted: EscalationRequest,
    *,
    policy: SandboxExecutionPolicy | None,
    noun: EffectNoun,
    action: Mapping[str, JsonValue],
) -> SandboxExecutionPolicy | EscalationRefused:
    """The policy ``call`` runs under when its escalation is granted, or why it was refused
    (steps 3a-e of the module docstring). ``policy`` is the call's resolved policy (``None``:
    no sandbox policy service); ``action`` is what answerers are shown of the call."""
    if policy is None:
        return EscalationRefused(_NO_POLICY_SERVICE)
    mode = wanted.target
    if not is_strictly_wider(mode, policy.mode):
        return EscalationRefused(_not_wider(mode, policy.mode))
    asked = EscalationAsk(mode, noun)
    approval = ctx.get(APPROVAL_SERVICE)
    if approval is None:
        return EscalationRefused(outcome_text(AskFailure.NO_APPROVAL, asked))
    agent = call.agent
    if agent is None:
        return EscalationRefused(outcome_text(AskFailure.NO_AGENT, asked))
    request = ApprovalRequest(
        agent,
        call.name,
        call_id=call.call_id,
        reason=f"escalate sandbox to {mode.value}: {wanted.justification}",
        signal=call.signal,
        # Answerers get the escalation itself, exact, not only the text that embeds it.
        action={
            **action,
            PERMISSIONS_ARGUMENT: mode.value,
            JUSTIFICATION_ARGUMENT: wanted.justification,
        },
        target_mode=mode,
    )
    decided: list[ApprovalDecided] = []

    async def ask_here() -> ApprovalOutcome:
        # Kept, so a refusal can say how the configured answerer failed.
        decided.append(await approval.decide(request))
        return decided[-1].outcome

    answer = await ctx.waterfall(ESCALATION_ASK, request, ask_here, scope=agent)
    # A routing listener's reply outside the vocabulary grants nothing and names no channel.
    outcome = as_outcome(answer) or ApprovalOutcome.UNAVAILABLE
    match outcome:
        case (
            ApprovalOutcome.ALLOWED_ONCE
            | ApprovalOutcome.ALLOWED_FOR_SESSION
            | ApprovalOutcome.ALLOWED_ALWAYS
        ):
            return replace(policy, mode=mode)
    rule = decided[-1].rule if decided else None
    if outcome is ApprovalOutcome.REJECTED and rule is not None:
        return EscalationRefused(rule_refusal_text(asked, rule))
    failure = decided[-1].failure if decided else None
    if outcome is ApprovalOutcome.UNAVAILABLE and failure is not None:
        return EscalationRefused(
            outcome_text(AskFailure.ANSWERER_FAILED, asked, detail=failure.describe())
        )
    return EscalationRefused(
        outcome_text(outcome, asked), cancelled=outcome is ApprovalOutcome.CANCELLED
    )


def escalation_hint(
    ctx: Context, noun: EffectNoun, current: SandboxMode, agent: HasSession | None
) -> str:
    """The hint a sandbox denial of a call under ``current`` appends (``""``: none), following
    the agent's effective approval policy. With no approval service or no agent nobody could be
    asked, which reads as ``never``; a pinned agent whose escalations a plugin routes
    elsewhere (:data:`ESCALATION_ROUTED`) may still ask, which reads as ``ask``."""
    approval = ctx.get(APPROVAL_SERVICE)
    effective = (
        approval.effective_policy(agent.session)
        if approval is not None and agent is not None
        else ApprovalPolicy.NEVER
    )
    if effective is ApprovalPolicy.NEVER and agent is not None:
        routed: list[bool] = ctx.collect(ESCALATION_ROUTED, agent, scope=agent)
        if any(routed):
            effective = ApprovalPolicy.ASK
    return denial_hint(noun, current, effective)


def denial_hint(noun: EffectNoun, current: SandboxMode | str, policy: ApprovalPolicy | str) -> str:
    """The hint for a call under mode ``current`` in a session whose policy is ``policy``.

    Departs from the reference on purpose (docs/decisions/0009): under approval policy
    ``never`` the hint does not invite an escalation that would be rejected automatically.
    """
    if ApprovalPolicy(policy) is ApprovalPolicy.NEVER:
        return (
            f"Escalation is unavailable in this session (approvals are disabled). Do not retry "
            f"this {noun} with {PERMISSIONS_ARGUMENT}; report that it needs wider access than "
            f"this session's scope allows."
        )
    wider = narrowest_wider_mode(current)
    if wider is None:
        return ""
    return (
        f"If this {noun} is necessary, retry this exact {noun} once with "
        f'{PERMISSIONS_ARGUMENT}: "{wider.value}" and a justification; the user will be asked '
        f"to approve it."
    )


__all__ = [
    "ESCALATION_ASK",
    "ESCALATION_ROUTED",
    "JUSTIFICATION_ARGUMENT",
    "PERMISSIONS_ARGUMENT",
    "EffectNoun",
    "EscalatingCall",
    "EscalationRefused",
    "EscalationRequest",
    "InvalidEscalation",
    "denial_hint",
    "escalation_hint",
    "escalation_noun",
    "grant_escalation",
    "take_escalation",
    "with_escalation_parameters",
]
