"""The agent: inbox, turns and steps, cancellation, system prompt and runtime context."""

from tether.agent.agent import (
    DEFAULT_MAX_STEPS,
    PENDING_WORK,
    PRE_STEP,
    PRE_TURN,
    SESSION_START,
    TEXT_DELTA,
    TURN_END,
    Agent,
    AgentOptions,
    AgentStatus,
    CancelCause,
    PreStep,
    PreStepDecision,
    PreTurn,
    StreamedText,
    TurnEnded,
    TurnRejected,
    TurnResult,
)
from tether.agent.compaction import (
    BYTES_PER_TOKEN,
    COMPACT_AT,
    CompactionError,
    CompactionErrorCode,
    estimate_tokens,
)
from tether.agent.context_snapshot import SNAPSHOT_HEAD, SNAPSHOT_NONE
from tether.agent.events import CompactTrigger, InboxTarget, StopReason
from tether.agent.inbox import InboxItem
from tether.agent.instructions import (
    PROJECT_INSTRUCTIONS,
    LoadedInstructions,
    ProjectInstructions,
    is_instructions,
)
from tether.agent.registry import AGENTS_SERVICE, AgentRegistry

__all__ = [
    "AGENTS_SERVICE",
    "BYTES_PER_TOKEN",
    "COMPACT_AT",
    "DEFAULT_MAX_STEPS",
    "PENDING_WORK",
    "PRE_STEP",
    "PRE_TURN",
    "PROJECT_INSTRUCTIONS",
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
    "CompactTrigger",
    "CompactionError",
    "CompactionErrorCode",
    "InboxItem",
    "InboxTarget",
    "LoadedInstructions",
    "PreStep",
    "PreStepDecision",
    "PreTurn",
    "ProjectInstructions",
    "StopReason",
    "StreamedText",
    "TurnEnded",
    "TurnRejected",
    "TurnResult",
    "estimate_tokens",
    "is_instructions",
]
