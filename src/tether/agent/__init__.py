"""The agent: inbox, turns and steps, cancellation, system prompt and runtime context."""

from tether.agent.agent import (
    Agent,
    AgentOptions,
    AgentStatus,
    CancelCause,
    PreStep,
    StopReason,
    TurnResult,
)
from tether.agent.context_snapshot import SNAPSHOT_HEAD, SNAPSHOT_NONE
from tether.agent.inbox import InboxItem, InboxTarget
from tether.agent.registry import AGENTS_SERVICE, AgentRegistry

__all__ = [
    "AGENTS_SERVICE",
    "SNAPSHOT_HEAD",
    "SNAPSHOT_NONE",
    "Agent",
    "AgentOptions",
    "AgentRegistry",
    "AgentStatus",
    "CancelCause",
    "InboxItem",
    "InboxTarget",
    "PreStep",
    "StopReason",
    "TurnResult",
]
