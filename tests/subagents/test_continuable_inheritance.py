"""Delegated policy, continuable (``continuation-inheritance.spec``).

Setup as in the reference: JSONL persistence, sandbox policy at default ``workspace-write``,
approval, the agent loop, the continuation manager with the spawn and fork providers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from subagent_support import (
    NEVER,
    child,
    delegated,
    plain,
    policy_events,
    pre_turn,
    settle,
    stored,
    subagents,
    texts,
    world,
    write,
)

from tether.agent._context_snapshot import SNAPSHOT_HEAD
from tether.policy import APPROVAL_SERVICE, SANDBOX_POLICY_SERVICE, SandboxMode
from tether.policy._approval import NEVER_TEXT, fold_approval_policy
from tether.policy._modes import ApprovalPolicy
from tether.policy._sandbox_policy import fold_sandbox_mode
from tether.subagents._composition import DELEGATION_TEXT

READ_ONLY_MARKER = "[sandbox: file access denied under read-only mode]"
DESCRIPTOR = {"version": 2, "mode": "continuable", "provider": "spawn", "label": "probe"}


PARENT = {"match": {"depth": 0}, "steps": [{"text": "noted"}] * 6}


async def test_fresh_start_under_a_dfa_parent_is_pinned_at_inbox_acceptance(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "done"}])])
    manager = subagents(w)
    sandbox, approval = w.ctx.get(SANDBOX_POLICY_SERVICE), w.ctx.get(APPROVAL_SERVICE)
    parent = w.root(mode="danger-full-access")
    child_id = await manager.start(parent, "work", label="probe")
    # Inbox acceptance: the prompt is queued, no turn has run, the scope is already folded.
    session = w.store.get(child_id)
    assert session is not None and not any(e.type == "turn/start" for e in session.events)
    assert sandbox.override_of(session) is SandboxMode.DANGER_FULL_ACCESS
    assert approval.effective_policy(session) is ApprovalPolicy.NEVER
    durable = await stored(w, child_id)
    assert pre_turn(durable.events) == [
        ("subagent/descriptor", DESCRIPTOR),
        ("session/end-seed", {}),
        delegated("danger-full-access"),
        NEVER,
    ]
    assert durable.events[4].type == "agent/inbox/spliced"
    assert durable.header.seed_length is None
    assert (durable.header.parent_session, durable.header.origin) == (parent.id, "subagent")
    assert durable.header.delegation_depth == 1
    await settle(w)
    durable = await stored(w, child_id)
    assert policy_events(durable.events) == [delegated("danger-full-access"), NEVER]
    # The parent's own approval policy was neither read nor written.
    assert approval.override_of(parent.session) is None
    assert not any(e.type == "approval/policy" for e in parent.session.events)
    snapshot = next(
        e
        for e in durable.events
        if e.type == "user/message" and plain(e)["source"].get("form") == "snapshot"
    )
    text = str(snapshot.data["content"])
    assert text.startswith(SNAPSHOT_HEAD)
    assert "danger-full-access" in text and NEVER_TEXT in text and DELEGATION_TEXT in text


async def test_capture_happens_before_the_first_await(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([write("cap.txt"), {"text": "denied"}])])
    manager = subagents(w)
    parent = w.root(mode="read-only")
    # A caller-supplied id makes start await the store (the duplicate check) before it
    # materializes the child; the parent switches while start is suspended there.
    task = asyncio.ensure_future(manager.start(parent, "write", label="probe", child_id="kid"))
    await asyncio.sleep(0)
    assert not task.done()
    w.ctx.get(SANDBOX_POLICY_SERVICE).set_sandbox_mode(parent.session, "danger-full-access")
    assert await task == "kid"
    await settle(w)
    durable = await stored(w, "kid")
    assert policy_events(durable.events) == [delegated("read-only"), NEVER]
    assert READ_ONLY_MARKER in texts(durable.events)[0]
    assert not (w.workspace / "cap.txt").exists()


async def test_unswitched_parent_gives_only_the_approval_pin(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([write("ok.txt"), {"text": "written"}])])
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "write", label="probe")
    await settle(w)
    durable = await stored(w, child_id)
    assert pre_turn(durable.events) == [
        ("subagent/descriptor", DESCRIPTOR),
        ("session/end-seed", {}),
        NEVER,
    ]
    assert fold_sandbox_mode(durable.events) is None
    assert policy_events(durable.events) == [NEVER]
    # The deployment default (workspace-write) applies, so the write succeeds.
    assert (w.workspace / "ok.txt").read_text() == "x"


async def test_fork_child_of_an_unswitched_parent(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [{"match": {"depth": 0}, "steps": [{"text": "first"}] * 4}, child([{"text": "forked"}])],
    )
    manager = subagents(w)
    parent = w.root()
    await parent.run("turn one")
    prefix = len(parent.session)
    child_id = await manager.start(parent, "continue", label="probe", provider="fork")
    await settle(w)
    durable = await stored(w, child_id)
    assert durable.header.seed_length == prefix > 0
    own = durable.events[prefix:]
    assert [(e.type, plain(e)) for e in own[:4]] == [
        ("session/end-seed", {}),
        ("subagent/descriptor", {**DESCRIPTOR, "provider": "fork"}),
        ("session/end-seed", {}),
        NEVER,
    ]
    assert policy_events(durable.events) == [NEVER]
    # Turn numbering continues after the inherited turn.
    assert [e.data["turn"] for e in own if e.type == "turn/start"] == [2]


async def test_child_side_switch_after_start_wins_and_is_persisted(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([write("wide.txt"), {"text": "written"}])])
    manager = subagents(w)
    sandbox = w.ctx.get(SANDBOX_POLICY_SERVICE)
    parent = w.root(mode="read-only")
    child_id = await manager.start(parent, "write", label="probe")
    session = w.store.get(child_id)
    assert session is not None
    sandbox.set_sandbox_mode(session, "danger-full-access")
    await settle(w)
    durable = await stored(w, child_id)
    assert policy_events(durable.events) == [
        delegated("read-only"),
        NEVER,
        ("sandbox/mode", {"mode": "danger-full-access"}),
    ]
    assert fold_sandbox_mode(durable.events) is SandboxMode.DANGER_FULL_ACCESS
    assert (w.workspace / "wide.txt").read_text() == "x"
    # The parent is untouched by the child's switch.
    assert sandbox.override_of(parent.session) is SandboxMode.READ_ONLY


async def test_cold_resume_keeps_the_recorded_scope_after_the_parent_widens(
    tmp_path: Path,
) -> None:
    w = world(
        tmp_path,
        [
            PARENT,
            child([{"text": "first task done"}, write("late.txt"), {"text": "denied again"}]),
        ],
    )
    manager = subagents(w)
    sandbox = w.ctx.get(SANDBOX_POLICY_SERVICE)
    parent = w.root(mode="read-only")
    child_id = await manager.start(parent, "first task", label="probe")
    await settle(w)
    assert w.store.get(child_id) is None  # settled: disposed, only the durable log remains
    sandbox.set_sandbox_mode(parent.session, "danger-full-access")
    await manager.followup(parent, child_id, "now write late.txt")
    assert manager.activation(child_id) is not None  # cold-resumed
    await settle(w)
    durable = await stored(w, child_id)
    assert policy_events(durable.events) == [delegated("read-only"), NEVER]
    assert fold_sandbox_mode(durable.events) is SandboxMode.READ_ONLY
    assert fold_approval_policy(durable.events) is ApprovalPolicy.NEVER
    assert not (w.workspace / "late.txt").exists()
    assert READ_ONLY_MARKER in texts(durable.events)[0]
    # The resume appended only its end-seed marker before the followup's splice.
    first_end = next(e.seq for e in durable.events if e.type == "turn/end")
    assert [e.type for e in durable.events[first_end + 1 : first_end + 4]] == [
        "session/end-seed",
        "agent/inbox/spliced",
        "turn/start",
    ]
    assert [e.data["turn"] for e in durable.events if e.type == "turn/start"] == [1, 2]


async def test_fork_precedence_fresh_snapshot_beats_stale_seed(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            {"match": {"depth": 0}, "steps": [{"text": "first"}] * 4},
            child([write("fork.txt"), {"text": "denied"}]),
        ],
    )
    manager = subagents(w)
    sandbox = w.ctx.get(SANDBOX_POLICY_SERVICE)
    parent = w.root()
    sandbox.set_sandbox_mode(parent.session, "workspace-write")
    await parent.run("turn one")
    sandbox.set_sandbox_mode(parent.session, "read-only")
    child_id = await manager.start(parent, "write", label="probe", provider="fork")
    await settle(w)
    durable = await stored(w, child_id)
    assert policy_events(durable.events) == [
        ("sandbox/mode", {"mode": "workspace-write"}),
        delegated("read-only"),
        NEVER,
    ]
    # The parent's trailing read-only switch (after its last turn) is not in the seed: the
    # delegation event is what carries it.
    assert durable.events[0].type == "sandbox/mode"
    assert fold_sandbox_mode(durable.events) is SandboxMode.READ_ONLY
    assert not (w.workspace / "fork.txt").exists()
