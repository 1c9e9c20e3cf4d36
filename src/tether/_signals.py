"""Cooperative cancellation shared by every layer.

``AbortSignal`` plays the role of the reference's ``AbortSignal``: a one-way latch with a
reason. It is deliberately tiny and loop-agnostic so that the session and policy layers can use
it without importing the agent layer.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

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
        """Await ``awaitable`` unless the signal fires first; see :func:`race`."""
        return await race(self, awaitable)

    @staticmethod
    def any(*signals: AbortSignal) -> AbortSignal:
        """A signal that fires when any of ``signals`` fires."""
        combined = AbortSignal()
        for s in signals:
            s.add_callback(combined.abort)
        return combined


async def race(signal: AbortSignal | None, awaitable: Awaitable[T]) -> T:
    """``await awaitable``, unless ``signal`` fires first: then raise :class:`AbortedError`.

    However it ends (a result, the signal, the caller's own cancellation), the losing side is
    cancelled and has stopped before this returns or raises: nothing the race started runs on
    unowned, so an HTTP read cut by an abort has finished touching its connection before the
    caller closes the response. A pre-aborted signal never starts the work.
    """
    if signal is None:
        return await awaitable
    if signal.aborted:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise AbortedError(signal.reason)
    task = asyncio.ensure_future(awaitable)
    # One plain future that either side completes: nothing but the work is left to stop.
    either: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(_: object) -> None:
        if not either.done():
            either.set_result(None)

    task.add_done_callback(wake)
    remove = signal.add_callback(wake)
    try:
        await either
    except BaseException:
        remove()
        await cancel_and_wait(task)
        raise
    remove()
    if task.done():
        return task.result()
    await cancel_and_wait(task)
    raise AbortedError(signal.reason)


async def cancel_and_wait(task: asyncio.Future[T]) -> None:
    """Cancel ``task`` and wait until it has stopped (at once when it already has). Its late
    result or failure is moot and retrieved on purpose (so asyncio does not report it as
    never retrieved)."""
    if not task.done():
        task.cancel()
        try:
            await asyncio.wait({task})
        finally:
            if task.done() and not task.cancelled():
                task.exception()
    elif not task.cancelled():
        task.exception()
