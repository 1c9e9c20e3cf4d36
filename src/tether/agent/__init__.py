"""The agent: inbox, turns and steps, cancellation, system prompt and runtime context."""

from tether.agent._agent import (
    PENDING_WORK,
    PRE_STEP,
    SESSION_START,
    TEXT_DELTA,
    TURN_END,
    Agent,
    PreStep,
    PreStepDecision,
    StreamedText,
    TurnEnded,
    TurnResult,
)
from tether.agent._events import StopReason
from tether.agent._instructions import PROJECT_INSTRUCTIONS
from tether.agent._registry import AGENTS_SERVICE, AgentRegistry

__all__ = [
    "AGENTS_SERVICE",
    "PENDING_WORK",
    "PRE_STEP",
    "PROJECT_INSTRUCTIONS",
    "SESSION_START",
    "TEXT_DELTA",
    "TURN_END",
    "Agent",
    "AgentRegistry",
    "PreStep",
    "PreStepDecision",
    "StopReason",
    "StreamedText",
    "TurnEnded",
    "TurnResult",
]
