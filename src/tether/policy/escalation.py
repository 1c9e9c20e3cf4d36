"""The escalation ladder: the one home of how a call asks to run wider, once.

A tool that supports it takes two paired arguments, ``sandbox_permissions`` (a mode from
:data:`ESCALATION_TARGETS`) and ``justification``. :func:`approve_escalation` decides, in this
order, with the reference's fail-closed texts (behaviour.md §2.4):

1. the target is not strictly wider than the call's current mode → refused, nobody is asked;
2. no approval service is composed → refused;
3. the call has no agent → refused;
4. ``approval.request`` with reason ``escalate sandbox to <mode>: <justification>``;
   and the target and justification added to the request's ``action``;
5. ``allowed-once`` → a policy with the granted mode, for **this call only** (nothing is
   stored); every other outcome → refused with its own text.

Escalation never goes through ``tools/pre-execute``: it is asked for the executing agent, so a
delegated child's ``never`` pin rejects it before any answerer runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from tether.policy.approval import ApprovalRequest
from tether.policy.modes import ApprovalPolicy, SandboxMode, is_strictly_wider, narrowest_wider_mode
from tether.policy.protocols import HasSession
from tether.policy.sandbox_policy import SandboxExecutionPolicy
from tether.session import JsonValue
from tether.signals import AbortSignal

EffectNoun = Literal["command", "operation"]
"""How a denial and a rejection name the action: ``command`` for bash, ``operation`` for file
tools."""


@dataclass(frozen=True, slots=True)
class EscalationRefused:
    reason: str
    cancelled: bool = False


def not_wider_text(target: str, current: str) -> str:
    return (
        f'sandbox escalation to "{target}" is not strictly wider than this call\'s current '
        f'"{current}" mode'
    )


async def approve_escalation(
    *,
    approval: Any,
    agent: HasSession | None,
    policy: SandboxExecutionPolicy,
    target: SandboxMode | str,
    justification: str,
    tool_name: str,
    call_id: str | None,
    noun: EffectNoun,
    signal: AbortSignal | None = None,
    action: Mapping[str, JsonValue] | None = None,
    ask: Callable[[ApprovalRequest], Awaitable[object]] | None = None,
) -> SandboxExecutionPolicy | EscalationRefused:
    """The granted one-call policy, or why the escalation was refused.

    ``ask`` replaces ``approval.request`` for step 4 (the pipeline passes one that lets a
    routing plugin send the question to the root; by default the executing agent is asked).
    """
    mode = SandboxMode(target)
    if not is_strictly_wider(mode, policy.mode):
        return EscalationRefused(not_wider_text(mode.value, policy.mode.value))
    prefix = f'sandbox escalation to "{mode.value}" requires approval, but'
    if approval is None:
        return EscalationRefused(f"{prefix} no approval service is composed")
    if agent is None:
        return EscalationRefused(f"{prefix} the call has no agent to route it through")
    request = ApprovalRequest(
        agent,
        tool_name,
        call_id=call_id,
        reason=f"escalate sandbox to {mode.value}: {justification}",
        signal=signal,
        # Answerers get the escalation itself, exact, not only the text that embeds it.
        action={
            **(action or {}),
            "sandbox_permissions": mode.value,
            "justification": justification,
        },
    )
    outcome = await (ask or approval.request)(request)
    if outcome == "allowed-once":
        return replace(policy, mode=mode)
    if outcome == "rejected":
        return EscalationRefused(f'the user rejected escalating this {noun} to "{mode.value}"')
    if outcome == "cancelled":
        return EscalationRefused(f'approval for escalating to "{mode.value}" was cancelled', True)
    return EscalationRefused(f"{prefix} no approval channel is available")


def denial_hint(noun: EffectNoun, current: SandboxMode | str, policy: ApprovalPolicy | str) -> str:
    """Guidance appended to a sandbox denial.

    Departs from the reference on purpose (docs/decisions/0009): under approval policy
    ``never`` the hint does not invite an escalation that would be rejected automatically.
    """
    if ApprovalPolicy(policy) is ApprovalPolicy.NEVER:
        return (
            f"Escalation is unavailable in this session (approvals are disabled). Do not retry "
            f"this {noun} with sandbox_permissions; report that it needs wider access than "
            f"this session's scope allows."
        )
    wider = narrowest_wider_mode(current)
    if wider is None:
        return ""
    return (
        f"If this {noun} is necessary, retry this exact {noun} once with "
        f'sandbox_permissions: "{wider.value}" and a justification; the user will be asked '
        f"to approve it."
    )
