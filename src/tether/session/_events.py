"""The event envelope and the closed vocabulary of event types.

An event is ``{type, seq, time, data, ignorable?, surface_op?}``. ``seq`` is contiguous from 0
and equals the event's index in its session. Surface events (the ones the model sees) carry a
``surface_op``; every other event is log-only. An event type a reader does not know is refused
on load unless the event is marked ``ignorable``: skipping a required fact (say, a
``sandbox/mode`` switch) could silently widen what a resumed session may do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, TypeGuard

from tether.errors import TetherError
from tether.session._json import (
    JsonObject,
    JsonValue,
    NotPlain,
    PayloadError,
    freeze,
    freeze_object,
    freeze_plain,
    frozen_object,
    thaw,
)

SURFACE_EVENT_TYPES: Final = frozenset({"user/message", "assistant/message", "tool/result"})
"""Events that form model history; they must carry ``surface_op``."""

CORE_EVENT_TYPES: Final = frozenset(
    {
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "user/message",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "request/header",
        "request/context",
        "session/end-seed",
        "agent/inbox/spliced",
        "sandbox/mode",
        "approval/policy",
        "approval/asked",
        "approval/decided",
        "approval/pending",
        "approval/answer-refused",
        "approval/grant",
        "approval/grant-revoked",
        "permission/preset",
        "permission/rules",
        "subagent/descriptor",
        "subagent/notice",
        "hook/invoked",
        "hook/result",
        "session/title",
        "context/compacted",
        "context/compact-failed",
    }
)

_registered: set[str] = set(CORE_EVENT_TYPES)


class UnknownEventTypeError(TetherError):
    code = "UNKNOWN_EVENT_TYPE"


class InvalidEventError(TetherError):
    code = "INVALID_EVENT"


def register_event_type(name: str) -> None:
    """Declare an event type owned by a plugin, so sessions may append and load it."""
    if not name or "/" not in name:
        raise InvalidEventError(f"event type {name!r} must look like 'owner/name'")
    _registered.add(name)


def is_known_event_type(name: str) -> bool:
    return name in _registered


def _check_surface_op(event_type: str, surface_op: JsonValue) -> None:
    surface = event_type in SURFACE_EVENT_TYPES
    if not surface:
        if surface_op is not None:
            raise InvalidEventError(f"{event_type} is log-only and must not carry surface_op")
        return
    if surface_op == "append":
        return
    if (
        isinstance(surface_op, Mapping)
        and surface_op.get("op") == "replace"
        and set(surface_op) == {"op", "start", "end"}
    ):
        start, end = surface_op["start"], surface_op["end"]
        # bool is an int subclass; ``True`` is not a surface index.
        if _is_index(start) and _is_index(end) and 0 <= start <= end:
            return
    raise InvalidEventError(
        f"{event_type} is a surface event: surface_op must be 'append' or "
        f"{{op: 'replace', start, end}}, got {surface_op!r}"
    )


@dataclass(frozen=True, slots=True)
class Event:
    """One immutable log entry. Build with :meth:`make` or :meth:`from_dict`, which validate."""

    type: str
    seq: int
    time: int
    data: JsonObject = field(repr=False)
    ignorable: bool = False
    surface_op: JsonValue = None

    @classmethod
    def make(
        cls,
        type: str,
        seq: int,
        time: int,
        data: Mapping[str, object] | None = None,
        *,
        ignorable: bool = False,
        surface_op: object = None,
    ) -> Event:
        if not isinstance(type, str) or not type:
            raise InvalidEventError(f"event type must be a non-empty string, got {type!r}")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise InvalidEventError(f"{type}: seq must be a non-negative integer, got {seq!r}")
        if not isinstance(time, int) or isinstance(time, bool):
            raise InvalidEventError(f"{type}: time must be integer epoch ms, got {time!r}")
        # ``None`` and ``"append"`` (nearly every event) are immutable already.
        frozen_op = (
            surface_op
            if surface_op is None or (surface_op.__class__ is str and surface_op == "append")
            else freeze(surface_op, "surface_op")
        )
        _check_surface_op(type, frozen_op)
        return _built(
            type, seq, time, freeze_object({} if data is None else data), ignorable, frozen_op
        )

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "type": self.type,
            "seq": self.seq,
            "time": self.time,
            "data": thaw(self.data),
        }
        if self.ignorable:
            out["ignorable"] = True
        if self.surface_op is not None:
            out["surface_op"] = thaw(self.surface_op)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_dict(cls, raw: object) -> Event:
        """Validate a stored record. Unknown required types are refused.

        A record as JSON parsing builds it, of a known type, takes a fast path
        (:func:`_plain_record`); anything else, and anything it does not take, is decided by
        the checks below, which name what is wrong."""
        if type(raw) is dict:
            event = _plain_record(raw)
            if event is not None:
                return event
        return cls._from_record(raw)

    @classmethod
    def _from_record(cls, raw: object) -> Event:
        if not isinstance(raw, Mapping):
            raise InvalidEventError(f"event must be a JSON object, got {type(raw).__name__}")
        extra = set(raw) - {"type", "seq", "time", "data", "ignorable", "surface_op"}
        if extra:
            raise InvalidEventError(f"event has unknown envelope fields: {sorted(extra)}")
        event_type = raw.get("type")
        ignorable = raw.get("ignorable", False)
        if not isinstance(ignorable, bool):
            raise InvalidEventError("event field 'ignorable' must be a boolean")
        if not isinstance(event_type, str):
            raise InvalidEventError(f"event type must be a string, got {event_type!r}")
        if "data" not in raw:
            raise InvalidEventError(f"{event_type}: event has no 'data' field")
        if not isinstance(raw["data"], Mapping):
            # ``make`` reads a missing payload as ``{}``; a stored ``null`` must not be.
            raise InvalidEventError(
                f"{event_type}: event 'data' must be a JSON object, got {raw['data']!r}"
            )
        if not ignorable and not is_known_event_type(event_type):
            raise UnknownEventTypeError(
                f"unknown required event type {event_type!r}: refusing to reconstruct the "
                "session (a newer tether or a missing plugin wrote it)"
            )
        try:
            return cls.make(
                event_type,
                raw.get("seq"),  # type: ignore[arg-type]
                raw.get("time"),  # type: ignore[arg-type]
                raw.get("data"),
                ignorable=ignorable,
                surface_op=raw.get("surface_op"),
            )
        except PayloadError as err:
            raise InvalidEventError(f"{event_type}: {err}") from err

    @classmethod
    def from_json(cls, text: str) -> Event:
        try:
            raw = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as err:
            raise InvalidEventError(f"event is not valid JSON: {err}") from err
        return cls.from_dict(raw)


_ENVELOPE: Final = frozenset({"type", "seq", "time", "data", "ignorable", "surface_op"})


def _plain_record(raw: dict[str, object]) -> Event | None:
    if not raw.keys() <= _ENVELOPE:
        return None
    get = raw.get
    return plain_event(
        get("type"),
        get("seq"),
        get("time"),
        get("data"),
        get("ignorable", False),
        get("surface_op"),
    )


def plain_event(
    event_type: object,
    seq: object,
    time: object,
    data: object,
    ignorable: object,
    surface_op: object,
) -> Event | None:
    """The fast path of :meth:`Event.from_dict`, from a stored record's fields: the event,
    when every field is of its exact type and the type is known (a surface event appending,
    any other without ``surface_op``), else ``None``, and the record must go through
    :meth:`Event.from_dict`, which decides and names what is wrong. It accepts only records
    that path accepts and builds the same event, with no ABC checks and no field paths (about
    half the cost of a load). A backend may call it with the fields it read, before building
    the record."""
    if type(data) is not dict or not _plain_envelope(event_type, seq, time, ignorable, surface_op):
        return None
    try:
        frozen: JsonObject = freeze_plain(data)  # type: ignore[assignment]  # a dict's
    except (NotPlain, RecursionError):
        return None
    return _built(event_type, seq, time, frozen, ignorable, surface_op)  # type: ignore[arg-type]


def plain_text_event(
    event_type: object,
    seq: object,
    time: object,
    data: str,
    ignorable: object,
    surface_op: object,
) -> Event | None:
    """:func:`plain_event` of a payload still in its stored JSON text: the same event, its
    payload frozen as it is parsed (:func:`~tether.session._json.frozen_object`), or ``None``
    when the fields or the text do not take this path, and the backend parses the text and
    goes on as for :func:`plain_event`."""
    if not _plain_envelope(event_type, seq, time, ignorable, surface_op):
        return None
    frozen = frozen_object(data)
    if frozen is None:
        return None
    return _built(event_type, seq, time, frozen, ignorable, surface_op)  # type: ignore[arg-type]


def plain_record_text(text: str) -> Event | None:
    """:meth:`Event.from_dict` of a stored record still in its JSON text, on the fast path:
    the same event, the record frozen as it is parsed
    (:func:`~tether.session._json.frozen_object`), or ``None`` when the text or the record do
    not take this path, and the backend parses the text for :meth:`Event.from_dict`."""
    record = frozen_object(text)
    if record is None or not record.keys() <= _ENVELOPE:
        return None
    get = record.get
    event_type, seq, time, data = get("type"), get("seq"), get("time"), get("data")
    ignorable, surface_op = get("ignorable", False), get("surface_op")
    if type(data) is not MappingProxyType or not _plain_envelope(
        event_type, seq, time, ignorable, surface_op
    ):
        return None
    return _built(event_type, seq, time, data, ignorable, surface_op)  # type: ignore[arg-type]


def _plain_envelope(
    event_type: object, seq: object, time: object, ignorable: object, surface_op: object
) -> bool:
    """Every envelope field of its exact type, the type known, ``surface_op`` as the type
    needs it (the fast paths' half of :meth:`Event.from_dict`'s checks)."""
    if (
        type(event_type) is not str
        or not event_type
        or type(seq) is not int
        or seq < 0
        or type(time) is not int
        or type(ignorable) is not bool
    ):
        return False
    if not ignorable and event_type not in _registered:
        return False
    if event_type in SURFACE_EVENT_TYPES:
        return type(surface_op) is str and surface_op == "append"
    return surface_op is None


class _Fields:
    """An event under construction: :class:`Event`'s very slots, writable. Its ``__init__``
    fills them with plain attribute stores and then makes the object the :class:`Event` it
    now is (the layouts are the same, so CPython allows the class change): less than half the
    cost of the slots' setters called one by one, and a sixth of the frozen dataclass's
    ``__init__``, which goes through ``object.__setattr__`` field by field. Every event of a
    load and every append is built here; nothing outside this module sees a ``_Fields``."""

    __slots__ = Event.__slots__

    def __init__(
        self,
        event_type: str,
        seq: int,
        time: int,
        data: JsonObject,
        ignorable: bool,
        surface_op: JsonValue,
    ) -> None:
        self.type = event_type
        self.seq = seq
        self.time = time
        self.data = data
        self.ignorable = ignorable
        self.surface_op = surface_op
        self.__class__ = Event  # type: ignore[assignment]


_built: Callable[[str, int, int, JsonObject, bool, JsonValue], Event] = _Fields  # type: ignore[assignment]
"""``Event(...)`` of checked fields (see :class:`_Fields`)."""


def _is_index(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")
