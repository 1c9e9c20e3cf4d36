"""One dedicated thread per backend instance for blocking storage work.

Storage calls block (disk, locks held by other processes, fsync). Running them on the event
loop would stall every agent; running them on a shared pool would let two calls of one backend
race. A single worker thread gives both: the loop stays free, and the backend's own state (a
SQLite connection, cached log lengths) is touched by one thread only, in submission order.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tether.errors import TetherError
from tether.session._events import Event
from tether.session._header import SessionHeader
from tether.session.persistence._base import (
    SYNC_WITHIN,
    PersistenceError,
    StoredSession,
)
from tether.session.persistence._codec import check_contiguous, check_first_batch
from tether.session.persistence._commits import Commit, CommitFeed, CommitListener

T = TypeVar("T")
log = logging.getLogger(__name__)


class Worker:
    def __init__(
        self,
        name: str,
        describe: str,
        wrap: tuple[type[Exception], ...] = (OSError,),
        explain: Callable[[Exception], PersistenceError | None] | None = None,
    ) -> None:
        """``explain`` may turn a wrapped storage error into a more specific one (a damaged
        file, a full disk); it runs on the worker thread."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._describe = describe
        self._wrap = wrap
        self._explain = explain
        self.closed = False

    async def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the worker; storage errors (``wrap``) become PersistenceError.

        The worker hands the outcome back itself, in one callback (``_settle``), rather than
        through ``run_in_executor``, which chains a thread-safe future to the loop's: the
        hand-off is what a commit costs the loop besides its wait (``docs/benchmarks.md``,
        "The writer's hand-offs"). What ``run_in_executor`` guaranteed still holds: a call
        whose caller was cancelled before it started never runs; one already running
        completes, and its outcome is dropped."""
        if self.closed:
            raise PersistenceError(f"{self._describe} is closed")
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[T] = loop.create_future()
        call = self._executor.submit(self._hand_back, fn, loop, outcome)
        try:
            return await outcome
        except asyncio.CancelledError:
            call.cancel()
            raise

    def _hand_back(
        self, fn: Callable[[], T], loop: asyncio.AbstractEventLoop, outcome: asyncio.Future[T]
    ) -> None:
        """On the worker: run ``fn``, then settle ``outcome`` on its loop."""
        try:
            result, error = self._guard(fn), None
        except BaseException as err:  # handed to the caller, as run_in_executor did
            result, error = None, err
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_settle, outcome, result, error)

    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except TetherError:
            raise
        except self._wrap as err:
            explained = self._explain(err) if self._explain is not None else None
            if explained is not None:
                raise explained from err
            raise PersistenceError(f"{self._describe}: {type(err).__name__}: {err}") from err

    async def close(self, release: Callable[[], None]) -> None:
        """Run ``release`` after every queued call, then stop the thread. Idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, release)
        finally:
            # The queue is empty once ``release`` ran, so the thread exits promptly.
            self._executor.shutdown(wait=False)


def _settle(outcome: asyncio.Future[T], result: T | None, error: BaseException | None) -> None:
    """On the loop: give a worker call's outcome to its caller, unless it gave up waiting."""
    if outcome.done():
        return
    if error is None:
        outcome.set_result(result)  # type: ignore[arg-type]  # None only with an error
    else:
        outcome.set_exception(error)


