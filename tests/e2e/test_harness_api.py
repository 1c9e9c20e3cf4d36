"""The Python front door (``docs/design.md`` §3): ``Harness.open``, ``run``, ``stream``."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from script_support import script as script_file
from tether import Harness
from tether._signals import AbortedError, AbortSignal
from tether.agent import PENDING_WORK, TURN_END, Agent, TurnEnded
from tether.model import Completion, ModelRequest, StreamEvent, ToolCall
from tether.session._lease import SessionLiveError
from tether.subagents import SUBAGENTS_SERVICE
from tether.subagents._continuation import ContinuationManager


def script(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    """The model spec of a one-entry script in ``tmp_path``."""
    return f"scripted:{script_file(tmp_path / 's.json', steps)}"


async def test_run_then_stream_on_the_same_root(tmp_path: Path) -> None:
    asked: list[str] = []

    async def approver(request: Any) -> str:
        asked.append(request.tool_name)
        return "allowed-once" if request.tool_name == "write" else "rejected"

    model = script(
        tmp_path,
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "a"}}]},
            {"text": "first done"},
            {"text": "second done"},
        ],
    )
    async with Harness.open(
        workspace=tmp_path,
        model=model,
        store=f"sqlite:///{tmp_path / 'h.db'}",
        sandbox="read-only",
        approval="ask",
        approver=approver,
        plugins=["ask_tools"],
    ) as harness:
        result = await harness.run("write a.txt")
        assert (result.stop_reason, result.output) == ("completed", "first done")
        # the write was approved but the session is read-only: the sandbox still denies it
        assert asked == ["write"] and not (tmp_path / "a.txt").exists()
        streamed = [item async for item in harness.stream("again")]
    assert {item.session_id for item in streamed} == {result.session_id}
    kinds = [item.event.type for item in streamed]
    assert kinds[0] == "agent/inbox/spliced" and kinds[-1] == "turn/end"
    assert streamed[-1].event.data == {"turn": 2, "reason": "completed"}
    assert [item.event.seq for item in streamed] == sorted(item.event.seq for item in streamed)


async def test_two_harnesses_never_run_the_same_session(tmp_path: Path) -> None:
    model = script(tmp_path, [{"text": "one"}, {"text": "two"}])
    store = f"sqlite:///{tmp_path / 'h.db'}"
    async with Harness.open(workspace=tmp_path, model=model, store=store) as first:
        result = await first.run("hello")
        async with Harness.open(workspace=tmp_path, model=model, store=store) as second:
            with pytest.raises(SessionLiveError) as refused:
                await second.run("again", resume=result.session_id)
            assert str(refused.value) == (
                f"session {result.session_id!r} is live in process {os.getpid()}"
            )
    # Once the first harness is closed, the session is free to resume.
    async with Harness.open(workspace=tmp_path, model=model, store=store) as third:
        again = await third.run("again", resume=result.session_id)
    assert again.session_id == result.session_id


# -- shutdown on every exit path --------------------------------------------------------------
class DelegateThenPark:
    """A root that starts one background child, then answers; the child's (and, with
    ``delegate=False``, the root's) model request waits until its turn is aborted."""

    def __init__(self, *, delegate: bool = True) -> None:
        self.delegate = delegate
        self.parked = asyncio.Event()

    def stream(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamEvent]:
        return self._reply(request, signal)

    async def _reply(
        self, request: ModelRequest, signal: AbortSignal | None
    ) -> AsyncIterator[StreamEvent]:
        if self.delegate and request.depth == 0:
            if request.step_index == 0:
                arguments = {"description": "probe", "prompt": "wait", "run_in_background": True}
                call = ToolCall("c1", "subagent", json.dumps(arguments))
                yield Completion("", tool_calls=(call,), finish_reason="tool_calls")
            else:
                yield Completion("delegated")
            return
        self.parked.set()
        assert signal is not None
        await signal.wait()
        raise AbortedError(signal.reason)


def stream_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "harness stream"]


@pytest.mark.parametrize("exit_by", ["raise", "cancel"])
async def test_a_body_that_fails_still_shuts_everything_down(tmp_path: Path, exit_by: str) -> None:
    model = DelegateThenPark()
    store = f"sqlite:///{tmp_path / 'h.db'}"
    opened: list[Harness] = []
    managers: list[ContinuationManager] = []
    children: list[Agent] = []
    inside = asyncio.Event()

    async def body() -> None:
        async with Harness.open(workspace=tmp_path, model=model, store=store) as harness:
            opened.append(harness)
            harness.agent_for(harness.new_root_session()).followup("delegate")
            await model.parked.wait()  # the background child is mid-request
            manager = harness.ctx.require(SUBAGENTS_SERVICE)
            managers.append(manager)
            children.extend(manager.resident())
            inside.set()
            if exit_by == "raise":
                raise RuntimeError("the body failed")
            await asyncio.Event().wait()

    task = asyncio.create_task(body())
    await inside.wait()
    if exit_by == "cancel":
        task.cancel()
    with pytest.raises(RuntimeError if exit_by == "raise" else asyncio.CancelledError):
        await task
    (harness,) = opened
    assert harness.kernel.runtime.tasks.closed and len(harness.kernel.runtime.tasks) == 0
    assert harness.kernel.plugins() == []
    assert harness.store.live() == []
    (manager,), (child,) = managers, children
    assert manager.resident() == []
    assert child.status == "idle"
    turn_end = child.session.last("turn/end")
    assert turn_end is not None and turn_end.data["cause"] == "disposed"
    (root,) = harness.agents
    assert root.status == "idle"
    # The store was closed: its lease is free, and the root's turn is on record.
    async with Harness.open(workspace=tmp_path, model=model, store=store) as again:
        resumed = await again.resume(root.id)
        assert resumed.session.last("turn/end") is not None


async def test_a_stream_left_early_stops_its_waiter(tmp_path: Path) -> None:
    model = DelegateThenPark(delegate=False)
    async with Harness.open(
        workspace=tmp_path, model=model, store=f"sqlite:///{tmp_path / 'h.db'}"
    ) as harness:
        stream = harness.stream("wait")
        async for _item in stream:
            break
        assert len(stream_tasks()) == 1  # the root still runs, so the waiter still waits
        await stream.aclose()
        assert stream_tasks() == []
        async for _item in harness.stream("more"):  # abandoned: the generator is dropped
            break
        for _ in range(5):
            await asyncio.sleep(0)
        assert stream_tasks() == []
        assert harness.root is not None and harness.root.status == "running"
        harness.root.cancel("user")


async def test_run_waits_for_work_a_plugin_may_still_queue(tmp_path: Path) -> None:
    # The shape of a Stop hook: after a turn ends, something runs in the background and then
    # queues another turn. Until it has, the run is not over. (Here the work only goes on once
    # the run asks what is pending, so a run that did not ask would end after "first".)
    model = script(tmp_path, [{"text": "first"}, {"text": "second"}])
    async with Harness.open(workspace=tmp_path, model=model) as harness:
        pending: list[asyncio.Task[None]] = []
        asked = asyncio.Event()

        async def continue_once(agent: Agent) -> None:
            await asked.wait()
            agent.followup("continue")

        def turn_end(item: TurnEnded) -> None:
            if item.result.output == "first":
                pending.append(harness.ctx.spawn(continue_once(item.agent), name="continue"))

        async def settled() -> None:
            asked.set()
            await asyncio.gather(*pending)

        harness.ctx.on(TURN_END, turn_end)
        harness.ctx.on(PENDING_WORK, lambda _: settled())
        result = await harness.run("go")
    assert result.output == "second"
