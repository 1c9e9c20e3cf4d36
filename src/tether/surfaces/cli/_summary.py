"""What a run did, in one line: printed by ``tether chat`` after each turn and by ``tether run``.

Computed from the events a run appended (``Harness.stream`` yields them), so any surface can
reuse it: ``tether run`` can sum the same stream. Counting rules:

- **turns**: ``turn/end`` events, split into the root session's and its children's;
- **tool calls**: ``tool/call`` events in every session;
- **approvals**: ``approval/asked`` events; of their ``approval/decided`` outcomes, the three
  that let the action run (``allowed-once``, ``allowed-for-session``, ``allowed-always``) are
  *granted* and every other outcome (rejected, cancelled, unavailable) is *denied*;
- **children**: sessions spawned during the run, recognised by their delegation facts (a
  ``sandbox/mode`` or ``approval/policy`` with ``source: delegation``, or a live
  ``subagent/descriptor``); a cold-resumed child has none of these, so it is not counted again;
- **tokens**: the ``usage`` of every ``assistant/message``;
- **elapsed**: the caller's wall-clock measure when given, else the span of the event times.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from tether._harness import SessionEvent
from tether.agent._events import AssistantMessage, ToolCalled, TurnClosed
from tether.policy._events import ApprovalAsked, ApprovalDecided, ApprovalPolicySet, SandboxModeSet
from tether.policy._modes import allows
from tether.subagents._events import Descriptor


@dataclass(frozen=True, slots=True)
class RunSummary:
    turns: int
    """Turns of the root session that ended."""
    child_turns: int
    """Turns of every other session that ended."""
    tool_calls: int
    approvals_asked: int
    approvals_granted: int
    approvals_denied: int
    children: int
    """Child sessions spawned during the run."""
    prompt_tokens: int
    completion_tokens: int
    elapsed_seconds: float

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "tokens": self.tokens}


def _is_delegation_fact(item: SessionEvent) -> bool:
    event = item.event
    if event.type == Descriptor.TYPE:
        return True
    if event.type == SandboxModeSet.TYPE:
        return SandboxModeSet.from_data(event.data).source == "delegation"
    if event.type == ApprovalPolicySet.TYPE:
        return ApprovalPolicySet.from_data(event.data).source == "delegation"
    return False


def summarize(
    events: Iterable[SessionEvent], *, root_id: str | None = None, elapsed: float | None = None
) -> RunSummary:
    """Count what ``events`` show. ``root_id`` defaults to the session of the first event (the
    root's own events come first in a :meth:`Harness.stream`)."""
    turns = child_turns = tool_calls = asked = granted = denied = 0
    prompt_tokens = completion_tokens = 0
    children: set[str] = set()
    first_time: int | None = None
    last_time: int | None = None
    for item in events:
        event = item.event
        if root_id is None:
            root_id = item.session_id
        first_time = event.time if first_time is None else min(first_time, event.time)
        last_time = event.time if last_time is None else max(last_time, event.time)
        if event.type == TurnClosed.TYPE:
            if item.session_id == root_id:
                turns += 1
            else:
                child_turns += 1
        elif event.type == ToolCalled.TYPE:
            tool_calls += 1
        elif event.type == ApprovalAsked.TYPE:
            asked += 1
        elif event.type == ApprovalDecided.TYPE:
            if allows(ApprovalDecided.from_data(event.data).outcome):
                granted += 1
            else:
                denied += 1
        elif event.type == AssistantMessage.TYPE:
            used = AssistantMessage.parse(event.data).usage
            prompt_tokens += used.prompt_tokens
            completion_tokens += used.completion_tokens
        if item.session_id != root_id and _is_delegation_fact(item):
            children.add(item.session_id)
    if elapsed is None:
        elapsed = (
            0.0 if first_time is None or last_time is None else (last_time - first_time) / 1000
        )
    return RunSummary(
        turns,
        child_turns,
        tool_calls,
        asked,
        granted,
        denied,
        len(children),
        prompt_tokens,
        completion_tokens,
        elapsed,
    )


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    return f"{count} {noun if count == 1 else plural_noun or noun + 's'}"


def format_summary(summary: RunSummary) -> str:
    """One line, e.g. ``1 turn · 2 tool calls · approvals: 1 asked, 1 granted, 0 denied ·
    no children · 412 tokens (400 in, 12 out) · 0.3s``."""
    turns = plural(summary.turns, "turn")
    if summary.child_turns:
        turns += f" (+{summary.child_turns} in children)"
    approvals = (
        f"approvals: {summary.approvals_asked} asked, {summary.approvals_granted} granted, "
        f"{summary.approvals_denied} denied"
        if summary.approvals_asked or summary.approvals_denied
        else "no approvals"
    )
    children = (
        plural(summary.children, "child", "children") + " spawned"
        if summary.children
        else "no children"
    )
    tokens = (
        f"{summary.tokens:,} tokens ({summary.prompt_tokens:,} in, "
        f"{summary.completion_tokens:,} out)"
    )
    return " · ".join(
        [
            turns,
            plural(summary.tool_calls, "tool call"),
            approvals,
            children,
            tokens,
            f"{summary.elapsed_seconds:.1f}s",
        ]
    )


__all__ = ["RunSummary", "format_summary", "plural", "summarize"]
