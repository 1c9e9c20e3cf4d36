"""Racing one await against an :class:`AbortSignal`, leaving nothing running behind.

``AbortSignal.race`` cancels the losing awaitable but returns before it has unwound. Here the
loser is always awaited to completion first, so that an HTTP read cancelled by an abort has
finished touching the connection before the caller closes the response.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import TypeVar

from tether.signals import AbortedError, AbortSignal

T = TypeVar("T")


async def race(signal: AbortSignal | None, awaitable: Awaitable[T]) -> T:
    """``await awaitable``, unless ``signal`` fires first: then raise :class:`AbortedError`."""
    if signal is None:
        return await awaitable
    if signal.aborted:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise AbortedError(signal.reason)
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        waiter.cancel()
        await _settle(task)
        raise
    waiter.cancel()
    if task.done():
        return task.result()
    await _settle(task)
    raise AbortedError(signal.reason)


async def _settle(task: asyncio.Future[T]) -> None:
    task.cancel()
    try:
        await asyncio.wait({task})
    finally:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved on purpose: a late failure is moot after an abort
