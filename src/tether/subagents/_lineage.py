"""The delegation tree of a stored session: each child's recorded scope and status.

Read-only: built from header-only listing plus a non-mutating ``inspect`` per session, so it
never activates or repairs anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from tether.agent._events import TurnClosed, TurnOpened
from tether.policy._errors import PolicyError
from tether.policy._events import ApprovalDecided, ApprovalPolicySet, SandboxModeSet
from tether.session import Event, Persistence, SessionHeader
from tether.session._lease import Leases
from tether.subagents._descriptor import fold_descriptor
from tether.subagents._visibility import (
    PendingQuestion,
    blocked_labels,
    last_denial,
    pending_from_log,
)


@dataclass
class LineageNode:
    id: str
    depth: int
    label: str | None
    mode: str | None
    """The recorded sandbox mode (``None``: the deployment default applies)."""
    mode_source: str | None
    approval: str | None
    approval_source: str | None
    kind: str
    """``root``, ``one-shot``, ``continuable`` or ``fork`` (a top-level fork)."""
    status: str
    denied: str | None = None
    blocked: str | None = None
    pending: list[PendingQuestion] = field(default_factory=list, repr=False)
    decided: set[str] = field(default_factory=set, repr=False)
    """Approval ids decided in this session's stored log. A crashed child's question stays
    shown as blocked until its log is repaired (``fsck --repair`` or a resume), which stores
    the closing decision: offline, a crashed asker and a live one look the same."""
    children: list[LineageNode] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "depth": self.depth,
            "label": self.label,
            "kind": self.kind,
            "mode": self.mode,
            "mode_source": self.mode_source,
            "approval": self.approval,
            "approval_source": self.approval_source,
            "status": self.status,
            "blocked": self.blocked,
            "denied": self.denied,
            "children": [c.to_dict() for c in self.children],
        }


def status_of(events: Sequence[Event]) -> str:
    for event in reversed(events):
        if event.type == TurnOpened.TYPE:
            return "running"
        if event.type == TurnClosed.TYPE:
            end = TurnClosed.parse(event.data)
            return end.reason if end is not None else "ended"
    return "new"


UNREADABLE: Final = "unreadable"
"""A knob whose stored event does not fit its definition: the tree shows the session anyway
(it is a view; resuming the session refuses the event with its own error)."""


def _knob(
    events: Sequence[Event], knob: type[SandboxModeSet | ApprovalPolicySet]
) -> tuple[str | None, str | None]:
    for event in reversed(events):
        if event.type == knob.TYPE:
            try:
                read = knob.from_data(event.data)
            except PolicyError:
                return UNREADABLE, None
            value = read.mode if isinstance(read, SandboxModeSet) else read.policy
            return value.value, read.source
    return None, None


async def node_for(persistence: Persistence, header: SessionHeader) -> LineageNode:
    stored = await persistence.inspect(header.id)
    # inspect shows the log as a crash-repairing load would; a session that another process is
    # running must not look "interrupted", so status and knobs come from the stored events.
    events = stored.events[: len(stored.events) - len(stored.repair.synthesized)]
    own = events[header.seed_length or 0 :]
    descriptor = fold_descriptor(events, header.seed_length or 0)
    if header.delegation_depth == 0:
        kind = "fork" if header.parent_session else "root"
    else:
        kind = descriptor.mode if descriptor is not None else "subagent"
    mode, mode_source = _knob(events, SandboxModeSet)
    approval, approval_source = _knob(events, ApprovalPolicySet)
    return LineageNode(
        header.id,
        header.delegation_depth,
        descriptor.label if descriptor is not None else None,
        mode,
        mode_source,
        approval,
        approval_source,
        kind,
        status_of(own),
        last_denial(own),
        None,
        pending_from_log(events),
        decided=decided_ids(events),
    )


def decided_ids(events: Sequence[Event]) -> set[str]:
    decided = set()
    for event in events:
        if event.type == ApprovalDecided.TYPE:
            try:
                decided.add(ApprovalDecided.from_data(event.data).id)
            except PolicyError:
                continue  # as in _knob: the tree is a view
    return decided


STOPPED: Final = "stopped mid-turn"
"""The status of a session whose log ends inside a turn while no process runs it (it crashed
or was killed; loading it, or ``tether sessions fsck --repair``, closes the turn)."""


async def lineage_tree(
    persistence: Persistence, session_id: str, *, leases: Leases | None = None
) -> LineageNode:
    """The tree rooted at ``session_id`` (delegated children only, by ``parent_session``).

    ``leases``: tell sessions that are running (a process holds the lease) from ones that
    stopped mid-turn; the questions of a stopped session wait for nobody, so they block
    nothing. Without it, an open turn is shown as running.
    """
    headers = {h.id: h for h in await persistence.list()}
    if session_id not in headers:
        await persistence.inspect(session_id)  # raises SESSION_NOT_FOUND with its message
    children: dict[str, list[SessionHeader]] = {}
    for header in headers.values():
        if header.parent_session is not None and header.delegation_depth > 0:
            children.setdefault(header.parent_session, []).append(header)

    async def build(header: SessionHeader) -> LineageNode:
        node = await node_for(persistence, header)
        for child in sorted(children.get(header.id, []), key=lambda h: h.created_at):
            node.children.append(await build(child))
        return node

    tree = await build(headers[session_id])
    nodes = walk(tree)
    if leases is not None and leases.in_use():  # else no session here could be told live
        for node in nodes:
            if node.status == "running" and leases.holder(node.id) is None:
                node.status = STOPPED
                node.pending = []
    decided = set().union(*(node.decided for node in nodes))
    # A question whose asking child has a stored decision (including a crash repair's) is not
    # waiting, even if the root's pending record was never closed.
    labels = blocked_labels(
        question for node in nodes for question in node.pending if question.id not in decided
    )
    for node in nodes:
        node.blocked = labels.get(node.id)
    return tree


def walk(node: LineageNode) -> list[LineageNode]:
    nodes = [node]
    for child in node.children:
        nodes += walk(child)
    return nodes


def render_tree(
    node: LineageNode, prefix: str = "", last: bool = True, top: bool = True
) -> list[str]:
    def knob(value: str | None, source: str | None, default: str) -> str:
        if value is None:
            return default
        return f"{value} ({source})" if source else value

    label = f" [{node.label}]" if node.label else ""
    line = (
        f"{node.id}{label}  {node.kind}  depth {node.depth}  "
        f"mode {knob(node.mode, node.mode_source, 'default')}  "
        f"approval {knob(node.approval, node.approval_source, 'default')}  {node.status}"
    )
    line += "".join(f"  {note}" for note in (node.blocked, node.denied) if note)
    lines = [line if top else f"{prefix}{'└── ' if last else '├── '}{line}"]
    child_prefix = "" if top else prefix + ("    " if last else "│   ")
    for index, child in enumerate(node.children):
        lines += render_tree(child, child_prefix, index == len(node.children) - 1, False)
    return lines
