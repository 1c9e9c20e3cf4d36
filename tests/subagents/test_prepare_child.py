"""``prepare_child`` and ``compose_child_agent``: the one home of child preparation.

The preparation tests are plain functions with no event loop: ``prepare_child`` must do all of
its work (depth, capture, seed, the prepared session, the delegation events) without awaiting
and without needing a loop, which is what makes "captured before the first await" hold for
every caller.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from subagent_support import NEVER, delegated, plain, world

from event_support import type_data as layout
from tether.agent import Agent
from tether.agent._agent import AgentOptions
from tether.kernel import SESSIONS_SERVICE
from tether.kernel._plugin import Kernel
from tether.model import ScriptedModel
from tether.policy import SANDBOX_POLICY_SERVICE, SandboxMode
from tether.policy._approval import approval_plugin
from tether.session import SessionMeta, SessionStore
from tether.subagents import ChildSpec, Descriptor, SubagentError, ToolFilter
from tether.subagents._composition import (
    DELEGATION_TEXT,
    PreparedChild,
    SubagentDepthError,
    UnknownToolError,
    compose_child_agent,
    prepare_child,
)

UNUSED = [{"match": {}, "steps": []}]
"""No test here runs a model; the scripted model still needs one entry."""


def no_running_loop() -> None:
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


def turn(parent: Agent) -> None:
    """A completed turn in the parent's log, so a fork has a prefix to inherit."""
    parent.session.append("turn/start", {"turn": 1})
    parent.session.append("turn/end", {"turn": 1, "reason": "completed"})


def test_a_one_shot_child_is_prepared_with_its_delegation_events_and_no_loop(
    tmp_path: Path,
) -> None:
    no_running_loop()
    w = world(tmp_path, UNUSED)
    parent = w.root(mode="read-only")
    before = len(parent.session)
    prepared = prepare_child(parent, ChildSpec(label="probe"), mode="one-shot")
    assert isinstance(prepared, PreparedChild)
    assert prepared.store is w.store
    assert prepared.descriptor == Descriptor("one-shot", "spawn", "probe")
    session = prepared.session
    assert layout(session) == [delegated("read-only"), NEVER]
    assert session.first_live_seq == 0  # published (and stored) once the driver announces it
    header = session.header
    assert (header.parent_session, header.origin, header.delegation_depth) == (
        parent.id,
        "subagent",
        1,
    )
    assert (header.cwd, header.seed_length) == (parent.session.header.cwd, None)
    # Nothing is live: not the child, and nothing was written to the parent.
    assert w.store.get(session.id) is None
    assert [s.id for s in w.store.live()] == [parent.id]
    assert len(parent.session) == before


def test_a_continuable_child_carries_its_descriptor_in_its_seed(tmp_path: Path) -> None:
    no_running_loop()
    w = world(tmp_path, UNUSED)
    parent = w.root(mode="read-only")
    spec = ChildSpec(label="worker", persona="Careful.", tool_filter=ToolFilter(allow=("read",)))
    prepared = prepare_child(parent, spec, mode="continuable", child_id="kid")
    session = prepared.session
    assert session.id == "kid"
    descriptor = {
        "version": 2,
        "mode": "continuable",
        "provider": "spawn",
        "label": "worker",
        "persona": "Careful.",
        "tool_filter": {"allow": ["read"]},
    }
    assert layout(session) == [
        ("subagent/descriptor", descriptor),
        ("session/end-seed", {}),
        delegated("read-only"),
        NEVER,
    ]
    assert session.first_live_seq == 1  # the descriptor is seed; the end-seed marker is not
    assert session.header.seed_length is None


