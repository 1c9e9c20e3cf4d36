"""One dedicated thread per backend instance for blocking storage work.

Storage calls block (disk, locks held by other processes, fsync). Running them on the event
loop would stall every agent; running them on a shared pool would let two calls of one backend
race. A single worker thread gives both: the loop stays free, and the backend's own state (a
SQLite connection, cached log lengths) is touched by one thread only, in submission order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tether.errors import TetherError
from tether.session.persistence.base import PersistenceError

T = TypeVar("T")


class Worker:
    def __init__(
        self, name: str, describe: str, wrap: tuple[type[Exception], ...] = (OSError,)
    ) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._describe = describe
        self._wrap = wrap
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
