"""The approval question a person answers at a terminal, for ``tether run``'s terminal answerer
and ``tether chat``'s prompt alike.

A model or a workspace file controls much of an ask (the command, the justification, a child's
description, a hook's reason), and a terminal obeys control characters. So the question is laid
out in two parts:

1. what tether knows from the ask's structure, each fact on its own line: the tool, the sandbox
   mode the action would run under (an escalation's target mode, validated by the escalation
   ladder, or the session's own mode), and who asks;
2. what the agent wrote, under a label that says so, each value on one line, escaped
   (:func:`tether.kernel._printable.printable`) and never cut: the reason (left out for an
   escalation, where it only repeats the justification), a description, a justification, and
   last the path and the command.

Nothing in part 2 can erase, rewrite or reorder a line of part 1.
"""

from __future__ import annotations

from typing import Final

from tether.kernel import Context
from tether.kernel._printable import printable
from tether.policy._approval import ApprovalRequest, AskedAction
from tether.policy._errors import InvalidPolicyError
from tether.policy._modes import SandboxMode
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE

WRITTEN_BY_AGENT: Final = "  written by the agent (escaped, in full):"
AGENT_FIELDS: Final = ("description", "justification")
"""Fields of an ask's action that the agent wrote, shown before its path and command."""


def session_mode(ctx: Context, request: ApprovalRequest) -> SandboxMode | None:
    """The mode the asking session's commands run under now, or ``None`` when no sandbox
    policy service is composed (or the session's mode cannot be read)."""
    service = ctx.get(SANDBOX_POLICY_SERVICE)
    if service is None:
        return None
    asking = request.origin.child if request.origin is not None else request.agent
    try:
        return service.resolve(asking.session).mode
    except InvalidPolicyError:
        return None


def mode_line(request: ApprovalRequest, current: SandboxMode | None) -> str:
    """``  sandbox: escalate from read-only to danger-full-access, for this call only``, or
    ``  sandbox: workspace-write (the session's mode, unchanged)``."""
    target = request.target_mode
    if target is not None:
        origin = f"from {current} " if current is not None else ""
        return f"  sandbox: escalate {origin}to {target}, for this call only"
    if current is None:
        return "  sandbox: no sandbox policy in this run"
    return f"  sandbox: {current} (the session's mode, unchanged)"


def agent_lines(request: ApprovalRequest) -> list[str]:
    """Part 2: what the agent wrote, labelled, escaped, in full; the path and command last."""
    action = request.action or {}
    asked = AskedAction.of(request)
    # An escalation's reason is tether's sentence around the justification shown below.
    reason = request.reason if request.target_mode is None else None
    values: list[tuple[str, str | None]] = [
        ("reason", reason),
        *((key, _text(action.get(key))) for key in AGENT_FIELDS),
        ("path", asked.path),
        ("command", asked.command),  # last: nothing after it can be taken for it
    ]
    lines = [f"  {key}: {printable(value)}" for key, value in values if value is not None]
    return [WRITTEN_BY_AGENT, *lines] if lines else []


def question_lines(
    request: ApprovalRequest, asker: list[str], current: SandboxMode | None
) -> list[str]:
    """The whole question: tether's facts (``asker`` says who asks), then the agent's text."""
    return [
        f'Approval needed: tool "{printable(request.tool_name)}"',
        mode_line(request, current),
        *asker,
        *agent_lines(request),
    ]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


__all__ = [
    "AGENT_FIELDS",
    "WRITTEN_BY_AGENT",
    "agent_lines",
    "mode_line",
    "question_lines",
    "session_mode",
]
