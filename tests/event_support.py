"""Events in the forms the tests assert on (no tests here).

Each projection takes its events from a session, from anything holding one (an agent), or
from a sequence of events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.agent._instructions import is_instructions
from tether.session import Event, Session
from tether.session._json import thaw


def events_of(source: object) -> Sequence[Event]:
    """The events of a session, of an object's ``session``, of a stored session (its
    ``events``), or ``source`` itself."""
    if isinstance(source, Session):
        return source.events
    session = getattr(source, "session", None)
    if isinstance(session, Session):
        return session.events
    stored = getattr(source, "events", None)
    if isinstance(stored, Sequence):
        return stored
    assert isinstance(source, Sequence), f"no events in {source!r}"
    return source


def plain(event: Event) -> dict[str, Any]:
    """An event's payload as plain JSON values (nested frozen mappings thawed)."""
    value = thaw(event.data)
    assert isinstance(value, dict)
    return value


def kinds(source: object, start: int = 0) -> list[str]:
    """The type of each event from ``start``."""
    return [e.type for e in events_of(source)[start:]]


def seq_kinds(source: object) -> list[tuple[int, str]]:
    """``(seq, type)`` of each event."""
    return [(e.seq, e.type) for e in events_of(source)]


def type_data(source: object, start: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """``(type, data)`` of each event from ``start``: the exact-layout assertion form."""
    return [(e.type, plain(e)) for e in events_of(source)[start:]]


def instruction_records(source: object) -> list[dict[str, Any]]:
    """The payload of each project-instructions ``user/message``."""
    return [plain(e) for e in events_of(source) if is_instructions(e)]
