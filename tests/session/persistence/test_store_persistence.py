"""SessionStore over the real backends: write-behind, flush, cold resume, veto, fork, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tether.session import Event, Session, SessionMeta, SessionStore
from tether.session.persistence import (
    JsonlPersistence,
    Persistence,
    PersistenceError,
    SeqConflictError,
    SessionNotFoundError,
    SqlitePersistence,
)
from tether.testing import T0, dicts, expected_closers, make_events

Factory = Callable[[], Persistence]


@pytest.fixture(params=["sqlite", "jsonl"])
def open_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    """Opens a new handle onto one store under ``tmp_path`` per call."""
    if request.param == "sqlite":
        return lambda: SqlitePersistence(tmp_path / "store.db")
    return lambda: JsonlPersistence(tmp_path / "sessions")


@pytest.fixture
async def backend(open_backend: Factory) -> AsyncIterator[Persistence]:
    handle = open_backend()
    yield handle
    await handle.close()


def new_store(persistence: Persistence) -> SessionStore:
    return SessionStore(persistence, clock=lambda: T0)


def play_closed_turn(session: Session, turn: int = 1) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("user/message", {"content": "list files", "source": "user"}, surface_op="append")
    session.append("step/start", {"step": 1})
    session.append("tool/call", {"call_id": f"c{turn}", "name": "ls", "arguments": "{}"})
    session.append("approval/asked", {"id": f"a{turn}", "tool_name": "ls", "call_id": f"c{turn}"})
    session.append("approval/decided", {"id": f"a{turn}", "outcome": "allowed-once"})
    session.append(
        "tool/result",
        {"call_id": f"c{turn}", "name": "ls", "content": "a.txt", "is_error": False},
        surface_op="append",
    )
    session.append("step/end", {"step": 1})
    session.append("assistant/message", {"content": "one file"}, surface_op="append")
    session.append("turn/end", {"turn": turn, "reason": "completed"})


async def wait_stored(backend: Persistence, session_id: str, count: int) -> list[Event]:
    """Poll until ``count`` events are stored (the writer runs in the background)."""
    async with asyncio.timeout(10):
        while True:
            try:
                events = list((await backend.inspect(session_id)).events)
            except SessionNotFoundError:
                events = []
            if len(events) >= count:
                return events
            await asyncio.sleep(0.001)


async def test_write_behind_stores_appends_without_a_flush(backend: Persistence) -> None:
    store = new_store(backend)
    session = store.create("s", meta=SessionMeta(cwd="/work"))
    play_closed_turn(session)
    stored = await wait_stored(backend, "s", 10)
    assert dicts(stored) == dicts(session.events)
    assert (await backend.inspect("s")).header == session.header


async def test_flush_is_a_barrier_for_everything_appended_before_it(backend: Persistence) -> None:
    store = new_store(backend)
    session = store.create("s")
    session.append("session/title", {"title": "first"})
    await asyncio.sleep(0)  # the writer is now storing the first event on its thread
    for index in range(200):
        session.append("session/title", {"title": f"t{index}"})
    await asyncio.gather(store.flush(session), store.flush(session))
    stored = await backend.inspect("s")
    assert dicts(stored.events) == dicts(session.events)
    assert len(stored.events) == 201
    session.append("approval/policy", {"policy": "never"})
    await store.flush(session)
    assert dicts((await backend.inspect("s")).events) == dicts(session.events)


async def test_cold_resume_appends_one_end_seed_marker(open_backend: Factory) -> None:
    first = new_store(open_backend())
    session = first.create("s", meta=SessionMeta(cwd="/work", agent_preset="coder"))
    play_closed_turn(session)
    await first.close()

    second = new_store(open_backend())
    resumed = await second.open("s")
    assert resumed.first_live_seq == 10
    assert resumed.header == session.header
    assert dicts(resumed.events[:10]) == dicts(session.events)
    assert resumed.events[10].to_dict() == {
        "type": "session/end-seed",
        "seq": 10,
        "time": T0,
        "data": {},
    }
    assert len(resumed) == 11
    play_closed_turn(resumed, turn=2)
    await second.close()

    third = new_store(open_backend())
    again = await third.open("s")
    assert again.first_live_seq == 21
    assert len(again) == 22  # the log ended in turn/end, so a new marker is appended
    untouched = dicts(again.events)
    await third.close()

    fourth = new_store(open_backend())
    last = await fourth.open("s")
    assert last.first_live_seq == 22
    assert dicts(last.events) == untouched  # ends in the marker already: nothing appended
    await fourth.close()


async def test_cold_resume_of_a_crashed_session_starts_after_the_repair(
    open_backend: Factory,
) -> None:
    backend = open_backend()
    first = new_store(backend)
    session = first.create("s")
    play_closed_turn(session)
    session.append("turn/start", {"turn": 2})
    session.append("user/message", {"content": "go", "source": "user"}, surface_op="append")
    session.append("step/start", {"step": 3})
    session.append("tool/call", {"call_id": "c1", "name": "bash", "arguments": '{"cmd": "ls"}'})
    session.append("tool/call", {"call_id": "c2", "name": "write", "arguments": '{"path": "x"}'})
    session.append(
        "tool/result",
        {"call_id": "c1", "name": "bash", "content": "a\nb", "is_error": False},
        surface_op="append",
    )
    session.append("approval/asked", {"id": "ap-9", "tool_name": "write", "call_id": "c2"})
    await first.flush(session)
    await backend.close()  # the process "dies": the store is never closed

    second = new_store(open_backend())
    resumed = await second.open("s")
    closers = expected_closers(17)
    for closer in closers:
        closer["time"] = T0
    assert dicts(resumed.events[17:21]) == closers
    assert resumed.first_live_seq == 21
    assert resumed.events[21].type == "session/end-seed"
    assert not resumed.has_open_turn()
    await second.close()


async def test_a_vetoed_announce_never_reaches_disk(backend: Persistence) -> None:
    store = new_store(backend)

    def veto(session: Session) -> None:
        raise RuntimeError("no")

    store.on_created(veto)
    with pytest.raises(RuntimeError):
        store.create("vetoed")
    prepared = store.prepare("setup")
    store.enter(prepared)
    prepared.append("sandbox/mode", {"mode": "read-only", "source": "delegation"})
    with pytest.raises(RuntimeError):
        store.announce(prepared)
    prepared.append("session/title", {"title": "after the veto"})
    for _ in range(20):
        await asyncio.sleep(0)
    await store.flush(prepared)  # rolled back: nothing to flush
    assert await backend.list() == []
    for session_id in ("vetoed", "setup"):
        with pytest.raises(SessionNotFoundError):
            await backend.inspect(session_id)


async def test_fork_of_a_live_session_is_stored_with_its_lineage(backend: Persistence) -> None:
    store = new_store(backend)
    parent = store.create("parent", meta=SessionMeta(cwd="/work/repo"))
    play_closed_turn(parent)
    parent.append("sandbox/mode", {"mode": "workspace-write"})
    child = await store.fork("parent", boundary=9, child_id="child")
    child.append("approval/policy", {"policy": "never", "source": "delegation"})
    await store.flush(child)
    stored = await backend.load("child")
    assert stored.header.parent_session == "parent"
    assert stored.header.seed_length == 10
    assert stored.header.cwd == "/work/repo"
    assert stored.header.origin is None
    assert stored.header.delegation_depth == 0
    assert dicts(stored.events[:10]) == dicts(parent.events[:10])
    assert [e.type for e in stored.events[10:]] == ["session/end-seed", "approval/policy"]
    assert [e.seq for e in stored.events] == list(range(12))
    assert not stored.repair.changed


async def test_a_background_write_failure_surfaces_at_flush(
    backend: Persistence, open_backend: Factory
) -> None:
    store = new_store(backend)
    session = store.create("s")
    session.append("session/title", {"title": "mine"})
    await store.flush(session)
    intruder = open_backend()
    try:
        await intruder.append("s", make_events(1, ("session/title", {"title": "theirs"})))
    finally:
        await intruder.close()
    session.append("session/title", {"title": "lost race"})
    with pytest.raises(PersistenceError) as caught:
        await store.flush(session)
    assert caught.value.code == "PERSISTENCE_ERROR"
    assert "'s' could not be stored" in str(caught.value)
    assert isinstance(caught.value.__cause__, SeqConflictError)
    session.append("session/title", {"title": "still failing"})
    with pytest.raises(PersistenceError):
        await store.flush(session)
    stored = await backend.inspect("s")
    assert [e.data["title"] for e in stored.events] == ["mine", "theirs"]


async def test_store_close_flushes_and_closes_the_backend(backend: Persistence) -> None:
    store = new_store(backend)
    session = store.create("s")
    play_closed_turn(session)
    await store.close()
    with pytest.raises(PersistenceError, match="closed"):
        await backend.list()