def test_a_fork_seed_is_followed_by_a_fresh_capture(tmp_path: Path) -> None:
    no_running_loop()
    w = world(tmp_path, UNUSED)
    parent = w.root(mode="workspace-write")
    turn(parent)
    w.ctx.get(SANDBOX_POLICY_SERVICE).set_sandbox_mode(parent.session, "read-only")
    prefix = [(e.type, plain(e)) for e in parent.session.events[:-1]]
    prepared = prepare_child(parent, ChildSpec(provider="fork"), mode="one-shot")
    session = prepared.session
    assert session.header.seed_length == session.first_live_seq == len(prefix)
    assert layout(session) == [
        *prefix,
        ("session/end-seed", {}),
        delegated("read-only"),
        NEVER,
    ]
    continuable = prepare_child(parent, ChildSpec(provider="fork"), mode="continuable")
    assert layout(continuable.session)[len(prefix) :] == [
        ("session/end-seed", {}),
        ("subagent/descriptor", {"version": 2, "mode": "continuable", "provider": "fork"}),
        ("session/end-seed", {}),
        delegated("read-only"),
        NEVER,
    ]


@pytest.mark.parametrize(
    ("parent_mode", "cap", "child_mode"),
    [
        (None, None, None),  # unswitched parent: the deployment default stays the child's too
        ("danger-full-access", None, "danger-full-access"),
        (None, "read-only", "read-only"),  # the default (workspace-write) narrowed by the cap
        (None, "danger-full-access", "workspace-write"),  # a cap above the default: the default
        ("read-only", "workspace-write", "read-only"),  # a cap never widens
        ("danger-full-access", "workspace-write", "workspace-write"),
    ],
)
def test_the_pinned_mode_is_the_explicit_override_narrowed_by_the_cap(
    tmp_path: Path, parent_mode: str | None, cap: str | None, child_mode: str | None
) -> None:
    w = world(tmp_path, UNUSED, default_mode="workspace-write")
    parent = w.root(mode=parent_mode)
    spec = ChildSpec(sandbox_cap=SandboxMode(cap) if cap else None)
    events = layout(prepare_child(parent, spec, mode="one-shot").session)
    assert events == ([delegated(child_mode)] if child_mode else []) + [NEVER]


def bare(tmp_path: Path, *, approval: bool) -> Agent:
    """A parent in a composition with a session store but no sandbox policy service."""
    kernel = Kernel()
    store = SessionStore()
    kernel.ctx.provide(SESSIONS_SERVICE, store)
    if approval:
        kernel.load(approval_plugin, {"policy": "ask"})
    session = store.prepare(meta=SessionMeta(cwd=str(tmp_path)))
    store.enter(session)
    store.announce(session)
    return Agent(kernel.ctx, session, AgentOptions(ScriptedModel.from_dict({"agents": UNUSED})))


def test_without_policy_services_only_what_can_be_known_is_written(tmp_path: Path) -> None:
    no_running_loop()
    parent = bare(tmp_path, approval=False)
    assert layout(prepare_child(parent, ChildSpec(), mode="one-shot").session) == []
    # The deployment default is unknown without a sandbox policy service: a capped child is
    # pinned to read-only, the one mode no wider than any default.
    capped = ChildSpec(sandbox_cap=SandboxMode.DANGER_FULL_ACCESS)
    assert layout(prepare_child(parent, capped, mode="one-shot").session) == [
        delegated("read-only")
    ]
    pinned = bare(tmp_path, approval=True)
    assert layout(prepare_child(pinned, ChildSpec(), mode="one-shot").session) == [NEVER]


