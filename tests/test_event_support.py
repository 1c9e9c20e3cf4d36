"""The shared event projections of ``event_support``."""

from __future__ import annotations

import pytest

from event_support import events_of, kinds, plain, seq_kinds, type_data
from tether.session import Session, SessionHeader


def session() -> Session:
    made = Session(SessionHeader(id="s", created_at=1), clock=lambda: 5)
    made.append("turn/start", {"turn": 1})
    made.append("sandbox/mode", {"mode": "read-only", "nested": {"a": [1, {"b": 2}]}})
    return made


class HoldsSession:
    def __init__(self, held: Session) -> None:
        self.session = held


def test_events_come_from_a_session_its_holder_or_a_sequence() -> None:
    s = session()
    assert events_of(s) == s.events
    assert events_of(HoldsSession(s)) == s.events
    assert events_of(list(s.events)) == list(s.events)
    with pytest.raises(AssertionError, match="no events in"):
        events_of(42)


def test_projections() -> None:
    s = session()
    assert kinds(s) == ["turn/start", "sandbox/mode"]
    assert kinds(HoldsSession(s), 1) == ["sandbox/mode"]
    assert seq_kinds(s.events) == [(0, "turn/start"), (1, "sandbox/mode")]
    assert type_data(s, 1) == [
        ("sandbox/mode", {"mode": "read-only", "nested": {"a": [1, {"b": 2}]}})
    ]
    data = plain(s.events[1])
    assert type(data["nested"]) is dict and type(data["nested"]["a"]) is list
