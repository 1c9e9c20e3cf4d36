"""A new session's header and first events are one commit (``CreatesWithEvents``): a crash
between a separate ``create`` and the first ``append`` left a header with an empty log, and a
cold resume then gave that session the default scope (found by the crash harness)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from tether.session import Event, SessionHeader, SessionMeta, SessionStore
from tether.session.persistence import (
    JsonlPersistence,
    Persistence,
    SeqConflictError,
    SessionExistsError,
    SqlitePersistence,
)
from tether.session.persistence._commits import Commit, commits_of
from tether.testing import header, titles


@pytest.fixture(params=["sqlite", "jsonl"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Persistence]:
    handle: Persistence = (
        SqlitePersistence(tmp_path / "store.db")
        if request.param == "sqlite"
        else JsonlPersistence(tmp_path / "sessions")
    )
    yield handle
    await handle.close()


async def test_header_and_first_events_are_stored_and_heard_together(
    backend: SqlitePersistence | JsonlPersistence,
) -> None:
    commits: list[Commit] = []
    commits_of(backend).on_commit(commits.append)
    await backend.create_with_events(header("a"), titles(0, 3))
    stored = await backend.inspect("a")
    assert stored.header == header("a")
    assert stored.events == tuple(titles(0, 3))
    assert [(c.session_id, [e.seq for e in c.events]) for c in commits] == [("a", [0, 1, 2])]
    await backend.append("a", titles(3, 1))  # the cached tail continues after them
    assert [e.seq for e in (await backend.inspect("a")).events] == [0, 1, 2, 3]


async def test_a_taken_id_or_a_batch_not_from_seq_0_stores_nothing(
    backend: SqlitePersistence | JsonlPersistence,
) -> None:
    commits: list[Commit] = []
    commits_of(backend).on_commit(commits.append)
    await backend.create_with_events(header("a"), titles(0, 1))
    with pytest.raises(SessionExistsError):
        await backend.create_with_events(header("a"), titles(0, 2))
    with pytest.raises(SeqConflictError, match="first event is seq 0, not 1"):
        await backend.create_with_events(header("b"), titles(1, 1))
    assert [h.id for h in await backend.list()] == ["a"]
    assert (await backend.inspect("a")).events == tuple(titles(0, 1))
    assert len(commits) == 1


class Recording(JsonlPersistence):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: list[tuple[str, list[int]]] = []

    async def create(self, header: SessionHeader) -> None:
        self.calls.append(("create", []))
        await super().create(header)

    async def create_with_events(self, header: SessionHeader, events: Sequence[Event]) -> None:
        self.calls.append(("create_with_events", [e.seq for e in events]))
        await super().create_with_events(header, events)

    async def append(self, session_id: str, events: Sequence[Event]) -> None:
        self.calls.append(("append", [e.seq for e in events]))
        await super().append(session_id, events)

    async def create_deferred(self, header: SessionHeader, events: Sequence[Event]) -> None:
        self.calls.append(("create_deferred", [e.seq for e in events]))
        await super().create_deferred(header, events)

    async def append_deferred(self, session_id: str, events: Sequence[Event]) -> None:
        self.calls.append(("append_deferred", [e.seq for e in events]))
        await super().append_deferred(session_id, events)


async def test_the_store_writes_a_new_sessions_scope_with_its_header(tmp_path: Path) -> None:
    backend = Recording(tmp_path / "sessions")
    store = SessionStore(backend)
    session = store.prepare(meta=SessionMeta(cwd="/w"))
    session.append("sandbox/mode", {"mode": "read-only"})
    session.append("approval/policy", {"policy": "never"})
    store.enter(session)
    store.announce(session)
    session.append("turn/start", {"turn": 1})
    await store.flush(session)
    session.append("turn/end", {"turn": 1, "reason": "completed"})
    await store.close()
    # The flush made the first write durable; closing commits the rest without a sync of
    # its own (the backend syncs it as it closes).
    assert backend.calls == [("create_with_events", [0, 1, 2]), ("append_deferred", [3])]
