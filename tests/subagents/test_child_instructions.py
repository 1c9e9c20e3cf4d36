"""A delegated child's project instructions: taken from its parent at preparation, written into
the child's own log before its first turn, never read again (decision 0041)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from subagent_support import NEVER, delegated

from event_support import instruction_records, kinds, plain, type_data
from script_support import call, write_script
from tether import Harness
from tether._dirs import config_dir
from tether.agent import PROJECT_INSTRUCTIONS, Agent
from tether.agent._instructions import instructions_data, is_instructions
from tether.session import SessionMeta
from tether.session._json import thaw
from tether.subagents import SUBAGENTS_SERVICE
from tether.subagents._continuation import ContinuationManager

DELEGATION = [delegated("workspace-write"), NEVER]
TURN = [
    "step/start",
    "user/message",  # the prompt
    "user/message",  # the runtime-context snapshot
    "request/header",
    "assistant/message",
    "step/end",
    "turn/end",
]
"""A one-step turn's events from its first step on."""


def scripted(path: Path, root: list[dict[str, Any]], child: list[dict[str, Any]]) -> str:
    """The model of a root (``root``) and its children (``child``)."""
    entries = [{"match": {"depth": 0}, "steps": root}, {"match": {"depth": 1}, "steps": child}]
    return f"scripted:{write_script(path, entries)}"


def rules(workspace: Path) -> None:
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "AGENTS.md").write_text("User rule.\n")
    (workspace / "AGENTS.md").write_text("Project rule.\n")


