"""Helpers for the CLI tests: real stores (SQLite and JSONL) populated through SessionStore,
and ways to damage them the way a crash, a broken disk or a newer writer would."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tether.session import SessionMeta, SessionStore
from tether.session.persistence import JsonlPersistence, StoredSession, open_persistence

T0 = 1_700_000_000_000
"""Epoch ms of the first header; every later clock reading is one second on."""

DONE = "s-done"
"""A finished session: one completed turn."""
CRASHED = "s-crashed"
"""A subagent session whose process died inside a turn, after approval/asked."""


@dataclass(frozen=True)
class StoreRef:
    kind: str
    """``sqlite`` or ``jsonl``."""
    path: Path
    url: str

    def inspect(self, session_id: str) -> StoredSession:
        return asyncio.run(_inspect(self.url, session_id))

    def session_ids(self) -> list[str]:
        return asyncio.run(_list_ids(self.url))

    def tear_tail(self, session_id: str, fragment: bytes = b'{"type":"step/end","seq":') -> None:
        """Leave a partial final line, as a crash in the middle of a JSONL write does."""
        assert self.kind == "jsonl"
        with open(JsonlPersistence(self.path).log_path(session_id), "ab") as handle:
            handle.write(fragment)

    def corrupt_event(self, session_id: str, seq: int) -> None:
        """Damage one complete event in the middle of the log (not repairable)."""
        if self.kind == "jsonl":
            path = JsonlPersistence(self.path).log_path(session_id)
            lines = path.read_bytes().split(b"\n")
            lines[seq + 1] = b"{oops"
            path.write_bytes(b"\n".join(lines))
        else:
            self._sql(
                "UPDATE events SET data = '{oops' WHERE session_id = ? AND seq = ?",
                (session_id, seq),
            )

    def set_event_type(self, session_id: str, seq: int, event_type: str) -> None:
        """Make a stored event claim a type this tether does not know (a newer writer)."""
        if self.kind == "jsonl":
            path = JsonlPersistence(self.path).log_path(session_id)
            text = path.read_text(encoding="utf-8").split("\n")
            old = text[seq + 1]
            start = old.index('"type":"') + len('"type":"')
            end = old.index('"', start)
            text[seq + 1] = old[:start] + event_type + old[end:]
            path.write_text("\n".join(text), encoding="utf-8")
        else:
            self._sql(
                "UPDATE events SET type = ? WHERE session_id = ? AND seq = ?",
                (event_type, session_id, seq),
            )

    def set_format_version(self, session_id: str, version: int) -> None:
        """Make a stored header claim another format version (a newer tether wrote it)."""
        if self.kind == "jsonl":
            path = JsonlPersistence(self.path).log_path(session_id)
            text = path.read_text(encoding="utf-8")
            old = '"version":0,'
            assert text.count(old) == 1
            path.write_text(text.replace(old, f'"version":{version},'), encoding="utf-8")
        else:
            self._sql("UPDATE sessions SET version = ? WHERE id = ?", (version, session_id))

    def _sql(self, statement: str, params: tuple[object, ...]) -> None:
        conn = sqlite3.connect(self.path)
        try:
            with conn:
                assert conn.execute(statement, params).rowcount == 1
        finally:
            conn.close()


async def _inspect(url: str, session_id: str) -> StoredSession:
    persistence = open_persistence(url)
    try:
        return await persistence.inspect(session_id)
    finally:
        await persistence.close()


async def _list_ids(url: str) -> list[str]:
    persistence = open_persistence(url)
    try:
        return [header.id for header in await persistence.list()]
    finally:
        await persistence.close()


def make_ref(kind: str, base: Path) -> StoreRef:
    base.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        path = base / "store.db"
        return StoreRef(kind, path, f"sqlite:///{path}")
    path = base / "store"
    return StoreRef(kind, path, f"jsonl://{path}")


def ticking_clock(start: int = T0) -> Callable[[], int]:
    counter = itertools.count()
    return lambda: start + next(counter) * 1000


async def _populate(url: str, build: Callable[[SessionStore], None]) -> None:
    store = SessionStore(open_persistence(url), clock=ticking_clock())
    try:
        build(store)
    finally:
        await store.close()  # flushes every session, then closes the backend


def populate(ref: StoreRef, build: Callable[[SessionStore], None]) -> None:
    asyncio.run(_populate(ref.url, build))


def add_done(store: SessionStore, session_id: str = DONE) -> None:
    session = store.create(session_id, meta=SessionMeta(cwd="/work/project"))
    session.append("turn/start", {"turn": 0})
    session.append("user/message", {"content": "héllo", "source": "user"}, surface_op="append")
    session.append("step/start", {"step": 0})
    session.append("assistant/message", {"content": "Hi."}, surface_op="append")
    session.append("step/end", {"step": 0})
    session.append("turn/end", {"turn": 0, "reason": "completed"})


def add_crashed(store: SessionStore, session_id: str = CRASHED) -> None:
    meta = SessionMeta(
        cwd="/work/project", parent_session=DONE, origin="subagent", delegation_depth=1
    )
    session = store.create(session_id, meta=meta)
    session.append("turn/start", {"turn": 0})
    session.append("step/start", {"step": 0})
    session.append("tool/call", {"call_id": "c1", "name": "write", "arguments": '{"path":"x.txt"}'})
    session.append("approval/asked", {"id": "ap-1", "tool_name": "write", "call_id": "c1"})


def add_standard(store: SessionStore) -> None:
    add_done(store)
    add_crashed(store)
