"""An append-only session log.

``Session`` holds the header and the events. It validates every append (known type, lossless
JSON payload, surface rules), assigns contiguous ``seq``, freezes the payload, and notifies
observers synchronously. It keeps the newest event of each type and, for readers that need
more of the log on every request (the agent's history), folds fed each event once
(:meth:`Session.fold`). It knows nothing about storage: the store drains new events to the
persistence backend.
"""

from __future__ import annotations

import logging
import time as _time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol, TypeVar, cast, overload, runtime_checkable

from tether.errors import TetherError
from tether.session._events import (
    Event,
    InvalidEventError,
    UnknownEventTypeError,
    is_known_event_type,
)
from tether.session._header import SessionHeader
from tether.session._json import PayloadError

log = logging.getLogger(__name__)

Clock = Callable[[], int]
EventObserver = Callable[["Session", Event], object]


def wall_clock_ms() -> int:
    return _time.time_ns() // 1_000_000


class LogFold(Protocol):
    """State derived from a log by reading each event once, in seq order
    (:meth:`Session.fold`)."""

    def feed(self, event: Event) -> None: ...


FoldT = TypeVar("FoldT", bound=LogFold)


class SeedError(TetherError):
    code = "INVALID_SEED"


class EventLog(Sequence[Event]):
    """A read-only live view of a session's events (no copy per access)."""

    __slots__ = ("_events",)

    def __init__(self, events: list[Event]) -> None:
        self._events = events

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        if isinstance(index, slice):
            return tuple(self._events[index])
        return self._events[index]

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __reversed__(self) -> Iterator[Event]:
        return reversed(self._events)


class Session:
    """One session: header plus append-only log.

    A seed (fork, replay, resume) is validated like appends and is never published as live
    events. When a seed is given and does not already end in ``session/end-seed``, the marker is
    appended at ``seq == first_live_seq``: it is the durable projection of the boundary.
    """

    def __init__(
        self,
        header: SessionHeader,
        seed: Sequence[Event] = (),
        *,
        clock: Clock = wall_clock_ms,
    ) -> None:
        self.header = header
        self._clock = clock
        self._events: list[Event] = []
        self._observers: list[EventObserver] = []
        self._open_turn = False
        self._last_by_type: dict[str, Event] = {}
        self._undelivered: deque[Event] = deque()
        self._delivering = False
        self._folds: dict[Callable[[], LogFold], tuple[LogFold, int]] = {}
        for index, event in enumerate(seed):
            if event.seq != index:
                raise SeedError(
                    f"seed event {index} has seq {event.seq}; seeds are contiguous from 0"
                )
            if not event.ignorable and not is_known_event_type(event.type):
                raise UnknownEventTypeError(f"seed contains unknown required event {event.type!r}")
            self._track_turn(event)
            self._events.append(event)
        self.first_live_seq = len(self._events)
        """Seed length: events below it were not appended by this incarnation."""
        self.view = EventLog(self._events)
        if self._events and self._events[-1].type != "session/end-seed":
            self.append("session/end-seed", {})

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def events(self) -> EventLog:
        return self.view

    def __len__(self) -> int:
        return len(self._events)

    def __repr__(self) -> str:
        return f"Session({self.id!r}, events={len(self._events)})"

    def has_open_turn(self) -> bool:
        """True when the newest of ``turn/start``/``turn/end`` is a ``turn/start``."""
        return self._open_turn

    def append(
        self,
        type: str,
        data: Mapping[str, object] | None = None,
        *,
        ignorable: bool = False,
        surface_op: object = None,
    ) -> Event:
        if not ignorable and not is_known_event_type(type):
            raise UnknownEventTypeError(
                f"cannot append unknown event type {type!r}: register it with "
                "tether.session.register_event_type first"
            )
        try:
            event = Event.make(
                type,
                len(self._events),
                self._clock(),
                data,
                ignorable=ignorable,
                surface_op=surface_op,
            )
        except PayloadError as err:
            # Nothing was appended: the log stays as it was, and the error says which event.
            raise PayloadError(f"{type}: {err}") from None
        self._track_turn(event)
        self._events.append(event)
        self._undelivered.append(event)
        if self._delivering:
            # Appended by an observer: delivered once the current event has reached every
            # observer, so each observer sees events in seq order.
            return event
        self._delivering = True
        try:
            while self._undelivered:
                current = self._undelivered.popleft()
                for observer in tuple(self._observers):
                    try:
                        observer(self, current)
                    except Exception:  # observers never undo a committed append
                        log.exception(
                            "session observer failed on %s #%d", current.type, current.seq
                        )
        finally:
            self._delivering = False
        return event

    def observe(self, observer: EventObserver) -> Callable[[], None]:
        """Call ``observer(session, event)`` synchronously after each append.

        An append made by an observer is delivered after the event being delivered has
        reached every observer (still before the outermost ``append`` returns).
        """
        self._observers.append(observer)

        def remove() -> None:
            if observer in self._observers:
                self._observers.remove(observer)

        return remove

    def _track_turn(self, event: Event) -> None:
        self._last_by_type[event.type] = event
        if event.type == "turn/start":
            self._open_turn = True
        elif event.type == "turn/end":
            self._open_turn = False

    def last(self, event_type: str) -> Event | None:
        """The newest event of ``event_type`` (last-event-wins folds start here)."""
        return self._last_by_type.get(event_type)

    def fold(self, kind: Callable[[], FoldT]) -> FoldT:
        """This session's fold of kind ``kind``, fed every event up to now.

        The first call makes it (``kind()``) and feeds it the whole log; each later call feeds
        it only the events appended since the one before. So a fold is always exactly what
        feeding the log from seq 0 gives, while reading it costs the new events, not the log:
        what keeps a model request as cheap at event 100,000 as at event 100. A fold that
        raises is dropped (the next call starts over from seq 0) and the error propagates; a
        fold never appends to the log it reads.
        """
        entry = self._folds.get(kind)
        fold, fed = entry if entry is not None else (kind(), 0)
        if fed < len(self._events):
            batch = self.view[fed:]
            try:
                for event in batch:
                    fold.feed(event)
            except BaseException:
                self._folds.pop(kind, None)
                raise
            fed += len(batch)
        self._folds[kind] = (fold, fed)
        # ``kind`` made this fold, so it is a ``FoldT``; the table cannot say so per key.
        return cast(FoldT, fold)


@runtime_checkable
class HasSession(Protocol):
    """An agent as the layers below the agent layer see it: something acting in a session.
    Its identity is also the scope of scoped listeners and prompt parts."""

    @property
    def session(self) -> Session: ...


def has_open_turn(events: Sequence[Event]) -> bool:
    """Pure form of :meth:`Session.has_open_turn` for stored or sliced logs."""
    for event in reversed(events):
        if event.type == "turn/start":
            return True
        if event.type == "turn/end":
            return False
    return False


__all__ = [
    "Clock",
    "Event",
    "EventLog",
    "HasSession",
    "InvalidEventError",
    "LogFold",
    "SeedError",
    "Session",
    "has_open_turn",
]
