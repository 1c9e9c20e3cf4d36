"""Cooperative cancellation shared by every layer.

``AbortSignal`` plays the role of the reference's ``AbortSignal``: a one-way latch with a
reason. It is deliberately tiny and loop-agnostic so that the session and policy layers can use
it without importing the agent layer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class AbortedError(Exception):
    """Raised by :meth:`AbortSignal.race` when the signal fires first."""

    def __init__(self, reason: object = None) -> None:
        super().__init__(f"aborted: {reason}" if reason is not None else "aborted")
        self.reason = reason


class AbortSignal:
    """A latch that fires once. Callbacks registered before firing run exactly once."""

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        self._callbacks: list[Callable[[object], None]] = []
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> object:
        return self._reason

    def abort(self, reason: object = None) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(reason)
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def add_callback(self, fn: Callable[[object], None]) -> Callable[[], None]:
        """Run ``fn(reason)`` on abort (immediately if already aborted). Returns a remover."""
        if self._aborted:
            fn(self._reason)
            return lambda: None
        self._callbacks.append(fn)

        def remove() -> None:
            if fn in self._callbacks:
                self._callbacks.remove(fn)

        return remove

    async def wait(self) -> None:
        if self._aborted:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)

    async def race(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` unless the signal fires first; then cancel it and raise."""
        if self._aborted:
            raise AbortedError(self._reason)
        task = asyncio.ensure_future(awaitable)
        waiter = asyncio.ensure_future(self.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            # The caller itself was cancelled: the inner work must not run on unowned.
            task.cancel()
            task.add_done_callback(_swallow)
            raise
        finally:
            waiter.cancel()
        if task.done():
            return task.result()
        task.cancel()
        # A late answer (or a late exception) is discarded on purpose; retrieving it here keeps
        # asyncio from reporting it as never retrieved.
        task.add_done_callback(_swallow)
        raise AbortedError(self._reason)

    @staticmethod
    def any(*signals: AbortSignal) -> AbortSignal:
        """A signal that fires when any of ``signals`` fires."""
        combined = AbortSignal()
        for s in signals:
            s.add_callback(combined.abort)
        return combined


def _swallow(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