async def test_a_spawned_child_gets_its_parents_record_in_its_own_log(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    rules(workspace)
    delegate = call("subagent", prompt="go", description="c", run_in_background=False)
    model = scripted(
        tmp_path / "script.json",
        [{"text": "first"}, delegate, {"text": "done"}],
        [{"text": "child done"}],
    )
    store = f"sqlite:///{tmp_path / 'store.db'}"
    async with Harness.open(
        workspace=workspace, model=model, store=store, sandbox="workspace-write"
    ) as harness:
        expected = instructions_data(harness.ctx.require(PROJECT_INSTRUCTIONS).load(str(workspace)))
        first = await harness.run("one")
        # Changed after the parent recorded them: the child takes the record, not the files.
        (workspace / "AGENTS.md").write_text("Changed since.\n")
        second = await harness.run("delegate now", resume=first.session_id)
        assert second.stop_reason == "completed", second.error
        listed = await harness.store.persistence.list()  # type: ignore[union-attr]
        child_id = next(m.id for m in listed if m.id != first.session_id)
        child = await harness.store.inspect(child_id)
        parent = await harness.store.inspect(first.session_id)
    assert thaw(expected) == instruction_records(parent.events)[0]
    assert type_data(child.events)[:3] == [*DELEGATION, ("user/message", thaw(expected))]
    assert kinds(child.events, 3) == [
        "agent/inbox/spliced",
        "turn/start",
        "subagent/descriptor",
        *TURN,
    ]
    assert [plain(e)["content"] for e in child.events if e.type == "user/message"][1] == "go"
    # The only scope events are the delegation's: the instructions fix nothing.
    assert [t for t, _ in type_data(child.events) if t in ("sandbox/mode", "approval/policy")] == [
        "sandbox/mode",
        "approval/policy",
    ]
    assert not any("Changed since" in str(e.data) for e in child.events)


@pytest.mark.parametrize("files", ["present", "absent"])
async def test_children_of_a_root_that_has_not_begun_share_its_one_read(
    tmp_path: Path, files: str
) -> None:
    """The workflow path (and ``bench/fanout.py``): children started before the root's first
    turn. The files are read once, for the root; the root's first turn and every child get
    that read, even after the files change."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    if files == "present":
        rules(workspace)
    model = scripted(tmp_path / "script.json", [{"text": "noted"}] * 3, [{"text": "child done"}])
    store = f"sqlite:///{tmp_path / 'store.db'}"
    async with Harness.open(
        workspace=workspace, model=model, store=store, sandbox="workspace-write"
    ) as harness:
        service = harness.ctx.require(PROJECT_INSTRUCTIONS)
        loaded = service.load(str(workspace))
        manager = harness.ctx.require(SUBAGENTS_SERVICE)
        assert isinstance(manager, ContinuationManager)
        root = harness.agent_for(harness.new_root_session())
        harness.root = root
        a = await manager.start(root, "task a", label="a")
        (workspace / "AGENTS.md").write_text("Written after the first child started.\n")
        b = await manager.start(root, "task b", label="b")
        await harness.settle()
        children = [await harness.store.inspect(i) for i in (a, b)]
        parent = await harness.store.inspect(root.id)
    expected = [thaw(instructions_data(loaded))] if files == "present" else []
    assert instruction_records(parent.events) == expected
    records = ["user/message"] * len(expected)
    for child in children:
        assert kinds(child.events) == [
            "subagent/descriptor",
            "session/end-seed",
            "sandbox/mode",
            "approval/policy",
            *records,
            "agent/inbox/spliced",
            "turn/start",
            *TURN,
        ]
        assert type_data(child.events)[2 : 4 + len(expected)] == [
            *DELEGATION,
            *(("user/message", e) for e in expected),
        ]
        assert instruction_records(child.events) == expected


async def test_a_cold_resumed_child_replays_its_own_record(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    rules(workspace)
    model = scripted(
        tmp_path / "script.json",
        [{"text": "noted"}] * 4,
        [{"text": "child done"}, {"text": "again done"}],
    )
    store = f"sqlite:///{tmp_path / 'store.db'}"
    async with Harness.open(
        workspace=workspace, model=model, store=store, sandbox="workspace-write"
    ) as harness:
        manager = harness.ctx.require(SUBAGENTS_SERVICE)
        assert isinstance(manager, ContinuationManager)
        root = harness.agent_for(harness.new_root_session())
        harness.root = root
        child_id = await manager.start(root, "task", label="c")
        await harness.settle()
        before = await harness.store.inspect(child_id)
        (workspace / "AGENTS.md").unlink()
        (config_dir() / "AGENTS.md").write_text("Changed user rule.\n")
        await manager.followup(root, child_id, "once more")
        assert manager.activation(child_id) is not None  # recomposed from its log
        await harness.settle()
        after = await harness.store.inspect(child_id)
    (record,) = [e for e in before.events if is_instructions(e)]
    assert [(e.seq, plain(e)) for e in after.events if is_instructions(e)] == [
        (record.seq, plain(record))
    ]
    assert "Project rule." in plain(record)["content"]
    turns = [plain(e)["turn"] for e in after.events if e.type == "turn/end"]
    assert turns == [1, 2]
    assert not any("Changed user rule" in str(e.data) for e in after.events)


async def test_a_child_in_another_working_directory_reads_its_own(tmp_path: Path) -> None:
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    (workspace / "AGENTS.md").write_text("The parent's rule.\n")
    (elsewhere / "AGENTS.md").write_text("The other directory's rule.\n")
    model = scripted(tmp_path / "script.json", [{"text": "first"}], [{"text": "child"}])
    store = f"sqlite:///{tmp_path / 'store.db'}"
    async with Harness.open(workspace=workspace, model=model, store=store) as harness:
        service = harness.ctx.require(PROJECT_INSTRUCTIONS)
        first = await harness.run("one")
        parent = harness.store.get(first.session_id)
        assert parent is not None and len(instruction_records(parent.events)) == 1
        child = harness.store.prepare(
            meta=SessionMeta(
                cwd=str(elsewhere),
                parent_session=parent.id,
                origin="subagent",
                delegation_depth=1,
            )
        )
        service.inherit(parent, child)
        assert kinds(child.events) == []
        harness.store.enter(child)
        harness.store.announce(child)
        agent: Agent = harness.agent_for(child)
        agent.followup("go")
        await harness.settle()
        expected = instructions_data(service.load(str(elsewhere)))
    assert instruction_records(child.events) == [thaw(expected)]
    assert kinds(child.events)[:4] == [
        "agent/inbox/spliced",
        "turn/start",
        "step/start",
        "user/message",
    ]
    assert "The parent's rule" not in str(instruction_records(child.events))


async def test_a_fork_has_its_parents_record_in_its_seed_and_gets_no_copy(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    rules(workspace)
    fork = call("subagent_fork", prompt="go on", description="f")
    model = scripted(
        tmp_path / "script.json", [{"text": "first"}, fork, {"text": "done"}], [{"text": "child"}]
    )
    store = f"sqlite:///{tmp_path / 'store.db'}"
    async with Harness.open(
        workspace=workspace, model=model, store=store, sandbox="workspace-write"
    ) as harness:
        first = await harness.run("one")
        second = await harness.run("fork now", resume=first.session_id)
        assert second.stop_reason == "completed", second.error
        listed = await harness.store.persistence.list()  # type: ignore[union-attr]
        child = await harness.store.inspect(next(m.id for m in listed if m.id != first.session_id))
        parent = await harness.store.inspect(first.session_id)
    seed = child.header.seed_length
    assert seed is not None
    (record,) = [e for e in child.events if is_instructions(e)]
    assert record.seq < seed
    assert plain(record) == instruction_records(parent.events)[0]
    assert type_data(child.events)[seed : seed + 3] == [("session/end-seed", {}), *DELEGATION]
    assert kinds(child.events, seed + 3)[:2] == ["agent/inbox/spliced", "turn/start"]
