"""The session store: prepare/enter/announce, notifications, the flush barrier, and fork.

Tests that store go through the ``backend`` fixture: a small in-memory implementation of the
``Persistence`` protocol (which can also inject failures) and the real SQLite and JSONL backends
from ``open_persistence``, so the store is checked against the contract, not one backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from event_support import seq_kinds as layout
from tether.errors import TetherError
from tether.session import (
    Event,
    Persistence,
    PersistenceError,
    SeqConflictError,
    Session,
    SessionExistsError,
    SessionHeader,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    StoredSession,
    _store,
)
from tether.session._store import (
    InvalidBoundaryError,
    NoPersistenceError,
    OpenTurnError,
    SessionNotLiveError,
)
from tether.session.persistence import open_persistence


class RecordingPersistence:
    """The protocol's contract, kept in dicts; records every write for assertions."""

    def __init__(self) -> None:
        self.headers: dict[str, SessionHeader] = {}
        self.events: dict[str, list[Event]] = {}
        self.writes: list[tuple[str, str, int]] = []
        self.fail_appends: BaseException | None = None
        self.closed = False

    async def create(self, header: SessionHeader) -> None:
        await asyncio.sleep(0)
        if header.id in self.headers:
            raise SessionExistsError(f"session {header.id!r} already exists")
        self.headers[header.id] = header
        self.events[header.id] = []
        self.writes.append(("create", header.id, 0))

    async def append(self, session_id: str, events: Sequence[Event]) -> None:
        await asyncio.sleep(0)
        if self.fail_appends is not None:
            raise self.fail_appends
        if session_id not in self.headers:
            raise SessionNotFoundError(f"session {session_id!r} not found")
        stored = self.events[session_id]
        if events and events[0].seq != len(stored):
            raise SeqConflictError(f"expected seq {len(stored)}, got {events[0].seq}")
        stored.extend(events)
        self.writes.append(("append", session_id, len(events)))

    async def load(self, session_id: str) -> StoredSession:
        return await self.inspect(session_id)

    async def inspect(self, session_id: str) -> StoredSession:
        if session_id not in self.headers:
            raise SessionNotFoundError(f"session {session_id!r} not found")
        return StoredSession(self.headers[session_id], tuple(self.events[session_id]))

    async def list(self) -> list[SessionHeader]:
        return list(self.headers.values())

    async def close(self) -> None:
        self.closed = True


def test_memory_backend_satisfies_the_protocol() -> None:
    assert isinstance(RecordingPersistence(), Persistence)


def make_store(persistence: Persistence | None = None) -> SessionStore:
    ids = itertools.count(1)
    clock = itertools.count(1_000)
    return SessionStore(
        persistence, clock=lambda: next(clock), new_id=lambda: f"session-{next(ids)}"
    )


