"""Commit notification: hearing that a batch of events is durable, in the order it became so.

A consumer that shows events (``tether run --json``, :meth:`tether._harness.Harness.stream`)
must never show one the store could still lose. Appends to a live session are write-behind
(``session/_store.py``), so the append notification comes too early; this one comes from the
backend itself, once its append returned: the batch is committed (a SQLite transaction, a
JSONL write and ``fsync``). The write-behind batches and the synchronous flush the approval
audit pair takes before an effect both pass through that one ``append``, and so does an append
to a stored session that is not live here (narrowing a stored child).

Delivery runs on the event loop that awaited the append, before that ``append`` call returns
to its caller, so a ``flush`` that returned has delivered every commit it waited for; commits
are delivered in the order the backend made them (its one worker thread).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tether.session._events import Event
from tether.session.persistence._base import PersistenceError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Commit:
    """One committed batch: events ``events[0].seq ..`` of ``session_id``, in seq order."""

    session_id: str
    events: tuple[Event, ...]


CommitListener = Callable[[Commit], object]


@runtime_checkable
class ReportsCommits(Protocol):
    """Optional capability of a backend: call listeners with each committed batch."""

    def on_commit(self, listener: CommitListener) -> Callable[[], None]:
        """Call ``listener`` with every batch committed from now on; returns the remover."""
        ...


class CommitsNotReportedError(PersistenceError):
    """A consumer needs to know what is durable, and the backend cannot say."""

    code = "COMMITS_NOT_REPORTED"


class CommitFeed:
    """The listeners of one backend and the hand-over from its worker thread to the loop."""

    def __init__(self) -> None:
        self._listeners: list[CommitListener] = []

    def subscribe(self, listener: CommitListener) -> Callable[[], None]:
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def committed(self, loop: asyncio.AbstractEventLoop, commit: Commit) -> None:
        """Called on the worker thread right after the commit returned. The loop runs
        callbacks in the order they were queued, which is the worker's commit order, and
        this one is queued before the append's own result, so it is delivered first."""
        if self._listeners:
            loop.call_soon_threadsafe(self.deliver, commit)

    def deliver(self, commit: Commit) -> None:
        """Call every listener now (on the loop: a backend without a worker thread calls
        this itself, before its ``append`` returns)."""
        for listener in tuple(self._listeners):
            try:
                listener(commit)
            except Exception:  # a listener never undoes a commit nor stops the others
                log.exception("commit listener failed")


def commits_of(persistence: object) -> ReportsCommits:
    """``persistence`` as a commit reporter, or :class:`CommitsNotReportedError`."""
    if isinstance(persistence, ReportsCommits):
        return persistence
    raise CommitsNotReportedError(
        f"the session store {persistence!r} does not report its commits, so what is durable "
        "cannot be streamed; use run() instead of stream(), or a backend that implements "
        "on_commit (the SQLite and JSONL stores do)"
    )


__all__ = [
    "Commit",
    "CommitFeed",
    "CommitListener",
    "CommitsNotReportedError",
    "ReportsCommits",
    "commits_of",
]
