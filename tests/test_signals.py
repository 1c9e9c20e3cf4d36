"""AbortSignal: the cancellation latch every layer shares."""

from __future__ import annotations

import asyncio

import pytest

from tether.signals import AbortedError, AbortSignal


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
