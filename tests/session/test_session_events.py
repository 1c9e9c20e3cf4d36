"""The event envelope: surface vs log-only rules, the type registry, and loading stored records."""

from __future__ import annotations

import itertools

import pytest

from tether.session import Event, Session, SessionHeader, register_event_type
from tether.session._events import (
    CORE_EVENT_TYPES,
    SURFACE_EVENT_TYPES,
    InvalidEventError,
    UnknownEventTypeError,
    is_known_event_type,
)

_names = itertools.count()


def unique_type() -> str:
    """A plugin event type no other test registered (the registry is process-global)."""
    return f"testplugin{next(_names)}/thing"


def fresh() -> Session:
    return Session(SessionHeader(id="s-events", created_at=1), clock=lambda: 42)


USER = {"content": "hi", "source": "user"}


def test_core_vocabulary() -> None:
    assert frozenset({"user/message", "assistant/message", "tool/result"}) == SURFACE_EVENT_TYPES
    for name in (
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "tool/call",
        "session/end-seed",
        "sandbox/mode",
        "approval/policy",
        "approval/asked",
        "approval/decided",
        "permission/preset",
        "request/header",
        "agent/inbox/spliced",
        "subagent/descriptor",
        "hook/invoked",
        "hook/result",
    ):
        assert name in CORE_EVENT_TYPES
        assert is_known_event_type(name)
    assert SURFACE_EVENT_TYPES <= CORE_EVENT_TYPES


# -- surface vs log-only ----------------------------------------------------------------------


@pytest.mark.parametrize("event_type", sorted(SURFACE_EVENT_TYPES))
def test_surface_events_accept_append(event_type: str) -> None:
    event = fresh().append(event_type, USER, surface_op="append")
    assert event.surface_op == "append"
    assert event.to_dict()["surface_op"] == "append"


def test_surface_event_accepts_replace_with_a_range() -> None:
    session = fresh()
    event = session.append(
        "assistant/message",
        {"content": "summary"},
        surface_op={"op": "replace", "start": 0, "end": 3},
    )
    assert event.to_dict() == {
        "type": "assistant/message",
        "seq": 0,
        "time": 42,
        "data": {"content": "summary"},
        "surface_op": {"op": "replace", "start": 0, "end": 3},
    }
    empty_range = session.append(
        "user/message", USER, surface_op={"op": "replace", "start": 2, "end": 2}
    )
    assert empty_range.surface_op == {"op": "replace", "start": 2, "end": 2}


@pytest.mark.parametrize(
    "surface_op",
    [
        None,
        "replace",
        "APPEND",
        {"op": "append"},
        {"op": "replace", "start": 0},
        {"op": "replace", "end": 1},
        {"op": "replace", "start": 2, "end": 1},
        {"op": "replace", "start": -1, "end": 1},
        {"op": "replace", "start": 0.0, "end": 1},
        {"op": "replace", "start": "0", "end": "1"},
        {"op": "replace", "start": False, "end": True},
        {"op": "replace", "start": 0, "end": 1, "extra": 1},
        ["append"],
    ],
)
def test_surface_events_need_a_valid_surface_op(surface_op: object) -> None:
    session = fresh()
    with pytest.raises(InvalidEventError) as info:
        session.append("tool/result", {"call_id": "c"}, surface_op=surface_op)
    assert info.value.code == "INVALID_EVENT"
    assert str(info.value).startswith("tool/result is a surface event: surface_op must be 'append'")
    assert len(session) == 0


@pytest.mark.parametrize(
    "event_type", ["turn/start", "tool/call", "sandbox/mode", "session/end-seed"]
)
@pytest.mark.parametrize("surface_op", ["append", {"op": "replace", "start": 0, "end": 0}])
def test_log_only_events_refuse_surface_op(event_type: str, surface_op: object) -> None:
    session = fresh()
    with pytest.raises(InvalidEventError) as info:
        session.append(event_type, {}, surface_op=surface_op)
    assert str(info.value) == f"{event_type} is log-only and must not carry surface_op"
    assert len(session) == 0


