"""The session log: contiguous seq, seeds and first_live_seq, open turns, observers, last()."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence

import pytest

from event_support import seq_kinds as layout
from tether.session import Event, Session, SessionHeader
from tether.session._events import UnknownEventTypeError
from tether.session._json import PayloadError
from tether.session._session import SeedError, has_open_turn


def ticking() -> itertools.count[int]:
    return itertools.count(1000)


def fresh(seed: Sequence[Event] = (), session_id: str = "s") -> Session:
    clock = ticking()
    return Session(SessionHeader(id=session_id, created_at=1), seed, clock=lambda: next(clock))


def seed_of(*types: str) -> tuple[Event, ...]:
    return tuple(Event.make(t, i, 10 + i, {}) for i, t in enumerate(types))


# -- seq and time -----------------------------------------------------------------------------


def test_seq_is_contiguous_from_zero_and_time_comes_from_the_clock() -> None:
    session = fresh()
    events = [
        session.append("turn/start", {"turn": 1}),
        session.append("step/start", {"step": 1}),
        session.append("user/message", {"content": "hi", "source": "user"}, surface_op="append"),
        session.append("step/end", {"step": 1}),
        session.append("turn/end", {"turn": 1, "reason": "completed"}),
    ]
    assert [e.seq for e in events] == [0, 1, 2, 3, 4]
    assert [e.time for e in events] == [1000, 1001, 1002, 1003, 1004]
    assert list(session.events) == events
    assert len(session) == 5
    assert session.first_live_seq == 0


def test_unseeded_session_has_no_end_seed_marker() -> None:
    session = fresh()
    assert len(session) == 0
    assert session.first_live_seq == 0
    assert session.last("session/end-seed") is None


def test_events_view_is_read_only_and_live() -> None:
    session = fresh()
    view = session.events
    assert not hasattr(view, "append")
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": "completed"})
    assert len(view) == 2
    assert view[-1].type == "turn/end"
    assert view[0:1] == (session.events[0],)
    assert isinstance(view[0:2], tuple)
    assert [e.seq for e in reversed(view)] == [1, 0]
    with pytest.raises(TypeError):
        view[0] = view[1]  # type: ignore[index]


def test_id_and_header() -> None:
    session = fresh(session_id="abc")
    assert session.id == "abc"
    assert session.header.id == "abc"


# -- seeds ------------------------------------------------------------------------------------


def test_seeded_construction_appends_end_seed_at_first_live_seq() -> None:
    seed = seed_of("turn/start", "turn/end")
    session = fresh(seed)
    assert session.first_live_seq == 2
    assert layout(session) == [(0, "turn/start"), (1, "turn/end"), (2, "session/end-seed")]
    marker = session.events[2]
    assert marker.data == {}
    assert marker.time == 1000
    assert session.events[0] is seed[0]
    assert session.append("turn/start", {"turn": 2}).seq == 3


def test_seed_already_ending_in_end_seed_gets_no_second_marker() -> None:
    seed = seed_of("turn/start", "turn/end", "session/end-seed")
    session = fresh(seed)
    assert session.first_live_seq == 3
    assert layout(session) == [(0, "turn/start"), (1, "turn/end"), (2, "session/end-seed")]


def test_reopening_an_untouched_session_adds_no_second_marker() -> None:
    first = fresh(seed_of("sandbox/mode"))
    reopened = fresh(tuple(first.events))
    assert layout(reopened) == layout(first) == [(0, "sandbox/mode"), (1, "session/end-seed")]
    assert reopened.first_live_seq == 2


def test_reopening_after_live_appends_marks_the_new_boundary() -> None:
    first = fresh(seed_of("turn/start", "turn/end"))
    first.append("sandbox/mode", {"mode": "read-only"})
    reopened = fresh(tuple(first.events))
    assert reopened.first_live_seq == 4
    assert layout(reopened) == [
        (0, "turn/start"),
        (1, "turn/end"),
        (2, "session/end-seed"),
        (3, "sandbox/mode"),
        (4, "session/end-seed"),
    ]


def test_end_seed_in_the_middle_of_a_seed_does_not_count() -> None:
    session = fresh(seed_of("session/end-seed", "sandbox/mode"))
    assert layout(session)[-1] == (2, "session/end-seed")


def test_empty_seed_is_no_seed() -> None:
    session = fresh(())
    assert session.first_live_seq == 0
    assert len(session) == 0


def test_seed_with_a_gap_is_refused() -> None:
    seed = (Event.make("turn/start", 0, 1, {}), Event.make("turn/end", 2, 1, {}))
    with pytest.raises(SeedError) as info:
        fresh(seed)
    assert info.value.code == "INVALID_SEED"
    assert str(info.value) == "seed event 1 has seq 2; seeds are contiguous from 0"


def test_seed_not_starting_at_zero_is_refused() -> None:
    with pytest.raises(SeedError) as info:
        fresh((Event.make("turn/start", 1, 1, {}),))
    assert str(info.value) == "seed event 0 has seq 1; seeds are contiguous from 0"


def test_seed_with_duplicate_seq_is_refused() -> None:
    seed = (Event.make("turn/start", 0, 1, {}), Event.make("turn/end", 0, 1, {}))
    with pytest.raises(SeedError):
        fresh(seed)


def test_seed_with_unknown_required_type_is_refused() -> None:
    seed = (Event.make("turn/start", 0, 1, {}), Event.make("nobody/knows", 1, 1, {}))
    with pytest.raises(UnknownEventTypeError) as info:
        fresh(seed)
    assert str(info.value) == "seed contains unknown required event 'nobody/knows'"


def test_seed_with_ignorable_unknown_type_is_kept() -> None:
    seed = (Event.make("nobody/knows", 0, 1, {"x": 1}, ignorable=True),)
    session = fresh(seed)
    assert layout(session) == [(0, "nobody/knows"), (1, "session/end-seed")]


# -- open turns -------------------------------------------------------------------------------


def test_has_open_turn_through_a_session() -> None:
    session = fresh()
    states = [session.has_open_turn()]
    session.append("sandbox/mode", {"mode": "read-only"})  # between turns, before the first
    states.append(session.has_open_turn())
    session.append("turn/start", {"turn": 1})
    states.append(session.has_open_turn())
    session.append("step/start", {"step": 1})
    session.append("step/end", {"step": 1})
    states.append(session.has_open_turn())
    session.append("turn/end", {"turn": 1, "reason": "completed"})
    states.append(session.has_open_turn())
    session.append("approval/policy", {"policy": "never"})  # between turns
    states.append(session.has_open_turn())
    session.append("turn/start", {"turn": 2})
    states.append(session.has_open_turn())
    assert states == [False, False, True, True, False, False, True]
    assert has_open_turn(session.events) is True
    assert has_open_turn(session.events[:5]) is False
    assert has_open_turn(session.events[:4]) is True


@pytest.mark.parametrize(
    ("types", "open_"),
    [
        ((), False),
        (("sandbox/mode",), False),
        (("turn/start",), True),
        (("turn/start", "step/start", "tool/call"), True),
        (("turn/start", "turn/end"), False),
        (("turn/start", "turn/end", "sandbox/mode", "approval/policy"), False),
        (("turn/start", "turn/end", "turn/start", "step/start"), True),
        (("turn/end",), False),
    ],
)
def test_pure_has_open_turn(types: tuple[str, ...], open_: bool) -> None:
    events = seed_of(*types)
    assert has_open_turn(events) is open_
    assert has_open_turn(list(events)) is open_


def test_seeded_open_turn_is_seen() -> None:
    session = fresh(seed_of("turn/start", "step/start"))
    assert session.has_open_turn() is True
    session.append("turn/end", {"turn": 1, "reason": "interrupted"})
    assert session.has_open_turn() is False


# -- observers --------------------------------------------------------------------------------


def test_observers_are_called_synchronously_in_order() -> None:
    session = fresh()
    calls: list[tuple[str, Session, int]] = []
    session.observe(lambda s, e: calls.append(("a", s, e.seq)))
    session.observe(lambda s, e: calls.append(("b", s, e.seq)))
    session.append("turn/start", {"turn": 1})
    assert calls == [("a", session, 0), ("b", session, 0)]
    session.append("turn/end", {"turn": 1, "reason": "completed"})
    assert calls[2:] == [("a", session, 1), ("b", session, 1)]


def test_observer_sees_the_event_already_in_the_log() -> None:
    session = fresh()
    seen: list[int] = []
    session.observe(lambda s, e: seen.append(len(s)))
    session.append("turn/start", {"turn": 1})
    assert seen == [1]


def test_raising_observer_does_not_undo_the_append(caplog: pytest.LogCaptureFixture) -> None:
    session = fresh()
    after: list[int] = []

    def boom(s: Session, e: Event) -> None:
        raise RuntimeError("observer broke")

    session.observe(boom)
    session.observe(lambda s, e: after.append(e.seq))
    with caplog.at_level(logging.ERROR, logger="tether.session._session"):
        event = session.append("turn/start", {"turn": 1})
    assert event.seq == 0
    assert layout(session) == [(0, "turn/start")]
    assert after == [0]
    assert "session observer failed on turn/start #0" in caplog.text
    assert "observer broke" in caplog.text
    assert session.append("turn/end", {"turn": 1, "reason": "completed"}).seq == 1


def test_observer_disposer_stops_calls_and_is_idempotent() -> None:
    session = fresh()
    seen: list[int] = []
    stop = session.observe(lambda s, e: seen.append(e.seq))
    session.append("turn/start", {"turn": 1})
    stop()
    stop()
    session.append("turn/end", {"turn": 1, "reason": "completed"})
    assert seen == [0]


def test_appends_made_by_an_observer_reach_every_observer_in_seq_order() -> None:
    session = fresh()
    seen_a: list[int] = []
    seen_b: list[int] = []

    def reacting(s: Session, e: Event) -> None:
        seen_a.append(e.seq)
        if e.type == "turn/start":
            s.append("sandbox/mode", {"mode": "read-only"})

    session.observe(reacting)
    session.observe(lambda s, e: seen_b.append(e.seq))
    session.append("turn/start", {"turn": 1})
    assert layout(session) == [(0, "turn/start"), (1, "sandbox/mode")]
    assert seen_a == [0, 1]
    assert seen_b == [0, 1]


def test_observer_added_during_delivery_is_not_called_for_that_event() -> None:
    session = fresh()
    late: list[int] = []
    session.observe(
        lambda s, e: s.observe(lambda s2, e2: late.append(e2.seq)) if e.seq == 0 else None
    )
    session.append("turn/start", {"turn": 1})
    assert late == []
    session.append("turn/end", {"turn": 1, "reason": "completed"})
    assert late == [1]


# -- last(type) -------------------------------------------------------------------------------


def test_last_returns_the_newest_event_of_a_type() -> None:
    session = fresh(seed_of("sandbox/mode", "turn/start", "turn/end"))
    seeded = session.last("sandbox/mode")
    assert seeded is not None and seeded.seq == 0
    assert session.last("approval/policy") is None
    newer = session.append("sandbox/mode", {"mode": "read-only"})
    assert session.last("sandbox/mode") is newer
    assert session.last("session/end-seed") is session.events[3]
    assert session.last("turn/end") is session.events[2]


def test_last_ignores_refused_appends() -> None:
    session = fresh()
    first = session.append("sandbox/mode", {"mode": "read-only"})
    with pytest.raises(PayloadError):
        session.append("sandbox/mode", {"mode": float("nan")})
    assert session.last("sandbox/mode") is first
