"""In-memory persistence (``memory://``): sessions that live and die with one process.

Nothing is written anywhere: a session stored here is gone when the process ends or the
backend is closed, and no other process can see it (``tether approvals answer``, ``tether
sessions ...`` and ``--approval-from store`` need a store on disk, and refuse this one with
``STORE_IN_MEMORY``). For tests, and for programs that want an agent without a record: the
permission scope, the approval service, the audit pair and cold resume within the process
all work as on a disk store, and every rule of the ``Persistence`` contract holds (the
conformance kit checks it). Only durability is absent, which is the point.

Events are kept as the immutable objects that were appended, so a commit costs no encoding
and no thread hand-off; commit listeners hear each batch before ``append`` returns.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tether.session._events import Event, UnknownEventTypeError, is_known_event_type
from tether.session._header import SessionHeader
from tether.session.persistence._base import (
    PersistenceError,
    SessionExistsError,
    SessionNotFoundError,
    StoredSession,
)
from tether.session.persistence._codec import (
    check_contiguous,
    check_continues,
    check_first_batch,
)
from tether.session.persistence._commits import Commit, CommitFeed, CommitListener
from tether.session.persistence._repair import plan_repair


@dataclass(slots=True)
class _Log:
    header: SessionHeader
    events: list[Event] = field(default_factory=list)


class MemoryPersistence:
    """Sessions in this process's memory (see the module docstring)."""

    def __init__(self) -> None:
        self._logs: dict[str, _Log] = {}
        self._commits = CommitFeed()
        self._closed = False

    def __repr__(self) -> str:
        return f"MemoryPersistence({len(self._logs)} sessions)"

    def on_commit(self, listener: CommitListener) -> Callable[[], None]:
        """Call ``listener`` with each batch once it is stored (``ReportsCommits``)."""
        return self._commits.subscribe(listener)

    async def create(self, header: SessionHeader) -> None:
        self._new(header)

    async def create_with_events(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """A new header and its first events (seq 0 on) at once (``CreatesWithEvents``)."""
        batch = tuple(events)
        check_first_batch(header.id, batch)
        self._new(header).events.extend(batch)
        if batch:
            self._commits.deliver(Commit(header.id, batch))

    async def append(self, session_id: str, events: Sequence[Event]) -> None:
        if not events:
            return
        batch = tuple(events)
        check_contiguous(session_id, batch)
        log = self._log(session_id)
        check_continues(session_id, batch[0].seq, len(log.events))
        log.events.extend(batch)
        self._commits.deliver(Commit(session_id, batch))

    async def load(self, session_id: str) -> StoredSession:
        stored = self._read(session_id)
        if stored.repair.changed:  # the closers are stored, as a disk store writes them
            log = self._logs[session_id]
            log.events.extend(stored.events[len(log.events) :])
        return stored

    async def inspect(self, session_id: str) -> StoredSession:
        return self._read(session_id)

    async def list(self) -> builtins.list[SessionHeader]:
        self._check_open()
        return sorted((log.header for log in self._logs.values()), key=_oldest_first)

    async def list_ids(self) -> builtins.list[str]:
        """Every stored id, oldest first (``ListsIds``)."""
        return [header.id for header in await self.list()]

    async def close(self) -> None:
        """Forget every session. Idempotent."""
        self._closed = True
        self._logs.clear()

    def _new(self, header: SessionHeader) -> _Log:
        self._check_open()
        if header.id in self._logs:
            raise SessionExistsError(f"session {header.id!r} already exists")
        log = self._logs[header.id] = _Log(header)
        return log

    def _log(self, session_id: str) -> _Log:
        self._check_open()
        log = self._logs.get(session_id)
        if log is None:
            raise SessionNotFoundError(f"session {session_id!r} not found")
        return log

    def _read(self, session_id: str) -> StoredSession:
        log = self._log(session_id)
        for event in log.events:
            # The rule of every store: a required fact this process does not know (a
            # plugin's event type, unregistered since) is refused, never skipped.
            if not event.ignorable and not is_known_event_type(event.type):
                raise UnknownEventTypeError(
                    f"unknown required event type {event.type!r}: refusing to reconstruct "
                    f"session {session_id!r}"
                )
        closers, report = plan_repair(log.events)
        return StoredSession(log.header, (*log.events, *closers), report)

    def _check_open(self) -> None:
        if self._closed:
            raise PersistenceError("the in-memory store is closed (its sessions are gone)")


def _oldest_first(header: SessionHeader) -> tuple[int, str]:
    return header.created_at, header.id


__all__ = ["MemoryPersistence"]
