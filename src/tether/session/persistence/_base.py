"""The narrow persistence interface every backend implements.

Five operations, all async: ``create`` a header, ``append`` events continuing the stored seq,
``load`` (repairing a crashed tail durably), ``inspect`` (the same view, never writing), and a
cheap header-only ``list``. The conformance kit, :mod:`tether.testing`, checks any backend
against this contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from tether.errors import TetherError
from tether.session._events import Event
from tether.session._header import SessionHeader


class PersistenceError(TetherError):
    code = "PERSISTENCE_ERROR"


class SessionNotFoundError(PersistenceError):
    code = "SESSION_NOT_FOUND"


class SessionExistsError(PersistenceError):
    code = "SESSION_ALREADY_EXISTS"


class SeqConflictError(PersistenceError):
    """An append did not continue the stored seq (a racing writer or a stale session)."""

    code = "SEQ_CONFLICT"


class CorruptLogError(PersistenceError):
    """The stored log is damaged before its tail; repair would lose committed events."""

    code = "CORRUPT_LOG"


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What loading had to do to make a crashed log whole again."""

    dropped_tail: int = 0
    """Torn (incomplete or unparseable) trailing records dropped."""
    synthesized: tuple[str, ...] = ()
    """Types of the closing events added for an interrupted turn, in order."""
    unmatched_approvals: tuple[str, ...] = ()
    """``approval/asked`` ids that had no ``approval/decided`` (the crash fell between them)."""

    @property
    def changed(self) -> bool:
        return bool(self.dropped_tail or self.synthesized)


@dataclass(frozen=True, slots=True)
class StoredSession:
    header: SessionHeader
    events: tuple[Event, ...]
    repair: RepairReport = field(default_factory=RepairReport)


@runtime_checkable
class Persistence(Protocol):
    """A session store backend. Implementations must pass the conformance suite."""

    async def create(self, header: SessionHeader) -> None:
        """Store a new header. Raises :class:`SessionExistsError` if the id is taken."""

    async def append(self, session_id: str, events: Sequence[Event]) -> None:
        """Durably add ``events``; the first must have ``seq`` equal to the stored length.

        Raises :class:`SessionNotFoundError` or :class:`SeqConflictError`. All or nothing.
        """

    async def load(self, session_id: str) -> StoredSession:
        """Read a session, repairing a crashed tail durably (see :mod:`._repair`)."""

    async def inspect(self, session_id: str) -> StoredSession:
        """Read a session as :meth:`load` would return it, without writing anything."""

    async def list(self) -> list[SessionHeader]:
        """Every stored header, oldest first, without reading events."""

    async def close(self) -> None:
        """Release resources. Further calls may fail."""


@runtime_checkable
class ListsIds(Protocol):
    """Optional capability: every stored session id, without parsing headers.

    ``list`` refuses a store holding an unreadable header (parsing it fails); a checker such
    as ``tether sessions fsck`` enumerates ids with this instead, then inspects each one and
    reports the unreadable ones rather than stopping.
    """

    async def list_ids(self) -> list[str]: ...


@runtime_checkable
class CreatesWithEvents(Protocol):
    """Optional capability: store a new header and its first events in one commit.

    A session's first events are its scope (``sandbox/mode``, ``approval/policy``, a child's
    delegation pins). A crash between a separate ``create`` and the first ``append`` would
    leave a header with an empty log, which a cold resume would give the deployment's default
    scope; with this, a crash leaves both or neither.
    """

    async def create_with_events(self, header: SessionHeader, events: Sequence[Event]) -> None: ...


@runtime_checkable
class OpensFiles(Protocol):
    """Optional capability: make the storage's files exist now, as they will while the handle
    is open (otherwise they appear at the first commit). The harness calls it before any
    command runs, since the sandbox hides only what exists when a command starts. Idempotent.
    """

    async def open(self) -> None: ...


SYNC_WITHIN: Final = 1.0
"""Seconds within which a backend that :class:`DefersSync` makes a deferred commit durable on
its own, when nothing asked for it sooner."""


@runtime_checkable
class DefersSync(Protocol):
    """Optional capability: commit now, wait for the disk only when asked.

    ``append_deferred`` and ``create_deferred`` commit exactly as ``append`` and
    ``create_with_events`` do (all or nothing, the same seq rules, visible to every other
    handle and process, kept if this process crashes, reported to ``on_commit``), but return
    without waiting for the disk, so a power loss or an operating-system crash may still take
    them. ``sync(session_id)`` returns once every commit of that session is durable against
    those too (a backend may make more durable with it: SQLite syncs its one log file).
    Durability is in commit order: a commit that survives means every earlier commit of its
    session survives. The backend syncs deferred commits on its own within
    :data:`SYNC_WITHIN` seconds and when it is closed.

    The session store commits its write-behind batches this way and syncs only where it
    must, so an approval costs one sync: its audit pair, with everything before it, in one
    durable commit (``decisions/0051-one-sync-per-approval.md``).
    """

    async def append_deferred(self, session_id: str, events: Sequence[Event]) -> None: ...

    async def create_deferred(self, header: SessionHeader, events: Sequence[Event]) -> None: ...

    async def sync(self, session_id: str) -> None: ...
