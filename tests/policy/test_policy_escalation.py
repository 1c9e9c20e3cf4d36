"""The escalation ladder's functions on their own: the schema it advertises, the parsing of the
paired arguments, each refusal text, the ask and its routing waterfall, and the hint.

The pipeline tests (``tests/tools/test_escalation.py``) drive the same rules through real tool
calls; these pin each function's contract, with a real kernel, approval service and sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from policy_support import ToyAgent, compose, layout, open_turn

from tether._signals import AbortSignal
from tether.kernel._plugin import Kernel
from tether.policy._approval import ApprovalRequest, register_answerer
from tether.policy._escalation import (
    ESCALATION_ASK,
    ESCALATION_ROUTED,
    EscalationRefused,
    EscalationRequest,
    InvalidEscalation,
    denial_hint,
    escalation_hint,
    escalation_noun,
    grant_escalation,
    take_escalation,
    with_escalation_parameters,
)
from tether.policy._modes import ApprovalOutcome, SandboxMode
from tether.policy._sandbox_policy import SandboxExecutionPolicy
from tether.session import Session, SessionHeader, SessionStore

RO, WW, DFA = SandboxMode.READ_ONLY, SandboxMode.WORKSPACE_WRITE, SandboxMode.DANGER_FULL_ACCESS
POLICY = SandboxExecutionPolicy(RO, "/work/space", "s1")
WANTED = EscalationRequest(WW, "needs the file")
ACTION = {"tool": "write", "path": "out.txt"}

ASK_HINT = (
    "If this operation is necessary, retry this exact operation once with sandbox_permissions: "
    '"workspace-write" and a justification; the user will be asked to approve it.'
)
NEVER_HINT = (
    "Escalation is unavailable in this session (approvals are disabled). Do not retry this "
    "operation with sandbox_permissions; report that it needs wider access than this "
    "session's scope allows."
)


@dataclass
class Call:
    """A call as the ladder sees it (the pipeline passes its ``ToolCall``)."""

    agent: ToyAgent | None
    call_id: str = "c1"
    name: str = "write"
    signal: AbortSignal = field(default_factory=AbortSignal)


def kernel_with(*, policy: str | None = "ask", answer: object = None) -> Kernel:
    """The approval service (unless ``policy`` is None) with an answerer giving ``answer``."""
    kernel = compose(store=SessionStore(), approval=None if policy is None else {"policy": policy})
    if answer is not None:
        register_answerer(kernel.ctx, lambda request, next_: answer)
    return kernel


def agent_in_turn(session_id: str = "s1") -> ToyAgent:
    agent = ToyAgent(Session(SessionHeader(session_id, 0)))
    open_turn(agent.session)
    return agent


async def grant(kernel: Kernel, call: Call, **overrides: Any) -> object:
    options: dict[str, Any] = {"policy": POLICY, "noun": "operation", "action": ACTION}
    return await grant_escalation(
        kernel.ctx, call, overrides.pop("wanted", WANTED), **{**options, **overrides}
    )


# -- which tools, and the schema ---------------------------------------------------------------
class Commands:
    escalation_noun = "command"


class Operations:
    escalation_noun = "operation"


class Other:
    escalation_noun = "action"


def test_a_tool_is_on_the_ladder_by_its_noun() -> None:
    assert escalation_noun(Commands()) == "command"
    assert escalation_noun(Operations()) == "operation"
    assert escalation_noun(Other()) is None
    assert escalation_noun(object()) is None


def test_the_paired_parameters_are_added_to_a_copy_of_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    widened = with_escalation_parameters(schema)
    assert widened == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "sandbox_permissions": {
                "type": "string",
                "enum": ["workspace-write", "danger-full-access"],
                "description": "Run this one call under a wider sandbox mode; the user is asked "
                "to approve. Give it only after a sandbox denial, together with justification.",
            },
            "justification": {
                "type": "string",
                "description": "Why this call needs the wider mode (shown to the approver).",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    assert schema["properties"] == {"path": {"type": "string"}}


# -- parsing -----------------------------------------------------------------------------------
def test_a_well_formed_pair_is_taken_out_of_the_arguments() -> None:
    arguments = {"path": "x", "sandbox_permissions": "danger-full-access", "justification": "why"}
    assert take_escalation(arguments) == ({"path": "x"}, EscalationRequest(DFA, "why"))
    assert set(arguments) == {"path", "sandbox_permissions", "justification"}  # not consumed


@pytest.mark.parametrize(
    "arguments",
    [{"path": "x"}, {"path": "x", "sandbox_permissions": None, "justification": None}],
)
def test_no_pair_or_a_null_pair_is_no_request(arguments: dict[str, object]) -> None:
    assert take_escalation(arguments) == ({"path": "x"}, None)


@pytest.mark.parametrize(
    ("pair", "problem"),
    [
        (
            {"sandbox_permissions": "workspace-write"},
            "sandbox_permissions and justification must be given together",
        ),
        (
            {"sandbox_permissions": "workspace-write", "justification": None},
            "sandbox_permissions and justification must be given together",
        ),
        ({"justification": "why"}, "sandbox_permissions and justification must be given together"),
        (
            {"sandbox_permissions": "read-only", "justification": "why"},
            "sandbox_permissions must be one of workspace-write, danger-full-access",
        ),
        (
            {"sandbox_permissions": 2, "justification": "why"},
            "sandbox_permissions must be one of workspace-write, danger-full-access",
        ),
        (
            {"sandbox_permissions": "workspace-write", "justification": " \n"},
            "justification must be a non-empty string",
        ),
        (
            {"sandbox_permissions": "workspace-write", "justification": ["why"]},
            "justification must be a non-empty string",
        ),
    ],
)
def test_a_malformed_pair_says_what_is_wrong(pair: dict[str, object], problem: str) -> None:
    assert take_escalation({"path": "x", **pair}) == InvalidEscalation(problem)


# -- refusals before anyone is asked -----------------------------------------------------------
async def test_without_a_sandbox_policy_service_it_is_refused() -> None:
    kernel = kernel_with(answer="allowed-once")
    agent = agent_in_turn()
    refused = await grant(kernel, Call(agent), policy=None)
    assert refused == EscalationRefused("sandbox escalation requires a sandbox policy service")
    assert layout(agent.session, 1) == []


@pytest.mark.parametrize(
    ("current", "target"), [(WW, WW), (WW, SandboxMode.READ_ONLY), (DFA, WW), (DFA, DFA)]
)
async def test_a_target_not_strictly_wider_is_refused_without_asking(
    current: SandboxMode, target: SandboxMode
) -> None:
    kernel = kernel_with(answer="allowed-once")
    agent = agent_in_turn()
    refused = await grant(
        kernel,
        Call(agent),
        policy=SandboxExecutionPolicy(current, "/w"),
        wanted=EscalationRequest(target, "why"),
    )
    assert refused == EscalationRefused(
        f'sandbox escalation to "{target.value}" is not strictly wider than this call\'s '
        f'current "{current.value}" mode'
    )
    assert layout(agent.session, 1) == []


async def test_without_an_approval_service_it_is_refused() -> None:
    refused = await grant(kernel_with(policy=None), Call(agent_in_turn()))
    assert refused == EscalationRefused(
        'sandbox escalation to "workspace-write" requires approval, but no approval service is '
        "composed"
    )


async def test_without_an_agent_it_is_refused() -> None:
    refused = await grant(kernel_with(answer="allowed-once"), Call(None))
    assert refused == EscalationRefused(
        'sandbox escalation to "workspace-write" requires approval, but the call has no agent '
        "to route it through"
    )


# -- the ask -----------------------------------------------------------------------------------
async def test_allowed_once_widens_the_policy_for_this_call_and_audits_the_ask() -> None:
    seen: list[ApprovalRequest] = []

    def answerer(request: ApprovalRequest, next_: object) -> str:
        seen.append(request)
        return "allowed-once"

    kernel = kernel_with()
    register_answerer(kernel.ctx, answerer)
    agent = agent_in_turn()
    call = Call(agent)
    granted = await grant(kernel, call)
    assert granted == SandboxExecutionPolicy(WW, "/work/space", "s1")
    [request] = seen
    assert (request.agent, request.tool_name, request.call_id, request.signal) == (
        agent,
        "write",
        "c1",
        call.signal,
    )
    assert request.reason == "escalate sandbox to workspace-write: needs the file"
    assert request.action == {
        "tool": "write",
        "path": "out.txt",
        "sandbox_permissions": "workspace-write",
        "justification": "needs the file",
    }
    assert [kind for kind, _ in layout(agent.session, 1)] == ["approval/asked", "approval/decided"]
    assert layout(agent.session, 2)[0][1]["outcome"] == "allowed-once"  # type: ignore[index]


@pytest.mark.parametrize(
    ("answer", "refused"),
    [
        (
            "rejected",
            EscalationRefused('the user rejected escalating this operation to "workspace-write"'),
        ),
        (
            "cancelled",
            EscalationRefused('approval for escalating to "workspace-write" was cancelled', True),
        ),
        (
            "unavailable",
            EscalationRefused(
                'sandbox escalation to "workspace-write" requires approval, but no approval '
                "channel is available"
            ),
        ),
    ],
)
async def test_every_other_outcome_is_refused_with_its_text(
    answer: str, refused: EscalationRefused
) -> None:
    assert await grant(kernel_with(answer=answer), Call(agent_in_turn())) == refused


async def test_the_never_policy_rejects_before_any_answerer() -> None:
    asked: list[object] = []
    kernel = kernel_with(policy="never")
    register_answerer(kernel.ctx, lambda request, next_: asked.append(request) or "allowed-once")
    refused = await grant(kernel, Call(agent_in_turn()), noun="command")
    assert refused == EscalationRefused(
        'the user rejected escalating this command to "workspace-write"'
    )
    assert asked == []


async def test_a_routing_listener_answers_for_its_agent_and_the_service_is_not_asked() -> None:
    kernel = kernel_with(answer="rejected")
    agent = agent_in_turn()
    routed: list[ApprovalRequest] = []

    def route(request: ApprovalRequest, next_: object) -> ApprovalOutcome:
        routed.append(request)
        return ApprovalOutcome.ALLOWED_ONCE

    kernel.ctx.on(ESCALATION_ASK, route, scope=agent)
    assert await grant(kernel, Call(agent)) == SandboxExecutionPolicy(WW, "/work/space", "s1")
    assert [r.agent for r in routed] == [agent]
    assert layout(agent.session, 1) == []  # the listener answered: this service wrote nothing
    # Another agent's escalation falls through to its own service.
    other = agent_in_turn("s2")
    assert await grant(kernel, Call(other)) == EscalationRefused(
        'the user rejected escalating this operation to "workspace-write"'
    )
    assert len(routed) == 1


@pytest.mark.parametrize("rogue", ["allowed-twice", None, 1])
async def test_a_routing_reply_outside_the_vocabulary_grants_nothing(rogue: object) -> None:
    kernel = kernel_with(answer="allowed-once")
    kernel.ctx.on(ESCALATION_ASK, lambda request, next_: rogue)
    assert await grant(kernel, Call(agent_in_turn())) == EscalationRefused(
        'sandbox escalation to "workspace-write" requires approval, but no approval channel is '
        "available"
    )


# -- the hint ----------------------------------------------------------------------------------
def test_the_hint_names_the_next_rung_or_says_escalation_is_unavailable() -> None:
    assert denial_hint("operation", RO, "ask") == ASK_HINT
    assert denial_hint("command", WW, "ask") == (
        "If this command is necessary, retry this exact command once with sandbox_permissions: "
        '"danger-full-access" and a justification; the user will be asked to approve it.'
    )
    assert denial_hint("operation", DFA, "ask") == ""
    assert denial_hint("operation", RO, "never") == NEVER_HINT
    assert denial_hint("operation", DFA, "never") == NEVER_HINT


def test_the_hint_follows_the_agents_effective_policy() -> None:
    kernel = kernel_with()
    agent = agent_in_turn()
    assert escalation_hint(kernel.ctx, "operation", RO, agent) == ASK_HINT
    agent.session.append("approval/policy", {"policy": "never"})
    assert escalation_hint(kernel.ctx, "operation", RO, agent) == NEVER_HINT


def test_with_nobody_to_ask_the_hint_reads_as_never() -> None:
    assert escalation_hint(kernel_with(policy=None).ctx, "operation", RO, agent_in_turn()) == (
        NEVER_HINT
    )
    assert escalation_hint(kernel_with().ctx, "operation", RO, None) == NEVER_HINT


def test_a_routed_agent_is_told_how_to_escalate_despite_its_pin() -> None:
    kernel = kernel_with(policy="never")
    routed, pinned = agent_in_turn("routed"), agent_in_turn("pinned")
    kernel.ctx.on(ESCALATION_ROUTED, lambda agent: agent is routed)
    assert escalation_hint(kernel.ctx, "operation", RO, routed) == ASK_HINT
    assert escalation_hint(kernel.ctx, "operation", RO, pinned) == NEVER_HINT
