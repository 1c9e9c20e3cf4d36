"""The agent layer's seams: the registry of live agents and the points of an agent's loop.

- :data:`PRE_STEP`, a waterfall scoped to the agent, runs before every step: ``"enter"`` lets
  the step run, anything else ends the turn ``blocked``.
- :data:`TEXT_DELTA`, scoped to the agent, carries each piece of streamed model text.
- :data:`TURN_END` follows every turn, with its result.
- :data:`SESSION_START` is for a surface that brings in a root session some other way than
  the store creating it (the hooks plugin runs ``SessionStart`` for it).
- :data:`PENDING_WORK` is gathered by whoever waits for a composition to go quiet: each
  listener returns an awaitable that finishes once the work it may still queue on an agent
  (a ``Stop`` hook's continuation) is queued or dropped.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

from tether.kernel import Gather, Notice, ServiceKey, Waterfall

if TYPE_CHECKING:
    from tether.agent.agent import Agent, PreStep, TurnResult
    from tether.agent.registry import AgentRegistry

PreStepDecision = Literal["enter", "reject"]
"""What a ``agent/pre-step`` listener answers."""


class StreamedText(NamedTuple):
    """Payload of ``agent/text-delta``."""

    agent: Agent
    text: str


class TurnEnded(NamedTuple):
    """Payload of ``agent/turn-end``."""

    agent: Agent
    result: TurnResult


AGENTS_SERVICE: Final[ServiceKey[AgentRegistry]] = ServiceKey("agents")
"""The live agents of the runtime."""

PRE_STEP: Final[Waterfall[PreStep, PreStepDecision]] = Waterfall("agent/pre-step")
TEXT_DELTA: Final = Notice[StreamedText]("agent/text-delta")
TURN_END: Final = Notice[TurnEnded]("agent/turn-end")
SESSION_START: Final[Notice[Agent]] = Notice("agent/session-start")
PENDING_WORK: Final = Gather[None, Awaitable[None]]("agent/pending-work")

__all__ = [
    "AGENTS_SERVICE",
    "PENDING_WORK",
    "PRE_STEP",
    "SESSION_START",
    "TEXT_DELTA",
    "TURN_END",
    "PreStepDecision",
    "StreamedText",
    "TurnEnded",
]
