"""The commit notification of the bundled backends (``session/persistence/_commits.py``): each
committed batch is delivered once, in commit order, before its ``append`` returns; a batch
that was not committed is never delivered."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.session import Event, SessionMeta, SessionStore
from tether.session.persistence import (
    JsonlPersistence,
    Persistence,
    SeqConflictError,
    SqlitePersistence,
)
from tether.session.persistence._commits import (
    Commit,
    CommitsNotReportedError,
    ReportsCommits,
    commits_of,
)
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


def heard(commits: list[Commit]) -> list[tuple[str, list[int]]]:
    return [(c.session_id, [e.seq for e in c.events]) for c in commits]


async def test_each_batch_is_delivered_before_its_append_returns(backend: Persistence) -> None:
    commits: list[Commit] = []
    commits_of(backend).on_commit(commits.append)
    await backend.create(header("a"))
    await backend.append("a", titles(0, 2))
    assert heard(commits) == [("a", [0, 1])]
    await backend.append("a", titles(2, 1))
    assert heard(commits) == [("a", [0, 1]), ("a", [2])]
    assert commits[0].events == tuple(titles(0, 2))


async def test_concurrent_appends_are_delivered_in_commit_order(backend: Persistence) -> None:
    commits: list[Commit] = []
    commits_of(backend).on_commit(commits.append)
    for sid in ("a", "b", "c"):
        await backend.create(header(sid))
    await asyncio.gather(*(backend.append(sid, titles(0, 3)) for sid in ("a", "b", "c")))
    await asyncio.gather(*(backend.append(sid, titles(3, 1)) for sid in ("c", "b", "a")))
    # One worker thread commits in submission order; delivery keeps that order.
    assert heard(commits) == [
        ("a", [0, 1, 2]),
        ("b", [0, 1, 2]),
        ("c", [0, 1, 2]),
        ("c", [3]),
        ("b", [3]),
        ("a", [3]),
    ]


async def test_a_refused_append_is_not_delivered(backend: Persistence) -> None:
    commits: list[Commit] = []
    commits_of(backend).on_commit(commits.append)
    await backend.create(header("a"))
    await backend.append("a", titles(0, 2))
    with pytest.raises(SeqConflictError):
        await backend.append("a", titles(1, 2))
    assert heard(commits) == [("a", [0, 1])]


async def hold_first_write(
    backend: Persistence, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Commit], threading.Event, threading.Event]:
    """Session ``a``, created; its append of seq 0 waits on the worker thread, once it has
    ``started``, until ``release``. Returns the commits heard from now on and both events."""
    commits: list[Commit] = []
    commits_of(backend).on_commit(commits.append)
    await backend.create(header("a"))
    started, release = threading.Event(), threading.Event()
    write = backend._append  # type: ignore[attr-defined]

    def held(session_id: str, batch: tuple[Event, ...], *, sync: bool) -> None:
        if batch[0].seq == 0:
            started.set()
            release.wait(10)
        write(session_id, batch, sync=sync)

    monkeypatch.setattr(backend, "_append", held)
    return commits, started, release


async def test_a_cancelled_caller_still_hears_its_commit(
    backend: Persistence, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write the worker has started goes on when its caller is cancelled; the batch is
    durable, so it is heard."""
    commits, started, release = await hold_first_write(backend, monkeypatch)
    task = asyncio.ensure_future(backend.append("a", titles(0, 2)))
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await backend.append("a", titles(2, 1))  # queued behind the cancelled write
    assert heard(commits) == [("a", [0, 1]), ("a", [2])]
    assert [e.seq for e in (await backend.inspect("a")).events] == [0, 1, 2]


async def test_a_write_cancelled_before_it_started_is_neither_made_nor_heard(
    backend: Persistence, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write still queued behind another when its caller is cancelled never runs, so the
    session store, which counts it as not written, writes it again without a conflict."""
    commits, started, release = await hold_first_write(backend, monkeypatch)
    first = asyncio.ensure_future(backend.append("a", titles(0, 2)))
    assert await asyncio.to_thread(started.wait, 10)
    queued = asyncio.ensure_future(backend.append("a", titles(2, 1)))
    await asyncio.sleep(0)  # handed to the worker, behind the held write
    queued.cancel()
    release.set()
    await first
    with pytest.raises(asyncio.CancelledError):
        await queued
    await backend.append("a", titles(2, 1))
    assert heard(commits) == [("a", [0, 1]), ("a", [2])]
    assert [e.seq for e in (await backend.inspect("a")).events] == [0, 1, 2]


async def test_a_failing_listener_stops_neither_others_nor_the_append(
    backend: Persistence, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_commit: Commit) -> None:
        raise RuntimeError("listener bug")

    commits: list[Commit] = []
    commits_of(backend).on_commit(broken)
    remove = commits_of(backend).on_commit(commits.append)
    await backend.create(header("a"))
    await backend.append("a", titles(0, 1))
    assert heard(commits) == [("a", [0])]
    assert "commit listener failed" in caplog.text
    remove()
    await backend.append("a", titles(1, 1))
    assert heard(commits) == [("a", [0])]


async def test_the_write_behind_store_commits_what_a_flush_waited_for(
    backend: Persistence,
) -> None:
    """Through the session store: after ``flush`` every appended event was heard, once, in
    seq order, the first batch no earlier than the header it needs."""
    commits: list[Commit] = []
    commits_of(backend).on_commit(commits.append)
    store = SessionStore(backend)
    session = store.create(meta=SessionMeta(cwd="/w"))
    for turn in range(1, 4):
        session.append("turn/start", {"turn": turn})
        session.append("turn/end", {"turn": turn, "reason": "completed"})
    await store.flush(session)
    seqs = [e.seq for c in commits for e in c.events]
    assert seqs == list(range(6))
    assert {c.session_id for c in commits} == {session.id}
    assert (await backend.inspect(session.id)).events == tuple(session.events)


def test_a_backend_without_the_capability_is_refused_by_name() -> None:
    class Plain:
        def __repr__(self) -> str:
            return "<plain store>"

    assert isinstance(SqlitePersistence("/nonexistent/x.db"), ReportsCommits)
    with pytest.raises(CommitsNotReportedError) as caught:
        commits_of(Plain())
    assert caught.value.code == "COMMITS_NOT_REPORTED"
    assert str(caught.value).startswith(
        "the session store <plain store> does not report its commits, so what is durable "
        "cannot be streamed; use run() instead of stream()"
    )
