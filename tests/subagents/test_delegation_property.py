"""Property (issue 5 acceptance): for random delegation trees with random parent switches
before and after each delegation, no child's effective sandbox mode is ever wider than its
parent's mode at the moment of delegation, and every child's effective approval policy is
``never``.

Each example is a real run: every agent follows a scripted model through the real tools. A
child first *probes* its scope with two real writes (inside the workspace and outside it), so
its effective mode is read from what the file tools actually allowed, not from a fold. Then it
delegates its own children, switching its own mode (the ``switch_mode`` test tool stands in for
a user's ``/permission``) before and/or after each delegation. Children are spawned or forked,
one-shot in the foreground or continuable in the background, up to depth 3.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from subagent_support import World, settle, stored, stored_headers, subagents, world

from script_support import call as tool_call
from tether.policy import SANDBOX_POLICY_SERVICE, SandboxMode
from tether.policy._approval import fold_approval_policy
from tether.policy._modes import ApprovalPolicy
from tether.policy._sandbox_policy import SandboxPolicyService, fold_sandbox_mode
from tether.subagents._descriptor import fold_descriptor
from tether.tools._base import ToolArgs, ToolCall, ToolResult

Kind = Literal["spawn-bg", "fork-bg", "spawn-fg", "fork-fg"]
KINDS: tuple[Kind, ...] = ("spawn-bg", "fork-bg", "spawn-fg", "fork-fg")
MODES = [m.value for m in SandboxMode]
RANK = {SandboxMode.READ_ONLY: 0, SandboxMode.WORKSPACE_WRITE: 1, SandboxMode.DANGER_FULL_ACCESS: 2}
DEFAULT = SandboxMode.WORKSPACE_WRITE
MAX_DEPTH = 3


class SwitchArgs(ToolArgs):
    mode: str


class SwitchMode:
    """The calling agent switches its own sandbox mode, as a user would mid-run."""

    name = "switch_mode"
    description = "Switch this session's sandbox mode."
    Args = SwitchArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, SwitchArgs) and call.agent is not None
        sandbox = call.ctx.get(SANDBOX_POLICY_SERVICE)
        assert isinstance(sandbox, SandboxPolicyService)
        sandbox.set_sandbox_mode(call.agent.session, args.mode)
        return ToolResult(f"switched to {args.mode}")


@dataclass
class Node:
    label: str
    parent: int
    depth: int
    kind: Kind
    before: str | None
    after: str | None
    children: list[int] = field(default_factory=list)


@dataclass
class Tree:
    warmup: str | None
    """The root's switch before a completed first turn (stale state for fork seeds)."""
    nodes: list[Node]


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    root = Node("root", -1, 0, "spawn-fg", None, None)
    nodes = [root]
    switch = st.sampled_from([None, *MODES])
    for index in range(1, draw(st.integers(1, 5)) + 1):
        parents = [i for i, n in enumerate(nodes) if n.depth < MAX_DEPTH]
        parent = draw(st.sampled_from(parents))
        node = Node(
            f"n{index}",
            parent,
            nodes[parent].depth + 1,
            draw(st.sampled_from(KINDS)),
            draw(switch),
            draw(switch),
        )
        nodes[parent].children.append(index)
        nodes.append(node)
    return Tree(draw(switch), nodes)


def delegation(node: Node) -> dict[str, Any]:
    tool = {
        "spawn-bg": "subagent",
        "fork-bg": "subagent_cfork",
        "spawn-fg": "subagent",
        "fork-fg": "subagent_fork",
    }[node.kind]
    extra = {"run_in_background": False} if node.kind == "spawn-fg" else {}
    return tool_call(tool, description=node.label, prompt=f"task {node.label}", **extra)


def script(tree: Tree, outside: Path) -> dict[str, Any]:
    entries = []
    for node in tree.nodes:
        steps: list[dict[str, Any]] = []
        if node.depth == 0:
            steps.append({"text": "warm"})
        else:
            steps.append(tool_call("write", path=f"{node.label}.txt", content="in"))
            steps.append(tool_call("write", path=str(outside / f"{node.label}.txt"), content="out"))
        for index in node.children:
            sub = tree.nodes[index]
            if sub.before:
                steps.append(tool_call("switch_mode", mode=sub.before))
            steps.append(delegation(sub))
            if sub.after:
                steps.append(tool_call("switch_mode", mode=sub.after))
        steps.append({"text": f"{node.label} done"})
        match = {"depth": 0} if node.depth == 0 else {"label": node.label}
        entries.append({"match": match, "steps": steps})
    return {"agents": entries}


def observed_mode(w: World, outside: Path, label: str) -> SandboxMode:
    inside = (w.workspace / f"{label}.txt").exists()
    beyond = (outside / f"{label}.txt").exists()
    if beyond:
        assert inside, label
        return SandboxMode.DANGER_FULL_ACCESS
    return SandboxMode.WORKSPACE_WRITE if inside else SandboxMode.READ_ONLY


def mode_before(events: Any, seq: int) -> SandboxMode:
    return fold_sandbox_mode(e for e in events if e.seq < seq) or DEFAULT


async def run_tree(tree: Tree, tmp: Path) -> None:
    from tether.model import ScriptedModel

    outside = tmp / "outside"
    outside.mkdir()
    w = world(tmp, [{"steps": [{"text": "placeholder"}]}])
    w.model.script = ScriptedModel.from_dict(script(tree, outside)).script
    w.tools.register(SwitchMode())
    subagents(
        w,
        {
            "instances": [
                {"name": "subagent"},
                {"name": "subagent_fork", "provider": "fork", "background_mode": "one-shot"},
                {"name": "subagent_cfork", "provider": "fork"},
            ]
        },
    )
    root = w.root()
    if tree.warmup:
        w.ctx.get(SANDBOX_POLICY_SERVICE).set_sandbox_mode(root.session, tree.warmup)
    await root.run("warm up")
    await root.run("delegate")
    await settle(w)

    logs = {h.id: await stored(w, h.id) for h in await stored_headers(w)}
    by_label: dict[str, str] = {root.id: root.id}
    ids = {"root": root.id}
    for session_id, log in logs.items():
        descriptor = fold_descriptor(log.events, log.header.seed_length or 0)
        if descriptor is not None and descriptor.label is not None:
            ids[descriptor.label] = session_id
            by_label[session_id] = descriptor.label
    assert set(ids) == {n.label for n in tree.nodes}, "every node ran"

    for node in tree.nodes[1:]:
        parent = logs[ids[tree.nodes[node.parent].label]]
        child = logs[ids[node.label]]
        # The parent's effective mode when its delegation call ran.
        delegating = next(
            e
            for e in parent.events
            if e.type == "tool/call"
            and json.loads(str(e.data["arguments"])).get("description") == node.label
        )
        at_delegation = mode_before(parent.events, delegating.seq)
        acted = observed_mode(w, outside, node.label)
        assert RANK[acted] <= RANK[at_delegation], (node, acted, at_delegation)
        # Not narrower either: the child holds exactly the parent's scope of that moment.
        assert acted is at_delegation, (node, acted, at_delegation)
        first_call = next(
            e.seq for e in child.events[child.header.seed_length or 0 :] if e.type == "tool/call"
        )
        assert mode_before(child.events, first_call) is acted, node
        assert fold_approval_policy(child.events) is ApprovalPolicy.NEVER, node
        assert child.header.delegation_depth == node.depth
    await w.store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_children_never_exceed_their_parents_scope_at_delegation(tree: Tree) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run_tree(tree, Path(tmp)))