class Backend:
    """A persistence under test plus a way to open the same storage afresh."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self._memory = RecordingPersistence() if kind == "memory" else None
        self._url = {
            "memory": "",
            "sqlite": f"sqlite:///{tmp_path}/store.db",
            "jsonl": f"jsonl://{tmp_path}/sessions",
        }[kind]
        self.opened: list[Persistence] = []
        self.persistence = self.reopen()

    def reopen(self) -> Persistence:
        if self._memory is not None:
            return self._memory
        opened = open_persistence(self._url)
        self.opened.append(opened)
        return opened


@pytest.fixture(params=["memory", "sqlite", "jsonl"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made = Backend(request.param, tmp_path)
    yield made
    for opened in made.opened:
        with contextlib.suppress(Exception):  # the store may have closed it already
            await opened.close()


async def stored_events(persistence: Persistence, session_id: str) -> list[Event]:
    return list((await persistence.inspect(session_id)).events)


def completed_turn(session: Session, turn: int) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("user/message", {"content": f"q{turn}", "source": "user"}, surface_op="append")
    session.append("turn/end", {"turn": turn, "reason": "completed"})


def raising(error: BaseException) -> Callable[..., None]:
    def listener(*args: object) -> None:
        raise error

    return listener


class Recorder:
    """Subscribes to every store notification and records it as plain tuples."""

    def __init__(self, store: SessionStore) -> None:
        self.log: list[tuple[str, ...]] = []
        store.on_created(lambda s: self.log.append(("created", s.id)))
        store.on_event(lambda s, e: self.log.append(("event", s.id, str(e.seq), e.type)))
        store.on_disposed(lambda s: self.log.append(("disposed", s.id)))


# -- lifecycle --------------------------------------------------------------------------------


def test_create_makes_a_live_announced_session() -> None:
    store = make_store()
    rec = Recorder(store)
    session = store.create("a", meta=SessionMeta(cwd="/w", agent_preset="p"))
    assert store.get("a") is session
    assert store.live() == [session]
    assert session.header == SessionHeader(id="a", created_at=1000, cwd="/w", agent_preset="p")
    assert rec.log == [("created", "a")]
    assert len(session) == 0


def test_create_mints_ids() -> None:
    store = make_store()
    assert [store.create().id, store.create().id] == ["session-1", "session-2"]


def test_default_ids_are_unique_uuids() -> None:
    store = SessionStore()
    first, second = store.create(), store.create()
    assert first.id != second.id
    assert len(first.id) == 36


def test_prepare_publishes_and_registers_nothing() -> None:
    store = make_store()
    rec = Recorder(store)
    session = store.prepare("p")
    session.append("sandbox/mode", {"mode": "read-only"})
    assert store.get("p") is None
    assert rec.log == []


def test_prepare_with_a_header() -> None:
    store = make_store()
    header = SessionHeader(id="h", created_at=5, cwd="/x")
    assert store.prepare(header=header).header is header


def test_enter_makes_live_without_announcing() -> None:
    store = make_store()
    rec = Recorder(store)
    session = store.prepare("e")
    store.enter(session)
    session.append("sandbox/mode", {"mode": "read-only"})
    assert store.get("e") is session
    assert rec.log == []


def test_enter_of_an_already_live_id_is_refused() -> None:
    store = make_store()
    live = store.create("dup")
    with pytest.raises(SessionExistsError) as info:
        store.enter(store.prepare("dup"))
    assert info.value.code == "SESSION_ALREADY_EXISTS"
    assert str(info.value) == "session 'dup' is already live"
    assert store.get("dup") is live
    with pytest.raises(SessionExistsError):
        store.create("dup")
    assert store.get("dup") is live


def test_announce_before_enter_is_refused() -> None:
    store = make_store()
    rec = Recorder(store)
    with pytest.raises(SessionNotLiveError) as info:
        store.announce(store.prepare("x"))
    assert info.value.code == "SESSION_NOT_LIVE"
    assert rec.log == []


def test_announcing_twice_notifies_once() -> None:
    store = make_store()
    rec = Recorder(store)
    session = store.prepare("twice")
    session.append("sandbox/mode", {"mode": "read-only"})
    store.enter(session)
    store.announce(session)
    store.announce(session)
    assert rec.log == [("created", "twice"), ("event", "twice", "0", "sandbox/mode")]


def test_detach_disposer_removes_and_pairs_disposed_with_created() -> None:
    store = make_store()
    rec = Recorder(store)
    session = store.prepare("d")
    detach = store.enter(session)
    store.announce(session)
    detach()
    detach()
    session.append("turn/start", {"turn": 1})  # no longer published
    assert store.get("d") is None
    assert rec.log == [("created", "d"), ("disposed", "d")]
    # The id is free again.
    assert store.create("d") is not session


def test_detaching_an_unannounced_session_emits_no_disposed() -> None:
    store = make_store()
    rec = Recorder(store)
    detach = store.enter(store.prepare("quiet"))
    detach()
    assert store.get("quiet") is None
    assert rec.log == []


async def test_dispose_emits_disposed_once() -> None:
    store = make_store()
    rec = Recorder(store)
    session = store.create("x")
    await store.dispose(session)
    await store.dispose(session)
    assert rec.log == [("created", "x"), ("disposed", "x")]


def test_listener_disposers() -> None:
    store = make_store()
    seen: list[str] = []
    stop_created = store.on_created(lambda s: seen.append("created"))
    stop_event = store.on_event(lambda s, e: seen.append("event"))
    stop_disposed = store.on_disposed(lambda s: seen.append("disposed"))
    for stop in (stop_created, stop_event, stop_disposed):
        stop()
        stop()
    session = store.create("s")
    session.append("turn/start", {"turn": 1})
    store.enter(store.prepare("t"))()
    assert seen == []


# -- veto -------------------------------------------------------------------------------------


def test_a_raising_created_listener_vetoes_and_rolls_back() -> None:
    store = make_store()
    rec = Recorder(store)

    class Veto(TetherError):
        code = "VETO"

    def veto(session: Session) -> None:
        if session.id.startswith("bad"):
            raise Veto("no")

    store.on_created(veto)
    with pytest.raises(Veto):
        store.create("bad-1")
    assert store.get("bad-1") is None
    assert store.live() == []
    # No events, no disposed for the vetoed session; later creates still notify everyone.
    good = store.create("good")
    good.append("turn/start", {"turn": 1})
    assert rec.log == [
        ("created", "bad-1"),
        ("created", "good"),
        ("event", "good", "0", "turn/start"),
    ]


def test_vetoed_session_publishes_nothing_afterwards() -> None:
    store = make_store()
    rec = Recorder(store)
    stop = store.on_created(raising(RuntimeError("veto")))
    session = store.prepare("v")
    session.append("sandbox/mode", {"mode": "read-only"})
    store.enter(session)
    with pytest.raises(RuntimeError):
        store.announce(session)
    session.append("turn/start", {"turn": 1})
    assert rec.log == [("created", "v")]
    stop()
    # The same session object can be entered and announced again once the veto is gone.
    store.enter(session)
    store.announce(session)
    assert rec.log[1:] == [
        ("created", "v"),
        ("event", "v", "0", "sandbox/mode"),
        ("event", "v", "1", "turn/start"),
    ]


async def test_vetoed_session_is_never_stored(backend: Backend) -> None:
    store = make_store(backend.persistence)
    store.on_created(raising(RuntimeError("veto")))
    session = store.prepare("v")
    session.append("sandbox/mode", {"mode": "read-only"})
    store.enter(session)
    await asyncio.sleep(0.01)  # give any writer every chance to run before the veto
    with pytest.raises(RuntimeError):
        store.announce(session)
    await asyncio.sleep(0.01)
    assert await backend.persistence.list() == []
    with pytest.raises(SessionNotFoundError):
        await backend.persistence.inspect("v")


# -- session/event ----------------------------------------------------------------------------


def test_seed_events_are_never_published_setup_appends_are_published_at_announce() -> None:
    store = make_store()
    rec = Recorder(store)
    seed = tuple(Event.make(t, i, 1, {}) for i, t in enumerate(["turn/start", "turn/end"]))
    session = store.prepare("child", seed=seed)
    session.append("sandbox/mode", {"mode": "read-only", "source": "delegation"})
    session.append("approval/policy", {"policy": "never", "source": "delegation"})
    store.enter(session)
    assert rec.log == []
    store.announce(session)
    session.append("turn/start", {"turn": 2})
    assert session.first_live_seq == 2
    assert rec.log == [
        ("created", "child"),
        ("event", "child", "2", "session/end-seed"),
        ("event", "child", "3", "sandbox/mode"),
        ("event", "child", "4", "approval/policy"),
        ("event", "child", "5", "turn/start"),
    ]


def test_created_listener_appends_are_published_in_order_after_created() -> None:
    store = make_store()
    rec = Recorder(store)
    store.on_created(lambda s: s.append("permission/preset", {"preset": "workspace-write"}))
    session = store.prepare("pin")
    session.append("sandbox/mode", {"mode": "workspace-write"})
    store.enter(session)
    store.announce(session)
    assert rec.log == [
        ("created", "pin"),
        ("event", "pin", "0", "sandbox/mode"),
        ("event", "pin", "1", "permission/preset"),
    ]


def test_live_appends_are_published_synchronously() -> None:
    store = make_store()
    seen: list[tuple[str, int]] = []
    store.on_event(lambda s, e: seen.append((s.id, e.seq)))
    a, b = store.create("a"), store.create("b")
    a.append("turn/start", {"turn": 1})
    assert seen == [("a", 0)]
    b.append("turn/start", {"turn": 1})
    a.append("turn/end", {"turn": 1, "reason": "completed"})
    assert seen == [("a", 0), ("b", 0), ("a", 1)]


def test_entered_but_unannounced_sessions_are_not_published() -> None:
    store = make_store()
    rec = Recorder(store)
    session = store.prepare("hidden")
    store.enter(session)
    session.append("turn/start", {"turn": 1})
    assert rec.log == []


def test_failing_event_listener_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    store = make_store()
    seen: list[int] = []

    def broken(session: Session, event: Event) -> None:
        raise ValueError("listener broke")

    store.on_event(broken)
    store.on_event(lambda s, e: seen.append(e.seq))
    session = store.create("s")
    with caplog.at_level(logging.ERROR, logger="tether.session._store"):
        event = session.append("turn/start", {"turn": 1})
    assert event.seq == 0
    assert seen == [0]
    assert len(session) == 1
    assert "session/event listener failed" in caplog.text


def test_failing_disposed_listener_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    store = make_store()
    seen: list[str] = []
    store.on_disposed(raising(ValueError("disposed listener broke")))
    store.on_disposed(lambda s: seen.append(s.id))
    session = store.prepare("s")
    detach = store.enter(session)
    store.announce(session)
    with caplog.at_level(logging.ERROR, logger="tether.session._store"):
        detach()
    assert seen == ["s"]
    assert store.get("s") is None
    assert "session/disposed listener failed" in caplog.text


def test_event_listener_appending_keeps_publication_in_seq_order() -> None:
    store = make_store()
    seen_first: list[int] = []
    seen_second: list[int] = []

    def reacting(session: Session, event: Event) -> None:
        seen_first.append(event.seq)
        if event.type == "turn/start":
            session.append("sandbox/mode", {"mode": "read-only"})

    store.on_event(reacting)
    store.on_event(lambda s, e: seen_second.append(e.seq))
    session = store.create("s")
    session.append("turn/start", {"turn": 1})
    assert seen_first == [0, 1]
    assert seen_second == [0, 1]


def test_event_listener_appending_during_announce_backlog() -> None:
    store = make_store()
    seen: list[tuple[int, str]] = []

    def reacting(session: Session, event: Event) -> None:
        seen.append((event.seq, event.type))
        if event.type == "sandbox/mode":
            session.append("approval/policy", {"policy": "never"})

    store.on_event(reacting)
    session = store.prepare("s")
    session.append("sandbox/mode", {"mode": "read-only"})
    session.append("permission/preset", {"preset": "custom"})
    store.enter(session)
    store.announce(session)
    assert seen == [(0, "sandbox/mode"), (1, "permission/preset"), (2, "approval/policy")]


# -- flush and storage ------------------------------------------------------------------------


async def test_flush_stores_header_and_every_event_appended_before_it(backend: Backend) -> None:
    store = make_store(backend.persistence)
    session = store.create("s", meta=SessionMeta(cwd="/w"))
    completed_turn(session, 1)
    await store.flush(session)
    stored = await backend.persistence.inspect("s")
    assert stored.header == session.header
    assert list(stored.events) == list(session.events)
    session.append("sandbox/mode", {"mode": "read-only"})
    await store.flush(session)
    assert await stored_events(backend.persistence, "s") == list(session.events)
    # A fresh handle on the same storage sees the same log.
    assert await stored_events(backend.reopen(), "s") == list(session.events)


async def test_flush_batches_and_writes_the_header_once() -> None:
    backend = RecordingPersistence()
    store = make_store(backend)
    session = store.create("s")
    completed_turn(session, 1)
    await store.flush(session)
    session.append("sandbox/mode", {"mode": "read-only"})
    await store.flush(session)
    assert backend.writes == [("create", "s", 0), ("append", "s", 3), ("append", "s", 1)]


async def test_nothing_is_stored_before_the_first_event(backend: Backend) -> None:
    store = make_store(backend.persistence)
    session = store.create("lazy")
    await store.flush(session)
    await asyncio.sleep(0.01)
    assert await backend.persistence.list() == []


async def test_writer_drains_in_the_background_taking_what_accumulates() -> None:
    backend = RecordingPersistence()
    store = make_store(backend)
    session = store.create("bg")
    completed_turn(session, 1)
    await asyncio.sleep(0)
    assert backend.writes == []  # it waits a moment for what follows
    session.append("session/title", {"title": "later"})
    for _ in range(400):
        if len(backend.events.get("bg", ())) == 4:
            break
        await asyncio.sleep(0.005)
    assert layout(backend.events["bg"]) == layout(session.events)
    assert backend.writes == [("create", "bg", 0), ("append", "bg", 4)]  # one commit


async def test_a_barrier_does_not_wait_for_the_write_behind_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_store, "WRITE_BEHIND_DELAY", 3600.0)  # a barrier that waited would hang
    backend = RecordingPersistence()
    store = make_store(backend)
    session = store.create("now")
    completed_turn(session, 1)
    await store.commit(session)
    assert layout(backend.events["now"]) == layout(session.events)
    session.append("session/title", {"title": "t"})
    await store.flush(session)
    detached = store.prepare("detached")
    detach = store.enter(detached)
    store.announce(detached)
    completed_turn(detached, 1)
    detach()  # without a barrier: what was appended is written all the same
    for _ in range(100):
        if len(backend.events.get("detached", ())) == 3:
            break
        await asyncio.sleep(0)
    assert layout(backend.events["detached"]) == layout(detached.events)


async def test_flush_before_announce_stores_setup_events(backend: Backend) -> None:
    store = make_store(backend.persistence)
    session = store.prepare("early")
    session.append("sandbox/mode", {"mode": "read-only"})
    store.enter(session)
    await store.flush(session)
    assert layout(await stored_events(backend.persistence, "early")) == [(0, "sandbox/mode")]
    store.announce(session)
    session.append("approval/policy", {"policy": "never"})
    await store.flush(session)
    assert layout(await stored_events(backend.persistence, "early")) == [
        (0, "sandbox/mode"),
        (1, "approval/policy"),
    ]


async def test_flush_without_persistence_is_a_no_op() -> None:
    store = make_store()
    session = store.create("mem")
    session.append("turn/start", {"turn": 1})
    await store.flush(session)


async def test_flush_reports_a_failed_write() -> None:
    backend = RecordingPersistence()
    backend.fail_appends = OSError("disk full")
    store = make_store(backend)
    session = store.create("s")
    session.append("turn/start", {"turn": 1})
    with pytest.raises(PersistenceError) as info:
        await store.flush(session)
    assert info.value.code == "PERSISTENCE_ERROR"
    assert str(info.value) == "session 's' could not be stored: disk full"
    # The in-memory log is unaffected; the failure is sticky.
    assert layout(session.events) == [(0, "turn/start")]
    with pytest.raises(PersistenceError):
        await store.flush(session)


async def test_close_flushes_every_session_and_closes_the_backend(backend: Backend) -> None:
    store = make_store(backend.persistence)
    rec = Recorder(store)
    a, b = store.create("a"), store.create("b")
    completed_turn(a, 1)
    b.append("sandbox/mode", {"mode": "read-only"})
    await store.close()
    assert store.live() == []
    assert ("disposed", "a") in rec.log and ("disposed", "b") in rec.log
    fresh = backend.reopen()
    assert await stored_events(fresh, "a") == list(a.events)
    assert await stored_events(fresh, "b") == list(b.events)


async def test_close_closes_the_backend() -> None:
    backend = RecordingPersistence()
    await make_store(backend).close()
    assert backend.closed


async def test_open_reopens_a_stored_session_with_one_marker(backend: Backend) -> None:
    store = make_store(backend.persistence)
    rec = Recorder(store)
    session = store.create("r", meta=SessionMeta(cwd="/w"))
    completed_turn(session, 1)
    await store.dispose(session)

    reopened = await store.open("r")
    assert reopened.header == session.header
    assert reopened.first_live_seq == 3
    assert list(reopened.events[:3]) == list(session.events)
    assert layout(reopened.events)[3:] == [(3, "session/end-seed")]
    await store.flush(reopened)
    assert await stored_events(backend.persistence, "r") == list(reopened.events)
    assert rec.log[-2:] == [("created", "r"), ("event", "r", "3", "session/end-seed")]
    await store.dispose(reopened)

    again = await store.open("r")  # untouched since: no second marker
    assert layout(again.events) == layout(reopened.events)
    assert again.first_live_seq == 4
    with pytest.raises(SessionExistsError):
        await store.open("r")


async def test_open_without_persistence() -> None:
    with pytest.raises(NoPersistenceError) as info:
        await make_store().open("x")
    assert info.value.code == "NO_PERSISTENCE"


async def test_inspect_live_and_stored(backend: Backend) -> None:
    store = make_store(backend.persistence)
    session = store.create("i")
    completed_turn(session, 1)
    live = await store.inspect("i")
    assert live.header == session.header
    assert live.events == tuple(session.events)
    await store.dispose(session)
    stored = await store.inspect("i")
    assert stored.events == tuple(session.events)
    with pytest.raises(SessionNotFoundError):
        await store.inspect("missing")


# -- fork -------------------------------------------------------------------------------------


def two_turns(store: SessionStore, session_id: str = "src", cwd: str | None = "/w") -> Session:
    source = store.create(session_id, meta=SessionMeta(cwd=cwd))
    completed_turn(source, 1)  # 0..2
    source.append("sandbox/mode", {"mode": "read-only"})  # 3, between turns
    completed_turn(source, 2)  # 4..6
    return source


async def test_fork_defaults_to_the_last_event() -> None:
    store = make_store()
    rec = Recorder(store)
    source = two_turns(store)
    before = len(rec.log)
    child = await store.fork("src", child_id="kid")
    assert store.get("kid") is child
    assert child.header == SessionHeader(
        id="kid", created_at=child.header.created_at, cwd="/w", parent_session="src", seed_length=7
    )
    assert child.header.origin is None
    assert child.header.delegation_depth == 0
    assert child.header.to_dict() == {
        "type": "session",
        "version": 0,
        "id": "kid",
        "created_at": child.header.created_at,
        "cwd": "/w",
        "parent_session": "src",
        "seed_length": 7,
        "delegation_depth": 0,
    }
    assert child.first_live_seq == 7
    assert layout(child.events) == [*layout(source.events), (7, "session/end-seed")]
    assert [e.to_dict() for e in child.events[:7]] == [e.to_dict() for e in source.events]
    # Only the end-seed marker is published; the inherited prefix never is.
    assert rec.log[before:] == [("created", "kid"), ("event", "kid", "7", "session/end-seed")]
    assert len(source) == 7, "forking never touches the source"


async def test_fork_at_an_explicit_boundary() -> None:
    store = make_store()
    two_turns(store)
    child = await store.fork("src", 2, "kid")
    assert child.header.seed_length == 3
    assert child.first_live_seq == 3
    assert layout(child.events) == [
        (0, "turn/start"),
        (1, "user/message"),
        (2, "turn/end"),
        (3, "session/end-seed"),
    ]
    between = await store.fork("src", 3, "kid2")
    assert between.header.seed_length == 4
    assert layout(between.events)[-2:] == [(3, "sandbox/mode"), (4, "session/end-seed")]


async def test_fork_mints_a_child_id() -> None:
    store = make_store()
    two_turns(store)
    child = await store.fork("src")
    assert child.id == "session-1"
    assert child.header.parent_session == "src"


async def test_fork_without_cwd() -> None:
    store = make_store()
    two_turns(store, cwd=None)
    child = await store.fork("src", 2, "kid")
    assert child.header.cwd is None


async def test_fork_of_a_fork_at_its_marker_adds_no_second_marker() -> None:
    store = make_store()
    two_turns(store)
    child = await store.fork("src", 2, "kid")  # 0..2 + end-seed at 3
    grandchild = await store.fork("kid", 3, "grandkid")
    assert grandchild.header.seed_length == 4
    assert grandchild.first_live_seq == 4
    assert layout(grandchild.events) == layout(child.events)


@pytest.mark.parametrize("boundary", [7, 100, -1, -7])
async def test_fork_boundary_out_of_range(boundary: int) -> None:
    store = make_store()
    two_turns(store)
    with pytest.raises(InvalidBoundaryError) as info:
        await store.fork("src", boundary, "kid")
    assert info.value.code == "INVALID_BOUNDARY"
    assert str(info.value) == (
        f"fork boundary {boundary} does not exist in session 'src' (events 0..6)"
    )
    assert store.get("kid") is None


@pytest.mark.parametrize("boundary", [True, False, 2.0, "2", [2]])
async def test_fork_boundary_must_be_an_int(boundary: object) -> None:
    store = make_store()
    two_turns(store)
    with pytest.raises(InvalidBoundaryError) as info:
        await store.fork("src", boundary, "kid")  # type: ignore[arg-type]
    assert str(info.value) == f"fork boundary must be an integer seq, got {boundary!r}"


async def test_fork_of_an_empty_session_has_no_boundary() -> None:
    store = make_store()
    store.create("empty")
    with pytest.raises(InvalidBoundaryError):
        await store.fork("empty")


@pytest.mark.parametrize("boundary", [0, 1, 4, 5])
async def test_fork_boundary_inside_an_open_turn(boundary: int) -> None:
    store = make_store()
    two_turns(store)
    with pytest.raises(OpenTurnError) as info:
        await store.fork("src", boundary, "kid")
    assert info.value.code == "OPEN_TURN"
    assert str(info.value) == f"fork boundary {boundary} falls inside an open turn"
    assert store.get("kid") is None


async def test_fork_default_boundary_inside_a_running_turn() -> None:
    store = make_store()
    source = two_turns(store)
    source.append("turn/start", {"turn": 3})
    with pytest.raises(OpenTurnError):
        await store.fork("src")
    assert (await store.fork("src", 6)).header.seed_length == 7


async def test_fork_of_an_unknown_source(backend: Backend) -> None:
    store = make_store(backend.persistence)
    with pytest.raises(SessionNotFoundError) as info:
        await store.fork("ghost")
    assert info.value.code == "SESSION_NOT_FOUND"
    assert str(info.value) == "session 'ghost' not found"
    with pytest.raises(SessionNotFoundError):
        await make_store().fork("ghost")


async def test_fork_of_a_stored_but_not_live_source(backend: Backend) -> None:
    store = make_store(backend.persistence)
    source = two_turns(store)
    await store.dispose(source)
    with pytest.raises(SessionNotLiveError) as info:
        await store.fork("src")
    assert info.value.code == "SESSION_NOT_LIVE"
    assert str(info.value) == "session 'src' is stored but not live"


async def test_fork_child_id_collision_with_a_live_session() -> None:
    store = make_store()
    two_turns(store)
    taken = store.create("taken")
    with pytest.raises(SessionExistsError) as info:
        await store.fork("src", child_id="taken")
    assert info.value.code == "SESSION_ALREADY_EXISTS"
    assert str(info.value) == "session 'taken' already exists"
    assert store.get("taken") is taken
    with pytest.raises(SessionExistsError):
        await store.fork("src", child_id="src")


async def test_fork_child_id_collision_with_a_stored_session(backend: Backend) -> None:
    store = make_store(backend.persistence)
    two_turns(store)
    old = store.create("old")
    old.append("turn/start", {"turn": 1})
    await store.dispose(old)
    with pytest.raises(SessionExistsError):
        await store.fork("src", child_id="old")
    assert store.get("old") is None


async def test_forked_child_is_stored_with_its_lineage(backend: Backend) -> None:
    store = make_store(backend.persistence)
    source = two_turns(store)
    child = await store.fork("src", 2, "kid")
    completed_turn(child, 2)
    await store.flush(child)
    stored = await backend.persistence.inspect("kid")
    assert stored.header == child.header
    assert stored.header.to_dict() == {
        "type": "session",
        "version": 0,
        "id": "kid",
        "created_at": child.header.created_at,
        "cwd": "/w",
        "parent_session": "src",
        "seed_length": 3,
        "delegation_depth": 0,
    }
    assert list(stored.events) == list(child.events)
    assert list(stored.events[:3]) == list(source.events[:3])
    assert layout(stored.events)[3:] == [
        (3, "session/end-seed"),
        (4, "turn/start"),
        (5, "user/message"),
        (6, "turn/end"),
    ]


async def test_fork_veto_rolls_the_child_back() -> None:
    store = make_store()
    two_turns(store)

    def no_forks(session: Session) -> None:
        if session.header.parent_session is not None:
            raise RuntimeError("no forks")

    store.on_created(no_forks)
    with pytest.raises(RuntimeError):
        await store.fork("src", child_id="kid")
    assert store.get("kid") is None
    assert [s.id for s in store.live()] == ["src"]
