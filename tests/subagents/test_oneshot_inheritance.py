"""Delegated policy, one-shot."""

from __future__ import annotations

from pathlib import Path

from subagent_support import data, kinds, world, write

from tether.agent._context_snapshot import SNAPSHOT_HEAD
from tether.policy import SANDBOX_POLICY_SERVICE
from tether.policy._approval import NEVER_TEXT, register_answerer
from tether.sandbox import SANDBOX_SERVICE, SandboxProvider
from tether.subagents._composition import DELEGATION_TEXT
from tether.subagents._oneshot import OneShotRequest, run_one_shot

MARKER = "[sandbox: file access denied under read-only mode]"


def child_script(*steps: dict[str, object]) -> dict[str, object]:
    return {"match": {"depth": 1}, "steps": list(steps)}


async def test_spawn_child_of_read_only_parent(tmp_path: Path) -> None:
    w = world(tmp_path, [child_script(write("c.txt"), {"text": "denied", "expect": "denied"})])
    parent = w.root(mode="read-only")
    parent_len = len(parent.session)
    result = await run_one_shot(OneShotRequest(parent, "write c.txt", label="probe"))
    assert result.stop_reason == "completed"
    child = await w.store.inspect(result.child_id)
    assert [e.type for e in child.events[:2]] == ["sandbox/mode", "approval/policy"]
    assert dict(child.events[0].data) == {"mode": "read-only", "source": "delegation"}
    assert dict(child.events[1].data) == {"policy": "never", "source": "delegation"}
    assert child.header.seed_length is None
    assert (child.header.origin, child.header.delegation_depth) == ("subagent", 1)
    assert child.header.parent_session == parent.id
    types = [e.type for e in child.events]
    assert types[2:5] == ["agent/inbox/spliced", "turn/start", "subagent/descriptor"]
    descriptor = next(e for e in child.events if e.type == "subagent/descriptor")
    assert dict(descriptor.data) == {
        "version": 2,
        "mode": "one-shot",
        "provider": "spawn",
        "label": "probe",
    }
    result_event = next(e for e in child.events if e.type == "tool/result")
    assert MARKER in str(result_event.data["content"])
    assert not (w.workspace / "c.txt").exists()
    # The parent's log is unchanged by the child's run.
    assert len(parent.session) == parent_len


async def test_child_snapshot_precedes_header_and_the_system_prompt_is_clean(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, [child_script({"text": "ok"})])
    parent = w.root(mode="read-only")
    result = await run_one_shot(OneShotRequest(parent, "hello"))
    child = (await w.store.inspect(result.child_id)).events
    types = [e.type for e in child]
    snapshot_at = next(
        i
        for i, e in enumerate(child)
        if e.type == "user/message" and e.data["source"].get("form") == "snapshot"
    )  # type: ignore[union-attr]
    assert types[snapshot_at + 1] == "request/header"
    text = str(child[snapshot_at].data["content"])
    assert text.startswith(SNAPSHOT_HEAD)
    assert text.index("read-only") < text.index(NEVER_TEXT) < text.index(DELEGATION_TEXT)
    system = str(child[snapshot_at + 1].data["header"]["system"])  # type: ignore[index]
    assert "Approval prompts are disabled" not in system
    assert "You are a delegated subagent" not in system


async def test_fork_seed_with_stale_mode_is_overridden_by_delegation(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            {"match": {"depth": 0}, "steps": [{"text": "parent turn"}]},
            child_script(write("f.txt"), {"text": "done"}),
        ],
    )
    parent = w.root()
    sandbox = w.ctx.get(SANDBOX_POLICY_SERVICE)
    sandbox.set_sandbox_mode(parent.session, "workspace-write")
    await parent.run("first turn")
    sandbox.set_sandbox_mode(parent.session, "read-only")
    result = await run_one_shot(OneShotRequest(parent, "write f.txt", provider="fork"))
    child = await w.store.inspect(result.child_id)
    seed_length = child.header.seed_length
    assert seed_length is not None and seed_length == parent.session.last("turn/end").seq + 1  # type: ignore[union-attr]
    modes = [(e.seq, dict(e.data)) for e in child.events if e.type == "sandbox/mode"]
    assert modes == [
        (0, {"mode": "workspace-write"}),
        (seed_length + 1, {"mode": "read-only", "source": "delegation"}),
    ]
    assert child.events[seed_length].type == "session/end-seed"
    assert not (w.workspace / "f.txt").exists()
    # turn numbering continues after the inherited turn
    own_turns = [e.data["turn"] for e in child.events[seed_length:] if e.type == "turn/start"]
    assert own_turns == [2]


async def test_capture_happens_before_the_first_await(tmp_path: Path) -> None:
    w = world(tmp_path, [child_script(write("cap.txt"), {"text": "done"})])
    parent = w.root(mode="read-only")
    started = run_one_shot(OneShotRequest(parent, "write"))
    import asyncio

    task = asyncio.ensure_future(started)
    await asyncio.sleep(0)  # the driver has run synchronously up to its first await
    w.ctx.get(SANDBOX_POLICY_SERVICE).set_sandbox_mode(parent.session, "danger-full-access")
    result = await task
    child = await w.store.inspect(result.child_id)
    assert dict(child.events[0].data) == {"mode": "read-only", "source": "delegation"}
    assert not (w.workspace / "cap.txt").exists()


async def test_unswitched_parent_gives_only_the_approval_pin(tmp_path: Path) -> None:
    w = world(tmp_path, [child_script(write("ok.txt"), {"text": "written"})])
    parent = w.root()
    result = await run_one_shot(OneShotRequest(parent, "write"))
    child = await w.store.inspect(result.child_id)
    assert dict(child.events[0].data) == {"policy": "never", "source": "delegation"}
    assert not any(e.type == "sandbox/mode" for e in child.events)
    assert (w.workspace / "ok.txt").read_text() == "x"


async def test_executor_boundary_pin_rejects_escalation_without_asking(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            child_script(
                write("esc.txt", sandbox_permissions="workspace-write", justification="need it"),
                {"text": "rejected"},
            )
        ],
    )
    w.ctx.provide(SANDBOX_SERVICE, SandboxProvider())
    consulted: list[object] = []

    def answerer(request: object, _next: object) -> str:
        consulted.append(request)
        return "allowed-once"

    register_answerer(w.ctx, answerer)
    parent = w.root(mode="read-only")
    result = await run_one_shot(OneShotRequest(parent, "escalate"))
    child = await w.store.inspect(result.child_id)
    assert consulted == []
    assert not (w.workspace / "esc.txt").exists()
    content = str(next(e for e in child.events if e.type == "tool/result").data["content"])
    assert 'the user rejected escalating this operation to "workspace-write"' in content
    asked = [dict(e.data) for e in child.events if e.type == "approval/asked"]
    decided = [dict(e.data) for e in child.events if e.type == "approval/decided"]
    assert [a["tool_name"] for a in asked] == ["write"]
    assert decided == [{"id": asked[0]["id"], "outcome": "rejected"}]


async def test_depth_cap(tmp_path: Path) -> None:
    from tether.subagents._composition import SubagentDepthError

    w = world(tmp_path, [child_script({"text": "x"})])
    parent = w.root()
    import pytest

    with pytest.raises(SubagentDepthError, match="subagent depth 1 exceeds maxDepth 0"):
        await run_one_shot(OneShotRequest(parent, "x", max_depth=0))
    assert len(w.store.live()) == 1


_ = (data, kinds)
