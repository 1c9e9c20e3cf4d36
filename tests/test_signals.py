"""AbortSignal: the cancellation latch every layer shares."""

from __future__ import annotations

import asyncio

import pytest

from tether._signals import AbortedError, AbortSignal, cancel_and_wait, race


async def test_race_returns_the_result_when_not_aborted() -> None:
    signal = AbortSignal()

    async def work() -> int:
        return 7

    assert await signal.race(work()) == 7


async def test_race_raises_and_cancels_the_work_when_aborted() -> None:
    signal = AbortSignal()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    racing = asyncio.ensure_future(signal.race(work()))
    await started.wait()
    signal.abort("user")
    with pytest.raises(AbortedError) as info:
        await racing
    assert info.value.reason == "user"
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_cancelling_the_caller_cancels_the_inner_work() -> None:
    signal = AbortSignal()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    racing = asyncio.ensure_future(signal.race(work()))
    await started.wait()
    racing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await racing
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_pre_aborted_signal_never_starts_the_work() -> None:
    signal = AbortSignal()
    signal.abort("parent")
    ran = False

    async def work() -> None:
        nonlocal ran
        ran = True

    coro = work()
    with pytest.raises(AbortedError):
        await signal.race(coro)
    coro.close()
    assert ran is False


def test_callbacks_run_once_and_any_combines() -> None:
    a, b = AbortSignal(), AbortSignal()
    seen: list[object] = []
    combined = AbortSignal.any(a, b)
    combined.add_callback(seen.append)
    remove = a.add_callback(lambda r: seen.append(("a", r)))
    remove()
    b.abort("disposed")
    a.abort("user")
    assert seen == ["disposed"]
    assert combined.aborted and combined.reason == "disposed"
    late: list[object] = []
    combined.add_callback(late.append)
    assert late == ["disposed"]


async def unwinding(stopped: asyncio.Event, started: asyncio.Event) -> None:
    """Work whose cleanup takes a few turns of the loop after it is cancelled."""
    started.set()
    try:
        await asyncio.sleep(3600)
    finally:
        for _ in range(3):
            await asyncio.sleep(0)
        stopped.set()


async def test_race_stops_the_losing_work_before_it_raises() -> None:
    signal = AbortSignal()
    started, stopped = asyncio.Event(), asyncio.Event()
    racing = asyncio.ensure_future(race(signal, unwinding(stopped, started)))
    await started.wait()
    signal.abort("user")
    with pytest.raises(AbortedError):
        await racing
    assert stopped.is_set()  # not merely cancelled: its cleanup has run


async def test_a_cancelled_caller_stops_the_work_before_its_cancellation_surfaces() -> None:
    signal = AbortSignal()
    started, stopped = asyncio.Event(), asyncio.Event()
    racing = asyncio.ensure_future(signal.race(unwinding(stopped, started)))
    await started.wait()
    racing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await racing
    assert stopped.is_set()


async def test_race_leaves_no_task_behind_when_the_work_wins() -> None:
    signal = AbortSignal()
    before = asyncio.all_tasks()

    async def work() -> str:
        return "done"

    assert await race(signal, work()) == "done"
    assert asyncio.all_tasks() == before  # the waiter on the signal is gone too


async def test_race_without_a_signal_just_awaits() -> None:
    async def work() -> int:
        return 3

    assert await race(None, work()) == 3


def test_a_pre_aborted_race_closes_the_coroutine_it_never_runs() -> None:
    signal = AbortSignal()
    signal.abort("parent")

    async def work() -> None:
        raise AssertionError("never started")

    coro = work()
    with pytest.raises(AbortedError):
        asyncio.run(race(signal, coro))
    assert coro.cr_frame is None  # closed, so no "never awaited" warning


async def test_cancel_and_wait_returns_once_the_task_has_stopped() -> None:
    started, stopped = asyncio.Event(), asyncio.Event()
    task = asyncio.ensure_future(unwinding(stopped, started))
    await started.wait()
    await cancel_and_wait(task)
    assert task.cancelled() and stopped.is_set()
