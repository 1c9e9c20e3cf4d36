"""The loading fast paths decide exactly as the general path does.

``freeze`` takes plain values (exact ``dict``, ``list``, ``str``, ...) on a path without field
paths or ABC checks, ``Event.from_dict`` takes plain records on a path that skips the
envelope's error reporting, and the SQLite backend builds events straight from a row's
columns. Each must accept exactly what the general path accepts, build an equal event of the
same shape, and leave every refusal (and its message) to the general path. Hypothesis draws
records of every shape, valid and not: nested JSON, unicode with lone surrogates, large and
negative integers, non-finite and negative-zero floats, subclasses, wrong envelope types.
"""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.session._events import CORE_EVENT_TYPES, Event
from tether.session._json import _freeze, freeze, freeze_object, frozen_object
from tether.session.persistence._codec import dumps, loads, surface_op_text
from tether.session.persistence._jsonl import _line_event
from tether.session.persistence._sqlite import _parse_row, _row_event

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Level(enum.IntEnum):
    ONE = 1


class Text(str):
    pass


any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=8)
"""Any code point, lone surrogates included."""

valid_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 0 or str(f) == "0.0"),
    st.text(max_size=8),
    st.sampled_from(["plain", "héllo", "世界 🧪", ""]),
)
edge_scalars = st.one_of(
    st.sampled_from([-0.0, math.nan, math.inf, -math.inf, "\udc80 lone", "a\udfff"]),
    any_text,
    st.floats(allow_nan=True, allow_infinity=True),
)
odd_scalars = st.one_of(
    st.just(Level.ONE), st.builds(Text, any_text), st.just(b"bytes"), st.just(object())
)
# Mostly valid leaves, so that one bad leaf is often the only one (the paths must agree on it
# alone, not only when something else already refuses the value).
leaves = st.one_of(valid_scalars, valid_scalars, valid_scalars, edge_scalars, odd_scalars)


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.one_of(st.text(max_size=6), st.text(max_size=6), any_text, st.just("\udcff"))
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=4),
        st.dictionaries(keys, children, max_size=3).map(MappingProxyType),
        st.dictionaries(keys, children, max_size=3).map(OrderedDict),
        st.dictionaries(st.one_of(st.integers(), st.none()), children, min_size=1, max_size=2),
    )


values = st.recursive(leaves, containers, max_leaves=12)
plain_values = st.recursive(
    valid_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)

types = st.sampled_from([*sorted(CORE_EVENT_TYPES), "conformance/never-registered", "", "no-slash"])
surface_ops = st.one_of(
    st.none(),
    st.just("append"),
    st.just("replace"),
    st.fixed_dictionaries(
        {"op": st.just("replace"), "start": st.integers(-1, 3), "end": st.integers(-1, 3)}
    ),
    values,
)
envelope_values = st.one_of(
    st.integers(min_value=-3, max_value=2**70),
    st.booleans(),
    st.none(),
    any_text,
    st.floats(),
    values,
)


@st.composite
def records(draw: st.DrawFn) -> object:
    raw: dict[str, object] = {
        "type": draw(st.one_of(types, envelope_values)),
        "seq": draw(st.one_of(st.integers(0, 10**20), envelope_values)),
        "time": draw(st.one_of(st.integers(), envelope_values)),
        "data": draw(st.one_of(st.dictionaries(any_text, values, max_size=4), values)),
    }
    if draw(st.booleans()):
        raw["ignorable"] = draw(st.one_of(st.booleans(), envelope_values))
    if draw(st.booleans()):
        raw["surface_op"] = draw(surface_ops)
    for key in draw(st.lists(st.sampled_from(["type", "seq", "time", "data"]), max_size=1)):
        del raw[key]
    if draw(st.integers(0, 20)) == 0:
        raw["extra"] = 1
    return raw if draw(st.integers(0, 10)) else draw(st.one_of(values, st.builds(OrderedDict)))


