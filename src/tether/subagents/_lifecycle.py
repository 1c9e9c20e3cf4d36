"""Lifecycle notifications (``subagent/start`` / ``subagent/end``), scoped to the delegating
parent; hook bridges map them to SubagentStart / SubagentStop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tether.subagents._events import DescriptorMode

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.subagents._results import SubagentStopReason


@dataclass(frozen=True, slots=True)
class SubagentLifecycle:
    parent: Agent
    child_id: str
    provider: str
    mode: DescriptorMode
    label: str | None = None
    stop_reason: SubagentStopReason | None = None
    output: str | None = None
