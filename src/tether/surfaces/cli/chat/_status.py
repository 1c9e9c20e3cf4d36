"""The compact status line: what runs, which children are blocked and on what.

Read from live state at each redraw: the agents registry (every live child, foreground or
background), the approval service's pending routed questions (a child waiting for the root's
answer is *blocked*), the tool each session is executing, and the elapsed time of the turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from tether.agent import Agent
from tether.kernel._printable import printable
from tether.policy._approval import PendingApproval
from tether.surfaces.cli.chat._render import SessionDirectory

SPINNER: Final = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
MAX_CHILDREN_SHOWN: Final = 4

ChildState = Literal["running", "idle", "blocked"]
"""``running``: in a turn; ``idle``: resident, waiting for work; ``blocked``: waiting for an
approval answer."""


@dataclass(frozen=True, slots=True)
class ChildStatus:
    id: str
    label: str
    state: ChildState
    detail: str | None = None
    """For a blocked child, the tool it waits to run."""

    def describe(self) -> str:
        if self.state == "blocked":
            return f"{self.label} blocked on {self.detail or 'approval'}"
        if self.detail:
            return f"{self.label} {self.state} ({self.detail})"
        return f"{self.label} {self.state}"


def child_statuses(
    agents: Iterable[Agent],
    pending: Iterable[PendingApproval],
    directory: SessionDirectory,
    running_tools: Mapping[str, tuple[str, str]],
) -> list[ChildStatus]:
    """Every live delegated agent, blocked ones first (they need the user)."""
    blocked = {p.child_session_id: printable(p.tool_name) for p in pending}
    rows = []
    for agent in agents:
        if agent.depth == 0:
            continue
        label = directory.label(agent.id)
        if agent.id in blocked:
            rows.append(ChildStatus(agent.id, label, "blocked", blocked[agent.id]))
        else:
            tool = running_tools.get(agent.id)
            rows.append(
                ChildStatus(agent.id, label, agent.status, tool[1] if tool is not None else None)
            )
    rows.sort(key=lambda row: row.state != "blocked")
    return rows


def children_text(rows: list[ChildStatus]) -> str:
    if not rows:
        return ""
    shown = [row.describe() for row in rows[:MAX_CHILDREN_SHOWN]]
    if len(rows) > MAX_CHILDREN_SHOWN:
        shown.append(f"+{len(rows) - MAX_CHILDREN_SHOWN} more")
    return "children: " + ", ".join(shown)


def busy_line(
    elapsed: float, root_tool: str | None, rows: list[ChildStatus], queued: int = 0
) -> str:
    """``⠹ 3.2s · running write · children: alpha running (ls), beta blocked on bash``."""
    parts = [f"{SPINNER[int(elapsed * 10) % len(SPINNER)]} {elapsed:.1f}s"]
    parts.append(f"running {root_tool}" if root_tool else "working")
    children = children_text(rows)
    if children:
        parts.append(children)
    if queued:
        parts.append(f"{queued} more approval{'s' if queued != 1 else ''} waiting")
    parts.append("Ctrl-C cancels")
    return " · ".join(parts)


def idle_line(session_id: str, preset: str | None, rows: list[ChildStatus]) -> str:
    """``session 1a2b3c4d · preset workspace-write · /help``."""
    parts = [f"session {session_id[:8]}"]
    if preset:
        parts.append(f"preset {preset}")
    children = children_text(rows)
    if children:
        parts.append(children)
    parts.append("/help · Ctrl-D quits")
    return " · ".join(parts)


__all__ = [
    "SPINNER",
    "ChildState",
    "ChildStatus",
    "busy_line",
    "child_statuses",
    "children_text",
    "idle_line",
]
