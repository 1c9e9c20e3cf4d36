"""The session store: lifecycle of live sessions and their write-behind persistence.

Lifecycle is three steps so that setup can append facts before anyone sees the session:
``prepare`` builds it (nothing published, nothing stored), ``enter`` makes it live (its id is
taken), ``announce`` notifies ``session/created`` listeners, any of which may veto by raising,
which rolls the session back out; only then are its setup events published and stored (an
explicit ``flush`` stores earlier). ``create`` does all three.

Appends are synchronous; a per-session writer task drains new events to the backend off the
event loop, batching whatever accumulated while the previous write ran. Two barriers wait for
it: ``commit`` returns once every event appended before the call is committed (visible to
every other reader, kept if this process crashes), ``flush`` once they are also durable
against a power loss. The writer commits its batches without waiting for the disk where the
backend can (``DefersSync``) and syncs only for a ``flush``, so the approval service's flush
of an audit pair is the one sync of an approval (``decisions/0051-one-sync-per-approval.md``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

from tether.errors import TetherError
from tether.session._events import Event
from tether.session._header import SessionHeader, SessionMeta
from tether.session._session import Clock, Session, has_open_turn, wall_clock_ms
from tether.session.persistence._base import (
    CreatesWithEvents,
    DefersSync,
    Persistence,
    PersistenceError,
    SessionExistsError,
    SessionNotFoundError,
    StoredSession,
)

if TYPE_CHECKING:
    from tether.session._lease import Lease, Leases

log = logging.getLogger(__name__)
T = TypeVar("T")

WRITE_BEHIND_DELAY: Final = 0.005
"""Seconds the write-behind waits after a session's first uncommitted event before it commits:
what is appended meanwhile (the rest of a step, a tool call and its approval) goes in the same
commit. A ``commit`` or ``flush`` does not wait for it, so no barrier is slower; only readers
of the store (another process, ``run --json``) see events up to this much later."""

SessionListener = Callable[[Session], object]
EventListener = Callable[[Session, Event], object]


class InvalidBoundaryError(TetherError):
    code = "INVALID_BOUNDARY"


class OpenTurnError(TetherError):
    code = "OPEN_TURN"


class SessionNotLiveError(TetherError):
    code = "SESSION_NOT_LIVE"


class NoPersistenceError(TetherError):
    code = "NO_PERSISTENCE"


@dataclass(slots=True)
class _Writer:
    persisted: int
    """Events committed."""
    created: bool
    synced: int = 0
    """Events durable (``<= persisted``)."""
    sync_wanted: int = 0
    """A ``flush`` waits for the events below this to be durable."""
    task: asyncio.Task[None] | None = None
    wake: asyncio.Future[None] | None = None
    """Set while the writer task waits out :data:`WRITE_BEHIND_DELAY`; resolving it ends the
    wait (a barrier or a detach cannot wait)."""
    error: BaseException | None = None
    detach: Callable[[], None] = field(default=lambda: None)
    lease: Lease | None = None


class SessionStore:
    def __init__(
        self,
        persistence: Persistence | None = None,
        *,
        clock: Clock = wall_clock_ms,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        leases: Leases | None = None,
    ) -> None:
        """``leases``: take each live session's lease there (see :mod:`._lease`), so no other
        process makes it live at the same time and outside tools can tell it is live; the
        store closes them with itself, as it does ``persistence``."""
        self.persistence = persistence
        self.leases = leases
        # The optional capabilities, looked up once (a protocol check costs microseconds).
        self._with_events = persistence if isinstance(persistence, CreatesWithEvents) else None
        self._deferring = persistence if isinstance(persistence, DefersSync) else None
        self._clock = clock
        self._new_id = new_id
        self._live: dict[str, Session] = {}
        self._announced: set[str] = set()
        self._writers: dict[str, _Writer] = {}
        self._created: list[SessionListener] = []
        self._disposed: list[SessionListener] = []
        self._event: list[EventListener] = []

    # -- notifications -------------------------------------------------------------------
    def on_created(self, fn: SessionListener) -> Callable[[], None]:
        """``session/created``: a synchronous raise vetoes the session."""
        return _register(self._created, fn)

    def on_event(self, fn: EventListener) -> Callable[[], None]:
        """``session/event``: every live append of every announced session."""
        return _register(self._event, fn)

    def on_disposed(self, fn: SessionListener) -> Callable[[], None]:
        return _register(self._disposed, fn)

    # -- lifecycle -----------------------------------------------------------------------
    def prepare(
        self,
        session_id: str | None = None,
        *,
        seed: Sequence[Event] = (),
        meta: SessionMeta | None = None,
        header: SessionHeader | None = None,
    ) -> Session:
        """Build a session without publishing or storing it."""
        if header is None:
            header = SessionHeader.from_meta(
                session_id or self._new_id(), self._clock(), meta or SessionMeta()
            )
        return Session(header, seed, clock=self._clock)

    def enter(
        self, session: Session, *, stored_length: int | None = None, lease: Lease | None = None
    ) -> Callable[[], None]:
        """Make ``session`` live; returns the detach disposer.

        ``stored_length`` marks a session reopened from storage: that many events are already
        durable and its header exists. ``lease``: the session's lease, already taken (by
        :meth:`open`, before it read the log); otherwise it is taken here.
        """
        if session.id in self._live:
            raise SessionExistsError(f"session {session.id!r} is already live")
        if lease is None and self.leases is not None:
            lease = self.leases.take(session.id)
        self._live[session.id] = session
        stored = stored_length or 0
        writer = _Writer(persisted=stored, created=stored_length is not None, synced=stored)
        writer.lease = lease
        self._writers[session.id] = writer
        writer.detach = session.observe(self._on_append)

        def detach() -> None:
            self._detach(session)

        return detach

    def announce(self, session: Session) -> None:
        """Emit ``session/created``; a listener that raises vetoes and rolls back.

        Then publish, in order, the live events appended during setup (seq >=
        ``first_live_seq``; seed events are never published), and start storing.
        """
        if self._live.get(session.id) is not session:
            raise SessionNotLiveError(f"session {session.id!r} must be entered before announce")
        if session.id in self._announced:
            return
        for fn in tuple(self._created):
            try:
                fn(session)
            except BaseException:
                self._rollback(session)
                raise
        # Index loop, not a slice: a listener that appends while the backlog is published gets
        # its event published after the backlog, in seq order, exactly once.
        index = session.first_live_seq
        while index < len(session):
            self._publish(session, session.events[index])
            index += 1
        self._announced.add(session.id)
        writer = self._writers.get(session.id)
        if writer is not None:
            self._schedule(session, writer)

    def create(
        self,
        session_id: str | None = None,
        *,
        seed: Sequence[Event] = (),
        meta: SessionMeta | None = None,
    ) -> Session:
        session = self.prepare(session_id, seed=seed, meta=meta)
        self.enter(session)
        self.announce(session)
        return session

    def get(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def live(self) -> list[Session]:
        return list(self._live.values())

    async def dispose(self, session: Session) -> None:
        """Commit, then detach and emit ``session/disposed``."""
        try:
            await self.commit(session)
        finally:
            self._detach(session)

    async def close(self) -> None:
        """Flush and detach every live session, then close the backend."""
        errors: list[BaseException] = []
        for session in list(self._live.values()):
            try:
                await self.dispose(session)
            except BaseException as err:  # keep closing the rest
                errors.append(err)
        if self.persistence is not None:
            await self.persistence.close()
        if self.leases is not None:
            self.leases.close()  # nothing is written any more: every lease here is given up
        if errors:
            raise errors[0]

    # -- durability ----------------------------------------------------------------------
    async def commit(self, session: Session) -> None:
        """Return once every event appended so far is committed: visible to every reader of
        the store and kept if this process crashes; durable against a power loss once the
        backend syncs (within ``SYNC_WITHIN`` seconds, at the next :meth:`flush`, or when it
        is closed). No-op without persistence."""
        await self._wait(session, durable=False)

    async def flush(self, session: Session) -> None:
        """Return once every event appended so far is committed and durable, against a power
        loss too (no-op without persistence)."""
        await self._wait(session, durable=True)

    async def _wait(self, session: Session, *, durable: bool) -> None:
        writer = self._writers.get(session.id)
        if writer is None or self.persistence is None:
            return
        target = len(session)
        if durable and writer.sync_wanted < target:
            writer.sync_wanted = target
        while True:
            if writer.error is not None:
                raise PersistenceError(
                    f"session {session.id!r} could not be stored: {writer.error}"
                ) from writer.error
            if writer.task is not None and not writer.task.done():
                _hurry(writer)
                await asyncio.shield(writer.task)
                continue
            if writer.persisted >= target and (not durable or writer.synced >= target):
                return
            self._start_drain(session, writer)

    def _on_append(self, session: Session, event: Event) -> None:
        writer = self._writers.get(session.id)
        if writer is not None:
            self._schedule(session, writer)
        if session.id in self._announced:
            self._publish(session, event)

    def _schedule(self, session: Session, writer: _Writer) -> None:
        if self.persistence is None or writer.error is not None:
            return
        if session.id not in self._announced:
            return  # nothing is stored before announce, so a veto leaves nothing behind
        if writer.task is not None and not writer.task.done():
            return  # the running drain loops until it has caught up
        if writer.persisted >= len(session):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: the next flush writes
        # The task exists from now on (so the loop's shutdown cancels it like any other); it
        # first waits a moment for what follows, until ``wake`` (here already, so a barrier
        # right after this append can end the wait before the task starts).
        writer.wake = loop.create_future()
        writer.task = loop.create_task(self._drain(session, writer))

    def _start_drain(self, session: Session, writer: _Writer) -> None:
        """Start a writer task that commits at once (a barrier found none running)."""
        writer.wake = None
        writer.task = asyncio.get_running_loop().create_task(self._drain(session, writer))

    async def _drain(self, session: Session, writer: _Writer) -> None:
        """Commit what is new, batch after batch, until caught up; a batch that holds events a
        ``flush`` waits for is committed durably, and with nothing new to commit for one, the
        backend syncs. Started by an append, it first waits :data:`WRITE_BEHIND_DELAY` (or
        until hurried)."""
        persistence = self.persistence
        assert persistence is not None
        deferring = self._deferring
        wake = writer.wake
        if wake is not None:
            timer = (
                None
                if wake.done()
                else wake.get_loop().call_later(WRITE_BEHIND_DELAY, _hurry, writer)
            )
            try:
                await wake
            finally:
                if timer is not None:
                    timer.cancel()
                writer.wake = None
        try:
            while writer.persisted < len(session) or writer.synced < writer.sync_wanted:
                if writer.persisted >= len(session):
                    assert deferring is not None  # without it every commit is durable
                    await deferring.sync(session.id)
                    writer.synced = writer.persisted
                    continue
                batch = session.events[writer.persisted :]
                durable = deferring is None or writer.sync_wanted > writer.persisted
                if not writer.created:
                    await self._create_with(persistence, session, batch, durable)
                    writer.created = True
                elif durable:
                    await persistence.append(session.id, batch)
                else:
                    assert deferring is not None
                    await deferring.append_deferred(session.id, batch)
                writer.persisted += len(batch)
                if durable:
                    writer.synced = writer.persisted
        except Exception as err:
            writer.error = err
            # Reported where it is raised, by the next commit or flush (every dispose commits),
            # so a user sees one line for it, not two.
            log.debug("session %s: write failed: %s", session.id, err)

    async def _create_with(
        self, persistence: Persistence, session: Session, batch: Sequence[Event], durable: bool
    ) -> None:
        """A new session's first write: its header and first events in one commit where the
        backend can (a crash between two would leave a session without its scope)."""
        if not durable and self._deferring is not None:
            await self._deferring.create_deferred(session.header, batch)
        elif self._with_events is not None:
            await self._with_events.create_with_events(session.header, batch)
        else:
            await persistence.create(session.header)
            await persistence.append(session.id, batch)

    def _publish(self, session: Session, event: Event) -> None:
        for fn in tuple(self._event):
            try:
                fn(session, event)
            except Exception:  # observers never undo a committed append
                log.exception("session/event listener failed")

    def _rollback(self, session: Session) -> None:
        writer = self._writers.pop(session.id, None)
        if writer is not None:
            writer.detach()
            if writer.task is not None:
                writer.task.cancel()
            if writer.lease is not None:
                writer.lease.release()
        self._live.pop(session.id, None)

    def _detach(self, session: Session) -> None:
        if self._live.get(session.id) is not session:
            return
        writer = self._writers.pop(session.id, None)
        if writer is not None:
            writer.detach()
            _hurry(writer)  # what was appended is still written, now
            if writer.lease is not None:
                _release_when_written(writer.lease, writer.task)
        del self._live[session.id]
        was_announced = session.id in self._announced
        self._announced.discard(session.id)
        if was_announced:
            for fn in tuple(self._disposed):
                try:
                    fn(session)
                except Exception:
                    log.exception("session/disposed listener failed")

    # -- fork and resume -----------------------------------------------------------------
    async def fork(
        self, source_id: str, boundary: int | None = None, child_id: str | None = None
    ) -> Session:
        """Create a session seeded with ``source``'s events ``0..boundary`` (inclusive).

        The boundary defaults to the last event, must exist, and must not fall inside an open
        turn. The child header records ``cwd``, ``parent_session`` and ``seed_length``.
        """
        source = self._live.get(source_id)
        if source is None:
            if self.persistence is not None and await self._stored(source_id):
                raise SessionNotLiveError(f"session {source_id!r} is stored but not live")
            raise SessionNotFoundError(f"session {source_id!r} not found")
        if boundary is None:
            boundary = len(source) - 1
        if isinstance(boundary, bool) or not isinstance(boundary, int):
            raise InvalidBoundaryError(f"fork boundary must be an integer seq, got {boundary!r}")
        if not 0 <= boundary < len(source):
            raise InvalidBoundaryError(
                f"fork boundary {boundary} does not exist in session {source_id!r} "
                f"(events 0..{len(source) - 1})"
            )
        seed = source.events[: boundary + 1]
        if has_open_turn(seed):
            raise OpenTurnError(f"fork boundary {boundary} falls inside an open turn")
        if child_id is not None and (
            child_id in self._live
            or (self.persistence is not None and await self._stored(child_id))
        ):
            raise SessionExistsError(f"session {child_id!r} already exists")
        meta = SessionMeta(
            cwd=source.header.cwd, parent_session=source.id, seed_length=boundary + 1
        )
        return self.create(child_id, seed=seed, meta=meta)

    async def open(self, session_id: str, *, inspected: StoredSession | None = None) -> Session:
        """Reopen a stored session (cold resume): its whole log becomes the seed.

        ``inspected``: a view the caller just read with :meth:`inspect`. When it needed no
        repair it is exactly what ``load`` would return, so the log is not read twice; a view
        that needed repair is ignored and ``load`` repairs durably.
        """
        if session_id in self._live:
            raise SessionExistsError(f"session {session_id!r} is already live")
        # The lease first: loading repairs a crashed tail durably, and a session another
        # process is running has a turn open that is not a crash's.
        lease = self.leases.take(session_id) if self.leases is not None else None
        try:
            if (
                inspected is not None
                and inspected.header.id == session_id
                and not inspected.repair.changed
            ):
                stored = inspected
            else:
                stored = await self._require_persistence().load(session_id)
            session = self.prepare(header=stored.header, seed=stored.events)
            self.enter(session, stored_length=len(stored.events), lease=lease)
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        self.announce(session)  # a veto rolls back, which releases the lease
        return session

    async def inspect(self, session_id: str) -> StoredSession:
        """A stored session's header and events, live or not, without writing anything."""
        live = self._live.get(session_id)
        if live is not None:
            return StoredSession(live.header, tuple(live.events))
        return await self._require_persistence().inspect(session_id)

    async def exists(self, session_id: str) -> bool:
        """Whether the id is live or stored (an unreadable stored session still exists)."""
        if session_id in self._live:
            return True
        if self.persistence is None:
            return False
        try:
            await self.persistence.inspect(session_id)
        except SessionNotFoundError:
            return False
        except Exception:
            return True
        return True

    async def _stored(self, session_id: str) -> bool:
        return self.persistence is not None and await self.exists(session_id)

    def _require_persistence(self) -> Persistence:
        if self.persistence is None:
            raise NoPersistenceError("this store has no persistence backend")
        return self.persistence


def _hurry(writer: _Writer) -> None:
    """End the writer task's wait for what follows, if it is waiting."""
    if writer.wake is not None and not writer.wake.done():
        writer.wake.set_result(None)


def _release_when_written(lease: Lease, task: asyncio.Task[None] | None) -> None:
    """Give the lease back once nothing of this process writes to the session any more: a
    write still running (a cancelled ``dispose``) must not meet another process's."""
    if task is None or task.done():
        lease.release()
    else:
        task.add_done_callback(lambda _task: lease.release())


def _register(items: list[T], fn: T) -> Callable[[], None]:
    items.append(fn)

    def remove() -> None:
        if fn in items:
            items.remove(fn)

    return remove


__all__ = [
    "InvalidBoundaryError",
    "OpenTurnError",
    "SessionNotLiveError",
    "SessionStore",
]
