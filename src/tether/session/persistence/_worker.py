"""One dedicated thread per backend instance for blocking storage work.

Storage calls block (disk, locks held by other processes, fsync). Running them on the event
loop would stall every agent; running them on a shared pool would let two calls of one backend
race. A single worker thread gives both: the loop stays free, and the backend's own state (a
SQLite connection, cached log lengths) is touched by one thread only, in submission order.
"""

from __future__ import annotations

import asyncio
import builtins
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tether.errors import TetherError
from tether.session._events import Event
from tether.session._header import SessionHeader
from tether.session.persistence._base import PersistenceError, SeqConflictError, StoredSession
from tether.session.persistence._codec import check_contiguous
from tether.session.persistence._commits import Commit, CommitFeed, CommitListener

T = TypeVar("T")


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
        """Run ``fn`` on the worker; storage errors (``wrap``) become PersistenceError."""
        if self.closed:
            raise PersistenceError(f"{self._describe} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._guard, fn)

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


class WorkerBackend(ABC):
    """The async side of a backend whose storage work runs on one :class:`Worker`.

    Subclasses implement the blocking half (``_create``, ``_append``, ``_read``, ``_list``,
    ``_list_ids``, ``_release``); every protocol call hops to the worker thread here, in one
    place, so the two shipped backends cannot drift apart in how they validate and dispatch.
    """

    _worker: Worker
    _commits: CommitFeed | None = None

    def on_commit(self, listener: CommitListener) -> Callable[[], None]:
        """Call ``listener`` with each batch once it is committed (see :mod:`._commits`)."""
        if self._commits is None:
            self._commits = CommitFeed()
        return self._commits.subscribe(listener)

    async def create(self, header: SessionHeader) -> None:
        await self._worker.run(lambda: self._create(header, ()))

    async def create_with_events(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """Store a new header and its first events (seq 0 on) in one commit (``CreatesWithEvents``)."""
        batch = tuple(events)
        if batch:
            check_contiguous(header.id, batch)
            if batch[0].seq != 0:
                raise SeqConflictError(
                    f"session {header.id!r}: a new session's first event is seq 0, not "
                    f"{batch[0].seq}"
                )
        loop = asyncio.get_running_loop()

        def commit() -> None:
            self._create(header, batch)
            if batch and self._commits is not None:
                self._commits.committed(loop, Commit(header.id, batch))

        await self._worker.run(commit)

    async def append(self, session_id: str, events: Sequence[Event]) -> None:
        if not events:
            return
        batch = tuple(events)
        check_contiguous(session_id, batch)
        loop = asyncio.get_running_loop()

        def commit() -> None:
            self._append(session_id, batch)
            # Announced from the worker, not after the await: a caller cancelled while the
            # write ran would otherwise drop the notice of a batch that is durable.
            if self._commits is not None:
                self._commits.committed(loop, Commit(session_id, batch))

        await self._worker.run(commit)

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
        await self._worker.close(self._release)

    # -- the blocking half (worker thread) ----------------------------------------------
    @abstractmethod
    def _create(self, header: SessionHeader, first: tuple[Event, ...]) -> None:
        """Store ``header`` and ``first`` (seq 0 on, possibly none) atomically."""

    @abstractmethod
    def _append(self, session_id: str, batch: tuple[Event, ...]) -> None: ...

    @abstractmethod
    def _read(self, session_id: str, *, repair: bool) -> StoredSession: ...

    @abstractmethod
    def _list(self) -> builtins.list[SessionHeader]: ...

    @abstractmethod
    def _list_ids(self) -> builtins.list[str]: ...

    @abstractmethod
    def _release(self) -> None:
        """Drop what the worker thread held (connections, caches) as it closes."""
