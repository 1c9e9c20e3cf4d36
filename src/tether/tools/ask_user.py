"""``ask_user``: a root agent asks the human a question.

Delegated agents may not: a subagent's question would wait on a human nobody is watching. The
guard is keyed on the durable delegation depth *and* on runtime ownership (an agent owned by
another), not on being a registry root, so continuable children are refused too
(behaviour.md §12 item 7). The question goes through the ``user/question`` waterfall; with no
answerer the call fails closed with a clear message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from pydantic import Field

from tether.signals import AbortSignal
from tether.tools.base import ToolArgs, ToolCall, ToolResult

QUESTION_EVENT: Final = "user/question"
_NO_ANSWER: Final = object()
DELEGATED_CALLER: Final = (
    "DELEGATED_CALLER: subagents cannot ask the user questions; state the open question in "
    "your reply to the delegating agent"
)


@dataclass(frozen=True, slots=True)
class QuestionRequest:
    agent: Any
    question: str
    signal: AbortSignal


class AskUserArgs(ToolArgs):
    question: str = Field(min_length=1, description="One clear question for the user.")


def is_delegated(agent: Any, ctx: Any) -> bool:
    if agent.session.header.delegation_depth > 0:
        return True
    registry = ctx.get("agents")
    return registry is not None and registry.owner_of(agent) is not None


class AskUserTool:
    name = "ask_user"
    description = "Ask the user a question and wait for the answer."
    Args = AskUserArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, AskUserArgs)
        if call.agent is None:
            return ToolResult.error("ask_user needs a calling agent")
        if is_delegated(call.agent, call.ctx):
            return ToolResult.error(DELEGATED_CALLER, code="DELEGATED_CALLER")
        answer: object = await call.ctx.waterfall(
            QUESTION_EVENT,
            QuestionRequest(call.agent, args.question, call.signal),
            _NO_ANSWER,
            scope=call.agent,
        )
        if not isinstance(answer, str):
            return ToolResult.error("no one is available to answer questions in this session")
        return ToolResult(answer)
