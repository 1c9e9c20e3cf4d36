"""SQLite persistence: the default backend.

One database file holds every session: a ``sessions`` table of headers and an ``events`` table
keyed by ``(session_id, seq)``. Design points:

- **Off the event loop, one writer.** Every database call of an instance runs on one dedicated
  worker thread over one connection, in submission order; the event loop only awaits.
- **Several processes, one file.** WAL mode lets readers run beside the writer. Every write
  takes the write lock up front (``BEGIN IMMEDIATE``) and waits for it up to ``busy_timeout``,
  so two processes appending to one session serialise, and the loser sees the winner's rows
  and gets :class:`SeqConflictError` (a primary-key violation maps to the same error).
- **Durability.** ``synchronous=FULL`` by default: ``append`` and ``create_with_events``
  commit and fsync the write-ahead log before they return, so an approval decision flushed
  before its action survives power loss, not only a process crash. The deferred forms
  (``DefersSync``: the session store's write-behind batches) commit at ``synchronous=NORMAL``,
  kept if the process crashes, and become durable with the next fsync of the log: the next
  durable commit (which syncs the whole log, every earlier commit with it), ``sync``, the
  backend's own sync within ``SYNC_WITHIN`` seconds, or ``close``. The log is one file
  written in commit order, so what survives a power loss is always a prefix of the commits.
  ``NORMAL`` (durable against process crash; the newest commits may roll back on power loss)
  makes every commit deferred and never syncs but at SQLite's own checkpoints.
- **Repair.** Transactions are atomic, so a torn row cannot happen through this module; the
  shared torn-tail rule still applies to rows damaged otherwise. ``load`` closes an interrupted
  turn and writes the closers in one transaction; ``inspect`` computes the same view and never
  writes.
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Final, Literal

from tether.session._events import Event, plain_event, plain_text_event
from tether.session._header import InvalidHeaderError, SessionHeader
from tether.session.persistence._base import (
    CorruptLogError,
    PersistenceError,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
    StoredSession,
)
from tether.session.persistence._codec import (
    INVALID_RECORD,
    DecodedLog,
    check_continues,
    decode_log,
    dumps,
    gc_paused,
    is_complete_record,
    loads,
    parse_surface_op,
    surface_op_text,
)
from tether.session.persistence._disk_full import disk_full_message, is_disk_full
from tether.session.persistence._repair import plan_repair
from tether.session.persistence._sqlite_damage import (
    DamagedStoreError,
    damaged_message,
    is_damage,
    survey,
)
from tether.session.persistence._worker import Worker, WorkerBackend

Synchronous = Literal["FULL", "NORMAL"]
"""SQLite ``synchronous`` level in WAL mode.

``FULL``: every commit is fsynced before it returns (durable against power loss).
``NORMAL``: the WAL is fsynced only at checkpoints (durable against process crash only).
"""

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY NOT NULL,
        version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        cwd TEXT,
        parent_session TEXT,
        seed_length INTEGER,
        origin TEXT,
        delegation_depth INTEGER NOT NULL DEFAULT 0,
        agent_preset TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time INTEGER NOT NULL,
        data TEXT NOT NULL,
        ignorable INTEGER NOT NULL DEFAULT 0,
        surface_op TEXT,
        PRIMARY KEY (session_id, seq)
    )""",
)

_HEADER_COLUMNS: Final = (
    "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset"
)
_INSERT_EVENT: Final = (
    "INSERT INTO events (session_id, seq, type, time, data, ignorable, surface_op) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_EVENTS: Final = (
    "SELECT seq, type, time, data, ignorable, surface_op FROM events "
    "WHERE session_id = ? ORDER BY seq"
)

_SELECT_EVENT: Final = (
    "SELECT seq, type, time, data, ignorable, surface_op FROM events "
    "WHERE session_id = ? AND seq = ?"
)

_Row = tuple[int, str, int, str, int, str | None]
_EventRow = tuple[str, int, str, int, str, int, str | None]


def _enter_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch ``conn`` to WAL, waiting up to ``timeout`` seconds for a racing handle.

    While another connection is switching a new database to WAL, SQLite answers the switch
    with "database is locked" at once, without calling the busy handler (it would risk a
    deadlock), so two handles opening a fresh store together could fail; the switch is retried
    instead, briefly, until ``timeout``."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


