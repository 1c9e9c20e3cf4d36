"""The continuation manager's background work is owned by the runtime: a resident child's
watcher is a task of the kernel's task scope, so closing the scope stops it."""

from __future__ import annotations

from pathlib import Path

from subagent_support import child, hold, hold_tool, holding, subagents, until, world

PARENT = {"match": {"depth": 0}, "steps": [{"text": "noted"}] * 4}


async def test_closing_the_task_scope_stops_a_resident_childs_watcher(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([hold("k"), {"text": "done"}])])
    gates = hold_tool(w)
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    activation = manager.activation(child_id)
    assert activation is not None
    await until(lambda: holding(activation.agent), "the child to be holding")
    watcher = activation.watcher
    assert watcher is not None and not watcher.done()
    assert watcher.get_name() == f"subagent {child_id}: watcher"
    await w.kernel.runtime.tasks.aclose()
    assert watcher.cancelled()
    gates.gate("k").set()
    await activation.agent.when_idle()