def shape(value: object) -> object:
    """``value`` with every type made visible (a tuple is not a list, -0.0 is not 0.0)."""
    if isinstance(value, Mapping):
        return (type(value).__name__, [(type(k).__name__, k, shape(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [shape(item) for item in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def event_shape(event: Event) -> object:
    return (
        type(event).__name__,
        shape(event.type),
        shape(event.seq),
        shape(event.time),
        shape(event.data),
        shape(event.ignorable),
        shape(event.surface_op),
    )


def outcome(decide: Callable[[], object]) -> object:
    try:
        result = decide()
    except Exception as err:
        return ("refused", type(err).__name__, str(err))
    return ("taken", event_shape(result) if isinstance(result, Event) else shape(result))


@SETTINGS
@given(values)
def test_freeze_decides_as_the_general_path(value: object) -> None:
    assert outcome(lambda: freeze(value)) == outcome(lambda: _freeze(value, "data"))


@SETTINGS
@given(records())
def test_from_dict_decides_as_the_general_path(raw: object) -> None:
    assert outcome(lambda: Event.from_dict(raw)) == outcome(lambda: Event._from_record(raw))


DAMAGE: list[tuple[str, object]] = [
    ("seq", -1),
    ("seq", True),
    ("seq", 1.0),
    ("seq", "1"),
    ("time", False),
    ("time", 1.5),
    ("time", None),
    ("type", ""),
    ("type", "conformance/never-registered"),
    ("type", Text("turn/start")),
    ("type", 7),
    ("ignorable", 1),
    ("ignorable", None),
    ("ignorable", "true"),
    ("surface_op", "append"),
    ("surface_op", "replace"),
    ("surface_op", {"op": "replace", "start": 0, "end": 0}),
    ("surface_op", Text("append")),
    ("data", None),
    ("data", []),
    ("data", OrderedDict(a=1)),
    ("data", MappingProxyType({"a": 1})),
    ("extra", 1),
]


@pytest.mark.parametrize("damage", DAMAGE, ids=[f"{k}={v!r}" for k, v in DAMAGE])
@pytest.mark.parametrize("event_type", ["session/title", "tool/result"])
@pytest.mark.parametrize("ignorable", [False, True])
def test_each_damage_alone_is_judged_alike(
    damage: tuple[str, object], event_type: str, ignorable: bool
) -> None:
    raw: dict[str, object] = {"type": event_type, "seq": 2, "time": 9, "data": {"k": [1, "v"]}}
    if event_type == "tool/result":
        raw["surface_op"] = "append"
    if ignorable:
        raw["ignorable"] = True
    key, value = damage
    raw[key] = value
    assert outcome(lambda: Event.from_dict(raw)) == outcome(lambda: Event._from_record(raw))


@SETTINGS
@given(
    st.dictionaries(st.text(max_size=6), plain_values, max_size=4),
    st.sampled_from(["session/title", "tool/result", "turn/start"]),
    st.one_of(st.none(), st.sampled_from(DAMAGE)),
    st.one_of(st.none(), edge_scalars, odd_scalars),
    st.booleans(),
)
def test_one_damage_to_a_valid_record_is_judged_alike(
    data: dict[str, object],
    event_type: str,
    damage: tuple[str, object] | None,
    bad_leaf: object,
    ignorable: bool,
) -> None:
    raw: dict[str, object] = {"type": event_type, "seq": 2, "time": 9, "data": data}
    if event_type == "tool/result":
        raw["surface_op"] = "append"
    if ignorable:
        raw["ignorable"] = True
    if bad_leaf is not None:
        data["leaf"] = [bad_leaf] if len(data) % 2 else bad_leaf
    if damage is not None:
        key, value = damage
        raw[key] = value
    assert outcome(lambda: Event.from_dict(raw)) == outcome(lambda: Event._from_record(raw))
    assert outcome(lambda: freeze(data)) == outcome(lambda: _freeze(data, "data"))


@SETTINGS
@given(plain_values, st.booleans())
def test_a_plain_record_takes_the_fast_path_and_round_trips(data: object, append: bool) -> None:
    # What a store holds: a valid record, written as JSON text and read back.
    if not isinstance(data, dict):
        data = {"value": data}
    event_type = "tool/result" if append else "session/title"
    try:
        event = Event.make(
            event_type, 3, 1_700_000_000_000, data, surface_op="append" if append else None
        )
    except Exception:
        return  # not lossless JSON (a lone surrogate, -0.0, ...): never stored
    read = loads(dumps(event.to_dict()))
    assert event_shape(Event.from_dict(read)) == event_shape(event)
    assert event_shape(Event._from_record(read)) == event_shape(event)


@SETTINGS
@given(
    st.one_of(types, envelope_values),
    st.one_of(st.integers(0, 10**20), envelope_values),
    st.one_of(st.integers(), envelope_values),
    st.one_of(plain_values, st.just("{not json"), st.just('{"a": 1} '), st.integers()),
    st.one_of(st.sampled_from([0, 1, 2, -1]), st.booleans(), st.just("1"), st.none()),
    st.one_of(
        st.none(),
        st.just('"append"'),
        st.just('{"op":"replace","start":0,"end":1}'),
        st.just("[broken"),
        st.integers(),
    ),
)
def test_a_sqlite_row_decides_as_its_record(
    event_type: object, seq: object, time: object, data: object, ignorable: object, op: object
) -> None:
    text = data if isinstance(data, str) else _json_text(data)
    row: Any = (seq, event_type, time, text, ignorable, op)
    assert outcome(lambda: _row_event(row)) == outcome(lambda: Event.from_dict(_parse_row(row)))


def _json_text(value: object) -> str:
    try:
        return dumps(value)
    except (TypeError, ValueError):
        return "null"


# Texts as a store holds them and as anything else could have written them: escapes of lone
# surrogates and of plain characters, floats JSON has but a frozen payload does not, brackets
# inside strings, nesting at and beyond the fast paths' depth, spaces, trailing garbage.
EDGE_TEXTS = [
    '{"a":"\\ud800"}',
    '{"a":"\\u00e9","b":"\\\\u"}',
    '{"\\udc80":1}',
    '{"a":"\\ud83d\\ude00"}',
    '{"a":1e999}',
    '{"a":-1e999}',
    '{"a":-0.0}',
    '{"a":-0e5}',
    '{"a":0.0,"b":1.5e-300,"c":-2.5}',
    '{"a":NaN}',
    '{"a":Infinity}',
    '{"a":"[not an array]"}',
    '{"a":[1]}',
    '{"a":1} ',
    ' {"a":1}',
    '{"a":1}x',
    '{"a":1',
    '{"a" : { "b" : true }, "c":null}',
    '{"a":1,"a":2}',
    '{"a":' + "1" * 5000 + "}",
    "[]",
    '"text"',
    "",
    "{}",
    *('{"":' * depth + "{}" + "}" * depth for depth in (62, 63, 64, 65, 200, 2000)),
    *('{"a":' * depth + "{}" + "}" * depth for depth in (63, 64)),
]


def parsed_and_frozen(text: str) -> object:
    return freeze_object(loads(text))


@pytest.mark.parametrize("text", EDGE_TEXTS, ids=lambda text: text[:40])
def test_frozen_object_decides_as_parse_and_freeze(text: str) -> None:
    _frozen_object_agrees(text, compact=False)


@SETTINGS
@given(st.one_of(values, st.dictionaries(any_text, values, max_size=4)), st.booleans())
def test_frozen_object_of_any_text_decides_as_parse_and_freeze(
    value: object, ascii_only: bool
) -> None:
    try:
        text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
    except (TypeError, ValueError):
        return  # not JSON at all
    _frozen_object_agrees(text, compact=True)


def _frozen_object_agrees(text: str, *, compact: bool) -> None:
    """The fast path takes only what parsing and freezing take, and builds the same value."""
    fast = frozen_object(text)
    general = outcome(lambda: parsed_and_frozen(text))
    if fast is not None:
        assert ("taken", shape(fast)) == general
    if compact and general[0] == "taken" and "[" not in text and "\\u" not in text:
        assert fast is not None  # compact, array-free, unescaped: the fast path takes it


@SETTINGS
@given(records(), st.booleans())
def test_a_jsonl_line_decides_as_its_record(raw: object, ascii_only: bool) -> None:
    try:
        line = json.dumps(raw, ensure_ascii=ascii_only, separators=(",", ":"))
        data = line.encode("utf-8")
    except (TypeError, ValueError):
        return  # not JSON text (a byte string, an object, a lone surrogate unescaped)
    assert outcome(lambda: _line_event(data)) == outcome(lambda: Event.from_dict(loads(line)))


@pytest.mark.parametrize("text", EDGE_TEXTS, ids=lambda text: text[:40])
def test_an_edge_payload_decides_alike_in_a_row_and_a_line(text: str) -> None:
    row: Any = (2, "session/title", 9, text, 0, None)
    line = f'{{"type":"session/title","seq":2,"time":9,"data":{text}}}'
    record = outcome(lambda: Event.from_dict(_parse_row(row)))
    assert outcome(lambda: _row_event(row)) == record
    assert outcome(lambda: _line_event(line.encode())) == outcome(
        lambda: Event.from_dict(loads(line))
    )


def test_the_fast_paths_are_taken() -> None:
    # Not a timing: the plain record builds an event without the general path's checks.
    raw = loads(
        '{"type":"tool/result","seq":4,"time":5,"data":{"content":"ok","n":[1,2.5,{"k":null}]},"surface_op":"append"}'
    )
    assert isinstance(raw, dict)
    event = Event.from_dict(raw)
    assert type(event.data) is MappingProxyType
    assert event.data["n"] == (1, 2.5, MappingProxyType({"k": None}))
    assert event.surface_op == "append"
    assert math.isclose(event.data["n"][1], 2.5)  # type: ignore[index]
    row_event = _row_event((4, "tool/result", 5, dumps(event.data), 0, surface_op_text("append")))
    assert event_shape(row_event) == event_shape(event)
    # A payload without arrays is frozen as it is parsed, in a row and in a line alike.
    text = '{"content":"ok (1)","n":{"k":null,"f":2.5},"t":true}'
    frozen = frozen_object(text)
    assert frozen is not None and shape(frozen) == shape(freeze_object(loads(text)))
    line = f'{{"type":"session/title","seq":1,"time":2,"data":{text},"ignorable":false}}'
    assert event_shape(_line_event(line.encode())) == event_shape(Event.from_dict(loads(line)))