class SqlitePersistence(WorkerBackend):
    """Sessions in one SQLite database file (created on first use)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout_ms: int = 30_000,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be 'FULL' or 'NORMAL', got {synchronous!r}")
        self.path = os.fspath(path)
        self.synchronous: Synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self._worker = Worker(
            "tether-sqlite",
            f"SQLite store {self.path}",
            wrap=(OSError, sqlite3.Error),
            explain=self._explain,
        )
        self._need = 0  # bytes the write in progress adds; worker only
        self._conn: sqlite3.Connection | None = None  # worker thread only
        self._level: Synchronous = synchronous  # the connection's level now; worker only
        self._unsynced = False  # a deferred commit since the log was last synced; worker only
        self._intact: dict[str, int] = {}  # session -> last seq known intact; worker only

    def __repr__(self) -> str:
        return f"SqlitePersistence({self.path!r})"

    # -- worker-thread side ---------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=self.busy_timeout_ms / 1000
            )
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                _enter_wal(conn, self.busy_timeout_ms / 1000)
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")
                self._level = self.synchronous
                self._ensure_schema(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _open(self) -> None:
        # The database, its write-ahead log and shared-memory file exist while a connection
        # is open; making a new one also passes through a transient rollback journal.
        self._connection()

    @staticmethod
    def _ensure_schema(conn: sqlite3.Connection) -> None:
        # Checked first so that opening an existing store for reading never writes.
        names = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if {"sessions", "events"} <= names:
            return
        with _write_transaction(conn):
            for statement in _SCHEMA:
                conn.execute(statement)

    def _explain(self, err: Exception) -> PersistenceError | None:
        """A damaged file or a full disk, said so (on the worker thread, after the failure)."""
        where = f"SQLite store {self.path}"
        if is_damage(err):
            self._release()
            found = survey(self.path, read_view)
            return DamagedStoreError(damaged_message(where, self.path, err, found))
        if is_disk_full(err):
            return PersistenceError(disk_full_message(where, self.path, self._need))
        return None

    def _release(self) -> None:
        self._intact.clear()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _durability(self, conn: sqlite3.Connection, sync: bool) -> None:
        """Set the level of the next commit: the configured one to sync, else ``NORMAL``."""
        level: Synchronous = self.synchronous if sync else "NORMAL"
        if level != self._level:
            conn.execute(f"PRAGMA synchronous = {level}")
            self._level = level

    def _committed(self, sync: bool) -> None:
        # A FULL commit syncs the whole log file, every deferred commit before it included.
        if self.synchronous == "FULL":
            self._unsynced = not sync

    def _sync(self, session_id: str) -> None:
        self._sync_all()  # one log file holds every session

    def _sync_all(self) -> None:
        if not self._unsynced:
            return
        try:
            fd = os.open(self.path + "-wal", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            # Only the last connection's close removes the log, after a checkpoint that
            # synced everything into the database file.
            self._unsynced = False
            return
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
        self._unsynced = False

    def _create(self, header: SessionHeader, first: tuple[Event, ...], *, sync: bool) -> None:
        rows = self._rows(header.id, first)
        conn = self._connection()
        self._durability(conn, sync)
        try:
            with _write_transaction(conn):
                conn.execute(
                    f"INSERT INTO sessions ({_HEADER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        header.id,
                        header.version,
                        header.created_at,
                        header.cwd,
                        header.parent_session,
                        header.seed_length,
                        header.origin,
                        header.delegation_depth,
                        header.agent_preset,
                    ),
                )
                if rows:
                    # The header row just went in: the session is new, its log empty.
                    conn.executemany(_INSERT_EVENT, rows)
        except sqlite3.IntegrityError as err:
            raise SessionExistsError(f"session {header.id!r} already exists") from err
        if rows:
            self._intact[header.id] = len(rows) - 1
        self._committed(sync)

    def _append(self, session_id: str, events: Sequence[Event], *, sync: bool) -> None:
        rows = self._rows(session_id, events)
        conn = self._connection()
        self._durability(conn, sync)
        try:
            with _write_transaction(conn):
                self._write_events(conn, session_id, events[0].seq, rows)
        except BaseException:
            self._intact.pop(session_id, None)  # what it says of the log is not committed
            raise
        self._committed(sync)

    def _rows(self, session_id: str, events: Sequence[Event]) -> list[_EventRow]:
        """The rows of ``events``, noting what the write will need on disk."""
        rows = [_event_row(session_id, event) for event in events]
        # SQLite's own pages and the WAL copy each row again: twice the text is the estimate.
        self._need = 2 * sum(len(row[4]) + len(row[2]) + 64 for row in rows)
        return rows

    def _write_events(
        self, conn: sqlite3.Connection, session_id: str, first: int, rows: Sequence[_EventRow]
    ) -> None:
        last = self._intact.get(session_id)
        if last is None and (
            conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None
        ):  # a session this instance wrote is there: sessions are never removed
            raise SessionNotFoundError(f"session {session_id!r} not found")
        # Continuing right after the last row this instance committed needs no look at the
        # log: a writer that got there first holds seq ``first``, and the insert says so.
        stored = first if last == first - 1 else self._intact_length(conn, session_id)
        check_continues(session_id, first, stored)
        try:
            conn.executemany(_INSERT_EVENT, rows)
        except sqlite3.IntegrityError as err:
            raise SeqConflictError(
                f"session {session_id!r}: seq {first} was taken by a concurrent writer"
            ) from err
        self._intact[session_id] = first + len(rows) - 1

    def _intact_length(self, conn: sqlite3.Connection, session_id: str) -> int:
        """Stored event count, after durably dropping damaged final rows (the torn-tail rule)
        so that an append never lands behind them. Call inside a write transaction.

        Only the last row is read, and only when this instance did not write it.
        """
        last = _last_seq(conn, session_id)
        if last is None or self._intact.get(session_id) == last:
            return 0 if last is None else last + 1
        while last is not None:
            row = conn.execute(_SELECT_EVENT, (session_id, last)).fetchone()
            try:
                complete = is_complete_record(_parse_row(row))
            except INVALID_RECORD:
                complete = False
            if complete:
                self._intact[session_id] = last
                return last + 1
            conn.execute("DELETE FROM events WHERE session_id = ? AND seq = ?", (session_id, last))
            last = _last_seq(conn, session_id)
        return 0

    def _read(self, session_id: str, *, repair: bool) -> StoredSession:
        conn = self._connection()
        with gc_paused():
            # One read transaction, so the header and the events are one consistent snapshot.
            conn.execute("BEGIN")
            try:
                header, decoded = self._read_snapshot(conn, session_id)
            finally:
                conn.execute("COMMIT")
            closers, report = plan_repair(decoded.events, decoded.torn)
            if not repair or not report.changed:
                return StoredSession(header, (*decoded.events, *closers), report)
            # Repair under the write lock, re-reading so a writer that raced the first read
            # cannot be overwritten or truncated; durably, like any repair.
            self._durability(conn, True)
            with _write_transaction(conn):
                header, decoded = self._read_snapshot(conn, session_id)
                closers, report = plan_repair(decoded.events, decoded.torn)
                if decoded.torn:
                    conn.execute(
                        "DELETE FROM events WHERE session_id = ? AND seq >= ?",
                        (session_id, len(decoded.events)),
                    )
                conn.executemany(_INSERT_EVENT, [_event_row(session_id, e) for e in closers])
            self._committed(True)
            self._intact.pop(session_id, None)
            return StoredSession(header, (*decoded.events, *closers), report)

    def _read_snapshot(
        self, conn: sqlite3.Connection, session_id: str
    ) -> tuple[SessionHeader, DecodedLog]:
        return read_snapshot(conn, session_id)

    def _list_ids(self) -> builtins.list[str]:
        conn = self._connection()
        rows = conn.execute("SELECT id FROM sessions ORDER BY created_at, id").fetchall()
        return [str(row[0]) for row in rows]

    def _list(self) -> builtins.list[SessionHeader]:
        conn = self._connection()
        rows = conn.execute(
            f"SELECT {_HEADER_COLUMNS} FROM sessions ORDER BY created_at, id"
        ).fetchall()
        return [_header(row) for row in rows]


def read_view(conn: sqlite3.Connection, session_id: str) -> StoredSession:
    """``session_id`` from ``conn`` as ``inspect`` shows it (closers added, nothing written)."""
    header, decoded = read_snapshot(conn, session_id)
    closers, report = plan_repair(decoded.events, decoded.torn)
    return StoredSession(header, (*decoded.events, *closers), report)


def read_snapshot(conn: sqlite3.Connection, session_id: str) -> tuple[SessionHeader, DecodedLog]:
    """The header and decoded events of ``session_id`` (call inside a read transaction for
    one consistent snapshot)."""
    row = conn.execute(
        f"SELECT {_HEADER_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise SessionNotFoundError(f"session {session_id!r} not found")
    header = _header(row)
    rows: builtins.list[_Row] = conn.execute(_SELECT_EVENTS, (session_id,)).fetchall()
    decoded = decode_log(session_id, rows, _row_event, _where(rows))
    if decoded.torn and rows[len(decoded.events)][0] != len(decoded.events):
        # Deleting from the first damaged row's seq must not reach an intact row.
        kept = len(decoded.events)
        raise CorruptLogError(
            f"session {session_id!r}: {_where(rows)(kept)} is damaged and seq {kept} is missing"
        )
    return header, decoded


@contextmanager
def _write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _last_seq(conn: sqlite3.Connection, session_id: str) -> int | None:
    (last,) = conn.execute(
        "SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if last is None else int(last)


def _event_row(session_id: str, event: Event) -> _EventRow:
    return (
        session_id,
        event.seq,
        event.type,
        event.time,
        dumps(event.data),
        1 if event.ignorable else 0,
        surface_op_text(event.surface_op),
    )


def _row_event(row: _Row) -> Event:
    """The event of a stored row: straight from its columns when they are plain
    (:func:`plain_event`), else through the record :meth:`Event.from_dict` validates."""
    seq, event_type, time, data, ignorable, surface_op = row
    if (
        type(data) is str
        and (ignorable == 0 or ignorable == 1)
        and type(ignorable) is int
        and (surface_op is None or surface_op == '"append"')
    ):
        op = None if surface_op is None else "append"
        event = plain_text_event(event_type, seq, time, data, ignorable == 1, op)
        if event is None:
            event = plain_event(event_type, seq, time, loads(data), ignorable == 1, op)
        if event is not None:
            return event
    return Event.from_dict(_parse_row(row))


def _parse_row(row: _Row) -> object:
    seq, event_type, time, data, ignorable, surface_op = row
    if type(data) is not str or (surface_op is not None and type(surface_op) is not str):
        raise ValueError("payload columns must hold JSON text")
    raw: dict[str, object] = {"type": event_type, "seq": seq, "time": time, "data": loads(data)}
    if ignorable:
        # Stored as 0/1; anything else is handed on so validation rejects it.
        raw["ignorable"] = True if ignorable == 1 else ignorable
    if surface_op is not None:
        raw["surface_op"] = parse_surface_op(surface_op)
    return raw


def _where(rows: Sequence[_Row]) -> Callable[[int], str]:
    return lambda index: f"row {index + 1} (seq {rows[index][0]})"


def _header(row: tuple[object, ...]) -> SessionHeader:
    session_id, version, created_at, cwd, parent, seed_length, origin, depth, preset = row
    try:
        return SessionHeader(
            id=session_id,  # type: ignore[arg-type]
            created_at=created_at,  # type: ignore[arg-type]
            cwd=cwd,  # type: ignore[arg-type]
            parent_session=parent,  # type: ignore[arg-type]
            seed_length=seed_length,  # type: ignore[arg-type]
            origin=origin,  # type: ignore[arg-type]
            delegation_depth=depth,  # type: ignore[arg-type]
            agent_preset=preset,  # type: ignore[arg-type]
            version=version,  # type: ignore[arg-type]
        )
    except InvalidHeaderError as err:
        raise CorruptLogError(f"session {session_id!r}: stored header is invalid: {err}") from err


__all__ = ["SqlitePersistence", "Synchronous", "read_snapshot", "read_view"]