def test_log_only_event_has_no_surface_op_in_its_stored_form() -> None:
    event = fresh().append("turn/start", {"turn": 1})
    assert event.surface_op is None
    assert event.to_dict() == {"type": "turn/start", "seq": 0, "time": 42, "data": {"turn": 1}}


# -- the type registry at append --------------------------------------------------------------


def test_unknown_type_is_refused_at_append() -> None:
    session = fresh()
    name = unique_type()
    with pytest.raises(UnknownEventTypeError) as info:
        session.append(name, {})
    assert info.value.code == "UNKNOWN_EVENT_TYPE"
    assert name in str(info.value)
    assert "register_event_type" in str(info.value)
    assert len(session) == 0


def test_registered_plugin_type_is_accepted_and_log_only() -> None:
    name = unique_type()
    assert not is_known_event_type(name)
    register_event_type(name)
    assert is_known_event_type(name)
    session = fresh()
    event = session.append(name, {"x": 1})
    assert event.to_dict() == {"type": name, "seq": 0, "time": 42, "data": {"x": 1}}
    with pytest.raises(InvalidEventError):
        session.append(name, {}, surface_op="append")


def test_unknown_ignorable_type_is_accepted_at_append() -> None:
    name = unique_type()
    event = fresh().append(name, {"x": 1}, ignorable=True)
    assert event.ignorable is True
    assert event.to_dict() == {
        "type": name,
        "seq": 0,
        "time": 42,
        "data": {"x": 1},
        "ignorable": True,
    }
    assert not is_known_event_type(name)


def test_ignorable_unknown_type_still_refuses_surface_op() -> None:
    with pytest.raises(InvalidEventError):
        fresh().append(unique_type(), {}, ignorable=True, surface_op="append")


@pytest.mark.parametrize("bad", ["", "noslash"])
def test_register_event_type_needs_owner_slash_name(bad: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        register_event_type(bad)
    assert str(info.value) == f"event type {bad!r} must look like 'owner/name'"


# -- make -------------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [-1, True, 1.0, "0", None])
def test_make_refuses_bad_seq(seq: object) -> None:
    with pytest.raises(InvalidEventError) as info:
        Event.make("turn/start", seq, 0, {})  # type: ignore[arg-type]
    assert str(info.value) == f"turn/start: seq must be a non-negative integer, got {seq!r}"


@pytest.mark.parametrize("time", [1.5, True, "0", None])
def test_make_refuses_bad_time(time: object) -> None:
    with pytest.raises(InvalidEventError) as info:
        Event.make("turn/start", 0, time, {})  # type: ignore[arg-type]
    assert str(info.value) == f"turn/start: time must be integer epoch ms, got {time!r}"


@pytest.mark.parametrize("bad", ["", None, 3])
def test_make_refuses_bad_type(bad: object) -> None:
    with pytest.raises(InvalidEventError):
        Event.make(bad, 0, 0, {})  # type: ignore[arg-type]


# -- loading stored records -------------------------------------------------------------------


def record(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1}}
    base.update(overrides)
    return base


def test_from_dict_builds_an_equal_event() -> None:
    event = Event.from_dict(record())
    assert event == Event.make("turn/start", 0, 5, {"turn": 1})
    assert event.ignorable is False
    assert event.surface_op is None


def test_from_dict_refuses_unknown_required_type() -> None:
    name = unique_type()
    with pytest.raises(UnknownEventTypeError) as info:
        Event.from_dict(record(type=name))
    assert info.value.code == "UNKNOWN_EVENT_TYPE"
    assert str(info.value) == (
        f"unknown required event type {name!r}: refusing to reconstruct the session "
        "(a newer tether or a missing plugin wrote it)"
    )
    with pytest.raises(UnknownEventTypeError):
        Event.from_dict(record(type=name, ignorable=False))


