"""The workflow API runs children through the one-shot driver: same capture, same pin."""

from __future__ import annotations

import asyncio
from pathlib import Path

from subagent_support import hold, hold_tool, holding, until, world, write

from tether._signals import AbortSignal
from tether.subagents import workflow


async def test_run_and_fan_out_children_carry_the_pin(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            {"match": {"depth": 1}, "steps": [write("w.txt"), {"text": "child done"}]},
        ],
    )
    parent = w.root(mode="read-only")
    single = await workflow.run(parent, "write", label="one")
    assert (single.stop_reason, single.output) == ("completed", "child done")
    many = await workflow.fan_out(parent, ["a", "b", "c"], limit=2, label="batch")
    assert [r.stop_reason for r in many] == ["completed"] * 3
    for result in [single, *many]:
        stored = await w.store.inspect(result.child_id)
        pins = [dict(e.data) for e in stored.events if e.data.get("source") == "delegation"]
        assert pins == [
            {"mode": "read-only", "source": "delegation"},
            {"policy": "never", "source": "delegation"},
        ]
    assert not (w.workspace / "w.txt").exists()


async def test_a_workflow_cap_narrows_and_never_widens(tmp_path: Path) -> None:
    w = world(tmp_path, [{"match": {"depth": 1}, "steps": [{"text": "ok"}]}])
    parent = w.root(mode="read-only")
    result = await workflow.run(parent, "x", sandbox="workspace-write")
    stored = await w.store.inspect(result.child_id)
    modes = [e.data["mode"] for e in stored.events if e.type == "sandbox/mode"]
    assert modes == ["read-only"]


async def test_cancelling_the_parent_signal_aborts_the_child(tmp_path: Path) -> None:
    w = world(tmp_path, [{"match": {"depth": 1}, "steps": [hold("k"), {"text": "never"}]}])
    hold_tool(w)
    parent = w.root()
    signal = AbortSignal()
    running = asyncio.ensure_future(workflow.run(parent, "wait", signal=signal))
    await until(
        lambda: any(holding(a) for a in w.agents if a.depth == 1), "the child to be holding"
    )
    signal.abort("parent")
    result = await running
    assert result.stop_reason == "aborted"
    stored = await w.store.inspect(result.child_id)
    end = [dict(e.data) for e in stored.events if e.type == "turn/end"][-1]
    assert (end["reason"], end["cause"]) == ("aborted", "parent")