class WorkerBackend(ABC):
    """The async side of a backend whose storage work runs on one :class:`Worker`.

    Subclasses implement the blocking half (``_create``, ``_append``, ``_sync``,
    ``_sync_all``, ``_read``, ``_list``, ``_list_ids``, ``_release``); every protocol call
    hops to the worker thread here, in one place, so the two shipped backends cannot drift
    apart in how they validate and dispatch. Every backend built on it reports its commits
    (``ReportsCommits``), writes a new session's first events with its header
    (``CreatesWithEvents``) and defers syncs (``DefersSync``).
    """

    _worker: Worker
    _commits: CommitFeed | None = None
    _sync_timer: asyncio.TimerHandle | None = None
    _sync_loop: asyncio.AbstractEventLoop | None = None
    _sync_task: asyncio.Task[None] | None = None

    def on_commit(self, listener: CommitListener) -> Callable[[], None]:
        """Call ``listener`` with each batch once it is committed (see :mod:`._commits`)."""
        if self._commits is None:
            self._commits = CommitFeed()
        return self._commits.subscribe(listener)

    async def create(self, header: SessionHeader) -> None:
        await self._worker.run(lambda: self._create(header, (), sync=True))

    async def create_with_events(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """Store a new header and its first events (seq 0 on) in one commit (``CreatesWithEvents``)."""
        await self._create_committed(header, events, sync=True)

    async def create_deferred(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """:meth:`create_with_events`, without waiting for the disk (``DefersSync``)."""
        await self._create_committed(header, events, sync=False)
        self._sync_later()

    async def append(self, session_id: str, events: Sequence[Event]) -> None:
        await self._append_committed(session_id, events, sync=True)

    async def append_deferred(self, session_id: str, events: Sequence[Event]) -> None:
        """:meth:`append`, without waiting for the disk (``DefersSync``)."""
        if events:
            await self._append_committed(session_id, events, sync=False)
            self._sync_later()

    async def sync(self, session_id: str) -> None:
        """Return once every commit of ``session_id`` is durable (``DefersSync``)."""
        await self._worker.run(lambda: self._sync(session_id))

    async def open(self) -> None:
        """``OpensFiles``: the storage's files exist from now (otherwise the first commit,
        which the write-behind may run while a command is starting, would make them)."""
        await self._worker.run(self._open)

    async def _create_committed(
        self, header: SessionHeader, events: Sequence[Event], *, sync: bool
    ) -> None:
        batch = tuple(events)
        check_first_batch(header.id, batch)
        loop = asyncio.get_running_loop()

        def commit() -> None:
            self._create(header, batch, sync=sync)
            if batch and self._commits is not None:
                self._commits.committed(loop, Commit(header.id, batch))

        await self._worker.run(commit)

    async def _append_committed(
        self, session_id: str, events: Sequence[Event], *, sync: bool
    ) -> None:
        if not events:
            return
        batch = tuple(events)
        check_contiguous(session_id, batch)
        loop = asyncio.get_running_loop()

        def commit() -> None:
            self._append(session_id, batch, sync=sync)
            # Announced from the worker, not after the await: a caller cancelled while the
            # write ran would otherwise drop the notice of a batch that is committed.
            if self._commits is not None:
                self._commits.committed(loop, Commit(session_id, batch))

        await self._worker.run(commit)

    def _sync_later(self) -> None:
        """Make sure deferred commits are synced within ``SYNC_WITHIN`` seconds (a timer of
        the running loop: one armed by a loop that has ended since is armed again)."""
        loop = asyncio.get_running_loop()
        if self._worker.closed or (self._sync_timer is not None and self._sync_loop is loop):
            return
        self._sync_loop = loop
        self._sync_timer = loop.call_later(SYNC_WITHIN, self._start_sync, loop)

    def _start_sync(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sync_timer = None
        if self._sync_task is None or self._sync_task.done():
            self._sync_task = loop.create_task(self._sync_in_background())

    async def _sync_in_background(self) -> None:
        try:
            await self._worker.run(self._sync_all)
        except PersistenceError as err:
            # The next durable write or sync meets the same failure and raises it where a
            # caller can act on it; here it can only be said.
            log.warning("%s", err)

    async def load(self, session_id: str) -> StoredSession:
        return await self._worker.run(lambda: self._read(session_id, repair=True))

    async def inspect(self, session_id: str) -> StoredSession:
        return await self._worker.run(lambda: self._read(session_id, repair=False))

    async def list(self) -> builtins.list[SessionHeader]:
        return await self._worker.run(self._list)

    async def list_ids(self) -> builtins.list[str]:
        """Every stored id, oldest first, without parsing headers (see ``ListsIds``)."""
        return await self._worker.run(self._list_ids)

    async def close(self) -> None:
        """Sync what is deferred, then release the worker's resources. Idempotent."""
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        task = self._sync_task
        try:
            if (
                task is not None
                and not task.done()
                and task.get_loop() is asyncio.get_running_loop()
            ):
                await asyncio.shield(task)
            if not self._worker.closed:
                await self._worker.run(self._sync_all)
        finally:
            await self._worker.close(self._release)

    # -- the blocking half (worker thread) ----------------------------------------------
    @abstractmethod
    def _create(self, header: SessionHeader, first: tuple[Event, ...], *, sync: bool) -> None:
        """Store ``header`` and ``first`` (seq 0 on, possibly none) atomically; durably when
        ``sync``."""

    @abstractmethod
    def _append(self, session_id: str, batch: tuple[Event, ...], *, sync: bool) -> None: ...

    @abstractmethod
    def _sync(self, session_id: str) -> None:
        """Make every commit of ``session_id`` durable."""

    @abstractmethod
    def _sync_all(self) -> None:
        """Make every commit durable."""

    @abstractmethod
    def _read(self, session_id: str, *, repair: bool) -> StoredSession: ...

    @abstractmethod
    def _list(self) -> builtins.list[SessionHeader]: ...

    @abstractmethod
    def _list_ids(self) -> builtins.list[str]: ...

    @abstractmethod
    def _open(self) -> None:
        """What :meth:`open` does on the worker thread."""

    @abstractmethod
    def _release(self) -> None:
        """Drop what the worker thread held (connections, caches) as it closes."""
