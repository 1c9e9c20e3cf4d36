"""Deferred commits (``DefersSync``): when the bundled backends sync them, counted.

A deferred commit is synced by the next durable commit (SQLite: the log is one file), by
``sync``, by the backend on its own within ``SYNC_WITHIN`` seconds, and by ``close``; the
session store asks for ``sync`` when a ``flush`` finds nothing new to commit. The counts come
from the backends' own sync calls and from ``os.fsync``/``os.fdatasync``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether.session import SessionMeta, SessionStore
from tether.session.persistence import JsonlPersistence, SqlitePersistence
from tether.session.persistence import _worker as worker_module
from tether.testing import header, titles


class SyncCounting(SqlitePersistence):
    """The real SQLite backend, counting the times its log file is synced by ``sync``."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.syncs = 0

    def _sync_all(self) -> None:
        if self._unsynced:
            self.syncs += 1
        super()._sync_all()


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls: list[int] = []
    real: Callable[[int], None] = getattr(os, name)

    def call(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, name, call)
    return calls


async def eventually(check: Callable[[], bool]) -> None:
    for _ in range(2000):  # a hang guard, not a timing
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("never happened")


async def test_a_durable_commit_or_a_sync_makes_every_deferred_one_durable(
    tmp_path: Path,
) -> None:
    backend = SyncCounting(tmp_path / "s.db")
    await backend.create_deferred(header(), titles(0, 2))
    await backend.append_deferred("s-1", titles(2, 2))
    assert backend._unsynced
    await backend.append("s-1", titles(4, 1))  # FULL: the whole log is synced
    assert not backend._unsynced and backend.syncs == 0
    await backend.append_deferred("s-1", titles(5, 1))
    await backend.sync("s-1")
    await backend.sync("s-1")  # nothing left: no second sync
    assert backend.syncs == 1
    await backend.close()
    assert backend.syncs == 1  # closing found nothing to sync


async def test_the_backend_syncs_on_its_own_and_when_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "SYNC_WITHIN", 0.01)
    backend = SyncCounting(tmp_path / "s.db")
    await backend.create_deferred(header(), titles(0, 2))
    await eventually(lambda: backend.syncs == 1)
    monkeypatch.setattr(worker_module, "SYNC_WITHIN", 3600.0)
    await backend.append_deferred("s-1", titles(2, 1))
    await backend.close()  # the timer had not fired: closing syncs
    assert backend.syncs == 2


def test_a_backend_used_by_a_later_loop_arms_its_sync_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = SyncCounting(tmp_path / "s.db")

    async def first() -> None:
        await backend.create_deferred(header(), titles(0, 1))  # its timer dies with this loop

    async def second() -> None:
        monkeypatch.setattr(worker_module, "SYNC_WITHIN", 0.01)
        await backend.append_deferred("s-1", titles(1, 1))
        await eventually(lambda: backend.syncs == 1)
        await backend.close()

    monkeypatch.setattr(worker_module, "SYNC_WITHIN", 3600.0)
    asyncio.run(first())
    asyncio.run(second())
    assert backend.syncs == 1


async def test_jsonl_syncs_only_the_sessions_it_deferred(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = JsonlPersistence(tmp_path / "sessions")
    await backend.create(header("a"))
    await backend.create(header("b"))
    fsyncs = counting(monkeypatch, "fsync")
    await backend.append_deferred("a", titles(0, 2))
    await backend.append_deferred("b", titles(0, 1))
    assert fsyncs == []
    await backend.sync("a")
    await backend.sync("a")
    assert len(fsyncs) == 1
    await backend.append("b", titles(1, 1))  # its own fsync syncs b's deferred line too
    assert len(fsyncs) == 2
    await backend.close()  # nothing deferred is left
    assert len(fsyncs) == 2
    reopened = JsonlPersistence(tmp_path / "sessions")
    assert [e.seq for e in (await reopened.load("b")).events] == [0, 1]
    await reopened.close()


async def test_a_flush_with_nothing_new_syncs_what_a_commit_left(tmp_path: Path) -> None:
    backend = SyncCounting(tmp_path / "s.db")
    store = SessionStore(backend)
    session = store.create(meta=SessionMeta(cwd="/w"))
    session.append("turn/start", {"turn": 1})
    await store.commit(session)
    assert backend._unsynced
    await store.flush(session)
    assert backend.syncs == 1 and not backend._unsynced
    await store.flush(session)  # durable already: nothing to do
    assert backend.syncs == 1
    await store.close()


async def test_synchronous_normal_never_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counting(monkeypatch, "fdatasync")
    backend: Any = SqlitePersistence(tmp_path / "s.db", synchronous="NORMAL")
    await backend.create_deferred(header(), titles(0, 1))
    await backend.sync("s-1")
    await backend.close()
    assert calls == []


async def test_each_barrier_hands_the_writer_one_commit_and_wakes_the_loop_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An approval cycle's two barriers (the flush of the audit pair before the tool runs, the
    commit that ends the run) cost one hand-off to the writer thread each and one thread-safe
    wake of the loop each (``docs/benchmarks.md``, "The writer's hand-offs"), and the flush
    is the cycle's one sync: a FULL commit."""

    class Counting(SyncCounting):
        full_commits = 0

        def _committed(self, sync: bool) -> None:
            self.full_commits += sync
            super()._committed(sync)

    backend = Counting(tmp_path / "s.db")
    store = SessionStore(backend)
    handed: list[int] = []
    real_run = worker_module.Worker.run

    async def run(self: worker_module.Worker, fn: Callable[[], Any]) -> Any:
        handed.append(1)
        return await real_run(self, fn)

    monkeypatch.setattr(worker_module.Worker, "run", run)
    loop = asyncio.get_running_loop()
    wakes: list[object] = []
    real_wake = loop.call_soon_threadsafe

    def wake(callback: Callable[..., object], *args: Any, **kwargs: Any) -> Any:
        wakes.append(callback)
        return real_wake(callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", wake)
    session = store.create(meta=SessionMeta(cwd="/w"))
    session.append("turn/start", {"turn": 1})
    session.append("session/title", {"title": "the audit pair stands in"})
    await store.flush(session)
    assert (len(handed), len(wakes), backend.full_commits) == (1, 1, 1)
    session.append("session/title", {"title": "the tool's result stands in"})
    session.append("turn/end", {"turn": 1})
    await store.commit(session)
    assert (len(handed), len(wakes), backend.full_commits, backend.syncs) == (2, 2, 1, 0)
    monkeypatch.undo()
    await store.close()
