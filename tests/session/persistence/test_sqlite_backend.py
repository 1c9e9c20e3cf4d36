"""What is specific to the SQLite backend: schema, pragmas, the worker thread, locking."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.session import Event
from tether.session.persistence import (
    CorruptLogError,
    PersistenceError,
    SeqConflictError,
    SqlitePersistence,
)
from tether.testing import T0, dicts, header, titles


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlitePersistence]:
    backend = SqlitePersistence(tmp_path / "store.db")
    yield backend
    await backend.close()


def raw(path: str | Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def columns(db: sqlite3.Connection, table: str) -> list[tuple[str, str, int, int]]:
    """(name, type, notnull, pk position) of each column."""
    return [(r[1], r[2], r[3], r[5]) for r in db.execute(f"PRAGMA table_info({table})")]


async def test_schema_is_the_two_documented_tables(store: SqlitePersistence) -> None:
    await store.list()
    with raw(store.path) as db:
        assert columns(db, "sessions") == [
            ("id", "TEXT", 1, 1),
            ("version", "INTEGER", 1, 0),
            ("created_at", "INTEGER", 1, 0),
            ("cwd", "TEXT", 0, 0),
            ("parent_session", "TEXT", 0, 0),
            ("seed_length", "INTEGER", 0, 0),
            ("origin", "TEXT", 0, 0),
            ("delegation_depth", "INTEGER", 1, 0),
            ("agent_preset", "TEXT", 0, 0),
        ]
        assert columns(db, "events") == [
            ("session_id", "TEXT", 1, 1),
            ("seq", "INTEGER", 1, 2),
            ("type", "TEXT", 1, 0),
            ("time", "INTEGER", 1, 0),
            ("data", "TEXT", 1, 0),
            ("ignorable", "INTEGER", 1, 0),
            ("surface_op", "TEXT", 0, 0),
        ]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_rows_hold_json_text(store: SqlitePersistence) -> None:
    events = [
        Event.make("session/title", 0, T0, {"title": "é", "n": [1, 2.5]}),
        Event.make("user/message", 1, T0 + 1, {"content": "hi"}, surface_op="append"),
        Event.make("acme/note", 2, T0 + 2, {}, ignorable=True),
    ]
    await store.create(header(cwd="/w", agent_preset="coder"))
    await store.append("s-1", events)
    with raw(store.path) as db:
        assert db.execute("SELECT * FROM sessions").fetchall() == [
            ("s-1", 0, T0, "/w", None, None, None, 0, "coder")
        ]
        assert db.execute("SELECT * FROM events ORDER BY seq").fetchall() == [
            ("s-1", 0, "session/title", T0, '{"title":"é","n":[1,2.5]}', 0, None),
            ("s-1", 1, "user/message", T0 + 1, '{"content":"hi"}', 0, '"append"'),
            ("s-1", 2, "acme/note", T0 + 2, "{}", 1, None),
        ]


async def test_pragmas_per_connection(tmp_path: Path) -> None:
    for level, expected in (("FULL", 2), ("NORMAL", 1)):
        backend = SqlitePersistence(tmp_path / "s.db", synchronous=level, busy_timeout_ms=1234)  # type: ignore[arg-type]
        try:
            await backend.list()
            conn = backend._conn  # the worker's connection: read its settings on that thread
            assert conn is not None
            settings = await backend._worker.run(
                lambda c=conn: (  # type: ignore[misc]
                    c.execute("PRAGMA synchronous").fetchone()[0],
                    c.execute("PRAGMA busy_timeout").fetchone()[0],
                    c.execute("PRAGMA journal_mode").fetchone()[0],
                    threading.current_thread().name,
                )
            )
        finally:
            await backend.close()
        assert settings[:3] == (expected, 1234, "wal")
        assert settings[3].startswith("tether-sqlite")
    with pytest.raises(ValueError, match="synchronous"):
        SqlitePersistence(tmp_path / "s.db", synchronous="OFF")  # type: ignore[arg-type]


async def test_the_event_loop_runs_while_a_write_waits_for_the_lock(
    store: SqlitePersistence,
) -> None:
    await store.create(header())
    other = raw(store.path)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    append = asyncio.ensure_future(store.append("s-1", titles(0, 1)))
    ticks = 0
    while ticks < 50:  # the loop keeps turning: the blocked write is on the worker thread
        await asyncio.sleep(0)
        ticks += 1
    assert not append.done()
    other.execute("COMMIT")
    other.close()
    await append
    assert dicts((await store.load("s-1")).events) == dicts(titles(0, 1))


async def test_a_lock_held_past_busy_timeout_is_a_persistence_error(tmp_path: Path) -> None:
    backend = SqlitePersistence(tmp_path / "s.db", busy_timeout_ms=50)
    try:
        await backend.create(header())
        other = raw(backend.path)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(PersistenceError, match="database is locked") as caught:
                await backend.append("s-1", titles(0, 1))
            assert caught.value.code == "PERSISTENCE_ERROR"
        finally:
            other.execute("ROLLBACK")
            other.close()
        await backend.append("s-1", titles(0, 1))
    finally:
        await backend.close()


async def test_a_missing_row_is_corruption(store: SqlitePersistence) -> None:
    await store.create(header())
    await store.append("s-1", titles(0, 4))
    with raw(store.path) as db:
        db.execute("DELETE FROM events WHERE seq = 1")
    with pytest.raises(
        CorruptLogError, match=r"'s-1': row 2 \(seq 2\): expected seq 1, found seq 2"
    ):
        await store.load("s-1")


async def test_damaged_payload_columns_are_invalid_records(store: SqlitePersistence) -> None:
    await store.create(header())
    await store.append("s-1", titles(0, 3))
    with raw(store.path) as db:
        db.execute("UPDATE events SET data = 42 WHERE seq = 2")
    loaded = await store.load("s-1")
    assert loaded.repair.dropped_tail == 1
    assert dicts(loaded.events) == dicts(titles(0, 2))
    with raw(store.path) as db:
        assert db.execute("SELECT COUNT(*) FROM events").fetchone() == (2,)


async def test_opening_an_existing_store_to_read_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    writer = SqlitePersistence(path)
    await writer.create(header())
    await writer.append("s-1", titles(0, 3))
    await writer.close()  # checkpoints the WAL into the database file
    before = path.read_bytes()
    reader = SqlitePersistence(path)
    try:
        await reader.list()
        await reader.inspect("s-1")
    finally:
        await reader.close()
    assert path.read_bytes() == before


async def test_closed_backend_refuses_calls(store: SqlitePersistence) -> None:
    await store.close()
    with pytest.raises(PersistenceError, match="is closed"):
        await store.create(header())


class FailsOnce(SqlitePersistence):
    """A write whose transaction fails after its rows went in (say, at a full disk)."""

    fail_next = False

    def _write_events(self, conn: sqlite3.Connection, *args: object) -> None:
        super()._write_events(conn, *args)  # type: ignore[arg-type]
        if self.fail_next:
            self.fail_next = False
            raise OSError(28, "No space left on device")


async def test_a_rolled_back_write_is_never_taken_for_the_stored_length(tmp_path: Path) -> None:
    # The backend skips looking at the log when an append continues right after the last row
    # it committed; a write that was rolled back must not count as committed.
    backend = FailsOnce(tmp_path / "s.db")
    events = titles(0, 6)
    await backend.create(header())
    await backend.append("s-1", events[:2])
    backend.fail_next = True
    with pytest.raises(PersistenceError):
        await backend.append("s-1", events[2:4])
    with pytest.raises(SeqConflictError, match="starts at seq 4 but 2 events are stored"):
        await backend.append("s-1", events[4:])  # would leave a gap
    await backend.append("s-1", events[2:])
    assert dicts((await backend.load("s-1")).events) == dicts(events)
    await backend.close()
