"""Crash repair shared by every backend.

A process can die mid-turn. Loading such a log must neither lose a committed event nor leave a
turn open forever (an open turn would let a later approval be audited inside a turn that no
driver owns). So the loader closes it with synthetic events, in this order:

1. ``approval/decided {outcome: unavailable, repaired: true}`` for each ``approval/asked`` in the
   open turn without a decision (the action it asked about never ran: an approved action runs
   only after its decision is flushed);
2. ``tool/result`` with ``TOOL_OUTCOME_UNKNOWN`` for each ``tool/call`` without a result;
3. ``step/end {reason: interrupted}`` if a step is open;
4. ``turn/end {reason: interrupted}``.

Torn trailing records are the backend's to detect; this module only plans the closers.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.session._events import Event
from tether.session.persistence._base import RepairReport

TOOL_OUTCOME_UNKNOWN = (
    "Error: TOOL_OUTCOME_UNKNOWN: the harness stopped before this tool call reported a result"
)


def unmatched_approvals(events: Sequence[Event]) -> tuple[str, ...]:
    """Ids of ``approval/asked`` events that have no ``approval/decided``."""
    asked: dict[str, None] = {}
    for event in events:
        if event.type == "approval/asked":
            asked[str(event.data.get("id"))] = None
        elif event.type == "approval/decided":
            asked.pop(str(event.data.get("id")), None)
    return tuple(asked)


def plan_repair(events: Sequence[Event], dropped_tail: int = 0) -> tuple[list[Event], RepairReport]:
    """Closing events for an interrupted turn (empty if no turn is open) and the report."""
    unmatched = unmatched_approvals(events)
    start = _open_turn_start(events)
    if start is None:
        return [], RepairReport(dropped_tail=dropped_tail, unmatched_approvals=unmatched)
    turn_events = events[start:]
    turn = events[start].data.get("turn", 0)
    time = events[-1].time
    closers: list[tuple[str, dict[str, object], object]] = []
    in_turn_unmatched = set(unmatched_approvals(turn_events))
    for approval_id in unmatched:
        if approval_id in in_turn_unmatched:
            closers.append(
                (
                    "approval/decided",
                    {"id": approval_id, "outcome": "unavailable", "repaired": True},
                    None,
                )
            )
    finished = {e.data.get("call_id") for e in turn_events if e.type == "tool/result"}
    for event in turn_events:
        if event.type == "tool/call" and event.data.get("call_id") not in finished:
            closers.append(
                (
                    "tool/result",
                    {
                        "call_id": event.data.get("call_id"),
                        "name": event.data.get("name"),
                        "content": TOOL_OUTCOME_UNKNOWN,
                        "is_error": True,
                    },
                    "append",
                )
            )
    open_step = _open_step(turn_events)
    if open_step is not None:
        closers.append(("step/end", {"step": open_step, "reason": "interrupted"}, None))
    closers.append(("turn/end", {"turn": turn, "reason": "interrupted"}, None))
    synthetic = [
        Event.make(kind, len(events) + i, time, data, surface_op=op)
        for i, (kind, data, op) in enumerate(closers)
    ]
    report = RepairReport(
        dropped_tail=dropped_tail,
        synthesized=tuple(e.type for e in synthetic),
        unmatched_approvals=unmatched,
    )
    return synthetic, report


def _open_turn_start(events: Sequence[Event]) -> int | None:
    for index in range(len(events) - 1, -1, -1):
        kind = events[index].type
        if kind == "turn/end":
            return None
        if kind == "turn/start":
            return index
    return None


def _open_step(turn_events: Sequence[Event]) -> object:
    for event in reversed(turn_events):
        if event.type == "step/end":
            return None
        if event.type == "step/start":
            return event.data.get("step", 0)
    return None
