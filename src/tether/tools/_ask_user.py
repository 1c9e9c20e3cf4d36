"""``ask_user``: a root agent asks the human a question.

Delegated agents may not: a subagent's question would wait on a human nobody is watching. The
guard is keyed on the durable delegation depth *and* on runtime ownership (an agent owned by
another), not on being a registry root, so continuable children are refused too
(``docs/decisions/0013-delegated-caller-guard.md``). The question goes through the ``user/question`` waterfall; with no
answerer the call fails closed with a clear message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from pydantic import Field

from tether._signals import AbortSignal
from tether.kernel import Waterfall
from tether.tools._base import AgentLike, ToolArgs, ToolCall, ToolResult

DELEGATED_CALLER: Final = (
    "DELEGATED_CALLER: subagents cannot ask the user questions; state the open question in "
    "your reply to the delegating agent"
)


@dataclass(frozen=True, slots=True)
class QuestionRequest:
    agent: AgentLike
    question: str
    signal: AbortSignal


USER_QUESTION: Final = Waterfall[QuestionRequest, str | None]("user/question")
"""The answerers of ``ask_user``, scoped to the asking agent: the answer, or ``None`` (or
``next()``) when this answerer has none; without one the call fails closed."""


@runtime_checkable
class Owned(Protocol):
    """An agent that knows whether another agent drives it (the agent layer's ``Agent``)."""

    @property
    def owner(self) -> object | None: ...


class AskUserArgs(ToolArgs):
    question: str = Field(min_length=1, description="One clear question for the user.")


def is_delegated(agent: AgentLike) -> bool:
    """Delegated by its durable depth, or driven by another agent right now."""
    if agent.session.header.delegation_depth > 0:
        return True
    return isinstance(agent, Owned) and agent.owner is not None


class AskUserTool:
    name = "ask_user"
    description = "Ask the user a question and wait for the answer."
    Args = AskUserArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, AskUserArgs)
        if call.agent is None:
            return ToolResult.error("ask_user needs a calling agent")
        if is_delegated(call.agent):
            return ToolResult.error(DELEGATED_CALLER, code="DELEGATED_CALLER")
        answer = await call.ctx.waterfall(
            USER_QUESTION,
            QuestionRequest(call.agent, args.question, call.signal),
            None,
            scope=call.agent,
        )
        if not isinstance(answer, str):
            return ToolResult.error("no one is available to answer questions in this session")
        return ToolResult(answer)
