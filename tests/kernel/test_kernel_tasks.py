"""The runtime's task scope: background tasks (async listeners among them) are owned,
cancelled and awaited on close."""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings

import pytest

from tether.kernel import Notice, TaskScope
from tether.kernel._plugin import Kernel
from tether.kernel._tasks import TaskScopeClosedError


async def test_closing_cancels_and_waits_for_every_task() -> None:
    scope = TaskScope()
    stopped: list[str] = []
    started = asyncio.Event()

    async def forever(name: str) -> None:
        try:
            started.set()
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0)  # cleanup that itself awaits still completes
            stopped.append(name)

    scope.spawn(forever("a"), name="a")
    scope.spawn(forever("b"), name="b")
    await started.wait()
    assert len(scope) == 2
    await scope.aclose()
    assert sorted(stopped) == ["a", "b"]
    assert len(scope) == 0


async def test_a_closed_scope_refuses_new_tasks_and_runs_nothing() -> None:
    scope = TaskScope()
    await scope.aclose()
    ran: list[bool] = []

    async def work() -> None:
        ran.append(True)

    with pytest.raises(TaskScopeClosedError) as err:
        scope.spawn(work(), name="late")
    assert str(err.value) == "cannot start 'late': its owner has shut down"
    await asyncio.sleep(0)
    assert ran == []


async def test_an_unobserved_failure_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    scope = TaskScope()

    async def boom() -> None:
        raise RuntimeError("broken listener")

    with caplog.at_level(logging.ERROR, logger="tether.kernel._tasks"):
        task = scope.spawn(boom(), name="listener")
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
    assert [r.getMessage() for r in caplog.records] == [
        "background task 'listener' failed: broken listener"
    ]


async def test_the_kernel_closes_its_tasks_before_unloading() -> None:
    kernel = Kernel()
    cancelled = asyncio.Event()

    async def watcher() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    kernel.ctx.spawn(watcher(), name="watcher")
    await asyncio.sleep(0)
    await kernel.aclose()
    assert cancelled.is_set()
    assert kernel.runtime.tasks.closed


async def test_an_async_listener_is_a_task_of_the_runtime_cancelled_and_awaited_at_close() -> None:
    kernel = Kernel()
    tick = Notice[int]("tick")
    started = asyncio.Event()
    stopped: list[int] = []

    async def listener(payload: int) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0)  # its own cleanup, which awaits, completes before close returns
            stopped.append(payload)

    kernel.ctx.on(tick, listener)
    kernel.ctx.emit(tick, 7)
    await started.wait()
    assert len(kernel.runtime.tasks) == 1
    await kernel.aclose()
    assert stopped == [7]
    assert len(kernel.runtime.tasks) == 0


async def test_after_close_an_async_listener_is_not_run_and_leaves_no_coroutine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kernel = Kernel()
    tick = Notice[str]("tick")
    ran: list[str] = []

    async def late(payload: str) -> None:
        ran.append(payload)

    kernel.ctx.on(tick, late)
    kernel.ctx.on(tick, ran.append)  # a synchronous listener still hears it
    await kernel.aclose()
    with (
        warnings.catch_warnings(record=True) as caught,
        caplog.at_level(logging.WARNING, logger="tether.kernel._context"),
    ):
        warnings.simplefilter("always")
        kernel.ctx.emit(tick, "late")
        await asyncio.sleep(0)
        gc.collect()
    assert ran == ["late"]
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert [r.getMessage() for r in caplog.records] == [
        "async listener for 'tick' not run: the runtime has shut down"
    ]
