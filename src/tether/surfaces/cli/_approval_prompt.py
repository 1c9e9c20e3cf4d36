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

Nothing in part 2 can erase, rewrite or reorder a line of part 1. Who asks is told the same
way at both terminals (:func:`asker_lines`: the asking child's label and its lineage up to the
root), and both offer the same choices, one key each (:data:`CHOICES`), and the same scopes
for a grant (:mod:`tether.surfaces.cli._grant_choice`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tether.kernel import Context
from tether.kernel._printable import printable
from tether.policy._approval import ApprovalRequest, AskedAction
from tether.policy._errors import InvalidPolicyError
from tether.policy._modes import GRANTING, ApprovalOutcome, SandboxMode
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE


@dataclass(frozen=True, slots=True)
class Choice:
    """One answer a person can give at a terminal, with the one key that gives it."""

    key: str
    """A lower-case letter; its capital gives the same answer."""
    label: str
    outcome: ApprovalOutcome
    default: bool = False
    """Also given by Enter: the safe answer."""

    @property
    def grants(self) -> bool:
        """The answer records a grant, whose scope a second key picks when the question
        offers more than one (:mod:`tether.surfaces.cli._grant_choice`)."""
        return self.outcome in GRANTING

    def shown(self) -> str:
        return f"[{self.key}] {self.label}" + (" (default)" if self.default else "")


CHOICES: Final = (
    Choice("a", "Allow once", ApprovalOutcome.ALLOWED_ONCE),
    Choice("s", "Allow for this session", ApprovalOutcome.ALLOWED_FOR_SESSION),
    Choice("w", "Always allow in this workspace", ApprovalOutcome.ALLOWED_ALWAYS),
    Choice("r", "Reject", ApprovalOutcome.REJECTED, default=True),
)
"""The answers both terminals offer, in the order shown: the one list a new answer is added
to. A question shows those it offers (:func:`offered_choices`): the grants only where the
approval service offers them."""
ENTER: Final = ("\r", "\n")


def offered_choices(request: ApprovalRequest) -> tuple[Choice, ...]:
    """The choices ``request`` offers, in the order shown."""
    outcomes = request.outcomes()
    return tuple(choice for choice in CHOICES if choice.outcome in outcomes)


def choices_text(choices: tuple[Choice, ...]) -> str:
    """``[a] Allow once   [r] Reject (default)``"""
    return "   ".join(choice.shown() for choice in choices)


def choice_for(key: str, choices: tuple[Choice, ...] = CHOICES) -> Choice | None:
    """The choice among ``choices`` a key press makes (its letter in either case; Enter the
    default), or ``None`` for a key that answers nothing."""
    for choice in choices:
        if key.lower() == choice.key or (choice.default and key in ENTER):
            return choice
    return None


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


SessionName = Callable[[str], str]
"""How a terminal names a session in a question: ``root 1a2b3c4d``, ``[label] 5e6f7a8b``."""


def session_name(session_id: str, root_id: str | None, label: str | None) -> str:
    """The root as ``root ID8``; a child by its label (already escaped) and ``ID8``."""
    short = session_id[:8]
    if session_id == root_id:
        return f"root {short}"
    return f"[{label}] {short}" if label and label != short else short


def asker_lines(request: ApprovalRequest, name: SessionName) -> list[str]:
    """Who asks: the routed child with its lineage, else the asking session itself."""
    origin = request.origin
    if origin is not None:
        lineage = " → ".join(name(sid) for sid in origin.lineage)
        depth = origin.child.session.header.delegation_depth
        return [
            f"  asked by: subagent {name(origin.child_session_id)} (depth {depth}), routed to "
            "the root",
            f"  lineage: {lineage}",
        ]
    session = request.agent.session
    header = session.header
    if header.delegation_depth == 0:
        return [f"  asked by: this session {session.id[:8]} (depth 0)"]
    parent = header.parent_session
    return [
        f"  asked by: subagent {name(session.id)} (depth {header.delegation_depth}"
        + (f", parent {name(parent)})" if parent else ")")
    ]


def question_lines(
    request: ApprovalRequest,
    asker: list[str],
    current: SandboxMode | None,
    elsewhere: str | None = None,
) -> list[str]:
    """The whole question: tether's facts (``asker`` says who asks; ``elsewhere``, the
    command that answers it from another terminal), then the agent's text."""
    return [
        f'Approval needed: tool "{printable(request.tool_name)}"',
        mode_line(request, current),
        *asker,
        *([f"  from another terminal: {printable(elsewhere)}"] if elsewhere else []),
        *agent_lines(request),
    ]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


__all__ = [
    "AGENT_FIELDS",
    "CHOICES",
    "ENTER",
    "WRITTEN_BY_AGENT",
    "Choice",
    "SessionName",
    "agent_lines",
    "asker_lines",
    "choice_for",
    "choices_text",
    "mode_line",
    "offered_choices",
    "question_lines",
    "session_mode",
    "session_name",
]
