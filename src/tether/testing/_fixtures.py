"""Events and headers the conformance checks write, for any test of a backend.

Every event time is ``T0 + seq`` so that expected records can be written out in full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tether.session._events import Event
from tether.session._header import SESSION_FORMAT_VERSION, SessionHeader
from tether.session._json import JsonValue
from tether.session.persistence._repair import TOOL_OUTCOME_UNKNOWN

T0 = 1_700_000_000_000
"""Epoch ms used for the events and headers the suite writes."""

UNKNOWN_TYPE = "conformance/never-registered"
"""An event type no tether registers: stands for one a newer writer or a plugin added."""


def make_events(
    start: int, *specs: tuple[str, Mapping[str, object]] | tuple[str, Mapping[str, object], object]
) -> list[Event]:
    """Events with seqs ``start, start+1, ...`` from ``(type, data[, surface_op])`` specs.

    Surface events default to ``surface_op="append"``.
    """
    out: list[Event] = []
    for offset, spec in enumerate(specs):
        kind, data = spec[0], spec[1]
        surface_op = spec[2] if len(spec) == 3 else None
        if surface_op is None and kind in ("user/message", "assistant/message", "tool/result"):
            surface_op = "append"
        out.append(
            Event.make(kind, start + offset, T0 + start + offset, data, surface_op=surface_op)
        )
    return out


def titles(start: int, count: int) -> list[Event]:
    """``count`` between-turn ``session/title`` events from seq ``start`` (no turn to close)."""
    return make_events(
        start,
        *[("session/title", {"title": f"title {seq}"}) for seq in range(start, start + count)],
    )


def dicts(events: Sequence[Event]) -> list[dict[str, object]]:
    return [event.to_dict() for event in events]


def header(session_id: str = "s-1", created_at: int = T0, **fields: JsonValue) -> SessionHeader:
    """A current-format header; ``fields`` as its stored form names them, read the way a
    stored header is (restating them as parameters would be a second home for its shape)."""
    stored: dict[str, JsonValue] = {"delegation_depth": 0, **fields}
    return SessionHeader.from_dict(
        {
            "type": "session",
            "version": SESSION_FORMAT_VERSION,
            "id": session_id,
            "created_at": created_at,
            **stored,
        }
    )


def closed_turn(start: int, turn: int = 1) -> list[Event]:
    """A complete turn: user message, one step with a tool call and its result, reply."""
    call = f"call-{turn}"
    return make_events(
        start,
        ("turn/start", {"turn": turn}),
        ("user/message", {"content": f"question {turn}", "source": "user"}),
        ("step/start", {"step": 1}),
        ("tool/call", {"call_id": call, "name": "read", "arguments": '{"path": "a.txt"}'}),
        ("approval/asked", {"id": f"ap-{turn}", "tool_name": "read", "call_id": call}),
        ("approval/decided", {"id": f"ap-{turn}", "outcome": "allowed-once"}),
        ("tool/result", {"call_id": call, "name": "read", "content": "text", "is_error": False}),
        ("step/end", {"step": 1}),
        ("assistant/message", {"content": f"answer {turn}"}),
        ("turn/end", {"turn": turn, "reason": "completed"}),
    )


def interrupted_turn(start: int, turn: int = 2) -> list[Event]:
    """A turn cut off mid-step: two tool calls (one answered), an approval still asked."""
    return make_events(
        start,
        ("turn/start", {"turn": turn}),
        ("user/message", {"content": "go", "source": "user"}),
        ("step/start", {"step": 3}),
        ("tool/call", {"call_id": "c1", "name": "bash", "arguments": '{"cmd": "ls"}'}),
        ("tool/call", {"call_id": "c2", "name": "write", "arguments": '{"path": "x"}'}),
        ("tool/result", {"call_id": "c1", "name": "bash", "content": "a\nb", "is_error": False}),
        ("approval/asked", {"id": "ap-9", "tool_name": "write", "call_id": "c2"}),
    )


def expected_closers(start: int, turn: int = 2) -> list[dict[str, object]]:
    """What repair must append after :func:`interrupted_turn` (times are the last event's)."""
    time = T0 + start - 1
    return [
        {
            "type": "approval/decided",
            "seq": start,
            "time": time,
            "data": {"id": "ap-9", "outcome": "unavailable", "repaired": True},
        },
        {
            "type": "tool/result",
            "seq": start + 1,
            "time": time,
            "data": {
                "call_id": "c2",
                "name": "write",
                "content": TOOL_OUTCOME_UNKNOWN,
                "is_error": True,
            },
            "surface_op": "append",
        },
        {
            "type": "step/end",
            "seq": start + 2,
            "time": time,
            "data": {"step": 3, "reason": "interrupted"},
        },
        {
            "type": "turn/end",
            "seq": start + 3,
            "time": time,
            "data": {"turn": turn, "reason": "interrupted"},
        },
    ]


__all__ = [
    "T0",
    "UNKNOWN_TYPE",
    "closed_turn",
    "dicts",
    "expected_closers",
    "header",
    "interrupted_turn",
    "make_events",
    "titles",
]
