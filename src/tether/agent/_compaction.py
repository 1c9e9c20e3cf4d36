"""Context that fits: estimate the next request, and replace older turns with a summary.

Before each model request the agent estimates its size (:func:`estimate_tokens`). At
:data:`COMPACT_AT` of the model's context window it asks the model, in one extra request, to
summarise the older part of the conversation, and records the answer as one durable
``context/compacted`` event; :func:`tether.agent._history.history` then replays the summary in
place of what it covers. ``docs/compaction.md`` describes the rules for users.

What is never summarised: the project instructions message, the latest runtime-context
snapshot, and (when the agent compacts in the middle of a turn) that turn's own user
messages; they are listed in ``kept_seqs`` and replayed verbatim. Permission events are
log-only and never part of any history, so the scope, which folds from the log, is the same
before and after.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from tether._signals import AbortSignal
from tether.agent._context_snapshot import retained_snapshot
from tether.agent._events import (
    AssistantMessage,
    CompactFailed,
    CompactTrigger,
    ContextCompacted,
)
from tether.agent._history import Conversation, message_bytes
from tether.agent._instructions import InstructionsRecords
from tether.errors import TetherError
from tether.model import Completion, Message, ModelClient, ModelError, ModelRequest, ToolSchema
from tether.model._client import complete
from tether.session import Event, Session

COMPACT_AT: Final = 0.85
"""The share of the context window at which the agent compacts before a request."""

BYTES_PER_TOKEN: Final = 4
"""The estimate for text no usage counted yet: one token per four bytes of UTF-8."""

SUMMARY_SYSTEM: Final = (
    "You summarise a conversation between a user and a coding agent so that the agent can "
    "continue the work from your summary alone. Keep the user's requests and constraints, "
    "decisions taken, files read or changed (with their paths), commands run and what they "
    "showed, errors met, and what remains to do. Leave out what was superseded. Do not call "
    "tools. Answer with the summary only."
)
SUMMARY_REQUEST: Final = (
    "Summarise the conversation above as instructed. Leave out the agent's permissions "
    "(sandbox mode, approval policy): tether keeps those itself."
)


CompactionErrorCode = Literal[
    "CONTEXT_OVERFLOW", "COMPACTION_FAILED", "NOTHING_TO_COMPACT", "COMPACTION_BUSY"
]


class CompactionError(TetherError):
    """Compaction could not be done, or the next request does not fit without it."""

    def __init__(self, message: str, *, code: CompactionErrorCode) -> None:
        super().__init__(message, code=code)


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Which events a summary replaces: ``first_seq``..``last_seq`` but ``kept_seqs``."""

    first_seq: int
    last_seq: int
    kept_seqs: tuple[int, ...]


def compact_threshold(window: int) -> int:
    return int(window * COMPACT_AT)


