"""The agent: inbox, turns and steps, cancellation, system prompt and runtime context."""

from tether.agent.agent import (
    PENDING_WORK,
    PRE_STEP,
    SESSION_START,
    TEXT_DELTA,
    TURN_END,
    Agent,
    AgentOptions,
    AgentStatus,
    CancelCause,
    PreStep,
    PreStepDecision,
    StopReason,
    StreamedText,
    TurnEnded,
    TurnResult,
)
from tether.agent.context_snapshot import SNAPSHOT_HEAD, SNAPSHOT_NONE
from tether.agent.inbox import InboxItem, InboxTarget
from tether.agent.registry import AGENTS_SERVICE, AgentRegistry

__all__ = [
    "AGENTS_SERVICE",
    "PENDING_WORK",
    "PRE_STEP",
    "SESSION_START",
    "SNAPSHOT_HEAD",
    "SNAPSHOT_NONE",
    "TEXT_DELTA",
    "TURN_END",
    "Agent",
    "AgentOptions",
    "AgentRegistry",
    "AgentStatus",
    "CancelCause",
    "InboxItem",
    "InboxTarget",
    "PreStep",
    "PreStepDecision",
    "StopReason",
    "StreamedText",
    "TurnEnded",
    "TurnResult",
]
