"""Blocked and denied children, visible up the lineage.

A child waiting on a routed approval question is *blocked*; every ancestor between it and the
root shows that a descendant is waiting. A child's most recent scope denial (a sandbox denial
or a refused approval) is shown on its own row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from tether.agent._events import ToolResulted
from tether.policy._errors import PolicyError
from tether.policy._events import ApprovalPendingOpened, read_approval_pending
from tether.session import Event

SANDBOX_MARKER = "[sandbox: file access denied"
DENIAL_MARKERS: Final = (
    SANDBOX_MARKER,
    # the child's own (pinned ``never``) policy, or an escalation it was refused
    "the user rejected",
    # root_approvals: the root's user said no, or routing failed closed
    "the root session's user rejected",
    "needs the root session's approval",
    # an ask with no answerer (a child whose policy was switched to ``ask``)
    "requires approval, but",
)
"""Phrases that make an error ``tool/result`` a scope denial. ``tool/result`` does not log a
result's details, so the log can only be read by its text; a cancelled call is not a denial."""


@dataclass(frozen=True, slots=True)
class PendingQuestion:
    id: str
    child_session: str
    headline: str
    lineage: tuple[str, ...]


def blocked_labels(pending: Iterable[PendingQuestion]) -> dict[str, str]:
    """Session id → ``blocked: …`` text, for the asking child and its non-root ancestors."""
    labels: dict[str, str] = {}
    for question in pending:
        for index, session_id in enumerate(question.lineage[:-1] or question.lineage):
            if session_id in labels:
                continue
            if index == 0:
                labels[session_id] = f"blocked: waiting for approval ({question.headline})"
            else:
                labels[session_id] = (
                    f"blocked: descendant {question.child_session} is waiting for approval "
                    f"({question.headline})"
                )
    return labels


def pending_from_log(events: Sequence[Event]) -> list[PendingQuestion]:
    """Routed questions recorded on a root's log that have no decision yet."""
    open_questions: dict[str, PendingQuestion] = {}
    for event in events:
        if event.type != ApprovalPendingOpened.TYPE:
            continue
        try:
            record = read_approval_pending(event.data)
        except PolicyError:
            # A view, not a fold: a record it cannot read shows no question (resume and the
            # approval service read the log strictly).
            continue
        if isinstance(record, ApprovalPendingOpened):
            open_questions[record.id] = PendingQuestion(
                record.id, record.child_session, record.reason, record.lineage
            )
        else:
            open_questions.pop(record.id, None)
    return list(open_questions.values())


def is_denial(content: str) -> bool:
    """Whether an error result's ``content`` says the child's scope refused the action."""
    return content.startswith("Error: ") and any(m in content for m in DENIAL_MARKERS)


def denial_label(tool: str, content: str) -> str:
    """``denied: <tool> (<reason>)``: the first line of reasoning, without the retry hint."""
    reason = " ".join(content.removeprefix("Error: ").split())
    first = reason.split(" If this ", 1)[0].split(" Escalation is unavailable", 1)[0]
    return f"denied: {tool} ({first[:200]})"


def last_denial(events: Sequence[Event]) -> str | None:
    """``denied: <tool> (<reason>)`` for the newest scope denial in ``events``."""
    for event in reversed(events):
        if event.type != ToolResulted.TYPE:
            continue
        result = ToolResulted.parse(event.data)
        if result.is_error and is_denial(result.content):
            return denial_label(result.name, result.content)
    return None
