"""Record encoding and decoding shared by the bundled backends.

Both backends store one JSON text per event and read it back through :meth:`Event.from_dict`,
the single validation path for stored records (it refuses unknown required types). This module
holds what they share: a fast encoder for frozen payloads, the decoder, the torn-tail rule, and
a garbage-collector pause for bulk loads.

The torn-tail rule, the same for every backend: invalid records at the very end of a log are a
torn write and are dropped (the append that wrote them never returned, so nothing committed is
lost); an invalid record followed by any complete record is corruption, because dropping it
would lose what comes after. A complete record whose ``seq`` is not its position is corruption
too: a torn write cannot produce it. A record of an unknown required type is refused, never
treated as torn.
"""

from __future__ import annotations

import gc
import json
import json.encoder
import threading
from _json import make_encoder
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from tether.session._events import Event, InvalidEventError, UnknownEventTypeError
from tether.session._json import JsonValue
from tether.session.persistence._base import CorruptLogError, SeqConflictError

R = TypeVar("R")


_thaw_proxy: Callable[[object], object] = MappingProxyType.copy  # type: ignore[assignment]
"""The encoder's ``default``: frozen payloads are read-only mappings (tuples already encode as
arrays); copying one level lets the C encoder do the rest, about four times as fast as thawing
in Python. A C method, so no Python frame per mapping (half the cost of a function calling
``dict``); anything else a frozen value cannot hold fails with ``TypeError``."""


def _encoder(quote: Callable[[str], str]) -> make_encoder:
    """The C encoder ``json.JSONEncoder(separators=(",", ":"), check_circular=False,
    default=_thaw_proxy).encode`` uses, made once: ``encode`` makes a new one on every call,
    through two Python frames, which cost a quarter of a small record's encoding (the write
    path encodes every event). Called as ``encoder(value, 0)``: the text's chunks, in order."""
    return make_encoder(None, _thaw_proxy, quote, None, ":", ",", False, False, True)


_encode_utf8 = _encoder(json.encoder.encode_basestring)
_encode_ascii = _encoder(json.encoder.encode_basestring_ascii)


def dumps(value: object) -> str:
    """Compact JSON of a frozen value, always encodable as UTF-8.

    Strings may hold lone surrogates (valid in JSON escapes, not in UTF-8); only then is the
    text written with ASCII escapes, which round-trips exactly.
    """
    text = "".join(_encode_utf8(value, 0))
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "".join(_encode_ascii(value, 0))
    return text


def event_record(event: Event) -> dict[str, object]:
    """The stored envelope of ``event`` (same keys and order as :meth:`Event.to_dict`)."""
    out: dict[str, object] = {
        "type": event.type,
        "seq": event.seq,
        "time": event.time,
        "data": event.data,
    }
    if event.ignorable:
        out["ignorable"] = True
    if event.surface_op is not None:
        out["surface_op"] = event.surface_op
    return out


def event_line(event: Event) -> bytes:
    """One JSONL line: byte-identical to ``Event.to_json()`` plus a newline."""
    return (dumps(event_record(event)) + "\n").encode("utf-8")


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_scan: Callable[[str, int], tuple[object, int]] = _decoder.scan_once  # type: ignore[attr-defined]