def tokens_of(byte_count: int) -> int:
    return -(-byte_count // BYTES_PER_TOKEN)


def request_bytes(system: str, tools: Sequence[ToolSchema]) -> int:
    """The UTF-8 size of what every request carries besides its history."""
    schemas = json.dumps(
        [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools]
    )
    return len(system.encode("utf-8", "surrogatepass")) + len(schemas.encode("utf-8"))


def estimate_tokens(conversation: Conversation, system: str, tools: Sequence[ToolSchema]) -> int:
    """The next request's size in tokens.

    The newest reply's usage (its prompt plus its own completion, which is now history) plus
    :data:`BYTES_PER_TOKEN` for every message appended after it; without a usable reply since
    the latest compaction, the whole request (system prompt, tool schemas, history) by bytes.
    Either way it reads what the conversation already holds, not the log.
    """
    compaction = conversation.compaction
    reply = conversation.latest_reply
    if reply is not None and (compaction is None or reply.seq > compaction.seq):
        usage = AssistantMessage.parse(reply.data).usage
        if usage.prompt_tokens > 0:
            since = conversation.messages_after(reply.seq)
            return (
                usage.prompt_tokens
                + usage.completion_tokens
                + tokens_of(sum(message_bytes(m) for m in since))
            )
    return tokens_of(request_bytes(system, tools) + conversation.history_bytes())


def plan_compaction(session: Session, turn_start: int | None) -> CompactionPlan | None:
    """What to summarise, or ``None`` when nothing new can be.

    ``turn_start`` is the seq of the running turn's ``turn/start`` (automatic compaction):
    the turn is kept verbatim if anything before it can be summarised, else everything
    before its latest model reply is summarised but for the turn's own user messages.
    Without one (between turns) everything is summarised. Either way the boundary lies before
    a ``turn/start`` or an ``assistant/message``, so no tool call is parted from its result.
    The plan is read from the session's folds (the surface events, the instructions, the
    latest snapshot), so it costs what the kept messages are, not the log.
    """
    conversation = session.fold(Conversation)
    previous, compacted = conversation.compaction, conversation.compacted
    floor = previous.seq if previous is not None else -1
    visible_from = compacted.last_seq + 1 if compacted is not None else 0
    snapshot = retained_snapshot(session)
    instructions = session.fold(InstructionsRecords).seqs
    if turn_start is None:
        tails: list[int] = [conversation.length]
    else:
        reply = conversation.latest_reply
        tails = [
            turn_start,
            *([reply.seq] if reply is not None and reply.seq >= turn_start else []),
        ]
    for tail in tails:
        if tail <= floor:
            continue
        kept = {seq for seq in instructions if seq < tail}
        if snapshot is not None and snapshot.seq < tail:
            kept.add(snapshot.seq)
        if turn_start is not None:
            kept.update(conversation.user_seqs_between(turn_start, tail))
        # Every kept event is a surface event: something is summarised past what an earlier
        # summary covered exactly when more surface events stand there than kept ones.
        visible = conversation.surface_count(visible_from, tail)
        if visible <= sum(1 for seq in kept if seq >= visible_from):
            continue
        first, last = conversation.first_surface(kept), tail - 1
        assert first is not None and first <= last  # a summarised event stands before tail
        return CompactionPlan(first, last, tuple(s for s in sorted(kept) if first <= s <= last))
    return None


@dataclass(frozen=True, slots=True)
class Summariser:
    """Who asks for a summary: the session, its model, and how the model knows the session."""

    session: Session
    model: ModelClient
    label: str | None
    system: str
    tools: Sequence[ToolSchema]
    window: int | None


async def compact(
    asker: Summariser,
    trigger: CompactTrigger,
    *,
    turn_start: int | None = None,
    signal: AbortSignal | None = None,
) -> Event:
    """Summarise by the model and append ``context/compacted``; return that event.

    Raises ``NOTHING_TO_COMPACT`` when nothing new can be summarised, and
    ``COMPACTION_FAILED`` (after appending ``context/compact-failed``) when the model fails or
    answers with no usable summary. An abort propagates as :class:`AbortedError`.
    """
    session = asker.session
    conversation = session.fold(Conversation)
    before = estimate_tokens(conversation, asker.system, asker.tools)
    plan = plan_compaction(session, turn_start)
    if plan is None:
        raise CompactionError(
            "there is nothing older to summarise: everything since the last compaction is "
            "kept as it is (the project instructions, the latest runtime context, the current "
            "step)",
            code="NOTHING_TO_COMPACT",
        )
    request = ModelRequest(
        messages=[
            Message.system(SUMMARY_SYSTEM),
            *conversation.messages_through(plan.last_seq),
            Message.user(SUMMARY_REQUEST),
        ],
        session_id=session.id,
        depth=session.header.delegation_depth,
        label=asker.label,
        step_index=conversation.replies_since(session.header.seed_length or 0),
    )
    try:
        completion = await complete(asker.model, request, signal)
    except ModelError as err:
        raise _failed(asker, trigger, before, f"{err.code}: {err}", replied=False) from err
    problem = _unusable(completion)
    if problem is not None:
        raise _failed(asker, trigger, before, problem, replied=True)
    compacted = ContextCompacted(
        trigger,
        plan.first_seq,
        plan.last_seq,
        plan.kept_seqs,
        completion.text.strip(),
        before,
        0,
        asker.window,
        completion.usage,
    )
    # Right after a summary no reply follows it, so the estimate is the whole request's
    # (over the log as it is now: the request let other writers append meanwhile).
    kept = session.fold(Conversation).compacted_messages(compacted)
    after = tokens_of(
        request_bytes(asker.system, asker.tools) + sum(message_bytes(m) for m in kept)
    )
    return session.append(compacted.TYPE, replace(compacted, tokens_after=after).to_data())


def _unusable(completion: Completion) -> str | None:
    if completion.tool_calls:
        return "the model asked for tools instead of answering with a summary"
    if completion.finish_reason == "length":
        return "the summary was cut off by the model's output limit"
    if completion.finish_reason != "stop":
        return f"the model stopped the summary with finish reason {completion.finish_reason!r}"
    if not completion.text.strip():
        return "the model answered with an empty summary"
    return None


def _failed(
    asker: Summariser, trigger: CompactTrigger, before: int, reason: str, *, replied: bool
) -> CompactionError:
    failed = CompactFailed(trigger, reason, replied, before, asker.window)
    asker.session.append(failed.TYPE, failed.to_data())
    return CompactionError(
        f"the model did not summarise the conversation: {reason}", code="COMPACTION_FAILED"
    )


def overflow(tokens: int, window: int, why: str) -> CompactionError:
    return CompactionError(
        f"the next request needs about {tokens} tokens, more than the model's context window "
        f"of {window}, and {why}; start a new session, or configure a larger context_window "
        "for this model (docs/models.md)",
        code="CONTEXT_OVERFLOW",
    )
