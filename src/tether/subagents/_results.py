"""What a finished child reports back: output, stop reason, and a sanitized diagnostic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from tether.agent._events import AssistantMessage, TurnClosed
from tether.session import Event

SubagentStopReason = Literal["completed", "aborted", "error", "max-tokens", "max-steps", "refusal"]
"""How a child run ended, as the parent sees it (``refusal``: a pre-step gate declined)."""

MAX_DIAGNOSTIC_BYTES: Final = 4096


@dataclass(frozen=True, slots=True)
class SubagentResult:
    child_id: str
    stop_reason: SubagentStopReason
    output: str
    diagnostic: str | None = None


def map_stop_reason(turn_reason: object, *, cancelled: bool) -> SubagentStopReason:
    mapping: dict[object, SubagentStopReason] = {
        "completed": "completed",
        "max-tokens": "max-tokens",
        "max-steps": "max-steps",
        "aborted": "aborted",
        "blocked": "refusal",
    }
    reason = mapping.get(turn_reason, "error")
    if cancelled and reason != "completed":
        return "aborted"
    return reason


def sanitize(text: str) -> str:
    """One line, printable, at most 4 KiB of UTF-8."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    data = flat.encode()[:MAX_DIAGNOSTIC_BYTES]
    return data.decode("utf-8", "ignore")


def result_from_events(
    child_id: str, events: Sequence[Event], *, cancelled: bool = False
) -> SubagentResult:
    """Read the result from the child's own events (those after its seed)."""
    output = ""
    turn_end: TurnClosed | None = None
    for event in events:
        if event.type == AssistantMessage.TYPE:
            output = AssistantMessage.parse(event.data).content or output
        elif event.type == TurnClosed.TYPE:
            # A turn/end this reader cannot read ends the run as an error, as a missing one.
            turn_end = TurnClosed.parse(event.data)
    reason = map_stop_reason(turn_end.reason if turn_end else None, cancelled=cancelled)
    diagnostic = None
    if reason != "completed":
        detail = (turn_end.error or turn_end.detail) if turn_end else None
        diagnostic = sanitize(detail or f"the child run ended {reason}")
    return SubagentResult(child_id, reason, output, diagnostic)


def failure_text(result: SubagentResult) -> str:
    """The parent-facing error for a non-completed run: headline, diagnostic, partial output."""
    headline = {
        "aborted": "subagent run was cancelled",
        "max-tokens": "subagent hit its token limit before finishing",
        "max-steps": "subagent reached its step limit before finishing",
        "refusal": "subagent declined the task",
        "error": "subagent run failed",
        "completed": "subagent completed",
    }[result.stop_reason]
    parts = [headline]
    if result.diagnostic:
        parts.append(f"Diagnostic: {result.diagnostic}")
    if result.output:
        parts.append(f"Partial output: {result.output}")
    return "\n".join(parts)
