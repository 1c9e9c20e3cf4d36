"""Owned background tasks: nothing the kernel's users start runs unowned.

Every task a component starts in the background (an async listener, an agent's driver, a
watcher of a child) is spawned into the runtime's :class:`TaskScope`. Closing the scope
cancels what is still running and waits until each task has really stopped, so a harness that
shuts down (or fails) leaves nothing behind, and nothing runs after its owner is gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TypeVar

from tether.errors import TetherError

log = logging.getLogger(__name__)
T = TypeVar("T")


class TaskScopeClosedError(TetherError):
    """A task was spawned into a scope that is closing or closed."""

    code = "TASK_SCOPE_CLOSED"


class TaskScope:
    """A set of running tasks with one owner."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()
        self._closed = False

    def spawn(
        self, coro: Coroutine[object, object, T], *, name: str, report: bool = True
    ) -> asyncio.Task[T]:
        """Run ``coro`` as a task of this scope. With ``report``, a failure nobody else
        observes is logged under ``name``; pass ``False`` when the caller awaits the task."""
        if self._closed:
            coro.close()
            raise TaskScopeClosedError(f"cannot start {name!r}: its owner has shut down")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)

        def done(finished: asyncio.Task[T]) -> None:
            self._tasks.discard(finished)
            if report and not finished.cancelled() and finished.exception() is not None:
                log.error("background task %r failed: %s", name, finished.exception())

        task.add_done_callback(done)
        return task

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._tasks)

    async def aclose(self) -> None:
        """Refuse new tasks, cancel the running ones and wait until every one has stopped."""
        self._closed = True
        while self._tasks:
            running = list(self._tasks)
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)


__all__ = ["TaskScope", "TaskScopeClosedError"]