def test_from_dict_accepts_ignorable_unknown_type() -> None:
    name = unique_type()
    event = Event.from_dict(record(type=name, ignorable=True))
    assert event.type == name
    assert event.ignorable is True
    assert event.to_dict() == record(type=name, ignorable=True)


def test_from_dict_refuses_unknown_envelope_fields() -> None:
    with pytest.raises(InvalidEventError) as info:
        Event.from_dict(record(source_event_seqs=[1], zz=1))
    assert str(info.value) == "event has unknown envelope fields: ['source_event_seqs', 'zz']"


def test_from_dict_refuses_missing_data() -> None:
    raw = record()
    del raw["data"]
    with pytest.raises(InvalidEventError) as info:
        Event.from_dict(raw)
    assert str(info.value) == "turn/start: event has no 'data' field"


@pytest.mark.parametrize("data", [None, [], "x", 1])
def test_from_dict_refuses_data_that_is_not_an_object(data: object) -> None:
    # A stored null must not quietly load as {}.
    with pytest.raises(InvalidEventError) as info:
        Event.from_dict(record(data=data))
    assert str(info.value) == f"turn/start: event 'data' must be a JSON object, got {data!r}"


def test_from_dict_wraps_payload_errors_with_the_field() -> None:
    with pytest.raises(InvalidEventError) as info:
        Event.from_dict(record(data={"a": [float("nan")]}))
    assert info.value.code == "INVALID_EVENT"
    assert str(info.value) == "turn/start: data.a[0]: nan is not representable in JSON"


@pytest.mark.parametrize(
    "raw",
    [
        [],
        "event",
        record(type=None),
        record(type=3),
        record(seq=-1),
        record(seq="1"),
        record(seq=None),
        record(time=None),
        record(time=1.5),
        record(ignorable="yes"),
        record(ignorable=1),
        record(surface_op="append"),
        record(type="user/message", data={"content": "x"}),
    ],
)
def test_from_dict_refuses_malformed_records(raw: object) -> None:
    with pytest.raises(InvalidEventError):
        Event.from_dict(raw)


def test_from_dict_surface_event_round_trip() -> None:
    raw = record(
        type="tool/result",
        data={"call_id": "c1", "name": "read", "content": "x", "is_error": False},
        surface_op="append",
    )
    event = Event.from_dict(raw)
    assert event.to_dict() == raw


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"turn/start","seq":0,"time":1,"data":{"x":NaN}}',
        '{"type":"turn/start","seq":0,"time":1,"data":{"x":Infinity}}',
        '{"type":"turn/start","seq":0,"time":1,"data":{"x":-Infinity}}',
        '{"type":"turn/start","seq":0,"time":1,"data":{"x":1e400}}',
        '{"type":"turn/start","seq":0,"time":1,"data":{"x":-0.0}}',
        '{"type":"turn/start","seq":0,"time":1,"data":{',
        "not json",
        "[1,2]",
        "",
    ],
)
def test_from_json_refuses_lossy_or_malformed_text(text: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        Event.from_json(text)
    assert info.value.code == "INVALID_EVENT"


def test_from_json_refuses_unknown_required_type() -> None:
    name = unique_type()
    with pytest.raises(UnknownEventTypeError):
        Event.from_json(f'{{"type":"{name}","seq":0,"time":1,"data":{{}}}}')


def test_envelope_key_order_in_json() -> None:
    event = Event.make(
        "user/message", 3, 9, {"content": "hi", "source": "user"}, surface_op="append"
    )
    assert event.to_json() == (
        '{"type":"user/message","seq":3,"time":9,'
        '"data":{"content":"hi","source":"user"},"surface_op":"append"}'
    )
    name = unique_type()
    ignorable = Event.make(name, 0, 1, {}, ignorable=True)
    assert (
        ignorable.to_json() == f'{{"type":"{name}","seq":0,"time":1,"data":{{}},"ignorable":true}}'
    )
