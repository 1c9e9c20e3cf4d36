"""``workflow.fan_out``'s failure contract: its children are one task group. A child that
raises cancels its siblings (running or waiting for a slot), they are awaited (aborted and
disposed), and only then is that error raised, as itself; nothing is left running."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from subagent_support import World, child, hold, hold_tool, holding, until, world

from tether.session import Session
from tether.subagents import workflow
from tether.subagents._lifecycle import SubagentLifecycle
from tether.subagents._seams import SUBAGENT_END, SUBAGENT_START


class Vetoed(Exception):
    """A child session refused by a ``session/created`` listener: its start raises."""


def veto_child(w: World, number: int) -> list[str]:
    """Refuse the ``number``-th child session created from now on; returns the ids of every
    child session created, refused or not."""
    created: list[str] = []

    def listener(session: Session) -> None:
        if session.header.delegation_depth == 1:
            created.append(session.id)
            if len(created) == number:
                raise Vetoed(f"child {number} refused")

    w.store.on_created(listener)
    return created


def lifecycle(w: World) -> tuple[list[str], dict[str, str | None]]:
    """Ids of started children, and each ended child's stop reason."""
    started: list[str] = []
    ended: dict[str, str | None] = {}

    def on_start(event: SubagentLifecycle) -> None:
        started.append(event.child_id)

    def on_end(event: SubagentLifecycle) -> None:
        ended[event.child_id] = event.stop_reason

    w.ctx.on(SUBAGENT_START, on_start)
    w.ctx.on(SUBAGENT_END, on_end)
    return started, ended


def holders(key: str) -> dict[str, object]:
    return child([hold(key), {"text": f"{key} done"}], label=f"batch-{key}")


def leftover_tasks() -> set[asyncio.Task[object]]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


def live_children(w: World) -> list[str]:
    return [s.id for s in w.store.live() if s.header.delegation_depth > 0]


async def test_a_failing_child_cancels_and_awaits_its_running_siblings(tmp_path: Path) -> None:
    w = world(tmp_path, [holders("0"), holders("1")])
    gates = hold_tool(w)
    parent = w.root()
    created = veto_child(w, 3)
    started, ended = lifecycle(w)
    fan = asyncio.ensure_future(workflow.fan_out(parent, ["a", "b", "c"], limit=2, label="batch"))
    await until(lambda: len(started) == 2 and all(holding(w.agents.get(i)) for i in started))
    first, second = started
    gates.gate("0").set()  # the first child finishes, so the third takes its slot and is refused
    with pytest.raises(Vetoed, match="child 3 refused"):
        await fan
    # Awaited, not merely cancelled: when the error arrives the running sibling has already
    # been aborted and disposed, and nothing of the fan-out is still running.
    assert ended == {first: "completed", second: "aborted"}
    assert live_children(w) == [] and [a.id for a in w.agents] == [parent.id]
    assert leftover_tasks() == set()
    assert len(created) == 3 and created[2] not in started
    end = [e for e in (await w.store.inspect(second)).events if e.type == "turn/end"][-1]
    assert (end.data["reason"], end.data["cause"]) == ("aborted", "parent")
    assert not gates.gate("1").is_set()


async def test_children_waiting_for_a_slot_never_start_after_a_failure(tmp_path: Path) -> None:
    w = world(tmp_path, [holders("0")])
    hold_tool(w)
    parent = w.root()
    created = veto_child(w, 1)
    started, ended = lifecycle(w)
    with pytest.raises(Vetoed, match="child 1 refused"):
        await workflow.fan_out(parent, ["a", "b", "c"], limit=1, label="batch")
    assert len(created) == 1 and started == [] and ended == {}
    assert live_children(w) == [] and leftover_tasks() == set()


async def test_cancelling_the_fan_out_stops_every_child_first(tmp_path: Path) -> None:
    w = world(tmp_path, [holders("0"), holders("1")])
    hold_tool(w)
    parent = w.root()
    started, ended = lifecycle(w)
    fan = asyncio.ensure_future(workflow.fan_out(parent, ["a", "b"], label="batch"))
    await until(lambda: len(started) == 2 and all(holding(w.agents.get(i)) for i in started))
    fan.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fan
    assert ended == {started[0]: "aborted", started[1]: "aborted"}
    assert live_children(w) == [] and leftover_tasks() == set()


async def test_a_child_that_fails_after_starting_is_a_result_not_an_error(
    tmp_path: Path,
) -> None:
    broken = child([{"text": "never", "expect": "no such reply"}], label="batch-0")
    w = world(tmp_path, [broken, child([{"text": "fine"}], label="batch-1")])
    parent = w.root()
    results = await workflow.fan_out(parent, ["a", "b"], label="batch")
    assert [r.stop_reason for r in results] == ["error", "completed"]
    assert results[1].output == "fine"
