"""Payload validation at append: only lossless JSON, errors naming the field, deep immutability."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import math
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import TetherError
from tether.session import Event, Session, SessionHeader
from tether.session._json import PayloadError


def fresh() -> Session:
    return Session(SessionHeader(id="s-json", created_at=1), clock=lambda: 7)


def refused(data: object) -> PayloadError:
    session = fresh()
    with pytest.raises(PayloadError) as info:
        session.append("turn/start", data)  # type: ignore[arg-type]
    assert len(session) == 0, "a refused append must leave the log untouched"
    assert info.value.code == "INVALID_PAYLOAD"
    assert isinstance(info.value, TetherError)
    return info.value


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
    ],
)
def test_non_finite_floats_are_refused_naming_the_field(value: float, shown: str) -> None:
    err = refused({"turn": value})
    assert str(err) == f"turn/start: data.turn: {shown} is not representable in JSON"


def test_negative_zero_is_refused_but_positive_zero_is_accepted() -> None:
    err = refused({"x": -0.0})
    assert str(err) == "turn/start: data.x: -0.0 does not survive a JSON round trip"
    event = fresh().append("turn/start", {"x": 0.0, "y": -1.5})
    assert event.data == {"x": 0.0, "y": -1.5}
    assert math.copysign(1.0, event.data["x"]) == 1.0  # type: ignore[arg-type]


def test_nested_field_path_names_objects_and_array_indices() -> None:
    err = refused({"a": [0, {"b": float("nan")}]})
    assert str(err) == "turn/start: data.a[1].b: nan is not representable in JSON"


def test_deeply_nested_path() -> None:
    err = refused({"outer": {"list": [[1, 2], [3, {"deep": [None, float("inf")]}]]}})
    assert str(err).startswith("turn/start: data.outer.list[1][1].deep[1]: ")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({1: "x"}, "data: key 1 is not a string"),
        ({("a", 1): "x"}, "data: key ('a', 1) is not a string"),
        ({"a": {2.5: "x"}}, "data.a: key 2.5 is not a string"),
        ({"a": [{"ok": 1}, {None: 1}]}, "data.a[1]: key None is not a string"),
        ({"a": {True: 1}}, "data.a: key True is not a string"),
    ],
)
def test_non_string_keys_are_refused(data: object, message: str) -> None:
    assert str(refused(data)) == f"turn/start: {message}"


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        ({1, 2}, "set"),
        (frozenset({1}), "frozenset"),
        (b"bytes", "bytes"),
        (bytearray(b"x"), "bytearray"),
        (object(), "object"),
        (datetime.datetime(2024, 1, 1), "datetime"),
        (datetime.date(2024, 1, 1), "date"),
        (decimal.Decimal("1.5"), "Decimal"),
        (1 + 2j, "complex"),
        (range(3), "range"),
        (iter([1]), "list_iterator"),
    ],
)
def test_non_json_types_are_refused(value: object, type_name: str) -> None:
    assert str(refused({"v": value})) == f"turn/start: data.v: {type_name} is not a JSON type"


def test_non_json_type_nested_in_arrays_and_objects() -> None:
    err = refused({"a": [{"b": {"c": [1, 2, {3}]}}]})
    assert str(err) == "turn/start: data.a[0].b.c[2]: set is not a JSON type"


def test_dataclass_instance_is_refused() -> None:
    @dataclasses.dataclass
    class Point:
        x: int

    assert str(refused({"p": Point(1)})) == "turn/start: data.p: Point is not a JSON type"


@pytest.mark.parametrize(
    ("data", "type_name"),
    [([1, 2], "list"), ("text", "str"), (3, "int"), ((("a", 1),), "tuple")],
)
def test_payload_itself_must_be_an_object(data: object, type_name: str) -> None:
    assert str(refused(data)) == f"turn/start: data: must be a JSON object, got {type_name}"


def test_none_payload_means_empty_object() -> None:
    event = fresh().append("session/end-seed")
    assert event.data == {}
    assert event.to_dict()["data"] == {}


def test_lone_surrogates_are_refused_in_values_and_keys() -> None:
    # Such a string could be appended but never encoded for storage.
    err = refused({"out": ["fine", "bad \udcff byte"]})
    assert (
        str(err)
        == "turn/start: data.out[1]: string contains a lone surrogate at index 4 (not valid Unicode)"
    )
    err = refused({"obj": {"\ud800": 1}})
    assert str(err).startswith("turn/start: data.obj: string contains a lone surrogate")


def test_cyclic_payload_is_refused_as_payload_error() -> None:
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    assert str(refused({"c": cyclic})) == "turn/start: data: nested too deeply or contains a cycle"


def test_refused_append_does_not_consume_a_seq() -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(PayloadError):
        session.append("step/start", {"step": float("nan")})
    assert session.append("step/start", {"step": 1}).seq == 1
    assert [e.seq for e in session.events] == [0, 1]


# -- accepted values round-trip exactly -------------------------------------------------------

ACCEPTED: dict[str, object] = {
    "null": None,
    "true": True,
    "false": False,
    "zero": 0,
    "negative": -17,
    "big": 2**70,
    "float": 0.1,
    "float_whole": 1.0,
    "tiny": 5e-324,
    "huge": 1.7976931348623157e308,
    "neg_float": -2.5,
    "text": 'quote " backslash \\ newline \n tab \t',
    "unicode": "héllo wörld 🚀 日本",
    "nul": "a\x00b",
    "empty_text": "",
    "empty_list": [],
    "empty_object": {},
    "nested": {"a": [1, [2, [3, {"b": None}]]], "c": {"d": {"e": "f"}}},
    "key with spaces.and.dots": "ok",
}


def round_trips(event: Event) -> None:
    via_dict = Event.from_dict(event.to_dict())
    via_json = Event.from_json(event.to_json())
    assert via_dict == event
    assert via_json == event
    assert via_json.to_dict() == event.to_dict()
    assert json.loads(via_json.to_json()) == json.loads(event.to_json())


def test_accepted_values_round_trip_exactly() -> None:
    event = fresh().append("turn/start", ACCEPTED)
    round_trips(event)
    back = Event.from_json(event.to_json())
    assert back.to_dict()["data"] == ACCEPTED
    # Types are preserved, not just values: 1.0 stays a float, 2**70 stays an int.
    assert type(back.data["float_whole"]) is float
    assert type(back.data["big"]) is int
    assert back.data["big"] == 2**70
    assert type(back.data["true"]) is bool


def test_tuples_are_accepted_as_arrays() -> None:
    event = fresh().append("turn/start", {"pair": (1, "two"), "nested": [(3,)]})
    assert event.data["pair"] == (1, "two")
    assert event.to_dict()["data"] == {"pair": [1, "two"], "nested": [[3]]}
    round_trips(event)


def test_to_json_is_compact_and_keeps_non_ascii() -> None:
    event = fresh().append("turn/start", {"turn": 1, "note": "é"})
    assert event.to_json() == '{"type":"turn/start","seq":0,"time":7,"data":{"turn":1,"note":"é"}}'


JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda f: not (f == 0.0 and math.copysign(1.0, f) < 0)
    )
    | st.text()
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(), JSON_VALUES, max_size=5))
def test_any_accepted_payload_round_trips(data: dict[str, object]) -> None:
    session = fresh()
    try:
        event = session.append("turn/start", data)
    except PayloadError as err:
        # Only lone surrogates may be refused among these values.
        assert "lone surrogate" in str(err)
        return
    round_trips(event)
    assert Event.from_json(event.to_json()).to_dict()["data"] == data


# -- immutability after append ----------------------------------------------------------------


def test_mutating_the_callers_dict_does_not_change_the_event() -> None:
    data: dict[str, object] = {"list": [1, 2], "obj": {"k": "v"}, "turn": 1}
    event = fresh().append("turn/start", data)
    data["turn"] = 99
    data["added"] = True
    data["list"].append(3)  # type: ignore[attr-defined]
    data["obj"]["k"] = "changed"  # type: ignore[index]
    assert event.to_dict()["data"] == {"list": [1, 2], "obj": {"k": "v"}, "turn": 1}


def test_event_data_is_deeply_read_only() -> None:
    event = fresh().append("turn/start", {"list": [1, {"x": 1}], "obj": {"k": "v"}})
    assert isinstance(event.data, MappingProxyType)
    assert isinstance(event.data["list"], tuple)
    assert isinstance(event.data["obj"], MappingProxyType)
    assert isinstance(event.data["list"][1], MappingProxyType)
    with pytest.raises(TypeError):
        event.data["new"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        event.data["obj"]["k"] = "w"  # type: ignore[index]
    with pytest.raises(TypeError):
        del event.data["obj"]  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.data = {}  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 5  # type: ignore[misc]


def test_to_dict_returns_a_fresh_copy() -> None:
    event = fresh().append("turn/start", {"obj": {"k": [1]}})
    copy = event.to_dict()
    copy["data"]["obj"]["k"].append(2)  # type: ignore[index]
    copy["type"] = "changed"
    assert event.to_dict() == {
        "type": "turn/start",
        "seq": 0,
        "time": 7,
        "data": {"obj": {"k": [1]}},
    }


def test_surface_op_is_frozen_too() -> None:
    op = {"op": "replace", "start": 0, "end": 1}
    event = fresh().append("user/message", {"content": "x", "source": "user"}, surface_op=op)
    op["end"] = 5
    assert event.surface_op == {"op": "replace", "start": 0, "end": 1}
    with pytest.raises(TypeError):
        event.surface_op["end"] = 2  # type: ignore[index]


def test_a_frozen_payload_can_be_appended_again() -> None:
    session = fresh()
    first = session.append("turn/start", {"a": [1, {"b": "c"}]})
    again = session.append("turn/start", first.data)
    assert again.data == first.data
    assert again.to_dict()["data"] == {"a": [1, {"b": "c"}]}