def test_depth_is_checked_first_and_a_refusal_prepares_nothing(tmp_path: Path) -> None:
    no_running_loop()
    w = world(tmp_path, UNUSED)
    parent = w.root(mode="read-only")
    before = len(parent.session)
    with pytest.raises(SubagentDepthError, match=r"^subagent depth 1 exceeds maxDepth 0$"):
        prepare_child(parent, ChildSpec(max_depth=0), mode="one-shot")
    with pytest.raises(SubagentError, match="maxDepth must be a non-negative integer"):
        prepare_child(parent, ChildSpec(max_depth=-1), mode="continuable")
    assert len(parent.session) == before and [s.id for s in w.store.live()] == [parent.id]
    child = Agent(
        w.ctx, prepare_child(parent, ChildSpec(), mode="one-shot").session, parent.options
    )
    grandchild = prepare_child(child, ChildSpec(max_depth=None), mode="one-shot").session
    assert grandchild.header.delegation_depth == 2
    assert grandchild.header.parent_session == child.id
    with pytest.raises(SubagentDepthError, match=r"^subagent depth 2 exceeds maxDepth 1$"):
        prepare_child(child, ChildSpec(max_depth=1), mode="one-shot")


def test_without_a_store_nothing_is_prepared(tmp_path: Path) -> None:
    kernel = Kernel()
    store = SessionStore()
    session = store.prepare(meta=SessionMeta(cwd=str(tmp_path)))
    parent = Agent(kernel.ctx, session, AgentOptions(ScriptedModel.from_dict({"agents": UNUSED})))
    with pytest.raises(SubagentError) as err:
        prepare_child(parent, ChildSpec(), mode="one-shot")
    assert err.value.code == "PERSISTENCE_UNAVAILABLE"


async def test_a_switch_queued_on_the_loop_lands_after_the_capture(tmp_path: Path) -> None:
    w = world(tmp_path, UNUSED)
    parent = w.root(mode="read-only")
    sandbox = w.ctx.get(SANDBOX_POLICY_SERVICE)
    loop = asyncio.get_running_loop()
    loop.call_soon(sandbox.set_sandbox_mode, parent.session, "danger-full-access")
    prepared = prepare_child(parent, ChildSpec(), mode="one-shot")
    await asyncio.sleep(0)
    assert sandbox.override_of(parent.session) is SandboxMode.DANGER_FULL_ACCESS
    assert layout(prepared.session) == [delegated("read-only"), NEVER]


# -- compose_child_agent --------------------------------------------------------------------


def test_a_composed_child_inherits_the_parent_options_and_gets_its_own_scope(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, UNUSED)
    parent = w.root(mode="read-only")
    spec = ChildSpec(label="rev", persona="You review.", tool_filter=ToolFilter(deny=("write",)))
    prepared = prepare_child(parent, spec, mode="continuable")
    child = compose_child_agent(w.ctx, parent, prepared.session, prepared.descriptor)
    assert child.session is prepared.session and child.tools is parent.tools
    assert child.options.model is parent.options.model
    assert child.options.label == "rev"
    assert child.options.allowed_tools == frozenset(w.tools.names()) - {"write"}
    prompt = w.kernel.runtime.prompt
    assert ("subagent:delegation", DELEGATION_TEXT) in prompt.render("context", child)
    assert ("deployment:persona", "You review.") in prompt.render("section", child)
    assert "subagent:delegation" not in dict(prompt.render("context", parent))
    assert child.scope_ctx is not None
    child.scope_ctx.dispose()
    assert "subagent:delegation" not in dict(prompt.render("context", child))
    assert "deployment:persona" not in dict(prompt.render("section", child))


def test_composed_options_override_the_parent_and_unknown_tools_are_refused(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, UNUSED)
    parent = w.root()
    options = AgentOptions(ScriptedModel.from_dict({"agents": UNUSED}), max_steps=3)
    prepared = prepare_child(parent, ChildSpec(label="x", options=options), mode="one-shot")
    child = compose_child_agent(
        w.ctx, parent, prepared.session, prepared.descriptor, options=options
    )
    assert (child.options.model, child.options.max_steps) == (options.model, 3)
    assert (child.options.label, child.options.allowed_tools) == ("x", None)
    unknown = Descriptor("one-shot", "spawn", tool_filter=ToolFilter(allow=("read", "teleport")))
    with pytest.raises(UnknownToolError, match=r"unknown tools: teleport$"):
        compose_child_agent(w.ctx, parent, prepared.session, unknown)