def loads(text: str) -> object:
    """Parse JSON text, refusing ``NaN`` and ``Infinity``; raises ``ValueError``.

    A stored record is compact JSON: scanned from its first character to its last, it needs
    none of ``decode``'s whitespace handling, which costs as much again. Anything else (space
    around it, garbage after it, nothing) is ``decode``'s to accept or refuse."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return _decoder.decode(text)
    return value if end == len(text) else _decoder.decode(text)


def surface_op_text(value: JsonValue) -> str | None:
    if value is None:
        return None
    return '"append"' if value == "append" else dumps(value)


def parse_surface_op(text: str) -> object:
    return "append" if text == '"append"' else loads(text)


@dataclass(frozen=True, slots=True)
class DecodedLog:
    events: list[Event]
    torn: int
    """How many trailing records were invalid (a torn write) and are not in ``events``."""


INVALID_RECORD = (ValueError, RecursionError, InvalidEventError)
"""What a damaged record raises while parsing or validating (``JSONDecodeError`` and
``UnicodeDecodeError`` are ``ValueError``s)."""


def decode_log(
    session_id: str,
    records: Sequence[R],
    decode: Callable[[R], Event],
    where: Callable[[int], str],
) -> DecodedLog:
    """Validate ``records`` in order with ``decode``, applying the torn-tail rule.

    ``decode`` turns a stored record into its event through :meth:`Event.from_dict` (or its
    fast path, :func:`~tether.session._events.plain_event`), raising one of
    :data:`INVALID_RECORD` when the record is unreadable or invalid; ``where(index)`` names a
    record's position for error messages.
    """
    events: list[Event] = []
    append = events.append
    for index, record in enumerate(records):
        try:
            event = decode(record)
        except INVALID_RECORD as err:
            _require_torn(session_id, records, index, decode, where, err)
            return DecodedLog(events, len(records) - index)
        if event.seq != index:
            raise CorruptLogError(
                f"session {session_id!r}: {where(index)}: expected seq {index}, found seq "
                f"{event.seq} (events are missing or out of order)"
            )
        append(event)
    return DecodedLog(events, 0)


def _require_torn(
    session_id: str,
    records: Sequence[R],
    first_bad: int,
    decode: Callable[[R], Event],
    where: Callable[[int], str],
    error: BaseException,
) -> None:
    for later in range(first_bad + 1, len(records)):
        try:
            decode(records[later])
        except UnknownEventTypeError:
            pass  # a complete record all the same
        except INVALID_RECORD:
            continue
        raise CorruptLogError(
            f"session {session_id!r}: {where(first_bad)} is damaged ({error}) but "
            f"{where(later)} after it is intact; refusing to drop committed events"
        )


def is_complete_record(raw: object) -> bool:
    """True when ``raw`` is a whole event, even of a type this reader does not know."""
    try:
        Event.from_dict(raw)
    except UnknownEventTypeError:
        return True
    except INVALID_RECORD:
        return False
    return True


class _GcPause:
    """Pause the cyclic garbage collector while bulk-decoding a log.

    Decoding allocates hundreds of thousands of acyclic containers; each allocation burst
    triggers collections that re-traverse everything allocated so far, which roughly doubles
    load time for large logs. Nesting and concurrent pauses from several threads are counted,
    and the collector is re-enabled only if it was enabled when the first pause began.

    What the pause let pile up is handed to the oldest generation as it ends (decision 0062):
    a loaded log lives as long as its session, and left in the youngest generation it would be
    traversed by the next young collection, again by the next middle one, and by a full one
    that its own size triggers (about 0.2 µs per event each, the first inside the load).
    ``gc.freeze`` then ``gc.unfreeze`` moves every tracked object there without traversing
    any; it is skipped when the process froze objects of its own, which the second call would
    thaw.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._was_enabled:
                    if gc.get_count()[0] >= gc.get_threshold()[0] and gc.get_freeze_count() == 0:
                        gc.freeze()
                        gc.unfreeze()
                    gc.enable()


gc_paused = _GcPause()


def check_contiguous(session_id: str, events: Sequence[Event]) -> None:
    """Refuse a batch whose seqs are not consecutive (before any storage is touched)."""
    first = events[0].seq
    for offset, event in enumerate(events):
        if event.seq != first + offset:
            raise SeqConflictError(
                f"session {session_id!r}: append batch is not contiguous "
                f"(seq {event.seq} at position {offset}, expected {first + offset})"
            )


def check_continues(session_id: str, first: int, stored: int) -> None:
    """Refuse an append whose first seq is not the number of events stored: another writer
    appended, or the appender's view of the session is stale."""
    if first != stored:
        raise SeqConflictError(
            f"session {session_id!r}: append starts at seq {first} but {stored} events are "
            "stored (another writer appended, or this session is stale)"
        )


def check_first_batch(session_id: str, events: Sequence[Event]) -> None:
    """Refuse a new session's first batch unless it is contiguous from seq 0 (before any
    storage is touched); an empty one is fine."""
    if not events:
        return
    check_contiguous(session_id, events)
    if events[0].seq != 0:
        raise SeqConflictError(
            f"session {session_id!r}: a new session's first event is seq 0, not {events[0].seq}"
        )
