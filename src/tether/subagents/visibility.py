"""Blocked and denied children, visible up the lineage (behaviour.md §8, issue #1723).

A child waiting on a routed approval question is *blocked*; every ancestor between it and the
root shows that a descendant is waiting. A child's most recent scope denial (a sandbox denial
or a refused approval) is shown on its own row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tether.session import Event

SANDBOX_MARKER = "[sandbox: file access denied"


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
        if event.type != "approval/pending":
            continue
        data = event.data
        question_id = str(data.get("id"))
        if data.get("state") == "pending":
            lineage = data.get("lineage")
            open_questions[question_id] = PendingQuestion(
                question_id,
                str(data.get("child_session")),
                str(data.get("reason", "")),
                tuple(str(x) for x in lineage) if isinstance(lineage, Sequence) else (),
            )
        else:
            open_questions.pop(question_id, None)
    return list(open_questions.values())


def last_denial(events: Sequence[Event]) -> str | None:
    """``denied: <tool> (<reason>)`` for the newest scope denial in ``events``."""
    for event in reversed(events):
        if event.type != "tool/result" or not event.data.get("is_error"):
            continue
        content = str(event.data.get("content", ""))
        if (
            SANDBOX_MARKER in content
            or content.startswith("Error: the user rejected")
            or ("needs the root session" in content)
        ):
            reason = " ".join(content.removeprefix("Error: ").split())
            first = reason.split(" If this ", 1)[0].split(" Escalation is unavailable", 1)[0]
            return f"denied: {event.data.get('name')} ({first[:200]})"
    return None
